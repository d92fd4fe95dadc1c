//! `--require-all`, the promotion rule: an environment may be promoted only when every gate
//! that applies to it passed in this run. A skipped trial (no chaos report, no Talos answers
//! in a snapshot) proves nothing, and a gate the filter left out was not looked at, so either
//! blocks promotion (exit 1) with which and why. Evidence whose origin cannot be proved (a
//! snapshot file that records none, such as kubectl output) is read and judged, but does not
//! promote: it may be of another cluster. Failures and errors already exit 1 and 2.

pub use gates_core::record::check::Promotion;

use crate::runner::{GateStatus, TrialResult};
use crate::verdict::Verdict;

/// Judge a run: `gates` are the gates of the environment (number and title) whether they
/// ran or not; `statuses` and `results` are what ran.
/// `unproven`: the snapshot files the run read whose origin cannot be proved.
pub fn judge(
    gates: &[(u32, String)],
    statuses: &[GateStatus],
    results: &[TrialResult],
    unproven: &[String],
) -> Promotion {
    let mut blockers: Vec<String> = unproven
        .iter()
        .map(|file| {
            format!(
                "{file} records no origin (kubectl output?): every verdict read from it may be of another cluster; promote on a live check or a `gates snapshot` file"
            )
        })
        .collect();
    for (number, title) in gates {
        match statuses.iter().find(|s| s.gate == *number) {
            None => blockers.push(format!(
                "gate {number} was not run (left out by the filter): {title}"
            )),
            Some(status) => match status.verdict {
                Verdict::Pass => {}
                Verdict::Fail => blockers.push(format!("gate {number} failed: {title}")),
                Verdict::Error => {
                    blockers.push(format!("gate {number} could not be evaluated: {title}"))
                }
                Verdict::Skip => blockers.push(format!("gate {number} was skipped: {title}")),
            },
        }
    }
    for result in results {
        match result.finding.verdict {
            Verdict::Skip => blockers.push(format!(
                "{} was skipped: {}",
                result.name, result.finding.summary
            )),
            Verdict::Pass | Verdict::Fail | Verdict::Error => {}
        }
    }
    Promotion {
        ready: blockers.is_empty(),
        blockers,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::verdict::Finding;
    use gates_core::exit::ExitCode;

    fn trial(gate: u32, name: &str, finding: Finding) -> TrialResult {
        TrialResult {
            name: name.to_string(),
            gate,
            kind: "chaos-report".into(),
            instance: None,
            finding,
            duration: Duration::ZERO,
        }
    }

    fn status(gate: u32, verdict: Verdict) -> GateStatus {
        GateStatus {
            gate,
            title: format!("gate {gate}"),
            verdict,
            trials: 1,
        }
    }

    fn gates(numbers: &[u32]) -> Vec<(u32, String)> {
        numbers.iter().map(|n| (*n, format!("title {n}"))).collect()
    }

    #[test]
    fn a_skipped_trial_blocks_promotion_and_says_why() {
        let results = [
            trial(1, "gate1::staging::distinct-hosts", Finding::pass("ok")),
            trial(
                4,
                "gate4::staging::chaos-report",
                Finding::skip("no chaos report for staging: run `gates chaos staging`"),
            ),
        ];
        let statuses = [status(1, Verdict::Pass), status(4, Verdict::Skip)];
        let promotion = judge(&gates(&[1, 4]), &statuses, &results, &[]);
        assert!(!promotion.ready);
        assert_eq!(promotion.exit_code(ExitCode::Passed), ExitCode::Failed);
        assert!(
            promotion
                .blockers
                .contains(&"gate 4 was skipped: title 4".to_string())
        );
        assert!(promotion.blockers.contains(
            &"gate4::staging::chaos-report was skipped: no chaos report for staging: run `gates chaos staging`"
                .to_string()
        ));
    }

    #[test]
    fn a_gate_left_out_by_the_filter_blocks_promotion() {
        let results = [trial(
            1,
            "gate1::staging::distinct-hosts",
            Finding::pass("ok"),
        )];
        let promotion = judge(&gates(&[1, 2]), &[status(1, Verdict::Pass)], &results, &[]);
        assert_eq!(
            promotion.blockers,
            ["gate 2 was not run (left out by the filter): title 2"]
        );
    }

    #[test]
    fn every_gate_passing_allows_promotion_and_errors_keep_exit_2() {
        let results = [trial(
            1,
            "gate1::staging::distinct-hosts",
            Finding::pass("ok"),
        )];
        let promotion = judge(&gates(&[1]), &[status(1, Verdict::Pass)], &results, &[]);
        assert!(promotion.ready);
        assert_eq!(promotion.exit_code(ExitCode::Passed), ExitCode::Passed);
        let blocked = judge(&gates(&[1, 2]), &[status(1, Verdict::Pass)], &results, &[]);
        assert_eq!(
            blocked.exit_code(ExitCode::CannotTell),
            ExitCode::CannotTell
        );
    }

    #[test]
    fn evidence_whose_origin_cannot_be_proved_blocks_promotion_naming_the_file() {
        let results = [trial(
            1,
            "gate1::staging::distinct-hosts",
            Finding::pass("ok"),
        )];
        let statuses = [status(1, Verdict::Pass)];
        assert!(judge(&gates(&[1]), &statuses, &results, &[]).ready);
        let promotion = judge(
            &gates(&[1]),
            &statuses,
            &results,
            &["dump.json".to_string()],
        );
        assert!(!promotion.ready);
        assert_eq!(
            promotion.blockers,
            [
                "dump.json records no origin (kubectl output?): every verdict read from it may be of another cluster; promote on a live check or a `gates snapshot` file"
            ]
        );
        assert_eq!(promotion.exit_code(ExitCode::Passed), ExitCode::Failed);
    }
}
