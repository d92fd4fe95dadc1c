//! What the Talos API, the Proxmox VE API and the API endpoint said about an environment,
//! as plain data (no client types), so checks stay pure and snapshots stay serializable.

use serde::{Deserialize, Serialize};

/// The talosconfig context and every configured control-plane endpoint's view of etcd.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TalosState {
    /// The talosconfig file and context that were used.
    pub talosconfig: String,
    pub context: String,
    /// Endpoint hosts the talosconfig context lists (what talosctl would dial).
    pub context_endpoints: Vec<String>,
    /// One entry per endpoint the environment names, in order.
    pub endpoints: Vec<TalosEndpoint>,
}

crate::sentence_error! {
    /// Why an answer the state holds is missing: what the client or the endpoint said, as the
    /// sentence the trials quote. Written in a snapshot as that sentence alone.
    #[derive(Serialize, Deserialize)]
    #[serde(transparent)]
    pub struct Unanswered;
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TalosEndpoint {
    pub endpoint: String,
    /// What the node answered, or why it could not be asked.
    pub view: Result<EtcdView, Unanswered>,
    /// The node's addresses (COSI `AddressStatuses`), which show who holds the API VIP.
    pub addresses: Result<Vec<std::net::IpAddr>, Unanswered>,
}

impl TalosState {
    /// The node an endpoint answers for: the hostname of its own etcd member.
    pub fn node_of(&self, endpoint: &TalosEndpoint) -> Option<String> {
        let view = endpoint.view.as_ref().ok()?;
        view.members
            .iter()
            .find(|m| m.id == view.member_id)
            .map(|m| m.hostname.clone())
    }

    /// The endpoints whose node carries one of `ips` (normally one: the VIP's holder).
    pub fn holders(&self, ips: &[std::net::IpAddr]) -> Vec<&TalosEndpoint> {
        self.endpoints
            .iter()
            .filter(|e| {
                e.addresses
                    .as_ref()
                    .is_ok_and(|a| a.iter().any(|ip| ips.contains(ip)))
            })
            .collect()
    }
}

/// One control-plane node's answers: its version, the member list it sees, its own
/// member's status and the cluster's alarms.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EtcdView {
    pub talos_version: String,
    pub members: Vec<EtcdMemberView>,
    /// This node's member id (hex), from its status.
    pub member_id: String,
    /// The leader this member follows (hex), empty when none.
    pub leader: String,
    pub alarms: Vec<String>,
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtcdMemberView {
    /// `%016x`, as talosctl prints it.
    pub id: String,
    /// The member name, which is the node's hostname.
    pub hostname: String,
    pub peer_urls: Vec<String>,
    pub learner: bool,
}

/// The Kubernetes API endpoint: where the kubeconfig points and whether the VIP answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApiState {
    /// `api.endpoint` of the environment (the VIP), if configured.
    pub vip_endpoint: Option<String>,
    /// The addresses its host name stands for (itself when it is an IP literal).
    pub vip_addresses: Vec<std::net::IpAddr>,
    /// The server of the kubeconfig context.
    pub kubeconfig_server: Result<String, Unanswered>,
    /// `GET <vip>/readyz` verified with the cluster CA.
    pub readyz: Result<(), Unanswered>,
    /// The HTTP status `/readyz` answered with; `None` when nothing answered (unreachable,
    /// TLS failure, timeout), which proves nothing about the VIP.
    #[serde(default)]
    pub readyz_status: Option<u16>,
}

/// The Proxmox hosts, the environment's VMs and which VM carries which node.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProxmoxState {
    pub hosts: Vec<ProxmoxHost>,
    /// Every VM of any configured environment's scope, with the environments it belongs to.
    pub vms: Vec<ProxmoxVm>,
    /// Kubernetes node → VM → host, for this environment's nodes.
    pub placements: Vec<Placement>,
    /// Nodes of this environment with no VM (by SMBIOS uuid, or by name when allowed).
    pub unmatched_nodes: Vec<String>,
    /// Why the mapping could not be made (duplicate UUIDs), when it could not.
    pub mapping_error: Option<String>,
    /// VMs whose config (and so SMBIOS uuid) could not be read, with why: a node that
    /// matches no VM while any of these exist has an unknown host, not a missing VM.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unread_vm_configs: Vec<String>,
    /// `GET /storage`: the storages the token may audit (Proxmox leaves the others out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storages: Vec<ProxmoxStorage>,
    /// Why `GET /storage` could not be read, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storages_unread: Option<String>,
}

/// A Proxmox storage: one datastore for every node when `shared`, else each node's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxmoxStorage {
    pub storage: String,
    /// The storage type (`lvmthin`, `nfs`, `rbd`, ...).
    pub kind: String,
    pub shared: bool,
    /// The nodes it is restricted to; empty for all.
    #[serde(default)]
    pub nodes: Vec<String>,
}

/// A disk of a VM's config and the storage it lives on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmDisk {
    /// `scsi0`, `virtio1`, ...
    pub key: String,
    /// `None` for a host path (`/dev/...`), which is the host's own.
    pub storage: Option<String>,
    pub volume: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProxmoxHost {
    pub name: String,
    pub online: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProxmoxVm {
    pub vmid: u32,
    pub name: String,
    pub host: String,
    pub status: String,
    pub uuid: Option<String>,
    pub ha_managed: bool,
    /// The environments whose VM scope selects this VM.
    pub environments: Vec<String>,
    /// The disks its config attaches (read for this environment's VMs only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<VmDisk>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Placement {
    pub node: String,
    pub vmid: u32,
    pub vm_name: String,
    pub host: String,
    pub uuid: Option<String>,
    /// `uuid` or `name`.
    pub matched_by: String,
}
