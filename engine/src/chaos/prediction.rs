//! The chaos run held to the host-loss prediction: the plan shows what the model expects for
//! the target host (VIP failover, ingress blink, the pods to reschedule and where), the run
//! is refused when the model says the loss is not survivable (unless `--expect-failure`), and
//! the report puts the prediction beside what was measured, per probe and per moved pod.
//!
//! Pure functions over the preflight state, the target host and the run's probe outcomes and
//! events, so the run itself only calls them.

use std::time::Duration;

use super::ChaosError;
use super::budget::ProbeOutcome;
use super::events::Event;
use crate::config::{Config, Environment};
use crate::hostloss::lineage::Lineage;
use crate::hostloss::schedule::MoveOutcome;
use crate::hostloss::{HostLoss, Outcome, Prediction};
use crate::state::State;

/// The prediction for the run's target host under the run's fault (a partition run is judged
/// against the partition's prediction, not a power loss's); `None` when the model has nothing
/// for it (it runs none of the environment's nodes, or the state could not be read).
pub fn for_target(
    config: &Config,
    env: &Environment,
    state: &State,
    host: &str,
    fault: super::act::journal::FaultKind,
) -> Option<HostLoss> {
    let fault = match fault {
        super::act::journal::FaultKind::Power => crate::hostloss::Fault::Power,
        super::act::journal::FaultKind::Partition => crate::hostloss::Fault::Partition,
    };
    let prediction: Prediction = crate::predict::over_fault(config, env, state, Some(host), fault);
    prediction.hosts.into_iter().next()
}

/// The plan's prediction section.
pub fn plan_section(predicted: Option<&HostLoss>) -> String {
    match predicted {
        None => "  prediction: none (the host-loss model could not predict this host)\n".into(),
        Some(h) => crate::hostloss::render::plan_lines(h)
            .into_iter()
            .map(|l| format!("  {l}\n"))
            .collect(),
    }
}

/// Why the run is refused: the model says the loss is not survivable and the operator did not
/// say `--expect-failure`.
pub fn refusal(predicted: Option<&HostLoss>, expect_failure: bool) -> Option<ChaosError> {
    let h = predicted?;
    (h.outcome == Outcome::Lost && !expect_failure).then(|| ChaosError::PredictedLoss {
        host: h.host.clone(),
        reason: h.first_reason().unwrap_or_default().to_string(),
    })
}

pub use gates_core::record::prediction::{Comparison, PodComparison, ProbeComparison};

/// Predicted beside measured. `fault_at` is when the VMs were stopped, on the run's timeline.
pub fn compare(
    predicted: &HostLoss,
    probes: &[ProbeOutcome],
    events: &[Event],
    fault_at: Option<Duration>,
) -> Comparison {
    let probes = probes
        .iter()
        .map(|p| {
            let (predicted_text, outage) = expected_outage(predicted, &p.probe);
            let measured = if p.outages.is_empty() {
                "no outage".to_string()
            } else {
                format!(
                    "down {:.1}s longest, {:.1}s in total",
                    p.longest.as_secs_f64(),
                    p.total.as_secs_f64()
                )
            };
            ProbeComparison {
                probe: p.probe.clone(),
                predicted: predicted_text,
                measured,
                agrees: outage.map(|o| o != p.outages.is_empty()),
            }
        })
        .collect();
    // Pods created after the fault, with the owner that created them.
    let created: Vec<(Duration, &str, &str, &Lineage)> = events
        .iter()
        .filter(|e| e.kind == "pod-created" && fault_at.is_none_or(|f| e.at >= f))
        .filter_map(|e| {
            let (pod, node) = e.detail.split_once(" on ")?;
            Some((e.at, pod, node, e.lineage.as_ref()?))
        })
        .collect();
    let mut used = vec![false; created.len()];
    let pods = predicted
        .pods
        .iter()
        .map(|m| {
            let predicted_text = match &m.outcome {
                MoveOutcome::Placed {
                    node,
                    after_seconds,
                    waits_for_deletion,
                    ..
                } => {
                    if *waits_for_deletion {
                        format!("{node} once the old pod is deleted")
                    } else {
                        format!("{node} after {after_seconds}s")
                    }
                }
                MoveOutcome::Unschedulable { why } => format!("nowhere: {why}"),
                MoveOutcome::Stays { .. } => "stays on the lost node".into(),
                MoveOutcome::NotRecreated { .. } => "not recreated".into(),
            };
            let found = m.lineage.as_ref().and_then(|lost| {
                created.iter().enumerate().find(|(i, (_, _, _, lineage))| {
                    !used[*i] && lost.replaced_by(lineage)
                })
            });
            let (measured, agrees) = match found {
                Some((i, (at, pod, node, _))) => {
                    used[i] = true;
                    let after = fault_at.map_or(*at, |f| at.saturating_sub(f));
                    let agrees = m.placed_on().map(|n| n == *node);
                    (
                        format!("{node} after {} ({pod})", minutes(after)),
                        agrees,
                    )
                }
                None => (
                    "no replacement observed (only protected controllers' pods are watched, until restore)"
                        .to_string(),
                    None,
                ),
            };
            PodComparison {
                pod: m.pod.clone(),
                controller: m.controller.clone(),
                predicted: predicted_text,
                measured,
                agrees,
            }
        })
        .collect();
    Comparison {
        host: predicted.host.clone(),
        outcome: predicted.outcome,
        reasons: predicted.reasons.clone(),
        probes,
        pods,
    }
}

