//! Which host goes down and exactly which VMs are stopped: the blast radius of a run.
//!
//! The default stops only this environment's running VMs on the host (what a host power loss
//! looks like to this cluster) and leaves every other environment's VMs alone. The whole-host
//! mode hard-stops the same VMs and then shuts the host itself down (woken again by
//! wake-on-LAN); it is refused unless every VM on the host belongs to this environment.

use chrono::{DateTime, NaiveDate, Utc};

use super::Refusal;
use crate::chaos::journal::{FaultKind, HostPower, PlannedFault, PlannedVm};
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
    /// Power loss, or a partition (the VMs' `nets` then name the devices it pulls).
    pub fault: FaultKind,
}

impl Target {
    pub fn fault(&self, environment: &str, restore_by: DateTime<Utc>) -> PlannedFault {
        PlannedFault {
            environment: environment.to_string(),
            host: self.host.clone(),
            vms: self.vms.clone(),
            restore_by,
            fault: self.fault,
            host_power: self.host_power.clone(),
            provenance: None,
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
) -> Result<(String, String), Refusal> {
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
                return Err(Refusal(format!(
                    "no Proxmox host `{name}` (hosts: {}; or use auto, worst)",
                    known.join(", ")
                )));
            }
            if !hosts.iter().any(|h| h == name) {
                return Err(Refusal(format!(
                    "host {name} runs no node of this environment (its hosts: {})",
                    hosts.join(", ")
                )));
            }
            Ok((name.to_string(), "given by name".to_string()))
        }
    }
}

/// The host whose loss hurts most: the one whose node holds the API VIP (seen in the Talos
/// addresses of each control plane) and the most L2 announcement leases (the ingress
/// address). Both move when it goes down.
fn worst_host(state: &State, proxmox: &ProxmoxState) -> Result<(String, String), Refusal> {
    let mut scores: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    let mut unknown = Vec::new();
    let host_of = |node: &str| {
        proxmox
            .placements
            .iter()
            .find(|p| p.node == node)
            .map(|p| p.host.clone())
    };
    match (state.talos.present(), state.api.present()) {
        (Some(talos), Some(api)) if !api.vip_addresses.is_empty() => {
            let holders = talos.holders(&api.vip_addresses);
            match holders.as_slice() {
                [one] => match talos
                    .node_of(one)
                    .as_deref()
                    .and_then(|n| host_of(n).map(|h| (n.to_string(), h)))
                {
                    Some((node, host)) => scores
                        .entry(host)
                        .or_default()
                        .push(format!("{node} holds the API VIP")),
                    None => unknown.push(format!(
                        "the API VIP holder {} has no known VM",
                        one.endpoint
                    )),
                },
                [] => unknown.push("no control plane lists the API VIP address".to_string()),
                many => unknown.push(format!("the API VIP is on {} nodes at once", many.len())),
            }
        }
        (Some(_), Some(api)) => unknown.push(format!(
            "the address of {} could not be resolved",
            api.vip_endpoint.as_deref().unwrap_or("the API endpoint")
        )),
        _ => unknown.push("the API VIP holder needs the talos and api sections".to_string()),
    }
    match state.leases.present() {
        Some(leases) => {
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
                if let Some(host) = host_of(holder) {
                    scores
                        .entry(host)
                        .or_default()
                        .push(format!("{name} held by {holder}"));
                }
            }
        }
        None => unknown.push("the Lease list could not be read".to_string()),
    }
    // Most reasons first; among equals the API VIP's host, then the first by name (stable).
    let has_vip = |why: &[String]| why.iter().any(|w| w.ends_with("holds the API VIP"));
    let best = scores
        .iter()
        .max_by(|a, b| {
            (a.1.len(), has_vip(a.1))
                .cmp(&(b.1.len(), has_vip(b.1)))
                .then_with(|| b.0.cmp(a.0))
        })
        .map(|(host, why)| (host.clone(), why.clone()));
    let suffix = if unknown.is_empty() {
        String::new()
    } else {
        format!(" ({})", unknown.join("; "))
    };
    match best {
        Some((host, why)) => Ok((host, format!("worst: {}{suffix}", why.join(", ")))),
        None => Err(Refusal(format!(
            "`worst`: neither the API VIP holder nor a cilium-l2announce-* lease holder is a node of this environment{suffix}"
        ))),
    }
}

