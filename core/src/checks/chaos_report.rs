//! Gate 4 is proven by `gates chaos`, not by reading the cluster. This check reports the
//! newest chaos report of the environment (found under the reports directory by the
//! collector), but counts it only as evidence about *this* cluster *now*:
//!
//! - an interrupted run proves nothing (skip: run it again);
//! - a report that finished after this check started is from a wrong clock or forged (error);
//! - a report older than `chaos.report_max_age` is stale (skip);
//! - a report without provenance, of another cluster (kube-system UID, API CA, etcd
//!   members), or of another control-plane topology (nodes, hosts, VM UUIDs) is not about
//!   this cluster (skip, naming both);
//! - a report whose trials contradict its verdict is not believed (error).
//!
//! Only then does it pass or fail as that run ended, with its date and host.

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::Context;
use crate::record::chaos::ChaosRecord;
use crate::state::Collected;
use crate::state::provenance::{Provenance, Sameness, TopologyNode, short};
use crate::verdict::{Finding, Verdict};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {}

impl super::Check for Params {
    fn inputs(&self) -> &'static [crate::state::Input] {
        use crate::state::Input;
        &[
            Input::ChaosReport,
            Input::Clock,
            Input::Nodes,
            Input::Proxmox,
            Input::Talos,
            Input::ClusterIdentity,
        ]
    }

    fn evaluate(&self, ctx: Context<'_>) -> Finding {
        evaluate(ctx, self)
    }
}

/// How far a report's finish may lie after the check's start before it counts as from the
/// future (two machines' clocks disagree a little).
const CLOCK_SKEW: chrono::Duration = chrono::Duration::seconds(60);

pub fn evaluate(ctx: Context<'_>, _params: &Params) -> Finding {
    let env = &ctx.env.name;
    let (file, report) = match &ctx.state.chaos_report {
        Collected::Present(evidence) => (&evidence.file, &evidence.record),
        Collected::Absent(reason) => {
            return Finding::error(format!("gate 4 evidence unreadable: {reason}"));
        }
        Collected::NotApplicable(reason) => {
            return Finding::skip(format!(
                "no chaos report for {env}: run `gates chaos {env}`"
            ))
            .with_evidence([reason.clone()]);
        }
    };
    let finished = match stands(ctx, file, report) {
        Ok(finished) => finished,
        Err(finding) => return finding,
    };
    let when = finished.format("%Y-%m-%d %H:%M UTC");
    let named = format!("report {file}");
    let not_passed: Vec<String> = report
        .trials
        .iter()
        .filter(|t| t.finding.verdict != Verdict::Pass)
        .map(|t| {
            format!(
                "{} {}: {}",
                t.name,
                t.finding.verdict.as_str(),
                t.finding.summary
            )
        })
        .collect();
    if let Some(contradiction) = contradiction(report, &not_passed) {
        return Finding::error(format!(
            "the newest chaos report of {env} ({when}) contradicts itself: {contradiction}"
        ))
        .with_evidence(std::iter::once(named).chain(not_passed));
    }
    let evidence = std::iter::once(named).chain(not_passed);
    let head = format!(
        "chaos run of {when} took {} down ({})",
        report.host, report.outcome
    );
    match report.verdict {
        Verdict::Pass => Finding::pass(format!(
            "{head}: every probe within budget, recovered without manual work"
        ))
        .with_evidence(evidence),
        Verdict::Fail => Finding::fail(format!("{head}: the run failed")).with_evidence(evidence),
        other @ (Verdict::Error | Verdict::Skip) => {
            Finding::error(format!("{head}: the run ended with `{}`", other.as_str()))
                .with_evidence(evidence)
        }
    }
}

