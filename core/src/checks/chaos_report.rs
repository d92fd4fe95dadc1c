//! Gate 4 is proven by `gates chaos`, not by reading the cluster. This check reports the
//! newest chaos report of the environment (found under the reports directory by the
//! collector) while it is younger than `chaos.report_max_age`: pass or fail as that run
//! ended, with its date and host. Without a recent report it is skipped with the command.

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::Context;
use crate::state::Collected;
use crate::verdict::Finding;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {}

impl super::Check for Params {
    fn evaluate(&self, ctx: Context<'_>) -> Finding {
        evaluate(ctx, self)
    }
}

pub fn evaluate(ctx: Context<'_>, _params: &Params) -> Finding {
    let env = &ctx.env.name;
    let summary = match &ctx.state.chaos_report {
        Collected::Present(summary) => summary,
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
    let max_age: std::time::Duration = ctx
        .env
        .chaos
        .clone()
        .unwrap_or_default()
        .report_max_age
        .into();
    let finished = match DateTime::parse_from_rfc3339(&summary.finished_at) {
        Ok(at) => at.with_timezone(&Utc),
        Err(err) => {
            return Finding::error(format!(
                "{}: finished_at {:?} is not a time: {err}",
                summary.file, summary.finished_at
            ));
        }
    };
    let age = ctx.state.collected_at.signed_duration_since(finished);
    let age_std = age.to_std().unwrap_or_default();
    let when = finished.format("%Y-%m-%d %H:%M UTC");
    if age_std > max_age {
        return Finding::skip(format!(
            "the newest chaos report for {env} ({when}, host {}) is older than {}: run `gates chaos {env}`",
            summary.host,
            humantime::format_duration(max_age)
        ))
        .with_evidence([summary.file.clone()]);
    }
    let not_passed: Vec<String> = summary
        .trials
        .iter()
        .filter(|t| t.verdict != "pass")
        .map(|t| format!("{} {}: {}", t.name, t.verdict, t.summary))
        .collect();
    let evidence = std::iter::once(format!("report {}", summary.file)).chain(not_passed);
    let head = format!(
        "chaos run of {when} took {} down ({})",
        summary.host, summary.outcome
    );
    match summary.verdict.as_str() {
        "pass" => Finding::pass(format!(
            "{head}: every probe within budget, recovered without manual work"
        ))
        .with_evidence(evidence),
        "fail" => Finding::fail(format!("{head}: the run failed")).with_evidence(evidence),
        other => {
            Finding::error(format!("{head}: the run ended with `{other}`")).with_evidence(evidence)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Environment;
    use crate::state::{Source, State};
    use crate::state::{Summary, SummaryTrial};
    use crate::verdict::Verdict;

    fn env() -> Environment {
        let mut env: Environment =
            serde_yaml_ng::from_str("{chaos: {allowed: true, report_max_age: 2d}}").unwrap();
        env.name = "staging".into();
        env
    }

    fn state(report: Collected<Summary>, now: &str) -> State {
        let mut state = State::empty(
            Source::Live {
                context: "staging".into(),
            },
            DateTime::parse_from_rfc3339(now)
                .unwrap()
                .with_timezone(&Utc),
        );
        state.chaos_report = report;
        state
    }

    fn summary(verdict: &str) -> Summary {
        Summary {
            environment: "staging".into(),
            host: "pve2".into(),
            started_at: "2026-11-29T20:00:00.000Z".into(),
            finished_at: "2026-11-29T20:10:00.000Z".into(),
            verdict: verdict.into(),
            outcome: "completed".into(),
            trials: vec![SummaryTrial {
                name: "gate4::staging::chaos::ingress::whoami".into(),
                verdict: verdict.into(),
                summary: "ingress: longest outage 31.0s".into(),
            }],
            file: "reports/chaos-staging-20261129T200000Z.json".into(),
        }
    }

    fn run(report: Collected<Summary>, now: &str) -> Finding {
        let env = env();
        let state = state(report, now);
        evaluate(
            Context {
                env: &env,
                state: &state,
            },
            &Params {},
        )
    }

    #[test]
    fn a_recent_passing_report_passes_with_date_and_host() {
        let f = run(Collected::Present(summary("pass")), "2026-11-30T08:00:00Z");
        assert_eq!(f.verdict, Verdict::Pass);
        assert!(
            f.summary.contains("2026-11-29 20:10 UTC") && f.summary.contains("pve2"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn a_recent_failing_report_fails_and_names_the_trial() {
        let f = run(Collected::Present(summary("fail")), "2026-11-30T08:00:00Z");
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
        let f = run(Collected::Present(summary("pass")), "2026-12-05T08:00:00Z");
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
            "2026-11-30T08:00:00Z",
        );
        assert_eq!(f.verdict, Verdict::Skip);
        assert!(f.summary.contains("run `gates chaos staging`"));
        let f = run(Collected::Absent("bad json".into()), "2026-11-30T08:00:00Z");
        assert_eq!(f.verdict, Verdict::Error);
    }
}
