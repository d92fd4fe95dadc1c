//! What the Talos apid server needs to know about the simulated nodes. The lab's world model
//! implements [`TalosBackend`]; tests use [`super::memory::MemoryTalos`].

use std::net::IpAddr;
use std::time::SystemTime;

/// The apid server's view of the world, per node (by node name, e.g. `talos-cp-1`).
pub trait TalosBackend: Send + Sync + 'static {
    /// The node a routing target names (`node`/`nodes` metadata: an address like `127.S.1.j`
    /// or a hostname), or `None` when no node has that name.
    fn resolve(&self, target: &str) -> Option<String>;

    /// Whether the node is powered on with apid running.
    fn is_up(&self, node: &str) -> bool;

    /// Control plane or worker; etcd calls on a worker answer `Unimplemented`.
    fn role(&self, node: &str) -> NodeRole;

    /// `Version` of the node's Talos.
    fn version(&self, node: &str) -> TalosVersion;

    /// The etcd member list as seen from this control-plane node; `NoQuorum` when the cluster
    /// has no leader (Talos asks with `WithRequireLeader`).
    fn etcd_members(&self, node: &str) -> Result<Vec<EtcdMember>, EtcdError>;

    /// Status of this node's own etcd member.
    fn etcd_status(&self, node: &str) -> Result<EtcdMemberStatus, EtcdError>;

    /// Active etcd alarms of the cluster, as seen from this node.
    fn etcd_alarms(&self, node: &str) -> Result<Vec<EtcdAlarm>, EtcdError>;

    /// The node's system services (`etcd`, `kubelet`, `apid`, …).
    fn services(&self, node: &str) -> Vec<ServiceState>;

    /// The node's addresses, served as COSI `AddressStatuses.net.talos.dev`: loopback, its own
    /// address and, on the current API VIP holder only, the VIP as a `/32`.
    fn addresses(&self, node: &str) -> Vec<LabAddress>;
}

/// One address configured on a node's link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabAddress {
    /// Link name: `lo`, `eth0`.
    pub link: String,
    pub address: IpAddr,
    pub prefix_len: u8,
    /// When the address appeared (the resource's created/updated time).
    pub since: SystemTime,
}

/// Node role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeRole {
    ControlPlane,
    Worker,
}

/// `machine.VersionInfo` plus the platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TalosVersion {
    pub tag: String,
    pub sha: String,
    pub built: String,
    pub go_version: String,
    pub os: String,
    pub arch: String,
    /// Platform name and mode (`nocloud`, `metal`); `None` omits the field.
    pub platform: Option<(String, String)>,
}

impl Default for TalosVersion {
    fn default() -> Self {
        Self {
            tag: "v1.13.9".into(),
            sha: "5c3d1f0e".into(),
            built: "2026-08-21T09:14:02Z".into(),
            go_version: "go1.25.7".into(),
            os: "linux".into(),
            arch: "amd64".into(),
            platform: Some(("nocloud".into(), "metal".into())),
        }
    }
}

/// One etcd member (`machine.EtcdMember`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdMember {
    pub id: u64,
    /// Member name = node hostname.
    pub hostname: String,
    pub peer_urls: Vec<String>,
    pub client_urls: Vec<String>,
    pub is_learner: bool,
}

/// `machine.EtcdMemberStatus`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EtcdMemberStatus {
    pub member_id: u64,
    pub protocol_version: String,
    pub storage_version: String,
    pub db_size: i64,
    pub db_size_in_use: i64,
    /// Member id of the leader; 0 when there is none.
    pub leader: u64,
    pub raft_index: u64,
    pub raft_term: u64,
    pub raft_applied_index: u64,
    pub errors: Vec<String>,
    pub is_learner: bool,
}

/// Alarm types of `EtcdMemberAlarm.AlarmType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlarmKind {
    None,
    NoSpace,
    Corrupt,
}

/// One active alarm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdAlarm {
    pub member_id: u64,
    pub alarm: AlarmKind,
}

/// Why an etcd call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EtcdError {
    /// No leader / quorum lost: gRPC `Unavailable` `etcdserver: no leader`.
    #[error("etcdserver: no leader")]
    NoQuorum,
    /// Any other failure, reported with gRPC `Unknown` and this text.
    #[error("{0}")]
    Failed(String),
}

/// One service of `ServiceList`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceState {
    /// `etcd`, `kubelet`, `apid`, …
    pub id: String,
    /// `Running`, `Waiting`, `Finished`, `Failed`, …
    pub state: String,
    /// `None` = health unknown.
    pub healthy: Option<bool>,
    pub last_message: String,
    pub last_change: SystemTime,
    /// Recent events, oldest first.
    pub events: Vec<ServiceEvent>,
}

/// One service event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceEvent {
    pub msg: String,
    pub state: String,
    pub at: SystemTime,
}
