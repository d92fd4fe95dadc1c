//! A probe's outages against its budget: the verdict of one chaos trial.
//!
//! A probe that could not observe (the workloads while the API is down) proves neither up
//! nor down. Its unknown intervals are kept apart from its outages; counting them as down,
//! the probe may have broken its budget, and then the verdict is `error` (unknown), never
//! a pass: proven outages over the budget still fail. Unknown time that an API probe's own
//! measured outage holds is that outage's, judged by the API's trial (see `attribution`).

use std::time::Duration;

use super::attribution::ApiOutages;
use crate::chaos::timeline::{
    Interval, Observation, Sample, longest_and_total, outages, unknowns, worst_case,
};
use crate::config::Budget;
use crate::verdict::{Finding, Verdict};

pub use gates_core::record::probe::ProbeOutcome;

pub fn judge(probe: &str, samples: &[Sample], budget: Budget) -> ProbeOutcome {
    judge_within(probe, samples, budget, &ApiOutages::none())
}

/// [`judge`], with the unknown time that one of `api`'s outages holds attributed to it.
pub fn judge_within(
    probe: &str,
    samples: &[Sample],
    budget: Budget,
    api: &ApiOutages,
) -> ProbeOutcome {
    let found = outages(samples);
    let unknown = unknowns(samples);
    let (longest, total) = longest_and_total(&found);
    let (unknown_longest, unknown_total) = longest_and_total(&unknown);
    let covered: Vec<(Interval, Interval, String)> = unknown
        .iter()
        .filter_map(|u| api.covering(u).map(|(o, p)| (*u, *o, p.to_string())))
        .collect();
    let during_api: Vec<Interval> = covered.iter().map(|(u, _, _)| *u).collect();
    let (worst_longest, worst_total) = worst_without(samples, &during_api);
    let budget_longest: Duration = budget.longest.into();
    let budget_total: Duration = budget.total.into();
    let over = |l: Duration, t: Duration| l > budget_longest || t > budget_total;
    let verdict = if over(longest, total) && !samples.is_empty() {
        Verdict::Fail
    } else if samples.is_empty() || over(worst_longest, worst_total) {
        Verdict::Error
    } else {
        Verdict::Pass
    };
    let summary = match verdict {
        Verdict::Error if samples.is_empty() => format!("{probe}: no sample was taken"),
        Verdict::Error => format!(
            "{probe}: could not observe for {:.1}s (longest {:.1}s); counting that as down, longest {:.1}s, total {:.1}s, over the budget (longest {:.1}s, total {:.1}s): availability unknown; raise the budget to cover the API's failover or fix what the probe reads through",
            unknown_total.as_secs_f64(),
            unknown_longest.as_secs_f64(),
            worst_longest.as_secs_f64(),
            worst_total.as_secs_f64(),
            budget_longest.as_secs_f64(),
            budget_total.as_secs_f64()
        ),
        Verdict::Pass if found.is_empty() && unknown.is_empty() => {
            format!("{probe}: available throughout ({} samples)", samples.len())
        }
        Verdict::Pass if found.is_empty() && during_api.len() == unknown.len() => format!(
            "{probe}: no outage seen; unknown for {:.1}s (longest {:.1}s), all of it while the API was down, which the API probe judged",
            unknown_total.as_secs_f64(),
            unknown_longest.as_secs_f64(),
        ),
        Verdict::Pass if found.is_empty() => format!(
            "{probe}: no outage seen; unknown for {:.1}s (longest {:.1}s), within the budget ({:.1}s, {:.1}s)",
            unknown_total.as_secs_f64(),
            unknown_longest.as_secs_f64(),
            budget_longest.as_secs_f64(),
            budget_total.as_secs_f64()
        ),
        Verdict::Pass => format!(
            "{probe}: longest outage {:.1}s, total {:.1}s, within the budget ({:.1}s, {:.1}s)",
            longest.as_secs_f64(),
            total.as_secs_f64(),
            budget_longest.as_secs_f64(),
            budget_total.as_secs_f64()
        ),
        Verdict::Fail | Verdict::Skip => format!(
            "{probe}: longest outage {:.1}s, total {:.1}s, over the budget (longest {:.1}s, total {:.1}s)",
            longest.as_secs_f64(),
            total.as_secs_f64(),
            budget_longest.as_secs_f64(),
            budget_total.as_secs_f64()
        ),
    };
    let evidence = intervals(samples, &found, &unknown, &covered);
    let finding = match verdict {
        Verdict::Pass => Finding::pass(summary),
        Verdict::Fail | Verdict::Skip => Finding::fail(summary),
        Verdict::Error => Finding::error(summary),
    }
    .with_evidence(evidence);
    ProbeOutcome {
        probe: probe.to_string(),
        samples: samples.len(),
        samples_span: samples
            .iter()
            .map(|s| s.at)
            .min()
            .zip(samples.iter().map(|s| s.at).max()),
        outages: found,
        unknown,
        unknown_during_api_outage: during_api,
        unknown_longest,
        unknown_total,
        longest,
        total,
        budget_longest,
        budget_total,
        finding,
    }
}