/// What the model expects a probe to see, and whether that is an outage (`None`: no claim).
fn expected_outage(h: &HostLoss, probe: &str) -> (String, Option<bool>) {
    let etcd = h.etcd.as_ref();
    if probe.starts_with("api") {
        return match etcd {
            Some(e) if !e.kept => ("down: etcd loses quorum".into(), Some(true)),
            Some(e) if e.vip_candidates.is_empty() => {
                ("down: no control plane to take the VIP".into(), Some(true))
            }
            Some(e) if e.vip_moves => ("a VIP failover outage (about a minute)".into(), Some(true)),
            Some(_) => ("no outage: the VIP holder stays".into(), Some(false)),
            None => ("no prediction".into(), None),
        };
    }
    if probe.starts_with("etcd") {
        return match etcd {
            Some(e) if e.kept => (
                format!("no outage: {} of {} members left", e.left, e.members),
                Some(false),
            ),
            Some(e) => (
                format!("down: {} of {} members left", e.left, e.members),
                Some(true),
            ),
            None => ("no prediction".into(), None),
        };
    }
    if probe.starts_with("ingress") {
        if h.l2.iter().any(|l| l.announcers_left.is_empty()) {
            return ("down: no surviving announcer".into(), Some(true));
        }
        if h.l2.iter().any(|l| l.holder_lost) {
            return (
                "a blink while the L2 lease moves (10 to 20 s)".into(),
                Some(true),
            );
        }
        if h.l2.is_empty() {
            return ("no prediction".into(), None);
        }
        return ("no outage: the lease holder stays".into(), Some(false));
    }
    if let Some(name) = probe.strip_prefix("workloads::") {
        return match h.controllers.iter().find(|c| c.name == name) {
            Some(c) if c.ready_left == 0 => {
                ("down until a replica is rescheduled".into(), Some(true))
            }
            Some(c) => (
                format!("no outage: {} ready replica(s) left", c.ready_left),
                Some(false),
            ),
            None => ("no outage: no replica on the host".into(), Some(false)),
        };
    }
    ("no prediction".into(), None)
}

