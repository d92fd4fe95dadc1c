//! Which host goes down and exactly which VMs are stopped: the blast radius of a run.
//!
//! The default stops only this environment's running VMs on the host (what a host power loss
//! looks like to this cluster) and leaves every other environment's VMs alone. The whole-host
//! mode hard-stops the same VMs and then shuts the host itself down (woken again by
//! wake-on-LAN); it is refused unless every VM on the host belongs to this environment.

use chrono::{DateTime, NaiveDate, Utc};

use super::journal::{HostPower, PlannedFault, PlannedVm};
use crate::config::Environment;
use crate::state::{ProxmoxState, State};

/// A VM on the target host that the run leaves running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bystander {
    pub vmid: u32,
    pub name: String,
    pub environments: Vec<String>,
}

/// The target and what is touched on it.
#[derive(Debug, Clone)]
pub struct Target {
    pub host: String,
    /// How the host was chosen (`auto`, `worst`, or given by name), for the plan.
    pub reason: String,
    pub vms: Vec<PlannedVm>,
    pub bystanders: Vec<Bystander>,
    pub whole_host: bool,
    /// Whole-host mode: how the host is woken again (set once preflight found a way).
    pub host_power: Option<HostPower>,
}

impl Target {
    pub fn fault(&self, environment: &str, restore_by: DateTime<Utc>) -> PlannedFault {
        PlannedFault {
            environment: environment.to_string(),
            host: self.host.clone(),
            vms: self.vms.clone(),
            restore_by,
            host_power: self.host_power.clone(),
        }
    }
}

/// The hosts that carry this environment's nodes, sorted.
pub fn environment_hosts(proxmox: &ProxmoxState) -> Vec<String> {
    let mut hosts: Vec<String> = proxmox.placements.iter().map(|p| p.host.clone()).collect();
    hosts.sort();
    hosts.dedup();
    hosts
}

/// Resolve `--host`: a host name, `auto` (rotates through the environment's hosts by date,
/// so nightly runs cover each), or `worst` (the host of the L2 announcement lease holder).
pub fn choose_host(
    selector: &str,
    state: &State,
    proxmox: &ProxmoxState,
    today: NaiveDate,
) -> Result<(String, String), String> {
    let hosts = environment_hosts(proxmox);
    if hosts.is_empty() {
        return Err(
            "no node of the environment is matched to a Proxmox VM, so no host can be chosen"
                .into(),
        );
    }
    match selector {
        "auto" => {
            let day = today.signed_duration_since(NaiveDate::MIN).num_days();
            let index = day.rem_euclid(hosts.len() as i64) as usize;
            let host = hosts[index].clone();
            Ok((
                host,
                format!("auto: host {} of {} for {today}", index + 1, hosts.len()),
            ))
        }
        "worst" => worst_host(state, proxmox),
        name => {
            if !proxmox.hosts.iter().any(|h| h.name == name) {
                let known: Vec<&str> = proxmox.hosts.iter().map(|h| h.name.as_str()).collect();
                return Err(format!(
                    "no Proxmox host `{name}` (hosts: {}; or use auto, worst)",
                    known.join(", ")
                ));
            }
            if !hosts.iter().any(|h| h == name) {
                return Err(format!(
                    "host {name} runs no node of this environment (its hosts: {})",
                    hosts.join(", ")
                ));
            }
            Ok((name.to_string(), "given by name".to_string()))
        }
    }
}

/// The host whose node holds the most L2 announcement leases (the ingress address moves
/// when it goes down).
fn worst_host(state: &State, proxmox: &ProxmoxState) -> Result<(String, String), String> {
    let leases = state
        .leases
        .present()
        .ok_or("`worst` needs the Lease list, which could not be read")?;
    let mut counts: std::collections::BTreeMap<String, (usize, Vec<String>)> = Default::default();
    for lease in leases {
        let name = lease.metadata.name.as_deref().unwrap_or_default();
        if !name.starts_with("cilium-l2announce-") {
            continue;
        }
        let Some(holder) = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
        else {
            continue;
        };
        if let Some(placement) = proxmox.placements.iter().find(|p| p.node == holder) {
            let entry = counts.entry(placement.host.clone()).or_default();
            entry.0 += 1;
            entry.1.push(format!("{name} held by {holder}"));
        }
    }
    counts
        .into_iter()
        .max_by_key(|(_, (n, _))| *n)
        .map(|(host, (_, why))| (host, format!("worst: {}", why.join(", "))))
        .ok_or_else(|| {
            "`worst`: no cilium-l2announce-* lease is held by a node of this environment".into()
        })
}

