//! Gates 1 and 5: no failure domain beyond a host takes a quorum of the control planes with
//! it. ADR 007's consequences: "A shared switch, power source, or datastore remains a shared
//! failure point." Three hosts keep etcd alive through one host's loss only if nothing else
//! that two of them depend on can fail at once.
//!
//! The switch and power feed of each host come from the environment file
//! (`proxmox.hosts: {pve1: {switch: sw-a, power: pdu-1}}`): Proxmox cannot tell them. The
//! datastores come from Proxmox: each disk of a control plane's VM config on a storage that
//! `/storage` marks `shared` (NFS, Ceph RBD, iSCSI, ... or set by the administrator) is one
//! datastore for every host; a storage that is not shared (`local-lvm`, a ZFS pool) and a host
//! path are the host's own, already counted by the host.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::Context;
use super::support::{is_control_plane, name};
use crate::state::{Collected, ProxmoxState};
use crate::verdict::Finding;

/// No parameters: the domains come from Proxmox and the environment's `proxmox.hosts`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {}

impl super::Check for Params {
    fn inputs(&self) -> &'static [crate::state::Input] {
        use crate::state::Input;
        &[Input::Nodes, Input::Proxmox]
    }

    fn evaluate(&self, ctx: Context<'_>) -> Finding {
        evaluate(ctx, self)
    }
}

/// A failure domain a control plane depends on besides its host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Domain {
    Switch(String),
    Power(String),
    Datastore(String),
}

impl std::fmt::Display for Domain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Domain::Switch(n) => write!(f, "switch {n}"),
            Domain::Power(n) => write!(f, "power feed {n}"),
            Domain::Datastore(n) => write!(f, "shared datastore {n}"),
        }
    }
}

/// One control plane and the domains it depends on.
#[derive(Debug, Clone)]
pub struct Member {
    pub node: String,
    pub host: String,
    pub vm: String,
    pub domains: Vec<Domain>,
}

/// What was found of the control planes' domains, and what could not be known.
#[derive(Debug, Clone, Default)]
pub struct Domains {
    pub members: Vec<Member>,
    /// Why a control plane's domains are partly unknown, one line each.
    pub unknown: Vec<String>,
    /// Hosts of control planes for which `proxmox.hosts` declares no switch (no power feed).
    pub no_switch: Vec<String>,
    pub no_power: Vec<String>,
}

/// The control planes' failure domains, from the nodes, Proxmox and the environment.
pub fn domains(
    control_planes: &[&str],
    proxmox: &ProxmoxState,
    declared: &BTreeMap<String, crate::config::HostDomains>,
) -> Domains {
    let mut out = Domains::default();
    for &node in control_planes {
        let Some(placement) = proxmox.placements.iter().find(|p| p.node == node) else {
            out.unknown.push(match proxmox.unread_vm_configs.is_empty() {
                true => format!("node {node} matches no VM of the environment in Proxmox: its host and disks are unknown"),
                false => format!(
                    "node {node} matches no VM while {} VM config(s) could not be read ({}): its host and disks are unknown",
                    proxmox.unread_vm_configs.len(),
                    proxmox.unread_vm_configs.join("; ")
                ),
            });
            continue;
        };
        let host = placement.host.clone();
        let vm = format!("VM {} {}", placement.vmid, placement.vm_name);
        let mut found = Vec::new();
        let declared_host = declared.get(&host);
        match declared_host.and_then(|d| d.switch.as_ref()) {
            Some(switch) => found.push(Domain::Switch(switch.clone())),
            None => push_once(&mut out.no_switch, &host),
        }
        match declared_host.and_then(|d| d.power.as_ref()) {
            Some(power) => found.push(Domain::Power(power.clone())),
            None => push_once(&mut out.no_power, &host),
        }
        let disks = proxmox
            .vms
            .iter()
            .find(|v| v.vmid == placement.vmid)
            .map(|v| v.disks.as_slice())
            .unwrap_or_default();
        if disks.is_empty() {
            out.unknown.push(format!(
                "{vm} (node {node}) has no disk in its config as read: where etcd's data lives is unknown"
            ));
        }
        for disk in disks {
            let Some(id) = &disk.storage else {
                continue; // a host path: the host's own
            };
            match proxmox.storages.iter().find(|s| &s.storage == id) {
                Some(storage) if storage.shared => found.push(Domain::Datastore(id.clone())),
                Some(_) => {}
                None => out.unknown.push(match &proxmox.storages_unread {
                    Some(why) => format!(
                        "disk {} of {vm} is on storage {id}, and whether it is shared is unknown: /storage could not be read ({why})",
                        disk.key
                    ),
                    None => format!(
                        "disk {} of {vm} is on storage {id}, which /storage does not list: the token needs Datastore.Audit on /storage/{id}",
                        disk.key
                    ),
                }),
            }
        }
        found.sort();
        found.dedup();
        out.members.push(Member {
            node: node.to_string(),
            host,
            vm,
            domains: found,
        });
    }
    out
}

