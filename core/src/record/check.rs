//! The record of one `gates check` run (`ENV-<stamp>.json`): what every report (terminal,
//! JSON, JUnit, HTML, SARIF, metrics, PolicyReports) says, made once by the engine, and what
//! `gates history` and `gates adr` read back. One type writes and reads the file, so the two
//! cannot drift apart; a report from before a field existed reads with it absent, never with
//! a guess in its place.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::trial::{Tally, TrialResult};
use crate::exit::ExitCode;
use crate::state::Source;
use crate::state::provenance::Provenance;
use crate::verdict::Verdict;

/// Everything a report says about one `gates check` run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckRecord {
    /// The report format's version ([`crate::schema::SCHEMA_VERSION`]), first in the file;
    /// 0 in a report written before versions were.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub schema_version: u32,
    pub environment: String,
    /// Which cluster the verdicts are about, and when it was read; `None` only in a report
    /// written before gates recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    /// The decision the gates come from, e.g. `adr-007`.
    pub decision: String,
    pub started_at: DateTime<Utc>,
    pub source: Source,
    #[serde(with = "super::seconds::exact")]
    pub collect_time: Duration,
    pub tally: Tally,
    pub gates: Vec<GateStatus>,
    pub trials: Vec<TrialResult>,
    /// With `--require-all`: whether every gate passed, and what blocks promotion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion: Option<Promotion>,
}

fn is_zero(version: &u32) -> bool {
    *version == 0
}

impl CheckRecord {
    /// 0 all pass, 1 a gate failed (or, with `--require-all`, did not pass), 2 something
    /// could not be evaluated.
    pub fn exit_code(&self) -> ExitCode {
        let code = self.tally.exit_code();
        match &self.promotion {
            Some(promotion) => promotion.exit_code(code),
            None => code,
        }
    }
}

/// How one gate stands after a run: the worst verdict of its evaluated trials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateStatus {
    pub gate: u32,
    pub title: String,
    pub verdict: Verdict,
    pub trials: usize,
}

/// Whether the run allows promotion, and what stands in the way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Promotion {
    pub ready: bool,
    /// One line per gate or trial that did not pass, with why.
    pub blockers: Vec<String>,
}

impl Promotion {
    /// The closing block of the terminal output.
    pub fn lines(&self) -> String {
        if self.ready {
            return "Promotion: every gate passed (--require-all)\n".to_string();
        }
        let mut out = "Promotion: blocked (--require-all)\n".to_string();
        for blocker in &self.blockers {
            out.push_str(&format!("  {blocker}\n"));
        }
        out
    }

    /// The run's exit code under `--require-all`: 2 and 1 as without it, else 1 when
    /// anything blocks promotion.
    pub fn exit_code(&self, without: ExitCode) -> ExitCode {
        match (without, self.ready) {
            (ExitCode::Passed, false) => ExitCode::Failed,
            (code, _) => code,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report from before versions and provenance were written (gates of 2026-12-01).
    const BEFORE_VERSIONS: &str =
        include_str!("../../../fixtures/reports/lab-20261201T101742Z.json");

    #[test]
    fn a_report_from_before_versions_reads_with_no_provenance_and_writes_the_same_document_again() {
        let record: CheckRecord = serde_json::from_str(BEFORE_VERSIONS).unwrap();
        assert_eq!(record.schema_version, 0);
        assert_eq!(record.provenance, None);
        assert_eq!(record.environment, "lab");
        assert_eq!(record.tally, Tally::of(&record.trials));
        // The fixture was reindented when committed, so the documents are compared, not bytes.
        let again = serde_json::to_value(&record).unwrap();
        let before: serde_json::Value = serde_json::from_str(BEFORE_VERSIONS).unwrap();
        assert!(
            again == before,
            "the record wrote another document than it read"
        );
    }

    #[test]
    fn a_gate_whose_verdict_is_no_verdict_is_refused_not_read_as_another() {
        let text = BEFORE_VERSIONS.replacen("\"verdict\": \"pass\"", "\"verdict\": \"passed\"", 1);
        assert_ne!(text, BEFORE_VERSIONS);
        let err = serde_json::from_str::<CheckRecord>(&text).unwrap_err();
        assert!(
            err.to_string().contains("unknown variant `passed`"),
            "{err}"
        );
    }

    #[test]
    fn promotion_blocked_turns_a_passing_run_into_a_failed_one_and_keeps_worse_codes() {
        let mut record: CheckRecord = serde_json::from_str(BEFORE_VERSIONS).unwrap();
        record.tally = Tally {
            passed: 3,
            ..Tally::default()
        };
        assert_eq!(record.exit_code(), ExitCode::Passed);
        record.promotion = Some(Promotion {
            ready: false,
            blockers: vec!["gate 4 was skipped: no chaos report".into()],
        });
        assert_eq!(record.exit_code(), ExitCode::Failed);
        record.tally.errors = 1;
        assert_eq!(record.exit_code(), ExitCode::CannotTell);
    }
}