/// The longest and total outage with unknown counted as down (what the probe cannot rule
/// out), less what the API's own measured outage holds: those samples are left out, so they
/// neither open nor close an outage.
fn worst_without(samples: &[Sample], during_api: &[Interval]) -> (Duration, Duration) {
    let counted: Vec<Sample> = samples
        .iter()
        .filter(|s| {
            !(matches!(s.observation, Observation::Unknown(_))
                && during_api.iter().any(|u| u.start <= s.at && s.at < u.end))
        })
        .cloned()
        .collect();
    longest_and_total(&worst_case(&counted))
}

/// Each outage with its first failure, and each unknown interval with the API outage that
/// covers it, if any.
fn intervals(
    samples: &[Sample],
    found: &[Interval],
    unknown: &[Interval],
    covered: &[(Interval, Interval, String)],
) -> Vec<String> {
    let mut evidence: Vec<String> = found
        .iter()
        .map(|i| format!("down {i}{}", reason_at(samples, i)))
        .collect();
    evidence.extend(unknown.iter().map(|i| {
        match covered.iter().find(|(u, _, _)| u == i) {
            Some((_, outage, by)) => format!(
                "unknown {i}, while the API was down ({by}: down {outage}; judged by that trial)"
            ),
            None => format!("unknown {i}"),
        }
    }));
    evidence
}

/// The failure detail of the first down sample of an interval.
fn reason_at(samples: &[Sample], interval: &Interval) -> String {
    samples
        .iter()
        .find(|s| s.at == interval.start)
        .and_then(|s| match &s.observation {
            crate::chaos::timeline::Observation::Down(reason) => Some(format!(": {reason}")),
            _ => None,
        })
        .unwrap_or_default()
}

