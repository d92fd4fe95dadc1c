//! Which VM is which Kubernetes node: by SMBIOS system UUID (Proxmox `smbios1` uuid =
//! the guest's `product_uuid` = kubelet's `systemUUID`, compared case-insensitively),
//! optionally by name when the environment allows it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::inventory::InventoryVm;

/// A Kubernetes node's identity as the API reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubeNodeIdentity {
    pub name: String,
    /// `status.nodeInfo.systemUUID` (may be empty).
    pub system_uuid: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MappingOptions {
    /// Match VM name = node name when no UUID matches. Off by default: names can lie.
    pub allow_name_fallback: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MatchedBy {
    SystemUuid,
    Name,
}

/// Where one Kubernetes node runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePlacement {
    pub node: String,
    pub vmid: u32,
    pub vm_name: Option<String>,
    /// Proxmox node (physical host) that owns the VM.
    pub host: String,
    /// The UUID both sides share (lowercase), for UUID matches.
    pub uuid: Option<String>,
    pub matched_by: MatchedBy,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeMapping {
    /// In the order of the nodes given.
    pub placements: Vec<NodePlacement>,
    /// Nodes no VM matched.
    pub unmatched: Vec<String>,
}

impl NodeMapping {
    pub fn placement(&self, node: &str) -> Option<&NodePlacement> {
        self.placements.iter().find(|p| p.node == node)
    }
}

/// Mapping refused because it would be ambiguous.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    #[error("SMBIOS UUID {uuid} is configured on several VMs ({}): give each VM a unique smbios1 uuid (restores without `unique` copy it)", join_ids(.vmids))]
    DuplicateVmUuid { uuid: String, vmids: Vec<u32> },
    #[error("systemUUID {uuid} is reported by several Kubernetes nodes ({}): the mapping to VMs would be ambiguous", .nodes.join(", "))]
    DuplicateNodeUuid { uuid: String, nodes: Vec<String> },
    #[error("node {node} has no UUID match and several VMs are named like it ({}): name fallback is ambiguous", join_ids(.vmids))]
    AmbiguousName { node: String, vmids: Vec<u32> },
}

fn join_ids(ids: &[u32]) -> String {
    ids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A UUID worth comparing: lowercase, not empty, not all zeros or all `f`.
fn normalize(uuid: &str) -> Option<String> {
    let u = uuid.trim().to_ascii_lowercase();
    let digits: String = u.chars().filter(|c| *c != '-').collect();
    if digits.is_empty() || digits.chars().all(|c| c == '0') || digits.chars().all(|c| c == 'f') {
        return None;
    }
    Some(u)
}

/// Maps nodes to VMs. Duplicate UUIDs on either side are an error, not a guess.
pub fn map_nodes_to_vms(
    nodes: &[KubeNodeIdentity],
    vms: &[InventoryVm],
    options: MappingOptions,
) -> Result<NodeMapping, MappingError> {
    let mut by_uuid: BTreeMap<String, Vec<&InventoryVm>> = BTreeMap::new();
    for vm in vms {
        if let Some(u) = vm.smbios_uuid.as_deref().and_then(normalize) {
            by_uuid.entry(u).or_default().push(vm);
        }
    }
    if let Some((uuid, list)) = by_uuid.iter().find(|(_, list)| list.len() > 1) {
        return Err(MappingError::DuplicateVmUuid {
            uuid: uuid.clone(),
            vmids: list.iter().map(|v| v.vm.vmid).collect(),
        });
    }
    let mut node_uuids: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for n in nodes {
        if let Some(u) = normalize(&n.system_uuid) {
            node_uuids.entry(u).or_default().push(n.name.clone());
        }
    }
    if let Some((uuid, names)) = node_uuids.iter().find(|(_, names)| names.len() > 1) {
        return Err(MappingError::DuplicateNodeUuid {
            uuid: uuid.clone(),
            nodes: names.clone(),
        });
    }

    // VMs a node claims by UUID are not offered to another node by name.
    let claimed: Vec<u32> = by_uuid
        .iter()
        .filter(|(u, _)| node_uuids.contains_key(*u))
        .flat_map(|(_, list)| list.iter().map(|v| v.vm.vmid))
        .collect();

    let mut mapping = NodeMapping::default();
    for n in nodes {
        let uuid = normalize(&n.system_uuid);
        if let Some(vm) = uuid
            .as_ref()
            .and_then(|u| by_uuid.get(u))
            .and_then(|l| l.first())
        {
            mapping.placements.push(NodePlacement {
                node: n.name.clone(),
                vmid: vm.vm.vmid,
                vm_name: vm.vm.name.clone(),
                host: vm.vm.node.clone(),
                uuid,
                matched_by: MatchedBy::SystemUuid,
            });
            continue;
        }
        if options.allow_name_fallback {
            let named: Vec<&InventoryVm> = vms
                .iter()
                .filter(|v| !claimed.contains(&v.vm.vmid))
                .filter(|v| {
                    v.vm.name
                        .as_deref()
                        .is_some_and(|name| name.eq_ignore_ascii_case(&n.name))
                })
                .collect();
            match named.as_slice() {
                [vm] => {
                    mapping.placements.push(NodePlacement {
                        node: n.name.clone(),
                        vmid: vm.vm.vmid,
                        vm_name: vm.vm.name.clone(),
                        host: vm.vm.node.clone(),
                        uuid: None,
                        matched_by: MatchedBy::Name,
                    });
                    continue;
                }
                [] => {}
                many => {
                    return Err(MappingError::AmbiguousName {
                        node: n.name.clone(),
                        vmids: many.iter().map(|v| v.vm.vmid).collect(),
                    });
                }
            }
        }
        mapping.unmatched.push(n.name.clone());
    }
    Ok(mapping)
}
