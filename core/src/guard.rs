//! Whether a cluster is steady enough for the next change of a rolling one. ADR 007: "Change
//! one control-plane member at a time. Wait for etcd health and matching membership before
//! the next change." `gates guard` reads the cluster again and again and asks this of each
//! picture: every control plane answers over the Talos API and sees the same expected voting
//! etcd members with no alarm (the `etcd-members` check), they follow one leader, the
//! control-plane nodes are the expected ones and Ready (`control-plane-nodes`), every node is
//! Ready, and the API VIP answers (`api-endpoint`). Pure: the same state gives the same
//! answer.

use std::collections::BTreeSet;

use crate::checks::{CheckSpec, Context};
use crate::config::Environment;
use crate::state::State;
use crate::verdict::Verdict;

/// What stands between the cluster and the next change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Readiness {
    /// What is not steady yet, each in a sentence; a rolling change waits for these.
    pub waiting: Vec<String>,
    /// What cannot be judged at all with this environment file (a section it lacks): waiting
    /// would not change it.
    pub cannot: Vec<String>,
}

impl Readiness {
    pub fn ready(&self) -> bool {
        self.waiting.is_empty() && self.cannot.is_empty()
    }
}

/// The checks a guard asks, as a gate file would name them.
const CHECKS: [&str; 3] = [
    "kind: etcd-members",
    "kind: control-plane-nodes",
    "kind: api-endpoint",
];

pub fn judge(env: &Environment, state: &State) -> Readiness {
    let mut out = Readiness::default();
    for text in CHECKS {
        let spec: CheckSpec = match crate::yaml::from_str(text) {
            Ok(spec) => spec,
            Err(err) => {
                out.cannot.push(format!("{text}: {err}"));
                continue;
            }
        };
        let finding = spec.evaluate(Context {
            env,
            state,
            indexes: &crate::checks::Indexes::new(state),
            pause: &crate::pause::NEVER,
        });
        let line = format!("{}: {}", spec.kind(), finding.summary);
        match finding.verdict {
            Verdict::Pass => {}
            Verdict::Fail | Verdict::Error => out.waiting.push(line),
            Verdict::Skip => out.cannot.push(line),
        }
    }
    out.waiting.extend(not_ready_nodes(state));
    out.waiting.extend(leaders(state));
    out
}

/// Every node not Ready, in one sentence; nothing when all are, or the nodes were not read
/// (`control-plane-nodes` says so then).
fn not_ready_nodes(state: &State) -> Option<String> {
    let nodes = state.nodes.present()?;
    let down: Vec<&str> = nodes
        .iter()
        .filter(|n| {
            !n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .map(|n| crate::meta::name(&n.metadata))
        .collect();
    (!down.is_empty()).then(|| {
        format!(
            "{} of {} nodes not Ready: {}",
            down.len(),
            nodes.len(),
            down.join(", ")
        )
    })
}

/// The members that answered follow more than one leader, or none: etcd is electing.
fn leaders(state: &State) -> Option<String> {
    let talos = state.talos.present()?;
    let views: Vec<_> = talos
        .endpoints
        .iter()
        .filter_map(|e| e.view.as_ref().ok().map(|v| (e, v)))
        .collect();
    if views.is_empty() {
        return None;
    }
    let leaders: BTreeSet<&str> = views.iter().map(|(_, v)| v.leader.as_str()).collect();
    match leaders.iter().copied().collect::<Vec<_>>().as_slice() {
        [one] if !one.is_empty() => None,
        _ => Some(format!(
            "etcd has no single leader: {}",
            views
                .iter()
                .map(|(e, v)| format!(
                    "{} follows {}",
                    e.endpoint,
                    if v.leader.is_empty() {
                        "none"
                    } else {
                        &v.leader
                    }
                ))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;

    #[test]
    fn the_staging_today_picture_waits_on_the_control_planes() {
        // One control plane where three are expected: not steady, and nothing it cannot judge
        // apart from what its snapshot lacks.
        let s = state()
            .nodes(vec![
                node("cp-1").host("pve1").control_plane().ready().build(),
            ])
            .build();
        let r = judge(&env(), &s);
        assert!(!r.ready());
        assert!(
            r.waiting
                .iter()
                .chain(&r.cannot)
                .any(|w| w.starts_with("control-plane-nodes:")),
            "{r:?}"
        );
    }

    #[test]
    fn a_node_not_ready_is_waited_for_by_name() {
        let s = state()
            .nodes(vec![
                node("cp-1").host("pve1").control_plane().ready().build(),
                node("cp-2")
                    .host("pve2")
                    .control_plane()
                    .not_ready()
                    .build(),
            ])
            .build();
        assert_eq!(
            not_ready_nodes(&s).as_deref(),
            Some("1 of 2 nodes not Ready: cp-2")
        );
    }
}