/// Samples one second apart: `+` up, `-` down, `?` unknown.
#[cfg(test)]
pub(crate) fn test_samples(pattern: &str) -> Vec<Sample> {
    pattern
        .chars()
        .enumerate()
        .map(|(i, c)| Sample {
            at: Duration::from_secs(i as u64),
            observation: match c {
                '+' => Observation::Up,
                '?' => Observation::Unknown("api down".into()),
                _ => Observation::Down("refused".into()),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Duration as Human;

    fn budget(longest: u64, total: u64) -> Budget {
        Budget {
            longest: Human::from_secs(longest),
            total: Human::from_secs(total),
        }
    }

    fn samples(pattern: &str) -> Vec<Sample> {
        test_samples(pattern)
    }

    /// The API probe saw `pattern`; edges may differ by one second.
    fn api_down(pattern: &str) -> ApiOutages {
        let api = samples(pattern);
        ApiOutages::of(
            [("api-vip-new-connection", api.as_slice())],
            Duration::from_secs(1),
        )
    }

    #[test]
    fn unknown_time_inside_the_api_outage_the_api_probe_measured_is_its_and_is_said() {
        // The VIP host goes down: the API is down [2s, 6s), the workloads unknown [2s, 6s).
        let outcome = judge_within(
            "workloads::coredns",
            &samples("++????++"),
            budget(0, 0),
            &api_down("++----++"),
        );
        assert_eq!(
            outcome.finding.verdict,
            Verdict::Pass,
            "{:?}",
            outcome.finding
        );
        let summary = &outcome.finding.summary;
        assert!(!summary.contains("available throughout"), "{summary}");
        assert!(summary.contains("unknown for 4.0s"), "{summary}");
        assert!(summary.contains("while the API was down"), "{summary}");
        assert_eq!(
            outcome.finding.evidence,
            [
                "unknown [2.0s, 6.0s) 4.0s, while the API was down (api-vip-new-connection: down [2.0s, 6.0s) 4.0s; judged by that trial)"
            ]
        );
        assert_eq!(outcome.unknown, outcome.unknown_during_api_outage);
    }

    #[test]
    fn unknown_time_outside_any_api_outage_stays_an_error() {
        // Another host goes down; the API stays up, yet the workloads could not be read.
        let outcome = judge_within(
            "workloads::coredns",
            &samples("++????++"),
            budget(0, 0),
            &api_down("++++++++"),
        );
        assert_eq!(outcome.finding.verdict, Verdict::Error);
        assert!(outcome.unknown_during_api_outage.is_empty());
    }

    #[test]
    fn unknown_time_reaching_past_the_api_outage_counts_whole() {
        // API down [2s, 4s); workloads unknown [2s, 7s): more than one second past it.
        let outcome = judge_within(
            "workloads::coredns",
            &samples("++?????++"),
            budget(0, 0),
            &api_down("++--+++++"),
        );
        assert_eq!(outcome.finding.verdict, Verdict::Error);
        assert!(
            outcome
                .finding
                .summary
                .contains("could not observe for 5.0s"),
            "{}",
            outcome.finding.summary
        );
    }

    #[test]
    fn a_workload_seen_down_after_the_api_outage_still_fails() {
        let outcome = judge_within(
            "workloads::coredns",
            &samples("++??--++"),
            budget(0, 0),
            &api_down("++--++++"),
        );
        assert_eq!(outcome.finding.verdict, Verdict::Fail);
    }

    #[test]
    fn within_budget_passes_and_lists_the_outage() {
        let outcome = judge("api", &samples("++--+++"), budget(5, 5));
        assert_eq!(outcome.finding.verdict, Verdict::Pass);
        assert_eq!(outcome.longest, Duration::from_secs(2));
        assert_eq!(
            outcome.finding.evidence,
            vec!["down [2.0s, 4.0s) 2.0s: refused".to_string()]
        );
    }

    #[test]
    fn longest_over_budget_fails() {
        let outcome = judge("ingress", &samples("+----+"), budget(3, 10));
        assert_eq!(outcome.finding.verdict, Verdict::Fail);
        assert!(
            outcome.finding.summary.contains("over the budget"),
            "{}",
            outcome.finding.summary
        );
    }

    #[test]
    fn total_over_budget_fails_even_when_each_outage_is_short() {
        let outcome = judge("ingress", &samples("+-+-+-+-+"), budget(1, 3));
        assert_eq!(outcome.finding.verdict, Verdict::Fail);
        assert_eq!(outcome.total, Duration::from_secs(4));
    }

    #[test]
    fn a_zero_budget_fails_on_any_outage() {
        assert_eq!(
            judge("etcd", &samples("+-+"), budget(0, 0)).finding.verdict,
            Verdict::Fail
        );
        assert_eq!(
            judge("etcd", &samples("+++"), budget(0, 0)).finding.verdict,
            Verdict::Pass
        );
    }

    #[test]
    fn no_samples_is_an_error() {
        assert_eq!(
            judge("api", &[], budget(1, 1)).finding.verdict,
            Verdict::Error
        );
    }

    #[test]
    fn unknown_periods_within_the_budget_are_listed_and_never_called_available_throughout() {
        let outcome = judge("workloads", &samples("++??++"), budget(5, 5));
        assert_eq!(outcome.finding.verdict, Verdict::Pass);
        assert_eq!(
            outcome.finding.evidence,
            vec!["unknown [2.0s, 4.0s) 2.0s".to_string()]
        );
        assert!(
            !outcome.finding.summary.contains("available throughout")
                && outcome.finding.summary.contains("unknown for 2.0s"),
            "{}",
            outcome.finding.summary
        );
        assert_eq!(outcome.unknown_longest, Duration::from_secs(2));
    }

    #[test]
    fn unknown_longer_than_the_budget_is_an_error_not_a_pass() {
        let outcome = judge("workloads::coredns", &samples("++????++"), budget(0, 0));
        assert_eq!(outcome.finding.verdict, Verdict::Error);
        assert!(
            outcome
                .finding
                .summary
                .contains("could not observe for 4.0s")
                && outcome.finding.summary.contains("availability unknown"),
            "{}",
            outcome.finding.summary
        );
    }

    #[test]
    fn unknown_next_to_an_outage_counts_as_down_for_the_budget() {
        // 2 s unknown then 1 s down: 1 s proven, 3 s possible.
        let outcome = judge("workloads", &samples("+??-+"), budget(2, 10));
        assert_eq!(outcome.finding.verdict, Verdict::Error);
    }

    #[test]
    fn a_proven_outage_over_the_budget_fails_even_with_unknown_time() {
        let outcome = judge("workloads", &samples("+----??+"), budget(2, 10));
        assert_eq!(outcome.finding.verdict, Verdict::Fail);
    }
}
