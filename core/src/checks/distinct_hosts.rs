//! Gates 1 and 5: every node names its physical host, and the control-plane nodes sit on as
//! many distinct hosts as the ADR asks for, so that losing one host costs one etcd member.
//! Workers may share a host with a control plane; only control planes must be apart.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use serde::Deserialize;

use super::Context;
use super::support::{Hosts, is_control_plane, name};
use crate::state::Collected;
use crate::verdict::Finding;

/// No parameters: the expected count and the host label come from the environment.
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

pub fn evaluate(ctx: Context<'_>, _params: &Params) -> Finding {
    let nodes = match ctx.state.nodes.get("nodes") {
        Ok(nodes) => nodes,
        Err(finding) => return finding,
    };
    // With a `proxmox` section the hosts must come from Proxmox: labels alone are what the
    // section exists to verify, so an unreadable Proxmox cannot fall back to them.
    if ctx.env.proxmox.is_some()
        && let Collected::Absent(reason) = &ctx.state.proxmox
    {
        return Finding::error(format!(
            "Proxmox could not be read, so the nodes' real hosts are unknown: {reason}"
        ));
    }
    let hosts = Hosts::new(ctx, nodes);
    let unread = ctx
        .state
        .proxmox
        .present()
        .map(|p| p.unread_vm_configs.as_slice())
        .unwrap_or_default();
    let mut problems = labels_match_hosts(nodes, &hosts);
    let unknown = placements(nodes, &hosts, unread, &mut problems);
    let (by_host, control_planes) = control_planes_by_host(nodes, &hosts);
    for (host, members) in by_host.iter().filter(|(_, m)| m.len() > 1) {
        problems.push(format!(
            "host {host} carries {} control-plane nodes: {}; losing it loses all of them",
            members.len(),
            members.join(", ")
        ));
    }
    let expected = ctx.env.nodes.control_planes;
    // With hosts unknown the count of distinct hosts proves nothing either way.
    if by_host.len() < expected && unknown.is_empty() {
        problems.push(format!(
            "control-plane nodes span {} distinct host(s), the ADR expects {expected} control planes on {expected} distinct hosts",
            by_host.len()
        ));
    }
    let evidence: Vec<String> = nodes
        .iter()
        .map(|n| {
            let role = if is_control_plane(n) {
                "control-plane"
            } else {
                "other"
            };
            format!("{role} {}", hosts.describe(name(&n.metadata)))
        })
        .collect();
    if !unknown.is_empty() {
        let note = format!(
            "{} node(s) match no VM while {} VM config(s) could not be read: {}",
            unknown.len(),
            unread.len(),
            unknown.join(", ")
        );
        if problems.is_empty() {
            return Finding::error(format!(
                "the hosts of {} node(s) are unknown: {} Proxmox VM config(s) could not be read",
                unknown.len(),
                unread.len()
            ))
            .with_evidence(std::iter::once(note).chain(unread.iter().cloned()));
        }
        problems.push(note);
    }
    match problems.first() {
        Some(first) => Finding::fail(first.clone())
            .with_evidence(problems.iter().skip(1).cloned().chain(evidence)),
        None => Finding::pass(format!(
            "{control_planes} control-plane nodes on {} distinct hosts; every node names its host{}",
            by_host.len(),
            if hosts.proxmox_known() { ", as Proxmox confirms" } else { "" }
        ))
        .with_evidence(evidence),
    }
}

/// Every node names its host with the host label.
fn labels_match_hosts(nodes: &[Arc<Node>], hosts: &Hosts) -> Vec<String> {
    let unlabelled: Vec<&str> = nodes
        .iter()
        .map(|n| name(&n.metadata))
        .filter(|n| hosts.labelled(n).is_none())
        .collect();
    if unlabelled.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "{} node(s) lack the host label {}: {}",
        unlabelled.len(),
        hosts.label(),
        unlabelled.join(", ")
    )]
}