/// `4m12s`, `45s`.
fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostloss::Reason;
    use crate::hostloss::schedule::PodMove;

    fn lineage(kind: &str, owner: &str, hash: Option<&str>, ordinal: Option<&str>) -> Lineage {
        Lineage {
            namespace: "kube-system".into(),
            kind: kind.into(),
            owner: owner.into(),
            owner_uid: Some(format!("uid-{owner}")),
            template_hash: hash.map(str::to_string),
            ordinal: ordinal.map(str::to_string),
        }
    }

    fn coredns() -> Lineage {
        lineage("ReplicaSet", "coredns-5d78c9869d", Some("5d78c9869d"), None)
    }

    fn moved(pod: &str, controller: &str, lineage: Lineage) -> PodMove {
        PodMove {
            index: 0,
            pod: pod.into(),
            controller: controller.into(),
            from: "cp-1".into(),
            lineage: Some(lineage),
            outcome: MoveOutcome::Placed {
                node: "cp-2".into(),
                host: "pve2".into(),
                after_seconds: 300,
                waits_for_deletion: false,
            },
        }
    }

    fn loss_of(pods: Vec<PodMove>) -> HostLoss {
        HostLoss {
            host: "pve1".into(),
            outcome: Outcome::Degraded,
            reasons: vec![],
            nodes: vec!["cp-1".into()],
            vms: vec![],
            etcd: None,
            l2: vec![],
            controllers: vec![],
            pdbs: vec![],
            pods,
            capacity: vec![],
            volumes: vec![],
        }
    }

    fn loss() -> HostLoss {
        loss_of(vec![moved(
            "kube-system/coredns-5d78c9869d-abcde",
            "Deployment kube-system/coredns",
            coredns(),
        )])
    }

    fn created(secs: u64, detail: &str, lineage: Option<Lineage>) -> Event {
        Event {
            at: Duration::from_secs(secs),
            kind: "pod-created".into(),
            subject: "coredns".into(),
            detail: detail.into(),
            lineage,
        }
    }

    #[test]
    fn a_replacement_is_matched_by_its_owner_and_timed_from_the_fault() {
        let events = [created(
            262,
            "kube-system/coredns-5d78c9869d-zzzzz on cp-2",
            Some(coredns()),
        )];
        let c = compare(&loss(), &[], &events, Some(Duration::from_secs(10)));
        assert_eq!(c.pods[0].predicted, "cp-2 after 300s");
        assert_eq!(
            c.pods[0].measured,
            "cp-2 after 4m12s (kube-system/coredns-5d78c9869d-zzzzz)"
        );
        assert_eq!(c.pods[0].agrees, Some(true));
    }

    #[test]
    fn a_replacement_on_another_node_disagrees_and_none_is_said_plainly() {
        let events = [created(
            20,
            "kube-system/coredns-5d78c9869d-zzzzz on cp-3",
            Some(coredns()),
        )];
        let c = compare(&loss(), &[], &events, None);
        assert_eq!(c.pods[0].agrees, Some(false));
        let c = compare(&loss(), &[], &[], None);
        assert_eq!(c.pods[0].agrees, None);
        assert!(c.pods[0].measured.starts_with("no replacement observed"));
    }

    #[test]
    fn a_pod_with_a_similar_name_but_another_owner_is_not_the_replacement() {
        // Same name prefix, same random-suffix shape: a name-prefix match took it.
        let impostor = lineage(
            "ReplicaSet",
            "coredns-5d78c9869d-canary",
            Some("5d78c9869d"),
            None,
        );
        let events = [
            created(
                30,
                "kube-system/coredns-5d78c9869d-qqqqq on cp-3",
                Some(impostor),
            ),
            created(40, "kube-system/coredns-5d78c9869d-rrrrr on cp-3", None),
        ];
        let c = compare(&loss(), &[], &events, Some(Duration::from_secs(10)));
        assert_eq!(c.pods[0].agrees, None, "{}", c.pods[0].measured);
        assert!(c.pods[0].measured.starts_with("no replacement observed"));
    }

    #[test]
    fn a_replacement_whose_name_was_cut_short_is_still_matched_by_its_owner() {
        // generateName truncates long names, so the replacement shares no name prefix.
        let long = "a-controller-with-a-name-long-enough-to-be-cut-short-7c9d4b";
        let rs = lineage("ReplicaSet", long, Some("7c9d4b"), None);
        let h = loss_of(vec![moved(
            &format!("kube-system/{long}-abcde"),
            "Deployment kube-system/a-controller",
            rs.clone(),
        )]);
        let events = [created(
            320,
            "kube-system/a-controller-with-a-name-long-enough-to-be-cut-shor-x7k2p on cp-2",
            Some(rs),
        )];
        let c = compare(&h, &[], &events, Some(Duration::from_secs(10)));
        assert_eq!(c.pods[0].agrees, Some(true), "{}", c.pods[0].measured);
        assert!(c.pods[0].measured.starts_with("cp-2 after 5m10s"));
    }

    #[test]
    fn a_statefulset_pod_is_matched_to_its_namesake_and_not_to_a_sibling() {
        let db = |ordinal: &str| lineage("StatefulSet", "db", None, Some(ordinal));
        let h = loss_of(vec![moved(
            "kube-system/db-0",
            "StatefulSet kube-system/db",
            db("db-0"),
        )]);
        let events = [
            created(50, "kube-system/db-1 on cp-3", Some(db("db-1"))),
            created(60, "kube-system/db-0 on cp-2", Some(db("db-0"))),
        ];
        let c = compare(&h, &[], &events, Some(Duration::from_secs(10)));
        assert_eq!(c.pods[0].measured, "cp-2 after 50s (kube-system/db-0)");
        assert_eq!(c.pods[0].agrees, Some(true));
    }

    #[test]
    fn a_pod_created_before_the_fault_is_no_replacement() {
        let events = [created(
            5,
            "kube-system/coredns-5d78c9869d-zzzzz on cp-2",
            Some(coredns()),
        )];
        let c = compare(&loss(), &[], &events, Some(Duration::from_secs(10)));
        assert_eq!(c.pods[0].agrees, None);
    }

    #[test]
    fn a_lost_prediction_refuses_unless_failure_is_expected() {
        let mut h = loss();
        h.outcome = Outcome::Lost;
        h.reasons.push(Reason {
            severity: Outcome::Lost,
            text: "etcd loses quorum".into(),
        });
        assert_eq!(
            refusal(Some(&h), false).unwrap().to_string(),
            "the prediction says losing pve1 is not survivable: etcd loses quorum; fix it first, or pass --expect-failure to run anyway and measure it"
        );
        assert!(refusal(Some(&h), true).is_none());
        assert!(refusal(Some(&loss()), false).is_none());
    }
}