/// The VMs to stop on `host`, or why the run must not touch it.
pub fn target(
    env: &Environment,
    proxmox: &ProxmoxState,
    host: &str,
    reason: String,
    whole_host: bool,
) -> Result<Target, Refusal> {
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
        return Err(Refusal(format!(
            "--whole-host refused: {host} also runs {}",
            bystanders
                .iter()
                .map(describe_bystander)
                .collect::<Vec<_>>()
                .join(", ")
        )));
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
                nets: Vec::new(),
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
        return Err(Refusal(format!(
            "the VMs on {host} must be known by UUID: {}",
            unknown.join("; ")
        )));
    }
    if vms.is_empty() {
        return Err(Refusal(format!("no running VM of {} on {host}", env.name)));
    }
    vms.sort_by_key(|v| v.vmid);
    Ok(Target {
        host: host.to_string(),
        reason,
        vms,
        bystanders,
        whole_host,
        host_power: None,
        fault: FaultKind::Power,
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
        let mut env: Environment = gates_core::yaml::from_str("{}").unwrap();
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
            disks: Vec::new(),
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
        assert!(err.0.contains("201 vm-201 (lab-production)"), "{err}");
        let ok = target(&env("lab"), &shared_host(), "pve2", "x".into(), true).unwrap();
        assert!(ok.whole_host && ok.bystanders.is_empty());
    }

    #[test]
    fn a_vm_matched_by_name_only_is_refused() {
        let mut p = shared_host();
        p.placements[1].matched_by = "name".into();
        let err = target(&env("lab"), &p, "pve2", "x".into(), false).unwrap_err();
        assert!(err.0.contains("by name only"), "{err}");
        p.placements.remove(1);
        let err = target(&env("lab"), &p, "pve2", "x".into(), false).unwrap_err();
        assert!(err.0.contains("no known Kubernetes node"), "{err}");
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

    fn live_state(vip_on: Option<usize>, lease_holders: &[&str]) -> State {
        use crate::state::{
            ApiState, Collected, EtcdMemberView, EtcdView, TalosEndpoint, TalosState,
        };
        use std::net::{IpAddr, Ipv4Addr};
        let vip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 10));
        let mut state = State::empty(
            crate::state::Source::Live {
                context: "lab".into(),
            },
            Utc::now(),
        );
        let members: Vec<EtcdMemberView> = [101, 102, 103]
            .iter()
            .map(|v| EtcdMemberView {
                id: format!("{v:016x}"),
                hostname: format!("node-{v}"),
                ..Default::default()
            })
            .collect();
        state.talos = Collected::Present(TalosState {
            endpoints: [101u32, 102, 103]
                .iter()
                .enumerate()
                .map(|(i, v)| TalosEndpoint {
                    endpoint: format!("10.0.0.{}", i + 1),
                    view: Ok(EtcdView {
                        members: members.clone(),
                        member_id: format!("{v:016x}"),
                        ..Default::default()
                    }),
                    addresses: Ok(if vip_on == Some(i) { vec![vip] } else { vec![] }),
                })
                .collect(),
            ..Default::default()
        });
        state.api = Collected::Present(ApiState {
            vip_endpoint: Some("https://10.0.0.10:6443".into()),
            vip_addresses: vec![vip],
            kubeconfig_server: Ok("https://10.0.0.10:6443".into()),
            readyz: Ok(()),
            readyz_status: Some(200),
        });
        state.leases = Collected::Present(
            lease_holders
                .iter()
                .enumerate()
                .map(|(i, holder)| {
                    serde_json::from_value(serde_json::json!({
                        "metadata": {"name": format!("cilium-l2announce-ingress-{i}"), "namespace": "kube-system"},
                        "spec": {"holderIdentity": holder}
                    }))
                    .unwrap()
                })
                .collect(),
        );
        state
    }

    #[test]
    fn worst_is_the_host_of_the_api_vip_and_the_l2_lease() {
        let p = shared_host();
        let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
        let (host, why) =
            choose_host("worst", &live_state(Some(1), &["node-102"]), &p, day).unwrap();
        assert_eq!(host, "pve2");
        assert!(
            why.contains("node-102 holds the API VIP") && why.contains("held by node-102"),
            "{why}"
        );
        // Split: the VIP's host wins a tie with a lease's host.
        let (host, _) = choose_host("worst", &live_state(Some(2), &["node-101"]), &p, day).unwrap();
        assert_eq!(host, "pve3");
        // No VIP holder seen: the lease decides, and the plan says the VIP holder is unknown.
        let (host, why) = choose_host("worst", &live_state(None, &["node-101"]), &p, day).unwrap();
        assert_eq!(host, "pve1");
        assert!(
            why.contains("no control plane lists the API VIP address"),
            "{why}"
        );
        let err = choose_host("worst", &live_state(None, &[]), &p, day).unwrap_err();
        assert!(err.0.contains("neither the API VIP holder"), "{err}");
    }
}