/// A `--domain` that is not `KIND:NAME` with a known kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--domain {0:?}: expected KIND:NAME with KIND switch, power or datastore (e.g. switch:sw-a)"
)]
pub struct NotADomainName(pub String);

impl Domain {
    /// `switch:sw-a`, `power:pdu-1` or `datastore:ceph-vm`, as `gates predict --domain`
    /// takes it.
    pub fn parse(text: &str) -> Result<Domain, NotADomainName> {
        let bad = || NotADomainName(text.to_string());
        let (kind, name) = text.split_once(':').ok_or_else(bad)?;
        let name = name.trim();
        if name.is_empty() {
            return Err(bad());
        }
        match kind.trim() {
            "switch" => Ok(Domain::Switch(name.to_string())),
            "power" => Ok(Domain::Power(name.to_string())),
            "datastore" => Ok(Domain::Datastore(name.to_string())),
            _ => Err(bad()),
        }
    }

    /// The nodes of the environment the domain's loss takes down (every node on a host
    /// behind the switch or feed; every node whose VM keeps a disk on the datastore), with
    /// what they are, or why that cannot be told.
    pub fn nodes(
        &self,
        proxmox: &ProxmoxState,
        declared: &BTreeMap<String, crate::config::HostDomains>,
    ) -> Result<(Vec<String>, String), NotADomain> {
        let (hosts, what): (Vec<&str>, &str) = match self {
            Domain::Switch(name) | Domain::Power(name) => {
                let what = if matches!(self, Domain::Switch(_)) {
                    "switch"
                } else {
                    "power"
                };
                let of = |d: &crate::config::HostDomains| match self {
                    Domain::Switch(_) => d.switch.clone(),
                    _ => d.power.clone(),
                };
                let hosts: Vec<&str> = declared
                    .iter()
                    .filter(|(_, d)| of(d).as_deref() == Some(name))
                    .map(|(h, _)| h.as_str())
                    .collect();
                if hosts.is_empty() {
                    let known: Vec<String> = declared
                        .values()
                        .filter_map(of)
                        .collect::<std::collections::BTreeSet<_>>()
                        .into_iter()
                        .collect();
                    return Err(NotADomain::Named(format!(
                        "no host of proxmox.hosts has {what} {name} (declared: {})",
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    )));
                }
                (hosts, what)
            }
            Domain::Datastore(id) => {
                match proxmox.storages.iter().find(|s| &s.storage == id) {
                    Some(s) if s.shared => {}
                    Some(_) => {
                        return Err(NotADomain::Named(format!(
                            "storage {id} is not shared: each host has its own, so losing it is losing a host (gates predict --host)"
                        )));
                    }
                    None => {
                        return Err(NotADomain::Unknown(match &proxmox.storages_unread {
                            Some(why) => format!("/storage could not be read: {why}"),
                            None => format!(
                                "/storage does not list {id} (the token needs Datastore.Audit on /storage/{id})"
                            ),
                        }));
                    }
                }
                let on_it: Vec<String> = proxmox
                    .placements
                    .iter()
                    .filter(|p| {
                        proxmox.vms.iter().any(|v| {
                            v.vmid == p.vmid
                                && v.disks.iter().any(|d| d.storage.as_deref() == Some(id))
                        })
                    })
                    .map(|p| p.node.clone())
                    .collect();
                let vms = on_it.join(", ");
                return Ok((on_it, format!("datastore {id} ({vms})")));
            }
        };
        let nodes = proxmox
            .placements
            .iter()
            .filter(|p| hosts.contains(&p.host.as_str()))
            .map(|p| p.node.clone())
            .collect();
        let name = match self {
            Domain::Switch(n) | Domain::Power(n) | Domain::Datastore(n) => n,
        };
        Ok((nodes, format!("{what} {name} ({})", hosts.join(", "))))
    }
}

