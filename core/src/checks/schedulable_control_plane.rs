//! Gate 1: workloads may run on the control-plane nodes (Talos
//! `allowSchedulingOnControlPlanes: true`), because the ADR's three nodes carry everything.
//! Talos otherwise taints control planes `node-role.kubernetes.io/control-plane:NoSchedule`;
//! the same key with `NoExecute` would also keep workloads off, so both fail.

use serde::Deserialize;

use super::Context;
use super::support::{CONTROL_PLANE_LABEL, Hosts, is_control_plane, name};
use crate::verdict::Finding;

/// No parameters.
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
    let hosts = Hosts::new(ctx, nodes);
    let mut tainted = Vec::new();
    let mut evidence = Vec::new();
    for node in nodes.iter().filter(|n| is_control_plane(n)) {
        let node_name = name(&node.metadata);
        let blocking: Vec<&str> = node
            .spec
            .iter()
            .flat_map(|s| s.taints.iter().flatten())
            .filter(|t| {
                t.key == CONTROL_PLANE_LABEL
                    && matches!(t.effect.as_str(), "NoSchedule" | "NoExecute")
            })
            .map(|t| t.effect.as_str())
            .collect();
        if blocking.is_empty() {
            evidence.push(format!("{}: schedulable", hosts.describe(node_name)));
        } else {
            tainted.push(node_name);
            for effect in blocking {
                evidence.push(format!(
                    "{}: taint {CONTROL_PLANE_LABEL}:{effect} keeps workloads off (set cluster.allowSchedulingOnControlPlanes: true)",
                    hosts.describe(node_name)
                ));
            }
        }
    }
    if evidence.is_empty() {
        return Finding::fail(format!("no node carries the label {CONTROL_PLANE_LABEL}"));
    }
    if !tainted.is_empty() {
        return Finding::fail(format!(
            "{} control-plane node(s) do not accept workloads: {}",
            tainted.len(),
            tainted.join(", ")
        ))
        .with_evidence(evidence);
    }
    Finding::pass("every control-plane node accepts workloads").with_evidence(evidence)
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
    fn untainted_control_planes_pass() {
        let mut nodes = target_nodes();
        // Other taints and workers do not matter.
        nodes[0] = node("cp-1")
            .host("pve1")
            .control_plane()
            .taint("example.com/x", "NoSchedule")
            .build();
        nodes.push(node("w").taint(CONTROL_PLANE_LABEL, "NoSchedule").build());
        let f = check(nodes);
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert!(
            f.evidence
                .contains(&"node cp-1 (host pve1): schedulable".to_string())
        );
    }

    #[test]
    fn the_talos_default_taint_fails_naming_node_and_host() {
        let mut nodes = target_nodes();
        nodes[1] = node("cp-2")
            .host("pve2")
            .control_plane()
            .taint(CONTROL_PLANE_LABEL, "NoSchedule")
            .build();
        let f = check(nodes);
        assert_eq!(f.verdict, Verdict::Fail);
        assert_eq!(
            f.summary,
            "1 control-plane node(s) do not accept workloads: cp-2"
        );
        assert!(text(&f).contains(
            "node cp-2 (host pve2): taint node-role.kubernetes.io/control-plane:NoSchedule keeps workloads off"
        ));
    }

    #[test]
    fn no_execute_with_the_same_key_also_fails_but_prefer_no_schedule_does_not() {
        let nodes = vec![
            node("cp-1")
                .host("pve1")
                .control_plane()
                .taint(CONTROL_PLANE_LABEL, "NoExecute")
                .build(),
            node("cp-2")
                .host("pve2")
                .control_plane()
                .taint(CONTROL_PLANE_LABEL, "PreferNoSchedule")
                .build(),
        ];
        let f = check(nodes);
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(f.summary.ends_with(": cp-1"), "{}", f.summary);
    }

    #[test]
    fn no_control_plane_at_all_fails() {
        let f = check(vec![node("w").build()]);
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(f.summary.contains("no node carries the label"));
    }

    #[test]
    fn nodes_absent_is_an_error() {
        let f = run(
            &env(),
            &state().with(|s| s.nodes = absent("x")).build(),
            &Params {},
            evaluate,
        );
        assert_eq!(f.verdict, Verdict::Error);
    }
}
