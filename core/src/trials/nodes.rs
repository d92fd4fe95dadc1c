//! Gate 1 on the repository: three control-plane VMs declared on three distinct Proxmox
//! hosts, scheduling allowed on control planes, each node labelled with its host, the VIP
//! configured only on control planes, and talosconfig endpoints that are not the VIP.

use std::collections::BTreeMap;

use crate::verdict::Finding;

use super::{RepoContext, at, declared_nodes, nodes_and_patches, talos_patches};
use crate::declared::environments::DeclaredNode;
use crate::declared::terraform::HostUnknown;

fn describe(node: &DeclaredNode<'_>) -> String {
    let mut host = node
        .vm
        .host
        .as_ref()
        .map(|h| format!(" on {}", h.show()))
        .unwrap_or_default();
    if let Some(unknown) = &node.vm.host_unknown {
        host = format!(" on a host not known ({})", unknown.error);
    }
    if let Some((_, site)) = &node.vm.machine_type
        && node.control_plane.is_some()
    {
        host.push_str(&format!(
            " (the role of the Talos configuration applied to its address at {site})"
        ));
    }
    at(
        &node.vm.name.site,
        &format!("{}[\"{}\"]", node.vm.resource, node.name()),
        format!("{}{host}", node.role()),
    )
}

fn unknown_roles(nodes: &[DeclaredNode<'_>]) -> Option<Finding> {
    let unknown: Vec<String> = nodes
        .iter()
        .filter(|n| n.control_plane.is_none())
        .map(describe)
        .collect();
    (!unknown.is_empty()).then(|| {
        Finding::error(
            "the role of some VMs is not declared: tag each VM with one role (control-plane, controlplane, ctrl, controller or master; worker), or name your tags in repo.roles",
        )
            .with_evidence(unknown)
    })
}

pub fn control_plane_nodes(ctx: &RepoContext<'_>) -> Finding {
    let nodes = match declared_nodes(ctx.env) {
        Ok(nodes) => nodes,
        Err(finding) => return finding,
    };
    if let Some(finding) = unknown_roles(&nodes) {
        return finding;
    }
    let want = ctx.settings.nodes.control_planes;
    let cps = nodes
        .iter()
        .filter(|n| n.control_plane == Some(true))
        .count();
    let evidence: Vec<String> = nodes.iter().map(describe).collect();
    let templates = match &ctx.env.terraform {
        Some(Ok(tf)) => tf.templates.clone(),
        _ => Vec::new(),
    };
    let finding = if cps == want {
        Finding::pass(format!(
            "{cps} control-plane VMs declared for {}",
            ctx.env.name
        ))
        .with_evidence(evidence)
    } else {
        Finding::fail(format!(
            "{cps} control-plane VM(s) declared for {}, the ADR wants {want}",
            ctx.env.name
        ))
        .with_evidence(evidence)
    };
    finding.with_warnings(templates)
}

/// What the VMs' own placement says against the ADR (a shared host, too few hosts, a VM
/// without one): settled by Terraform alone, whatever the Talos patches say.
/// Where a node runs: a VM's declared Proxmox host; a node only the Talos configuration
/// declares runs where its host label says (`None`: not said).
fn host_of(
    node: &DeclaredNode<'_>,
    patches: Option<&crate::declared::talos::Patches>,
    label: &str,
) -> Option<String> {
    if node.is_vm() {
        return node.host().map(str::to_string);
    }
    // The labels the node will carry: its patches' and kubelet's own (`kubernetes.io/hostname`
    // is its name, so a host label of that key makes each node its own host, as on bare metal).
    super::l2::node_labels(node, patches)
        .labels
        .get(label)
        .cloned()
}

/// What is wrong with where the control planes run, whatever the hosts not known turn out
/// to be, and the control planes whose host is not known.
fn host_problems(
    nodes: &[DeclaredNode<'_>],
    want: usize,
    host: &dyn Fn(&DeclaredNode<'_>) -> Option<String>,
) -> (Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let mut unknown = Vec::new();
    let mut hosts: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    // Hosts not known but the same for every VM that reads them (one expression without
    // `count`, `each` or `self`): whatever they are, those VMs share one.
    let mut same: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for node in nodes.iter().filter(|n| n.control_plane == Some(true)) {
        match (host(node), &node.vm.host_unknown) {
            (Some(h), _) => hosts.entry(h).or_default().push(node.name()),
            (
                None,
                Some(HostUnknown {
                    same_as: Some(key), ..
                }),
            ) if node.is_vm() => same.entry(key.as_str()).or_default().push(node.name()),
            (None, Some(h)) if node.is_vm() => {
                unknown.push(format!("{} ({})", node.name(), h.error))
            }
            (None, _) if node.is_vm() => problems.push(format!(
                "{}: VM {} declares no Proxmox host",
                node.vm.name.site,
                node.name()
            )),
            (None, _) => unknown.push(node.name().to_string()),
        }
    }
    for (host, names) in hosts.iter().filter(|(_, n)| n.len() > 1) {
        problems.push(format!(
            "control planes {} share host {host}",
            names.join(", ")
        ));
    }
    for (expr, names) in same.iter().filter(|(_, n)| n.len() > 1) {
        let expr = expr.rsplit_once("module.").map_or(*expr, |(_, e)| e);
        problems.push(format!(
            "control planes {} share one host, whatever `{expr}` is: each is placed by that one expression",
            names.join(", ")
        ));
    }
    let at_most = hosts.len() + same.len() + unknown.len();
    if at_most < want {
        problems.push(format!(
            "{at_most} distinct host(s) for the control planes, the ADR wants {want}"
        ));
    }
    (problems, unknown)
}

/// Whether the declared nodes alone already make the distinct-hosts trial fail.
pub fn hosts_settle_a_fail(ctx: &RepoContext<'_>) -> bool {
    let patches = talos_patches(ctx.env).ok().flatten();
    let label = &ctx.settings.nodes.host_label;
    declared_nodes(ctx.env).is_ok_and(|nodes| {
        !host_problems(&nodes, ctx.settings.nodes.control_planes, &|n| {
            host_of(n, patches, label)
        })
        .0
        .is_empty()
    })
}

pub fn distinct_hosts(ctx: &RepoContext<'_>) -> Finding {
    let nodes = match declared_nodes(ctx.env) {
        Ok(nodes) => nodes,
        Err(finding) => return finding,
    };
    if let Some(finding) = unknown_roles(&nodes) {
        return finding;
    }
    let patches = match talos_patches(ctx.env) {
        Ok(p) => p,
        Err(finding) => return finding,
    };
    let want = ctx.settings.nodes.control_planes;
    let label = &ctx.settings.nodes.host_label;
    let (mut problems, unknown) = host_problems(&nodes, want, &|n| host_of(n, patches, label));
    let mut warnings = Vec::new();
    let vm_unknown: Vec<String> = nodes
        .iter()
        .filter(|n| n.control_plane == Some(true) && n.is_vm())
        .filter_map(|n| n.vm.host_unknown.as_ref().map(|h| (n, h)))
        .map(|(n, h)| format!("{}: {}", n.name(), h.error))
        .collect();
    if !vm_unknown.is_empty() && problems.is_empty() {
        return Finding::error(format!(
            "the host of {} control-plane VM(s) cannot be evaluated, so whether they share one is not known",
            vm_unknown.len()
        ))
        .with_evidence(vm_unknown);
    }
    if !unknown.is_empty() && problems.is_empty() {
        return Finding::skip(format!(
            "the repository does not say which host {} run(s) on: they are declared by the Talos configuration, not as VMs, and carry no `{label}` label (set it in their nodeLabels)",
            unknown.join(", ")
        ))
        .with_evidence(nodes.iter().map(describe));
    }
    match patches {
        Some(patches) => {
            for node in nodes.iter().filter(|n| n.is_vm()) {
                let labels = patches.labels(node.name(), node.control_plane == Some(true));
                let value = labels.iter().find(|(k, _)| k == label).map(|(_, v)| v);
                match (value, node.host()) {
                    (Some(v), Some(host)) if v.as_str() == Some(host) => {}
                    // The label cannot be compared with a host not known; the host trial
                    // above already says what is known of it.
                    (Some(_), None) if node.vm.host_unknown.is_some() => {}
                    (Some(v), host) => problems.push(format!(
                        "{}, but the VM is on {}",
                        at(&v.site, &format!("{} nodeLabels.{label}", node.name()), v.show()),
                        host.unwrap_or("no declared host")
                    )),
                    (None, _) => problems.push(format!(
                        "{} has no `{label}` label in its Talos patches (set machine.nodeLabels.{label} to its host)",
                        node.name()
                    )),
                }
            }
        }
        None => warnings.push(format!(
            "host labels not checked: the repository has no Talos patches for {}",
            ctx.env.name
        )),
    }
    let evidence: Vec<String> = nodes.iter().map(describe).collect();
    if problems.is_empty() {
        Finding::pass(format!(
            "{want} control planes declared on {} distinct hosts, each labelled with its host",
            nodes
                .iter()
                .filter(|n| n.control_plane == Some(true))
                .count()
        ))
        .with_evidence(evidence)
        .with_warnings(warnings)
    } else {
        Finding::fail(format!(
            "the declared control planes of {} do not sit on {want} distinct, labelled hosts",
            ctx.env.name
        ))
        .with_evidence(problems.into_iter().chain(evidence))
        .with_warnings(warnings)
    }
}

pub fn schedulable_control_plane(ctx: &RepoContext<'_>) -> Finding {
    let (nodes, patches) = match nodes_and_patches(ctx.env, || {
        format!("the repository has no Talos patches for {}", ctx.env.name)
    }) {
        Ok(found) => found,
        Err(finding) => return finding,
    };
    let mut problems = Vec::new();
    let mut evidence = Vec::new();
    for node in nodes.iter().filter(|n| n.control_plane == Some(true)) {
        let scheduling = patches.control_plane_scheduling(node.name());
        problems.extend(
            scheduling
                .blocked
                .into_iter()
                .map(|line| format!("{line} (for {})", node.name())),
        );
        evidence.extend(scheduling.evidence);
    }
    evidence.sort();
    evidence.dedup();
    if problems.is_empty() {
        Finding::pass("the Talos patches allow workloads on every control plane")
            .with_evidence(evidence)
    } else {
        Finding::fail("the Talos patches keep workloads off control planes").with_evidence(problems)
    }
}

pub fn vip(ctx: &RepoContext<'_>) -> Finding {
    let (nodes, patches) = match nodes_and_patches(ctx.env, || {
        format!("the repository has no Talos patches for {}", ctx.env.name)
    }) {
        Ok(found) => found,
        Err(finding) => return finding,
    };
    let mut problems = Vec::new();
    let mut evidence = Vec::new();
    for node in &nodes {
        let vips = patches.vips(node.name(), node.control_plane == Some(true));
        match (node.control_plane, vips.is_empty()) {
            (Some(true), true) => problems.push(format!(
                "{}: no VIP (machine.network.interfaces[].vip.ip) in its Talos patches",
                node.name()
            )),
            (Some(true), false) => evidence.extend(
                vips.iter()
                    .map(|v| format!("{} (on {})", at(&v.site, "vip.ip", v.show()), node.name())),
            ),
            (_, false) => problems.extend(vips.iter().map(|v| {
                format!(
                    "{} applies to {}, a {}",
                    at(&v.site, "vip.ip", v.show()),
                    node.name(),
                    node.role()
                )
            })),
            (_, true) => {}
        }
    }
    if problems.is_empty() {
        Finding::pass("the VIP is configured on every control plane and nowhere else")
            .with_evidence(evidence)
    } else {
        Finding::fail("the VIP is not configured on exactly the control planes")
            .with_evidence(problems)
    }
}

pub fn talos_endpoints(ctx: &RepoContext<'_>) -> Finding {
    let Some(Ok(tf)) = &ctx.env.terraform else {
        return match &ctx.env.terraform {
            Some(Err(err)) => super::unreadable("the Terraform cannot be read", err),
            _ => Finding::skip(
                "the repository has no Terraform, so no talosconfig endpoints are declared",
            ),
        };
    };
    let endpoints = match &tf.talos_endpoints {
        None => {
            return Finding::skip(
                "no talos_client_configuration endpoints are declared in the Terraform",
            );
        }
        Some(Err(err)) => {
            return super::unreadable("the talosconfig endpoints cannot be read", err);
        }
        Some(Ok(endpoints)) => endpoints,
    };
    let vips: Vec<String> = match talos_patches(ctx.env) {
        Ok(Some(p)) => p
            .patches
            .iter()
            .flat_map(|p| {
                p.doc
                    .get(&["machine", "network", "interfaces"])
                    .and_then(|i| i.as_seq())
                    .unwrap_or_default()
            })
            .filter_map(|i| i.get_str(&["vip", "ip"]).map(str::to_string))
            .collect(),
        Ok(None) => Vec::new(),
        Err(finding) => return finding,
    };
    let list = endpoints.as_seq().unwrap_or_default();
    let bad: Vec<String> = list
        .iter()
        .filter(|e| {
            e.as_str().is_some_and(|e| {
                let host = super::drift_addresses::endpoint_host(e);
                vips.iter().any(|v| v.trim() == host)
            })
        })
        .map(|e| {
            format!(
                "{} is the API VIP",
                at(&e.site, "talos_client_configuration.endpoints[]", e.show())
            )
        })
        .collect();
    if bad.is_empty() {
        Finding::pass(format!(
            "talosconfig endpoints name {} address(es), none of them the VIP",
            list.len()
        ))
        .with_evidence([at(
            &endpoints.site,
            "talos_client_configuration.endpoints",
            endpoints.show(),
        )])
    } else {
        Finding::fail("the talosconfig endpoints include the API VIP, which depends on etcd quorum")
            .with_evidence(bad)
    }
}