/// Why a domain names no nodes: the name matches nothing the environment declares (a usage
/// error), or what it holds cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotADomain {
    Named(String),
    Unknown(String),
}

fn push_once(list: &mut Vec<String>, host: &str) {
    if !list.iter().any(|h| h == host) {
        list.push(host.to_string());
    }
}

/// `proxmox.hosts` naming a host Proxmox does not list: an error naming them and the hosts.
fn strangers(
    declared: &BTreeMap<String, crate::config::HostDomains>,
    proxmox: &crate::state::ProxmoxState,
    environment: &str,
) -> Option<Finding> {
    let strangers: Vec<&str> = declared
        .keys()
        .filter(|h| !proxmox.hosts.iter().any(|p| &p.name == *h))
        .map(String::as_str)
        .collect();
    if strangers.is_empty() {
        return None;
    }
    Some(Finding::error(format!(
        "proxmox.hosts names {}, which Proxmox does not list as a host (it lists {}): correct the host names in environment {environment}",
        strangers.join(", "),
        proxmox
            .hosts
            .iter()
            .map(|h| h.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    )))
}

/// The domains that carry a quorum of the control planes (failing), and those that carry more
/// than one below quorum (worth a warning).
fn shared_domains(members: &[Member], total: usize, quorum: usize) -> (Vec<String>, Vec<String>) {
    let mut by_domain: BTreeMap<&Domain, Vec<&Member>> = BTreeMap::new();
    for member in members {
        for domain in &member.domains {
            by_domain.entry(domain).or_default().push(member);
        }
    }
    let mut failing = Vec::new();
    let mut shared = Vec::new();
    for (domain, members) in &by_domain {
        let on: Vec<String> = members
            .iter()
            .map(|m| format!("{} on {}", m.node, m.host))
            .collect();
        let line = format!(
            "{domain} carries {} of the {total} control planes ({})",
            members.len(),
            on.join(", ")
        );
        if members.len() >= quorum {
            failing.push(format!("{line}: losing it loses etcd quorum"));
        } else if members.len() > 1 {
            shared.push(format!(
                "{line}: below quorum ({quorum}), but one fault takes both"
            ));
        }
    }
    (failing, shared)
}

fn describe_member(m: &Member) -> String {
    let domains: Vec<String> = m.domains.iter().map(ToString::to_string).collect();
    format!(
        "node {} (host {}, {}): {}",
        m.node,
        m.host,
        m.vm,
        if domains.is_empty() {
            "no switch, power feed or shared datastore declared or found".to_string()
        } else {
            domains.join(", ")
        }
    )
}

pub fn evaluate(ctx: Context<'_>, _params: &Params) -> Finding {
    let Some(access) = ctx.env.proxmox.as_ref() else {
        return Finding::skip(
            "the environment has no proxmox section: the hosts, their disks and datastores are unknown to gates",
        );
    };
    let nodes = match ctx.state.nodes.get("nodes") {
        Ok(nodes) => nodes,
        Err(finding) => return finding,
    };
    let proxmox = match &ctx.state.proxmox {
        Collected::Present(p) => p,
        Collected::Absent(reason) => {
            return Finding::error(format!(
                "Proxmox could not be read, so the control planes' hosts and datastores are unknown: {reason}"
            ));
        }
        Collected::NotApplicable(why) => return Finding::skip(why.clone()),
    };
    if let Some(finding) = strangers(&access.hosts, proxmox, &ctx.env.name) {
        return finding;
    }
    let control_planes: Vec<&str> = nodes
        .iter()
        .filter(|n| is_control_plane(n))
        .map(|n| name(&n.metadata))
        .collect();
    if control_planes.is_empty() {
        return Finding::error("no node carries the control-plane role: nothing to judge");
    }
    let found = domains(&control_planes, proxmox, &access.hosts);
    let total = control_planes.len();
    let quorum = total / 2 + 1;

    let (failing, shared) = shared_domains(&found.members, total, quorum);
    let mut evidence: Vec<String> = found.members.iter().map(describe_member).collect();
    let mut warnings = shared;
    for (list, what) in [(&found.no_switch, "switch"), (&found.no_power, "power")] {
        if !list.is_empty() {
            warnings.push(format!(
                "proxmox.hosts declares no {what} for {}: declare it (proxmox.hosts.HOST.{what}) to have it judged",
                list.join(", ")
            ));
        }
    }
    if !failing.is_empty() {
        let summary = failing[0].clone();
        evidence.splice(0..0, failing.into_iter().skip(1));
        evidence.extend(found.unknown);
        return Finding::fail(summary)
            .with_evidence(evidence)
            .with_warnings(warnings);
    }
    if let Some(first) = found.unknown.first() {
        return Finding::error(first.clone())
            .with_evidence(found.unknown.iter().skip(1).cloned().chain(evidence))
            .with_warnings(warnings);
    }
    Finding::pass(format!(
        "no switch, power feed or shared datastore carries a quorum ({quorum}) of the {total} control planes"
    ))
    .with_evidence(evidence)
    .with_warnings(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::config::HostDomains;
    use crate::state::{ProxmoxHost, ProxmoxStorage, VmDisk};
    use crate::verdict::Verdict;

    /// Three control planes, one per host, each VM's disk on `storages[i]`.
    fn cluster(storages: [&str; 3]) -> crate::state::State {
        state()
            .nodes(target_nodes())
            .with(|s| {
                let mut p =
                    match proxmox(&[("cp-1", "pve1"), ("cp-2", "pve2"), ("cp-3", "pve3")], &[]) {
                        Collected::Present(p) => p,
                        _ => unreachable!(),
                    };
                p.hosts = ["pve1", "pve2", "pve3"]
                    .iter()
                    .map(|h| ProxmoxHost {
                        name: h.to_string(),
                        online: true,
                    })
                    .collect();
                p.vms = p
                    .placements
                    .iter()
                    .zip(storages)
                    .map(|(pl, storage)| crate::state::ProxmoxVm {
                        vmid: pl.vmid,
                        name: pl.vm_name.clone(),
                        host: pl.host.clone(),
                        status: "running".into(),
                        uuid: pl.uuid.clone(),
                        ha_managed: false,
                        environments: vec!["production".into()],
                        disks: vec![VmDisk {
                            key: "scsi0".into(),
                            storage: Some(storage.into()),
                            volume: format!("{storage}:vm-{}-disk-0", pl.vmid),
                        }],
                    })
                    .collect();
                p.storages = vec![
                    storage("local-lvm", "lvmthin", false),
                    storage("ceph-vm", "rbd", true),
                ];
                s.proxmox = Collected::Present(p);
            })
            .build()
    }

    fn storage(name: &str, kind: &str, shared: bool) -> ProxmoxStorage {
        ProxmoxStorage {
            storage: name.into(),
            kind: kind.into(),
            shared,
            nodes: Vec::new(),
        }
    }

    fn with_hosts(hosts: &[(&str, &str, &str)]) -> crate::config::Environment {
        let mut env = env();
        let access = env.proxmox.get_or_insert_with(|| {
            crate::yaml::from_str("{url: 'https://pve1:8006', token_id: 'a@pve!b'}").unwrap()
        });
        access.hosts = hosts
            .iter()
            .map(|(h, sw, pw)| {
                (
                    h.to_string(),
                    HostDomains {
                        switch: Some(sw.to_string()),
                        power: Some(pw.to_string()),
                    },
                )
            })
            .collect();
        env
    }

    /// Each control plane's host on a switch and power feed of its own.
    const APART: [(&str, &str, &str); 3] = [
        ("pve1", "sw-a", "pdu-1"),
        ("pve2", "sw-b", "pdu-2"),
        ("pve3", "sw-c", "pdu-3"),
    ];

    fn check(env: &crate::config::Environment, state: &crate::state::State) -> Finding {
        run(env, state, &Params {}, evaluate)
    }

    #[test]
    fn separate_switches_feeds_and_local_disks_pass_naming_each_control_planes_domains() {
        let env = with_hosts(&APART);
        let f = check(&env, &cluster(["local-lvm"; 3]));
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert_eq!(
            f.evidence[0],
            "node cp-1 (host pve1, VM 101 cp-1): switch sw-a, power feed pdu-1"
        );
        assert!(f.warnings.is_empty(), "{:?}", f.warnings);
    }

    #[test]
    fn one_switch_under_two_of_three_control_planes_fails_and_names_them() {
        let env = with_hosts(&[
            ("pve1", "sw-a", "pdu-1"),
            ("pve2", "sw-a", "pdu-2"),
            ("pve3", "sw-b", "pdu-3"),
        ]);
        let f = check(&env, &cluster(["local-lvm"; 3]));
        assert_eq!(f.verdict, Verdict::Fail, "{}", text(&f));
        assert_eq!(
            f.summary,
            "switch sw-a carries 2 of the 3 control planes (cp-1 on pve1, cp-2 on pve2): losing it loses etcd quorum"
        );
    }

    #[test]
    fn control_plane_disks_on_one_shared_datastore_fail_and_one_alone_is_a_warning() {
        let env = with_hosts(&APART);
        let f = check(&env, &cluster(["ceph-vm", "ceph-vm", "local-lvm"]));
        assert_eq!(f.verdict, Verdict::Fail, "{}", text(&f));
        assert!(
            f.summary
                .starts_with("shared datastore ceph-vm carries 2 of the 3"),
            "{}",
            f.summary
        );
        // local-lvm has the same name on every host but is each host's own.
        let f = check(&env, &cluster(["ceph-vm", "local-lvm", "local-lvm"]));
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
    }

    #[test]
    fn a_storage_proxmox_does_not_list_or_an_unread_storage_list_is_an_error_never_a_pass() {
        let env = with_hosts(&APART);
        let f = check(&env, &cluster(["nfs-a", "local-lvm", "local-lvm"]));
        assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
        assert!(
            f.summary.contains("Datastore.Audit on /storage/nfs-a"),
            "{}",
            f.summary
        );
        let mut state = cluster(["local-lvm"; 3]);
        if let Collected::Present(p) = &mut state.proxmox {
            p.storages.clear();
            p.storages_unread = Some("403 Forbidden".into());
        }
        let f = check(&env, &state);
        assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
        assert!(
            f.summary
                .contains("/storage could not be read (403 Forbidden)"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn undeclared_switches_are_said_and_a_host_proxmox_does_not_know_is_an_error() {
        let f = check(&with_hosts(&[]), &cluster(["local-lvm"; 3]));
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert!(
            f.warnings
                .iter()
                .any(|w| w.contains("declares no switch for pve1, pve2, pve3")),
            "{:?}",
            f.warnings
        );
        let f = check(
            &with_hosts(&[("pve9", "sw-a", "pdu-1")]),
            &cluster(["local-lvm"; 3]),
        );
        assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
        assert!(
            f.summary.starts_with("proxmox.hosts names pve9"),
            "{}",
            f.summary
        );
    }
}
