//! Informational: which environments' VMs each Proxmox host runs. The ADR expects staging
//! and production to share some of the five hosts; the chaos step uses the same facts to
//! keep its blast radius inside one environment.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::Context;
use crate::verdict::Finding;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {}

impl super::Check for Params {
    fn inputs(&self) -> &'static [crate::state::Input] {
        use crate::state::Input;
        &[Input::Proxmox]
    }

    fn evaluate(&self, ctx: Context<'_>) -> Finding {
        evaluate(ctx, self)
    }
}

pub fn evaluate(ctx: Context<'_>, _params: &Params) -> Finding {
    let proxmox = match ctx.state.proxmox.get("Proxmox") {
        Ok(proxmox) => proxmox,
        Err(finding) => return finding,
    };
    let mut by_host: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for host in &proxmox.hosts {
        by_host.entry(host.name.as_str()).or_default();
    }
    for vm in &proxmox.vms {
        let owners = if vm.environments.is_empty() {
            "no environment".to_string()
        } else {
            vm.environments.join("+")
        };
        by_host
            .entry(vm.host.as_str())
            .or_default()
            .push(format!("{owners}: {} ({} {})", vm.name, vm.vmid, vm.status));
    }
    let shared = proxmox
        .hosts
        .iter()
        .filter(|h| {
            let mut envs: Vec<&String> = proxmox
                .vms
                .iter()
                .filter(|v| v.host == h.name)
                .flat_map(|v| &v.environments)
                .collect();
            envs.sort();
            envs.dedup();
            envs.len() > 1
        })
        .count();
    let evidence = by_host.iter().map(|(host, vms)| {
        let online = proxmox
            .hosts
            .iter()
            .find(|h| h.name == *host)
            .is_none_or(|h| h.online);
        format!(
            "{host}{}: {}",
            if online { "" } else { " (offline)" },
            if vms.is_empty() {
                "no VMs".to_string()
            } else {
                vms.join(", ")
            }
        )
    });
    Finding::pass(format!(
        "{} Proxmox hosts, {shared} shared by more than one environment",
        proxmox.hosts.len()
    ))
    .with_evidence(evidence)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::{env, run, state, text};
    use crate::state::{Collected, ProxmoxHost, ProxmoxState, ProxmoxVm};
    use crate::verdict::Verdict;

    fn vm(vmid: u32, host: &str, envs: &[&str]) -> ProxmoxVm {
        ProxmoxVm {
            vmid,
            name: format!("vm-{vmid}"),
            host: host.into(),
            status: "running".into(),
            uuid: None,
            ha_managed: false,
            environments: envs.iter().map(|e| e.to_string()).collect(),
            disks: Vec::new(),
        }
    }

    #[test]
    fn lists_each_hosts_tenants_and_counts_shared_hosts() {
        let s = state()
            .with(|s| {
                s.proxmox = Collected::Present(ProxmoxState {
                    hosts: ["pve1", "pve2", "pve3"]
                        .iter()
                        .map(|h| ProxmoxHost {
                            name: h.to_string(),
                            online: *h != "pve3",
                        })
                        .collect(),
                    vms: vec![
                        vm(101, "pve1", &["staging"]),
                        vm(201, "pve1", &["production"]),
                        vm(102, "pve2", &["staging"]),
                    ],
                    ..Default::default()
                })
            })
            .build();
        let f = run(&env(), &s, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Pass);
        let t = text(&f);
        assert!(
            t.contains("3 Proxmox hosts, 1 shared by more than one environment"),
            "{t}"
        );
        assert!(
            t.contains("pve1: staging: vm-101 (101 running), production: vm-201 (201 running)"),
            "{t}"
        );
        assert!(t.contains("pve3 (offline): no VMs"), "{t}");
    }

    #[test]
    fn unreachable_proxmox_is_an_error() {
        let s = state()
            .with(|s| s.proxmox = Collected::Absent("401 Unauthorized".into()))
            .build();
        assert_eq!(
            run(&env(), &s, &Params {}, evaluate).verdict,
            Verdict::Error
        );
    }
}
