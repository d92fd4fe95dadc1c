//! Full recovery after restore, judged on a freshly collected state: every node Ready, etcd
//! healthy with all members, attached Longhorn volumes healthy, and every protected
//! controller passing its gate-2 check again (two ready replicas on distinct hosts, its PDB
//! allowing a disruption).

use crate::checks::{CheckSpec, Context};
use crate::cluster;
use crate::config::Environment;
use crate::state::State;
use crate::verdict::Verdict;

/// What is not back yet; empty when everything is.
pub fn outstanding(
    env: &Environment,
    state: &State,
    controller_checks: &[CheckSpec],
) -> Vec<String> {
    let mut out = Vec::new();
    match state.nodes.present() {
        Some(nodes) => {
            let not_ready = cluster::not_ready_nodes(nodes);
            if !not_ready.is_empty() {
                out.push(format!("nodes not Ready: {}", not_ready.join(", ")));
            }
        }
        None => out.push("the node list could not be read".to_string()),
    }
    match state.talos.present() {
        Some(talos) => {
            let problems = cluster::etcd_problems(talos);
            if !problems.is_empty() {
                out.push(format!("etcd: {}", problems.join("; ")));
            }
        }
        None => out.push("etcd: the Talos API could not be read".to_string()),
    }
    if let Some(volumes) = state.longhorn_volumes.present() {
        let unhealthy = cluster::unhealthy_volumes(volumes);
        if !unhealthy.is_empty() {
            out.push(format!("Longhorn volumes: {}", unhealthy.join(", ")));
        }
    }
    let indexes = crate::checks::Indexes::new(state);
    let ctx = Context {
        env,
        state,
        indexes: &indexes,
        pause: &gates_core::pause::NEVER,
    };
    for check in controller_checks {
        let finding = check.evaluate(ctx);
        if finding.verdict != Verdict::Pass {
            out.push(format!(
                "{}: {}",
                check.instance().unwrap_or(check.kind()),
                finding.summary
            ));
        }
    }
    out
}

/// The `replicated-controller` checks of the `chaos-protected` gates, as recovery criteria.
pub fn controller_checks(config: &crate::config::Config) -> Vec<CheckSpec> {
    config
        .gates
        .iter()
        .filter(|g| g.has(crate::config::GateRole::ChaosProtected))
        .flat_map(|g| g.checks.iter())
        .filter(|c| matches!(c, CheckSpec::ReplicatedController(_)))
        .cloned()
        .collect()
}
