//! Gate 1 and 5: the cluster runs exactly the number of control-plane nodes the ADR asks for
//! (`nodes.control_planes` of the environment), and all of them are Ready.

use serde::Deserialize;

use super::Context;
use super::support::{CONTROL_PLANE_LABEL, Hosts, is_control_plane, name, node_ready_status};
use crate::verdict::Finding;

/// No parameters: the expected count comes from the environment.
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
    let expected = ctx.env.nodes.control_planes;

    let mut evidence = Vec::new();
    let mut not_ready = Vec::new();
    let mut count = 0;
    for node in nodes.iter().filter(|n| is_control_plane(n)) {
        count += 1;
        let node_name = name(&node.metadata);
        let ready = node_ready_status(node);
        let state = match ready {
            Some("True") => "Ready".to_string(),
            Some(other) => format!("not Ready (Ready={other})"),
            None => "not Ready (no Ready condition reported)".to_string(),
        };
        if ready != Some("True") {
            not_ready.push(node_name.to_string());
        }
        evidence.push(format!(
            "control-plane {}: {state}",
            hosts.describe(node_name)
        ));
    }
    for node in nodes.iter().filter(|n| !is_control_plane(n)) {
        evidence.push(format!(
            "other {}: no label {CONTROL_PLANE_LABEL}",
            hosts.describe(name(&node.metadata))
        ));
    }

    if count != expected {
        return Finding::fail(format!(
            "found {count} control-plane node(s) (label {CONTROL_PLANE_LABEL}), the ADR expects {expected}"
        ))
        .with_evidence(evidence);
    }
    if !not_ready.is_empty() {
        return Finding::fail(format!(
            "{} of {count} control-plane nodes are not Ready: {}",
            not_ready.len(),
            not_ready.join(", ")
        ))
        .with_evidence(evidence);
    }
    Finding::pass(format!("{count} control-plane nodes, all Ready")).with_evidence(evidence)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::verdict::Verdict;

    fn check(state: &crate::state::State) -> Finding {
        run(&env(), state, &Params {}, evaluate)
    }

    #[test]
    fn three_ready_control_planes_pass_and_are_listed_with_hosts() {
        let f = check(&state().nodes(target_nodes()).build());
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert!(
            f.evidence
                .contains(&"control-plane node cp-2 (host pve2): Ready".to_string())
        );
    }

    #[test]
    fn staging_today_with_one_control_plane_and_a_worker_fails() {
        let nodes = vec![
            node("talos-test-cp-01")
                .host("pve1")
                .control_plane()
                .ready()
                .build(),
            node("talos-test-worker-01").host("pve2").ready().build(),
        ];
        let f = check(&state().nodes(nodes).build());
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(
            f.summary.contains("found 1 control-plane node(s)"),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("expects 3"));
        assert!(text(&f).contains("other node talos-test-worker-01 (host pve2)"));
    }

    #[test]
    fn too_many_control_planes_fail() {
        let mut nodes = target_nodes();
        nodes.push(node("cp-4").host("pve4").control_plane().ready().build());
        let f = check(&state().nodes(nodes).build());
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(f.summary.contains("found 4"));
    }

    #[test]
    fn a_control_plane_that_is_not_ready_fails_by_name() {
        let mut nodes = target_nodes();
        nodes[1] = node("cp-2")
            .host("pve2")
            .control_plane()
            .not_ready()
            .build();
        let f = check(&state().nodes(nodes).build());
        assert_eq!(f.verdict, Verdict::Fail);
        assert_eq!(f.summary, "1 of 3 control-plane nodes are not Ready: cp-2");
        assert!(text(&f).contains("node cp-2 (host pve2): not Ready (Ready=False)"));
    }

    #[test]
    fn a_node_without_ready_condition_is_not_ready_and_a_missing_host_is_named() {
        let mut nodes = target_nodes();
        nodes[2] = node("cp-3").control_plane().build();
        let f = check(&state().nodes(nodes).build());
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(text(&f).contains(
            "node cp-3 (no host label topology.kubernetes.io/zone): not Ready (no Ready condition reported)"
        ));
    }

    #[test]
    fn the_expected_count_comes_from_the_environment() {
        let mut env = env();
        env.nodes.control_planes = 1;
        let nodes = vec![node("cp-1").host("pve1").control_plane().ready().build()];
        let f = run(&env, &state().nodes(nodes).build(), &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Pass);
    }

    #[test]
    fn nodes_absent_is_an_error() {
        let f = check(&state().with(|s| s.nodes = absent("forbidden")).build());
        assert_eq!(f.verdict, Verdict::Error);
        assert!(f.summary.contains("nodes unavailable: forbidden"));
    }
}
