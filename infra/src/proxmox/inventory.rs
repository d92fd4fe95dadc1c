//! The environment's VMs as Proxmox sees them: which host runs each, its SMBIOS UUID,
//! tags and HA state. Collected once, then checks and the mapping work on plain data.

use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use super::client::ProxmoxClient;
use super::error::ProxmoxError;
use super::model::{ClusterVm, HaRequestedState, PveNode};

/// Which VMs belong to an environment. An empty scope selects every VM.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmScope {
    /// The VM must carry every one of these tags (case-insensitive).
    pub tags: Vec<String>,
    /// Glob on the VM name (`*`, `?`), case-insensitive.
    pub name_pattern: Option<String>,
}

impl VmScope {
    pub fn matches(&self, vm: &ClusterVm) -> bool {
        let tags_ok = self
            .tags
            .iter()
            .all(|want| vm.tags.iter().any(|t| t.eq_ignore_ascii_case(want)));
        let name_ok = match &self.name_pattern {
            None => true,
            Some(pattern) => vm.name.as_deref().is_some_and(|name| {
                glob_match(&pattern.to_ascii_lowercase(), &name.to_ascii_lowercase())
            }),
        };
        tags_ok && name_ok
    }
}

/// `*` matches any run, `?` one character; everything else literally.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// One scoped VM with what its config said (or why it could not be read).
#[derive(Debug, Clone)]
pub struct InventoryVm {
    pub vm: ClusterVm,
    /// `smbios1` uuid as configured; `None` if the config has none or could not be read.
    pub smbios_uuid: Option<String>,
    /// Why the config could not be read (for example 595: its host is down).
    pub config_error: Option<ProxmoxError>,
    /// The disks its config attaches; empty when the config was not read.
    pub disks: Vec<super::model::VmDisk>,
    /// HA requested state, when HA lists the VM.
    pub ha: Option<HaRequestedState>,
}

impl InventoryVm {
    /// The physical host (Proxmox node) that owns the VM.
    pub fn host(&self) -> &str {
        &self.vm.node
    }

    pub fn is_ha_managed(&self) -> bool {
        self.ha
            .as_ref()
            .is_some_and(|s| *s != HaRequestedState::Ignored)
            || self.vm.hastate.is_some()
    }
}

/// Everything gates reads from Proxmox for one environment.
#[derive(Debug, Clone)]
pub struct Inventory {
    pub nodes: Vec<PveNode>,
    /// Scoped VMs (templates excluded), by vmid.
    pub vms: Vec<InventoryVm>,
    /// Why `/cluster/ha/resources` could not be read (for example 403 without Sys.Audit);
    /// HA membership then comes only from `hastate` in `/cluster/resources`.
    pub ha_error: Option<ProxmoxError>,
    /// `GET /storage`, or why it could not be read.
    pub storages: Result<Vec<super::model::Storage>, ProxmoxError>,
}

impl Inventory {
    pub fn vm(&self, vmid: u32) -> Option<&InventoryVm> {
        self.vms.iter().find(|v| v.vm.vmid == vmid)
    }

    pub fn node(&self, name: &str) -> Option<&PveNode> {
        self.nodes.iter().find(|n| n.node == name)
    }
}

/// VM configs read at once unless the caller says otherwise: enough to hide each call's
/// latency, few enough that the calls share a handful of kept-alive connections.
pub const CONFIG_CONCURRENCY: usize = 16;

/// Reads nodes, the scoped VMs, their configs (concurrently) and HA resources.
/// A VM whose config cannot be read is kept with `config_error`; failing list calls fail.
pub async fn collect_inventory(
    client: &ProxmoxClient,
    scope: &VmScope,
) -> Result<Inventory, ProxmoxError> {
    collect_inventory_reading(client, scope, scope, CONFIG_CONCURRENCY).await
}

/// As [`collect_inventory`] for the VMs `listed` selects, reading the configs (SMBIOS uuid)
/// only of those `read` also selects, at most `concurrency` at once. The others keep
/// `smbios_uuid: None` and no `config_error`: they were not asked about.
pub async fn collect_inventory_reading(
    client: &ProxmoxClient,
    listed: &VmScope,
    read: &VmScope,
    concurrency: usize,
) -> Result<Inventory, ProxmoxError> {
    let (nodes, vms, ha, storages) = tokio::join!(
        client.nodes(),
        client.cluster_vms(),
        client.ha_resources(),
        client.storages()
    );
    let nodes = nodes?;
    let mut vms: Vec<ClusterVm> = vms?
        .into_iter()
        .filter(|vm| !vm.template && listed.matches(vm))
        .collect();
    vms.sort_by_key(|vm| vm.vmid);
    let (ha, ha_error) = match ha {
        Ok(list) => (list, None),
        Err(e) => (Vec::new(), Some(e)),
    };

    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let mut configs = JoinSet::new();
    let mut results: Vec<Option<Result<_, ProxmoxError>>> = vec![None; vms.len()];
    for (index, vm) in vms.iter().enumerate() {
        if !read.matches(vm) {
            results[index] = Some(Ok(None));
            continue;
        }
        let client = client.clone();
        let permits = permits.clone();
        let (node, vmid) = (vm.node.clone(), vm.vmid);
        configs.spawn(async move {
            let _permit = permits.acquire_owned().await;
            (index, client.vm_config(&node, vmid).await.map(Some))
        });
    }
    while let Some(joined) = configs.join_next().await {
        if let Ok((index, result)) = joined {
            results[index] = Some(result);
        }
    }

    // The first HA resource of each guest, as a search from the front would find it.
    let mut ha_by_vmid = std::collections::HashMap::new();
    for r in &ha {
        if let Some(vmid) = r.vmid {
            ha_by_vmid.entry(vmid).or_insert(r);
        }
    }
    let vms = vms
        .into_iter()
        .zip(results)
        .map(|(vm, config)| {
            let (smbios_uuid, disks, config_error) = match config {
                Some(Ok(Some(c))) => (c.smbios_uuid, c.disks, None),
                Some(Ok(None)) => (None, Vec::new(), None),
                Some(Err(e)) => (None, Vec::new(), Some(e)),
                None => (
                    None,
                    Vec::new(),
                    Some(ProxmoxError::Decode {
                        path: format!("/nodes/{}/qemu/{}/config", vm.node, vm.vmid),
                        detail: "config read was aborted".into(),
                    }),
                ),
            };
            let ha = ha_by_vmid.get(&vm.vmid).map(|r| r.state.clone());
            InventoryVm {
                vm,
                smbios_uuid,
                config_error,
                disks,
                ha,
            }
        })
        .collect();
    Ok(Inventory {
        nodes,
        vms,
        ha_error,
        storages,
    })
}