/// Whether the report may stand for this cluster now: finished (not interrupted), not from
/// the future, younger than `report_max_age`, and of this cluster. Its finish, or the
/// finding that says why not.
fn stands(ctx: Context<'_>, file: &str, report: &ChaosRecord) -> Result<DateTime<Utc>, Finding> {
    let env = &ctx.env.name;
    let max_age: std::time::Duration = ctx
        .env
        .chaos
        .clone()
        .unwrap_or_default()
        .report_max_age
        .into();
    let finished = match DateTime::parse_from_rfc3339(&report.finished_at) {
        Ok(at) => at.with_timezone(&Utc),
        Err(err) => {
            return Err(Finding::error(format!(
                "{file}: finished_at {:?} is not a time: {err}",
                report.finished_at
            )));
        }
    };
    let now = ctx.state.collected_at;
    let when = finished.format("%Y-%m-%d %H:%M UTC");
    let named = format!("report {file}");
    if report.interrupted.is_some() || report.outcome.starts_with("interrupted") {
        return Err(Finding::skip(format!(
            "the newest chaos run of {env} ({when}) was interrupted ({}): it proves nothing; run `gates chaos {env}`",
            report.outcome
        ))
        .with_evidence([named]));
    }
    if finished > now + CLOCK_SKEW {
        return Err(Finding::error(format!(
            "the newest chaos report of {env} finished at {when}, after this check started ({}): a clock is wrong or the report is not genuine",
            now.format("%Y-%m-%d %H:%M UTC")
        ))
        .with_evidence([named]));
    }
    let age_std = now
        .signed_duration_since(finished)
        .to_std()
        .unwrap_or_default();
    if age_std > max_age {
        return Err(Finding::skip(format!(
            "the newest chaos report for {env} ({when}, host {}) is older than {}: run `gates chaos {env}`",
            report.host,
            humantime::format_duration(max_age)
        ))
        .with_evidence([file.to_string()]));
    }
    if let Some(reason) = not_this_cluster(ctx, report.provenance.as_ref()) {
        return Err(Finding::skip(format!(
            "the newest chaos report of {env} ({when}) cannot stand for this cluster: {}; run `gates chaos {env}`",
            reason.0
        ))
        .with_evidence(std::iter::once(named).chain(reason.1)));
    }
    Ok(finished)
}

/// A report whose verdict its trials contradict: a pass with no trial or with trials that
/// did not pass, a fail with no failed trial.
fn contradiction(report: &ChaosRecord, not_passed: &[String]) -> Option<String> {
    match report.verdict {
        Verdict::Pass if report.trials.is_empty() => Some("it passes with no trial".to_string()),
        Verdict::Pass if !not_passed.is_empty() => Some(format!(
            "it passes, but {} of its trials did not",
            not_passed.len()
        )),
        Verdict::Fail
            if !report
                .trials
                .iter()
                .any(|t| t.finding.verdict == Verdict::Fail) =>
        {
            Some("it fails, but none of its trials failed".to_string())
        }
        Verdict::Pass | Verdict::Fail | Verdict::Error | Verdict::Skip => None,
    }
}

/// Why a report's provenance does not tie it to the cluster being checked, with evidence;
/// `None` when identity and topology both match.
fn not_this_cluster(
    ctx: Context<'_>,
    recorded: Option<&Provenance>,
) -> Option<(String, Vec<String>)> {
    let Some(recorded) = recorded else {
        return Some((
            "it records no cluster identity (written before provenance)".to_string(),
            Vec::new(),
        ));
    };
    let current = Provenance::of(ctx.env, ctx.state, ctx.state.collected_at);
    let evidence = vec![
        format!("the run's cluster: {}", recorded.describe()),
        format!("this cluster: {}", current.describe()),
    ];
    match recorded.cluster.compare(&current.cluster) {
        Sameness::Same => {}
        Sameness::Different(parts) => {
            return Some((
                format!("it is of another cluster ({})", parts.join("; ")),
                evidence,
            ));
        }
        Sameness::Unknown(why) => {
            return Some((format!("{why}, so it cannot be tied to it"), evidence));
        }
    }
    if current.topology.digest.is_empty() {
        return Some((
            "the control-plane topology of this cluster is unknown (no node list)".to_string(),
            evidence,
        ));
    }
    if recorded.topology.digest != current.topology.digest {
        return Some((
            format!(
                "the control-plane topology changed since the run ({} then: {}; {} now: {})",
                short(&recorded.topology.digest),
                list(&recorded.topology.control_planes),
                short(&current.topology.digest),
                list(&current.topology.control_planes)
            ),
            evidence,
        ));
    }
    None
}