/// The VMs to stop on `host`, or why the run must not touch it.
pub fn target(
    env: &Environment,
    proxmox: &ProxmoxState,
    host: &str,
    reason: String,
    whole_host: bool,
) -> Result<Target, String> {
    let on_host: Vec<&crate::state::ProxmoxVm> =
        proxmox.vms.iter().filter(|vm| vm.host == host).collect();
    let (mine, others): (Vec<&crate::state::ProxmoxVm>, Vec<&crate::state::ProxmoxVm>) = on_host
        .iter()
        .partition(|vm| vm.environments.iter().any(|e| e == &env.name));
    let bystanders: Vec<Bystander> = others
        .iter()
        .map(|vm| Bystander {
            vmid: vm.vmid,
            name: vm.name.clone(),
            environments: vm.environments.clone(),
        })
        .collect();
    if whole_host && !bystanders.is_empty() {
        return Err(format!(
            "--whole-host refused: {host} also runs {}",
            bystanders
                .iter()
                .map(describe_bystander)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let mut vms = Vec::new();
    let mut unknown = Vec::new();
    for vm in mine.iter().filter(|vm| vm.status == "running") {
        match proxmox.placements.iter().find(|p| p.vmid == vm.vmid) {
            Some(p) if p.matched_by == "uuid" => vms.push(PlannedVm {
                vmid: vm.vmid,
                name: vm.name.clone(),
                host: host.to_string(),
                node: p.node.clone(),
            }),
            Some(p) => unknown.push(format!(
                "VM {} {} is matched to node {} by name only, not by SMBIOS UUID",
                vm.vmid, vm.name, p.node
            )),
            None => unknown.push(format!(
                "VM {} {} carries no known Kubernetes node (no node has its SMBIOS UUID)",
                vm.vmid, vm.name
            )),
        }
    }
    if !unknown.is_empty() {
        return Err(format!(
            "the VMs on {host} must be known by UUID: {}",
            unknown.join("; ")
        ));
    }
    if vms.is_empty() {
        return Err(format!("no running VM of {} on {host}", env.name));
    }
    vms.sort_by_key(|v| v.vmid);
    Ok(Target {
        host: host.to_string(),
        reason,
        vms,
        bystanders,
        whole_host,
        host_power: None,
    })
}

pub fn describe_bystander(b: &Bystander) -> String {
    let owner = if b.environments.is_empty() {
        "no configured environment".to_string()
    } else {
        b.environments.join(", ")
    };
    format!("{} {} ({owner})", b.vmid, b.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Placement, ProxmoxHost, ProxmoxVm};

    fn env(name: &str) -> Environment {
        let mut env: Environment = serde_yaml_ng::from_str("{}").unwrap();
        env.name = name.into();
        env
    }

    fn vm(vmid: u32, host: &str, envs: &[&str]) -> ProxmoxVm {
        ProxmoxVm {
            vmid,
            name: format!("vm-{vmid}"),
            host: host.into(),
            status: "running".into(),
            uuid: Some(format!("uuid-{vmid}")),
            ha_managed: false,
            environments: envs.iter().map(|e| e.to_string()).collect(),
        }
    }

    fn placement(vmid: u32, host: &str, by: &str) -> Placement {
        Placement {
            node: format!("node-{vmid}"),
            vmid,
            vm_name: format!("vm-{vmid}"),
            host: host.into(),
            uuid: Some(format!("uuid-{vmid}")),
            matched_by: by.into(),
        }
    }

    fn shared_host() -> ProxmoxState {
        ProxmoxState {
            hosts: ["pve1", "pve2", "pve3"]
                .iter()
                .map(|h| ProxmoxHost {
                    name: h.to_string(),
                    online: true,
                })
                .collect(),
            vms: vec![
                vm(101, "pve1", &["lab"]),
                vm(102, "pve2", &["lab"]),
                vm(103, "pve3", &["lab"]),
                vm(201, "pve3", &["lab-production"]),
            ],
            placements: vec![
                placement(101, "pve1", "uuid"),
                placement(102, "pve2", "uuid"),
                placement(103, "pve3", "uuid"),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn the_default_stops_only_this_environments_vms() {
        let t = target(&env("lab"), &shared_host(), "pve3", "x".into(), false).unwrap();
        assert_eq!(t.vms.iter().map(|v| v.vmid).collect::<Vec<_>>(), vec![103]);
        assert_eq!(t.vms[0].node, "node-103");
        assert_eq!(t.bystanders.len(), 1);
        assert_eq!(t.bystanders[0].vmid, 201);
    }

    #[test]
    fn whole_host_is_refused_when_another_environment_runs_there() {
        let err = target(&env("lab"), &shared_host(), "pve3", "x".into(), true).unwrap_err();
        assert!(err.contains("201 vm-201 (lab-production)"), "{err}");
        let ok = target(&env("lab"), &shared_host(), "pve2", "x".into(), true).unwrap();
        assert!(ok.whole_host && ok.bystanders.is_empty());
    }

    #[test]
    fn a_vm_matched_by_name_only_is_refused() {
        let mut p = shared_host();
        p.placements[1].matched_by = "name".into();
        let err = target(&env("lab"), &p, "pve2", "x".into(), false).unwrap_err();
        assert!(err.contains("by name only"), "{err}");
        p.placements.remove(1);
        let err = target(&env("lab"), &p, "pve2", "x".into(), false).unwrap_err();
        assert!(err.contains("no known Kubernetes node"), "{err}");
    }

    #[test]
    fn auto_rotates_through_the_hosts_day_by_day() {
        let state = State::empty(
            crate::state::Source::Live {
                context: "lab".into(),
            },
            Utc::now(),
        );
        let p = shared_host();
        let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
        let picks: Vec<String> = (0..3)
            .map(|i| {
                choose_host("auto", &state, &p, day + chrono::Days::new(i))
                    .unwrap()
                    .0
            })
            .collect();
        let mut sorted = picks.clone();
        sorted.sort();
        assert_eq!(sorted, vec!["pve1", "pve2", "pve3"], "{picks:?}");
        assert!(choose_host("pve9", &state, &p, day).is_err());
        assert!(choose_host("pve3", &state, &p, day).is_ok());
    }
}
