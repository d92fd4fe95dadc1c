//! The judge phase: one trial per probe, one for recovery and one for "no manual work", the
//! tally and verdict they add up to, and the run's outcome in words. Pure over what the
//! other phases measured.

use std::time::Duration;

use super::attribution::{ApiOutages, reads_through_api};
use super::budget::{ProbeOutcome, judge_within};
use super::split_brain::SignalOutcome;
use crate::chaos::act::signals::signal_name;
use crate::chaos::observe::outage::RestoreReason;
use crate::chaos::observe::recover::Recovery;
use crate::chaos::plan::Target;
use crate::chaos::power::{self, Issued};
use crate::chaos::probes::Probe;
use crate::chaos::timeline::Sample;
use crate::runner::{Tally, TrialResult};
use crate::verdict::{Finding, Verdict};
use gates_core::hostloss::attach::{AttachUnknown, Held};

/// What the run measured, for the verdicts.
pub struct Measured<'a> {
    pub environment: &'a str,
    pub probes: &'a [Probe],
    pub samples: &'a [Vec<Sample>],
    pub target: &'a Target,
    pub start_errors: &'a [String],
    pub recovery: &'a Recovery,
    pub recovery_timeout: Duration,
    pub controller_checks: usize,
    pub issued: &'a [Issued],
    pub reason: &'a RestoreReason,
    /// The first signal of the run, if any.
    pub interrupted: Option<i32>,
    /// The run's one write outside the plan: its Lease, said in words.
    pub lease: Option<&'a str>,
    /// How far apart two probes may see one edge: one sampling interval plus one timeout.
    pub edge_slack: Duration,
    /// The pods the lost nodes still held their volumes for at the end of the outage; `None`
    /// when the run restored before it could look (a failed stop, a signal).
    pub held: Option<&'a Result<Held, AttachUnknown>>,
    /// The split-brain signals of a partition run; `None` for a power loss.
    pub split_brain: Option<&'a [SignalOutcome]>,
}

pub struct Judged {
    /// The signal that interrupted the run (`SIGINT`), if one did.
    pub interrupted: Option<&'static str>,
    pub outcomes: Vec<ProbeOutcome>,
    pub trials: Vec<TrialResult>,
    pub tally: Tally,
    pub verdict: Verdict,
    pub outcome: String,
    /// The split-brain signals, each also a trial.
    pub split_brain: Option<Vec<SignalOutcome>>,
}

pub fn judge_run(m: &Measured<'_>) -> Judged {
    let api = ApiOutages::of(
        m.probes
            .iter()
            .zip(m.samples)
            .map(|(p, s)| (p.name.as_str(), s.as_slice())),
        m.edge_slack,
    );
    let none = ApiOutages::none();
    let outcomes: Vec<ProbeOutcome> = m
        .probes
        .iter()
        .zip(m.samples)
        .map(|(p, s)| {
            let excuse = if reads_through_api(&p.name) {
                &api
            } else {
                &none
            };
            judge_within(&p.name, s, p.budget, excuse)
        })
        .collect();
    let mut trials: Vec<TrialResult> = m
        .probes
        .iter()
        .zip(&outcomes)
        .map(|(p, o)| TrialResult {
            name: format!("gate4::{}::chaos::{}", m.environment, p.name),
            gate: 4,
            kind: "chaos-probe".into(),
            instance: Some(p.name.clone()),
            finding: o.finding.clone(),
            duration: sampled(&o.samples_span),
        })
        .collect();
    trials.push(TrialResult {
        name: format!("gate4::{}::chaos::recovery", m.environment),
        gate: 4,
        kind: "chaos-recovery".into(),
        instance: Some("recovery".into()),
        finding: recovery_finding(m),
        duration: m.recovery.took,
    });
    trials.push(TrialResult {
        name: format!("gate4::{}::chaos::no-manual-work", m.environment),
        gate: 4,
        kind: "chaos-no-manual-work".into(),
        instance: Some("no-manual-work".into()),
        finding: no_manual_work(m.target, m.issued, m.lease, m.held),
        duration: Duration::ZERO,
    });
    for signal in m.split_brain.into_iter().flatten() {
        trials.push(TrialResult {
            name: format!(
                "gate4::{}::chaos::split-brain::{}",
                m.environment, signal.signal
            ),
            gate: 4,
            kind: "chaos-split-brain".into(),
            instance: Some(format!("split-brain::{}", signal.signal)),
            finding: signal.finding.clone(),
            duration: Duration::ZERO,
        });
    }
    let tally = Tally::of(&trials);
    let verdict = if tally.errors > 0 {
        Verdict::Error
    } else if tally.failed > 0 {
        Verdict::Fail
    } else {
        Verdict::Pass
    };
    let outcome = match m.interrupted {
        Some(sig) => format!("interrupted by {}; restored", signal_name(sig)),
        None if !m.start_errors.is_empty() => "restore failed".to_string(),
        None => format!(
            "completed; restored because {}",
            final_reason(m.reason, &outcomes)
        ),
    };
    Judged {
        interrupted: m.interrupted.map(signal_name),
        outcomes,
        trials,
        tally,
        verdict,
        outcome,
        split_brain: m.split_brain.map(<[SignalOutcome]>::to_vec),
    }
}