/// Where Proxmox is known, each node's label agrees with the host its VM runs on; the nodes
/// whose VM may be one whose config could not be read (unknown, not broken).
fn placements<'n>(
    nodes: &'n [Arc<Node>],
    hosts: &Hosts,
    unread: &[String],
    problems: &mut Vec<String>,
) -> Vec<&'n str> {
    let mut unknown = Vec::new();
    if !hosts.proxmox_known() {
        return unknown;
    }
    for node in nodes {
        let node_name = name(&node.metadata);
        match (hosts.placement(node_name), hosts.labelled(node_name)) {
            (Some((real, vm)), Some(claimed)) if real != claimed => problems.push(format!(
                "node {node_name} is labelled {}={claimed} but runs on Proxmox host {real} ({vm}): the label lies",
                hosts.label()
            )),
            (None, _) if !unread.is_empty() => unknown.push(node_name),
            (None, _) => problems.push(format!(
                "node {node_name} matches no VM of the environment in Proxmox (by SMBIOS uuid): its host is unknown"
            )),
            _ => {}
        }
    }
    unknown
}

/// The control planes on each known host, and how many control planes there are.
fn control_planes_by_host<'n>(
    nodes: &'n [Arc<Node>],
    hosts: &'n Hosts,
) -> (BTreeMap<&'n str, Vec<&'n str>>, usize) {
    let mut by_host: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut control_planes = 0;
    for node in nodes.iter().filter(|n| is_control_plane(n)) {
        control_planes += 1;
        let node_name = name(&node.metadata);
        if let Some(host) = hosts.of(node_name) {
            by_host.entry(host).or_default().push(node_name);
        }
    }
    (by_host, control_planes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::verdict::Verdict;

    fn check(nodes: Vec<k8s_openapi::api::core::v1::Node>) -> Finding {
        run(&env(), &state().nodes(nodes).build(), &Params {}, evaluate)
    }

    #[test]
    fn three_control_planes_on_three_hosts_pass() {
        let mut nodes = target_nodes();
        // A worker may share a host with a control plane.
        nodes.push(node("worker-1").host("pve1").ready().build());
        let f = check(nodes);
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert!(
            f.summary
                .contains("3 control-plane nodes on 3 distinct hosts")
        );
        assert!(
            f.evidence
                .contains(&"other node worker-1 (host pve1)".to_string())
        );
    }

    fn placed(nodes: Vec<k8s_openapi::api::core::v1::Node>, real: &[(&str, &str)]) -> Finding {
        use crate::state::{Collected, Placement, ProxmoxState};
        let placements = real
            .iter()
            .enumerate()
            .map(|(i, (node, host))| Placement {
                node: node.to_string(),
                vmid: 101 + i as u32,
                vm_name: node.to_string(),
                host: host.to_string(),
                uuid: Some(format!("uuid-{i}")),
                matched_by: "uuid".into(),
            })
            .collect();
        let s = state()
            .nodes(nodes)
            .with(|s| {
                s.proxmox = Collected::Present(ProxmoxState {
                    placements,
                    ..Default::default()
                })
            })
            .build();
        run(&env(), &s, &Params {}, evaluate)
    }

    #[test]
    fn proxmox_placement_that_agrees_with_the_labels_passes() {
        let f = placed(
            target_nodes(),
            &[("cp-1", "pve1"), ("cp-2", "pve2"), ("cp-3", "pve3")],
        );
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert!(f.summary.contains("as Proxmox confirms"));
        assert!(
            text(&f).contains("node cp-2 (host pve2, VM 102 cp-2)"),
            "{}",
            text(&f)
        );
    }

    #[test]
    fn a_label_that_lies_fails_naming_both_hosts() {
        // The labels say pve1..pve3, but cp-3's VM really runs on pve1.
        let f = placed(
            target_nodes(),
            &[("cp-1", "pve1"), ("cp-2", "pve2"), ("cp-3", "pve1")],
        );
        assert_eq!(f.verdict, Verdict::Fail);
        let t = text(&f);
        assert!(
            t.contains("node cp-3 is labelled topology.kubernetes.io/zone=pve3 but runs on Proxmox host pve1 (VM 103 cp-3): the label lies"),
            "{t}"
        );
        assert!(
            t.contains("host pve1 carries 2 control-plane nodes: cp-1, cp-3"),
            "{t}"
        );
    }

    #[test]
    fn a_node_without_a_vm_fails_when_proxmox_was_read() {
        let f = placed(target_nodes(), &[("cp-1", "pve1"), ("cp-2", "pve2")]);
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(text(&f).contains("node cp-3 matches no VM of the environment in Proxmox"));
    }

    #[test]
    fn unreadable_vm_configs_make_unmatched_nodes_an_error_not_a_failure() {
        use crate::state::{Placement, ProxmoxState};
        let s = state()
            .nodes(target_nodes())
            .with(|s| {
                s.proxmox = Collected::Present(ProxmoxState {
                    placements: vec![Placement {
                        node: "cp-1".into(),
                        vmid: 101,
                        vm_name: "cp-1".into(),
                        host: "pve1".into(),
                        uuid: Some("uuid-1".into()),
                        matched_by: "uuid".into(),
                    }],
                    unread_vm_configs: vec![
                        "VM 102 cp-2 on pve2: timed out".into(),
                        "VM 103 cp-3 on pve3: timed out".into(),
                    ],
                    ..Default::default()
                })
            })
            .build();
        let f = run(&env(), &s, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
        assert!(
            text(&f).contains("VM 102 cp-2 on pve2: timed out"),
            "{}",
            text(&f)
        );
    }

    #[test]
    fn an_unreadable_proxmox_is_an_error_when_the_environment_has_a_proxmox_section() {
        let mut env = env();
        env.proxmox = Some(
            crate::yaml::from_str(
                "{url: 'https://pve1:8006', token_id: 'a@pve!b', token_secret_env: X, insecure_tls: true, vms: {tags: [staging]}}",
            )
            .unwrap(),
        );
        let s = state()
            .nodes(target_nodes())
            .with(|s| s.proxmox = absent("connection refused"))
            .build();
        let f = run(&env, &s, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
        assert!(text(&f).contains("connection refused"));
    }

    #[test]
    fn two_control_planes_on_one_host_fail_naming_both() {
        let mut nodes = target_nodes();
        nodes[2] = node("cp-3").host("pve1").control_plane().ready().build();
        let f = check(nodes);
        assert_eq!(f.verdict, Verdict::Fail);
        assert_eq!(
            f.summary,
            "host pve1 carries 2 control-plane nodes: cp-1, cp-3; losing it loses all of them"
        );
        assert!(text(&f).contains("span 2 distinct host(s)"));
    }

    #[test]
    fn a_node_without_the_host_label_fails_by_name() {
        let mut nodes = target_nodes();
        nodes.push(node("worker-1").ready().build());
        let f = check(nodes);
        assert_eq!(f.verdict, Verdict::Fail);
        assert_eq!(
            f.summary,
            "1 node(s) lack the host label topology.kubernetes.io/zone: worker-1"
        );
    }

    #[test]
    fn too_few_control_planes_cannot_span_enough_hosts() {
        let nodes = vec![
            node("talos-test-cp-01")
                .host("pve1")
                .control_plane()
                .ready()
                .build(),
            node("talos-test-worker-01").host("pve2").ready().build(),
        ];
        let f = check(nodes);
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(
            f.summary.contains("span 1 distinct host(s)"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn the_host_label_comes_from_the_environment() {
        let mut env = env();
        env.nodes.host_label = "example.com/proxmox-host".into();
        let nodes: Vec<_> = (1..=3)
            .map(|i| {
                node(&format!("cp-{i}"))
                    .label("example.com/proxmox-host", &format!("pve{i}"))
                    .control_plane()
                    .build()
            })
            .collect();
        let f = run(
            &env,
            &state().nodes(nodes.clone()).build(),
            &Params {},
            evaluate,
        );
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        // The default label alone does not count under another host label.
        let f = run(
            &env,
            &state().nodes(target_nodes()).build(),
            &Params {},
            evaluate,
        );
        assert_eq!(f.verdict, Verdict::Fail);
    }

    #[test]
    fn nodes_absent_is_an_error() {
        let f = run(
            &env(),
            &state().with(|s| s.nodes = absent("timeout")).build(),
            &Params {},
            evaluate,
        );
        assert_eq!(f.verdict, Verdict::Error);
    }
}