fn list(nodes: &[TopologyNode]) -> String {
    nodes
        .iter()
        .map(|n| {
            format!(
                "{} on {} VM {}",
                n.node,
                n.host.as_deref().unwrap_or("?"),
                n.vm_uuid.as_deref().unwrap_or("?")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::{node, state as state_builder, target_nodes};
    use crate::config::Environment;
    use crate::record::chaos::{ChaosRecord, Mode, Moments};
    use crate::record::trial::{Tally, TrialResult};
    use crate::state::ChaosEvidence;
    use crate::state::State;
    use crate::state::provenance::ClusterIdentity;

    fn env() -> Environment {
        let mut env: Environment =
            crate::yaml::from_str("{chaos: {allowed: true, report_max_age: 2d}}").unwrap();
        env.name = "staging".into();
        env
    }

    fn identity(uid: &str) -> ClusterIdentity {
        ClusterIdentity {
            kube_system_uid: Some(uid.into()),
            api_ca_sha256: Some("9f86d081884c".into()),
            etcd_members: None,
        }
    }

    /// The cluster being checked: the target nodes, kube-system `uid-1`.
    fn cluster(now: &str) -> State {
        let mut state = state_builder()
            .nodes(target_nodes())
            .with(|s| s.cluster_identity = identity("uid-1"))
            .build();
        state.collected_at = at(now);
        state
    }

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    /// A report of the run on `of` (its provenance), with one trial of `verdict`.
    fn summary(verdict: Verdict, of: &State) -> ChaosEvidence {
        let trials = vec![TrialResult {
            name: "gate4::staging::chaos::ingress::whoami".into(),
            gate: 4,
            kind: "chaos-probe".into(),
            instance: Some("ingress::whoami".into()),
            finding: Finding {
                verdict,
                summary: "ingress: longest outage 31.0s".into(),
                evidence: Vec::new(),
                warnings: Vec::new(),
            },
            duration: std::time::Duration::from_secs(600),
        }];
        let record = ChaosRecord {
            schema_version: Some(crate::schema::SCHEMA_VERSION),
            environment: "staging".into(),
            decision: "adr-007".into(),
            gate_title: "A host failure leaves the cluster available.".into(),
            host: "pve2".into(),
            host_choice: "named".into(),
            mode: Mode::EnvironmentVms,
            vms: Vec::new(),
            untouched: Vec::new(),
            started_at: "2026-11-29T20:00:00.000Z".into(),
            finished_at: "2026-11-29T20:10:00.000Z".into(),
            sample_interval: 0.5,
            moments: Moments::default(),
            outcome: "completed".into(),
            interrupted: None,
            verdict,
            tally: Tally::of(&trials),
            trials,
            probes: Vec::new(),
            power_actions: Vec::new(),
            handovers: Vec::new(),
            timeline_file: String::new(),
            provenance: Some(Provenance::of(&env(), of, at("2026-11-29T20:00:00Z"))),
            prediction: None,
            split_brain: None,
        };
        ChaosEvidence {
            file: "reports/chaos-staging-20261129T200000Z.json".into(),
            record,
        }
    }

    fn run_on(mut state: State, report: Collected<ChaosEvidence>) -> Finding {
        let env = env();
        state.chaos_report = report;
        evaluate(
            Context {
                env: &env,
                state: &state,
                indexes: &crate::checks::Indexes::new(&state),
                pause: &crate::pause::NEVER,
            },
            &Params {},
        )
    }

    fn run(report: Collected<ChaosEvidence>, now: &str) -> Finding {
        run_on(cluster(now), report)
    }

    const NOW: &str = "2026-11-30T08:00:00Z";

    #[test]
    fn a_recent_passing_report_of_this_cluster_passes_with_date_and_host() {
        let f = run(
            Collected::Present(summary(Verdict::Pass, &cluster(NOW))),
            NOW,
        );
        assert_eq!(f.verdict, Verdict::Pass, "{}", f.details());
        assert!(
            f.summary.contains("2026-11-29 20:10 UTC") && f.summary.contains("pve2"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn a_recent_failing_report_fails_and_names_the_trial() {
        let f = run(
            Collected::Present(summary(Verdict::Fail, &cluster(NOW))),
            NOW,
        );
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(
            f.evidence
                .iter()
                .any(|e| e.contains("ingress::whoami fail")),
            "{:?}",
            f.evidence
        );
    }

    #[test]
    fn an_old_report_is_skipped_with_the_command() {
        let f = run(
            Collected::Present(summary(Verdict::Pass, &cluster(NOW))),
            "2026-12-05T08:00:00Z",
        );
        assert_eq!(f.verdict, Verdict::Skip);
        assert!(
            f.summary.contains("run `gates chaos staging`"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn no_report_is_skipped_and_an_unreadable_one_is_an_error() {
        let f = run(
            Collected::NotApplicable("no chaos report for staging under reports".into()),
            NOW,
        );
        assert_eq!(f.verdict, Verdict::Skip);
        assert!(f.summary.contains("run `gates chaos staging`"));
        let f = run(Collected::Absent("bad json".into()), NOW);
        assert_eq!(f.verdict, Verdict::Error);
    }

    #[test]
    fn a_passing_report_of_another_cluster_does_not_count() {
        let mut other = cluster(NOW);
        other.cluster_identity = identity("uid-2");
        let f = run(Collected::Present(summary(Verdict::Pass, &other)), NOW);
        assert_eq!(f.verdict, Verdict::Skip, "{}", f.details());
        assert!(
            f.summary
                .contains("kube-system namespace UID uid-2 vs uid-1"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn a_passing_report_of_another_topology_does_not_count() {
        let moved = state_builder()
            .nodes([
                node("cp-1").host("pve1").control_plane().ready().build(),
                node("cp-2").host("pve2").control_plane().ready().build(),
                node("cp-3").host("pve1").control_plane().ready().build(),
            ])
            .with(|s| s.cluster_identity = identity("uid-1"))
            .build();
        let f = run(Collected::Present(summary(Verdict::Pass, &moved)), NOW);
        assert_eq!(f.verdict, Verdict::Skip, "{}", f.details());
        assert!(f.summary.contains("topology changed"), "{}", f.summary);
    }

    #[test]
    fn a_report_without_provenance_does_not_count() {
        let mut report = summary(Verdict::Pass, &cluster(NOW));
        report.record.provenance = None;
        let f = run(Collected::Present(report), NOW);
        assert_eq!(f.verdict, Verdict::Skip);
        assert!(
            f.summary.contains("records no cluster identity"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn a_report_from_the_future_is_an_error() {
        let f = run(
            Collected::Present(summary(Verdict::Pass, &cluster(NOW))),
            "2026-11-29T19:00:00Z",
        );
        assert_eq!(f.verdict, Verdict::Error, "{}", f.details());
        assert!(
            f.summary.contains("after this check started"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn a_report_whose_trials_contradict_its_verdict_is_an_error() {
        let mut report = summary(Verdict::Pass, &cluster(NOW));
        report.record.trials[0].finding.verdict = Verdict::Fail;
        let f = run(Collected::Present(report), NOW);
        assert_eq!(f.verdict, Verdict::Error, "{}", f.details());
        assert!(f.summary.contains("contradicts itself"), "{}", f.summary);
        let mut report = summary(Verdict::Pass, &cluster(NOW));
        report.record.trials.clear();
        assert_eq!(run(Collected::Present(report), NOW).verdict, Verdict::Error);
    }

    #[test]
    fn an_interrupted_run_is_skipped_never_a_pass() {
        let mut report = summary(Verdict::Pass, &cluster(NOW));
        report.record.interrupted = Some("SIGINT".into());
        let f = run(Collected::Present(report), NOW);
        assert_eq!(f.verdict, Verdict::Skip);
        assert!(f.summary.contains("was interrupted"), "{}", f.summary);
        let mut report = summary(Verdict::Fail, &cluster(NOW));
        report.record.outcome = "interrupted by SIGINT".into();
        assert_eq!(run(Collected::Present(report), NOW).verdict, Verdict::Skip);
    }
}