/// Why the run restored, with the final numbers of a probe over its budget (not the ones
/// seen when it first broke it), so the outcome agrees with the probe's trial.
fn final_reason(reason: &RestoreReason, outcomes: &[ProbeOutcome]) -> String {
    match reason {
        RestoreReason::OverBudget { probe, .. } => {
            match outcomes.iter().find(|o| &o.probe == probe) {
                Some(o) => format!("a probe broke its budget: {}", o.finding.summary),
                None => reason.to_string(),
            }
        }
        RestoreReason::StopFailed(_) | RestoreReason::Signal(_) | RestoreReason::Deadline => {
            reason.to_string()
        }
    }
}

/// The time a probe measured: from its first sample to its last.
fn sampled(span: &Option<(Duration, Duration)>) -> Duration {
    span.map(|(first, last)| last.saturating_sub(first))
        .unwrap_or_default()
}

fn recovery_finding(m: &Measured<'_>) -> Finding {
    let took = m.recovery.took.as_secs_f64();
    let timeout = m.recovery_timeout.as_secs_f64();
    if let Some(sig) = m.interrupted.filter(|_| !m.recovery.outstanding.is_empty()) {
        // An interrupted run did not wait for recovery: that is no failed recovery.
        return Finding::error(format!(
            "interrupted by {} {took:.1}s after the VMs were started, before recovery could be judged (timeout {timeout:.0}s); the run restored what it stopped",
            signal_name(sig)
        ))
        .with_evidence(
            m.recovery
                .outstanding
                .iter()
                .map(|o| format!("not yet back when interrupted: {o}"))
                .collect::<Vec<_>>(),
        );
    }
    if !m.start_errors.is_empty() {
        Finding::error(format!(
            "the VMs could not all be started: run `gates recover {}`",
            m.environment
        ))
        .with_evidence(m.start_errors.to_vec())
    } else if m.recovery.outstanding.is_empty() {
        Finding::pass(format!(
            "everything is back {took:.1}s after the VMs were started (timeout {timeout:.0}s): nodes Ready, etcd healthy, volumes healthy, {} controllers with two ready replicas on distinct hosts",
            m.controller_checks
        ))
    } else {
        Finding::fail(format!(
            "not recovered within {took:.1}s of the VMs starting (timeout {timeout:.0}s)"
        ))
        .with_evidence(m.recovery.outstanding.clone())
    }
}

