//! Typed results of the Talos calls gates makes, independent of the generated code.
//! Serializable so snapshots can carry them.

use serde::{Deserialize, Serialize};

/// `machine.Version` of one node.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NodeVersion {
    /// Talos release tag, e.g. `v1.13.9`.
    pub tag: String,
    pub sha: String,
    pub os: String,
    pub arch: String,
    /// Platform name (`metal`, `nocloud`, ...) when the node reports one.
    pub platform: Option<String>,
}

/// One etcd member as a control-plane node sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtcdMember {
    pub id: u64,
    /// etcd member name = node hostname.
    pub hostname: String,
    pub peer_urls: Vec<String>,
    pub client_urls: Vec<String>,
    pub is_learner: bool,
}

impl EtcdMember {
    /// The id as talosctl prints it (`%016x`).
    pub fn id_hex(&self) -> String {
        format!("{:016x}", self.id)
    }
}

/// Status of the local etcd member of one control-plane node.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EtcdMemberStatus {
    pub member_id: u64,
    /// Member id of the leader this member follows (0: none known).
    pub leader: u64,
    pub protocol_version: String,
    pub db_size: i64,
    pub db_size_in_use: i64,
    pub raft_index: u64,
    pub raft_term: u64,
    pub raft_applied_index: u64,
    pub errors: Vec<String>,
    pub is_learner: bool,
    /// Empty from Talos before v1.11.
    pub storage_version: String,
}

/// Kind of an etcd alarm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EtcdAlarmKind {
    None,
    NoSpace,
    Corrupt,
    /// A value newer than our proto knows.
    Other(i32),
}

/// An alarm raised on an etcd member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtcdAlarm {
    pub member_id: u64,
    pub kind: EtcdAlarmKind,
}

/// One Talos system service (`etcd`, `kubelet`, `apid`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceState {
    pub id: String,
    /// `Running`, `Finished`, `Failed`, ... as Talos reports it.
    pub state: String,
    /// `None` when the service has no health check (Talos `health.unknown`).
    pub healthy: Option<bool>,
    pub last_message: String,
}

/// One address a node has configured (a COSI `AddressStatuses.net.talos.dev` resource),
/// e.g. id `eth0/10.5.0.2/24`. The API VIP shows up as an extra `/32` on its holder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAddress {
    /// The resource id: `<link>/<address>/<prefix>`.
    pub id: String,
    /// Link name (`eth0`, `lo`, ...).
    pub link: String,
    pub address: std::net::IpAddr,
    pub prefix_len: u8,
}
