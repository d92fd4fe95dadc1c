//! A trial and what it found, as every report of a run lists it, and the counts over them.

use std::borrow::Cow;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::exit::ExitCode;
use crate::verdict::{Finding, Verdict};

/// A trial and what it found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrialResult {
    pub name: String,
    #[serde(default)]
    pub gate: u32,
    /// The check kind (`distinct-hosts`) or the chaos trial's (`chaos-probe`): a name the
    /// program gives, borrowed, or read back from a report.
    #[serde(default)]
    pub kind: Cow<'static, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    #[serde(flatten)]
    pub finding: Finding,
    #[serde(default, with = "super::seconds::exact")]
    pub duration: Duration,
}

/// Counts over the results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    pub passed: usize,
    pub failed: usize,
    pub errors: usize,
    pub skipped: usize,
}

impl Tally {
    pub fn of(results: &[TrialResult]) -> Tally {
        let mut tally = Tally::default();
        for result in results {
            match result.finding.verdict {
                Verdict::Pass => tally.passed += 1,
                Verdict::Fail => tally.failed += 1,
                Verdict::Error => tally.errors += 1,
                Verdict::Skip => tally.skipped += 1,
            }
        }
        tally
    }

    /// Both tallies together (a fleet run's over its environments).
    pub fn plus(&self, other: &Tally) -> Tally {
        Tally {
            passed: self.passed + other.passed,
            failed: self.failed + other.failed,
            errors: self.errors + other.errors,
            skipped: self.skipped + other.skipped,
        }
    }

    /// 0 all pass, 1 a gate failed, 2 something could not be evaluated.
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from_findings(self.failed > 0, self.errors > 0)
    }
}