/// The harness wrote exactly its plan (the planned stops, the starts that undid them and, in
/// whole-host mode, the host's shutdown and wake), and the host's loss asked nothing of a
/// person: no pod was left Terminating on a lost node holding the ReadWriteOnce volume its
/// replacement needs, which only a force delete frees while the host stays down.
pub fn no_manual_work(
    target: &Target,
    issued: &[Issued],
    lease: Option<&str>,
    held: Option<&Result<Held, AttachUnknown>>,
) -> Finding {
    let whole_host = target.host_power.as_ref().map(|_| target.host.as_str());
    let beyond = power::beyond_plan(&target.vms, whole_host, issued);
    let actions: Vec<String> = issued
        .iter()
        .map(|a| match a.vmid {
            Some(vmid) => format!("{} VM {vmid} on {}: {}", a.action, a.host, a.result),
            None => format!("{} of host {}: {}", a.action, a.host, a.result),
        })
        .chain(lease.map(str::to_string))
        .collect();
    if !beyond.is_empty() {
        return Finding::fail("the harness wrote beyond its plan")
            .with_evidence(beyond.into_iter().chain(actions).collect::<Vec<_>>());
    }
    match held {
        Some(Ok(h)) if !h.pods.is_empty() => {
            return Finding::fail(format!(
                "the loss of {} needed manual work: {} pod(s) stayed Terminating on its nodes holding the volume their replacement needs",
                target.host,
                h.pods.len()
            ))
            .with_evidence(h.pods.iter().cloned().chain([h.fix.clone()]).chain(actions).collect::<Vec<_>>());
        }
        Some(Err(why)) => {
            return Finding::error(format!(
                "whether the lost nodes' pods still held their volumes at the end of the outage could not be read: {why}"
            ))
            .with_evidence(actions);
        }
        Some(Ok(_)) | None => {}
    }
    let looked = match held {
        Some(_) => {
            "no pod was left Terminating on the lost nodes holding a ReadWriteOnce Longhorn volume at the end of the outage"
        }
        None => {
            "pods left on the lost nodes were not read: the run restored before the outage's end"
        }
    };
    {
        Finding::pass(format!(
            "the harness made {} power action(s), exactly the plan's stops{} and the starts that undid them; {}",
            issued.len(),
            if whole_host.is_some() { ", the host's shutdown and wake" } else { "" },
            if lease.is_some() {
                "the only other write was the run's Lease"
            } else {
                "nothing else was written"
            }
        ))
        .with_evidence(std::iter::once(looked.to_string()).chain(actions).collect::<Vec<_>>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::act::test_power::target;
    use crate::chaos::power::PowerAction;
    use crate::chaos::test_support::{budget, probe};
    use crate::chaos::timeline::Observation;

    fn recovered(took: u64) -> Recovery {
        Recovery {
            outstanding: Vec::new(),
            recovered: Some(took as f64),
            took: Duration::from_secs(took),
            interrupted: None,
            checked: true,
        }
    }

    fn issued(action: PowerAction, vmid: u32) -> Issued {
        Issued {
            action,
            vmid: Some(vmid),
            host: "pve2".into(),
            device: None,
            result: "ok".into(),
        }
    }

    fn samples(pattern: &str) -> Vec<Sample> {
        pattern
            .chars()
            .enumerate()
            .map(|(i, c)| Sample {
                at: Duration::from_secs(i as u64),
                observation: if c == '+' {
                    Observation::Up
                } else {
                    Observation::Down("refused".into())
                },
            })
            .collect()
    }

    #[test]
    fn a_run_within_budget_that_recovered_and_did_only_its_plan_passes() {
        let probes = vec![probe(
            "api",
            budget(5, 5),
            tokio::time::Instant::now(),
            |_| Observation::Up,
        )];
        let target = target();
        let actions = [
            issued(PowerAction::Stop, 201),
            issued(PowerAction::Stop, 202),
            issued(PowerAction::Start, 201),
            issued(PowerAction::Start, 202),
        ];
        let recovery = recovered(12);
        let judged = judge_run(&Measured {
            environment: "lab",
            probes: &probes,
            samples: &[samples("++--++")],
            target: &target,
            start_errors: &[],
            recovery: &recovery,
            recovery_timeout: Duration::from_secs(600),
            controller_checks: 3,
            issued: &actions,
            reason: &RestoreReason::Deadline,
            interrupted: None,
            lease: Some("Lease kube-system/gates-chaos-lab taken before the first power action"),
            edge_slack: Duration::from_secs(1),
            held: None,
            split_brain: None,
        });
        let names: Vec<&str> = judged.trials.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "gate4::lab::chaos::api",
                "gate4::lab::chaos::recovery",
                "gate4::lab::chaos::no-manual-work"
            ]
        );
        assert_eq!(judged.verdict, Verdict::Pass);
        assert_eq!(
            judged.outcome,
            "completed; restored because the outage deadline was reached"
        );
        assert_eq!(judged.trials[1].duration, Duration::from_secs(12));
        assert_eq!(
            judged.trials[0].duration,
            Duration::from_secs(5),
            "a probe's time is what it sampled, not the whole run"
        );
        assert_eq!(judged.interrupted, None);
        let manual = &judged.trials[2].finding;
        assert!(
            manual
                .summary
                .contains("the only other write was the run's Lease")
                && manual
                    .evidence
                    .iter()
                    .any(|e| e.contains("gates-chaos-lab")),
            "{manual:?}"
        );
    }

    fn judged_with(
        pattern: &str,
        reason: RestoreReason,
        recovery: Recovery,
        interrupted: Option<i32>,
    ) -> Judged {
        let probes = vec![probe(
            "api",
            budget(2, 2),
            tokio::time::Instant::now(),
            |_| Observation::Up,
        )];
        let target = target();
        judge_run(&Measured {
            environment: "lab",
            probes: &probes,
            samples: &[samples(pattern)],
            target: &target,
            start_errors: &[],
            recovery: &recovery,
            recovery_timeout: Duration::from_secs(600),
            controller_checks: 3,
            issued: &[],
            reason: &reason,
            interrupted,
            lease: None,
            edge_slack: Duration::from_secs(1),
            held: None,
            split_brain: None,
        })
    }

    #[test]
    fn the_outcome_quotes_the_final_numbers_of_the_probe_that_broke_its_budget() {
        // Seen over budget at 3 s down; the outage went on to 5 s before restore took hold.
        let reason = RestoreReason::OverBudget {
            probe: "api".into(),
            why: "api: longest outage 3.0s, total 3.0s, over the budget".into(),
        };
        let judged = judged_with("+-----+", reason, recovered(10), None);
        assert!(
            judged.outcome.contains("longest outage 5.0s, total 5.0s")
                && !judged.outcome.contains("3.0s"),
            "{}",
            judged.outcome
        );
        assert!(
            judged.trials[0]
                .finding
                .summary
                .contains("longest outage 5.0s")
        );
    }

    #[test]
    fn an_interrupted_run_is_recorded_as_interrupted_not_as_a_failed_recovery() {
        let waiting = Recovery {
            outstanding: vec!["nodes not Ready: talos-lab-cp-02".into()],
            recovered: None,
            took: Duration::from_secs(3),
            interrupted: Some(2),
            checked: true,
        };
        let judged = judged_with("++++", RestoreReason::Signal(2), waiting, Some(2));
        let recovery = &judged.trials[1].finding;
        assert_eq!(recovery.verdict, Verdict::Error, "{}", recovery.summary);
        assert!(
            recovery.summary.contains("interrupted by SIGINT"),
            "{}",
            recovery.summary
        );
        assert_eq!(judged.interrupted, Some("SIGINT"));
        assert_eq!(judged.outcome, "interrupted by SIGINT; restored");
        assert_ne!(judged.verdict, Verdict::Pass);
    }

    #[test]
    fn a_power_action_outside_the_plan_fails_no_manual_work() {
        let finding = no_manual_work(
            &target(),
            &[
                issued(PowerAction::Stop, 201),
                issued(PowerAction::Stop, 999),
            ],
            None,
            None,
        );
        assert_eq!(finding.verdict, Verdict::Fail);
        assert!(
            finding.evidence.iter().any(|e| e.contains("999")),
            "{:?}",
            finding.evidence
        );
    }

    #[test]
    fn a_pod_left_holding_its_volume_on_a_lost_node_fails_no_manual_work_with_the_fix() {
        let plan = [
            issued(PowerAction::Stop, 201),
            issued(PowerAction::Start, 201),
        ];
        let held = Ok(Held {
            pods: vec!["apps/db-0 stayed Terminating on cp-1 holding ReadWriteOnce Longhorn volume pvc-db, attached there".into()],
            fix: "set node-down-pod-deletion-policy to delete-both-statefulset-and-deployment-pod".into(),
        });
        let finding = no_manual_work(&target(), &plan, None, Some(&held));
        assert_eq!(finding.verdict, Verdict::Fail, "{}", finding.summary);
        assert!(
            finding.summary.contains("needed manual work: 1 pod(s)"),
            "{}",
            finding.summary
        );
        assert!(
            finding.evidence[0].contains("apps/db-0")
                && finding.evidence[1].contains("delete-both-statefulset-and-deployment-pod"),
            "{:?}",
            finding.evidence
        );
        // Nothing held: the plan alone decides, and the evidence says the nodes were looked at.
        let finding = no_manual_work(&target(), &plan, None, Some(&Ok(Held::default())));
        assert_eq!(finding.verdict, Verdict::Pass, "{}", finding.summary);
        assert!(
            finding.evidence[0].contains("no pod was left Terminating"),
            "{:?}",
            finding.evidence
        );
        // Not readable: an error naming why, never a pass.
        let finding = no_manual_work(
            &target(),
            &plan,
            None,
            Some(&Err(AttachUnknown::Unread(
                "pods unavailable: timed out".into(),
            ))),
        );
        assert_eq!(finding.verdict, Verdict::Error);
        assert!(finding.summary.contains("timed out"), "{}", finding.summary);
    }
}
