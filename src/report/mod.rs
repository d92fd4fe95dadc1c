//! Reports of one run: JUnit XML for dashboards and CI, JSON for machines, SARIF for code
//! scanning on pull requests, and the closing lines of the terminal output.

pub mod chaos_view;
pub mod history;
pub mod html;
pub mod json;
pub mod junit;
pub mod metrics;
pub mod outputs;
pub mod pushgateway;
pub mod sarif;
pub use gates_engine::report_files as unique;

use gates_core::exit::ExitCode;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::runner::{GateStatus, Tally, TrialResult};
use crate::state::Source;
use crate::verdict::Verdict;

/// Everything a report says about one `gates check` run.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub environment: String,
    /// Which cluster the verdicts are about, and when it was read.
    pub provenance: crate::state::provenance::Provenance,
    /// The decision the gates come from, e.g. `adr-007`.
    pub decision: String,
    pub started_at: DateTime<Utc>,
    pub source: Source,
    #[serde(serialize_with = "seconds")]
    pub collect_time: Duration,
    pub tally: Tally,
    pub gates: Vec<GateStatus>,
    pub trials: Vec<TrialResult>,
    /// With `--require-all`: whether every gate passed, and what blocks promotion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub promotion: Option<crate::promotion::Promotion>,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl Run {
    /// `reports/staging-20261129T191500Z` (extension added by the writer), claimed so that
    /// a second run in the same second writes `...Z-2` instead of overwriting this one.
    pub fn default_stem(&self, dir: &Path) -> PathBuf {
        unique::claim(
            &dir.join(format!(
                "{}-{}",
                self.environment,
                self.started_at.format("%Y%m%dT%H%M%SZ")
            )),
            "json",
        )
    }

    /// The closing lines: counts and how the rollout stands.
    pub fn closing_lines(&self) -> String {
        self.closing_lines_in(false)
    }

    /// The closing lines, the verdict words coloured as libtest colours its lines (green
    /// pass, red FAIL and ERROR, yellow skip) when `colour` is set.
    pub fn closing_lines_in(&self, colour: bool) -> String {
        let t = &self.tally;
        let mut out = format!(
            "{} passed, {} failed, {} errors, {} skipped\n",
            t.passed, t.failed, t.errors, t.skipped
        );
        let passing = self
            .gates
            .iter()
            .filter(|g| g.verdict == Verdict::Pass)
            .count();
        out.push_str(&format!(
            "Rollout: {passing} of {} gates pass for {}\n",
            self.gates.len(),
            self.environment
        ));
        for gate in &self.gates {
            let (word, ansi) = match gate.verdict {
                Verdict::Pass => ("pass ", "32"),
                Verdict::Fail => ("FAIL ", "31"),
                Verdict::Error => ("ERROR", "31"),
                Verdict::Skip => ("skip ", "33"),
            };
            let word = if colour {
                format!("\x1b[{ansi}m{word}\x1b[0m")
            } else {
                word.to_string()
            };
            out.push_str(&format!("  gate {} {word}  {}\n", gate.gate, gate.title));
        }
        if let Some(promotion) = &self.promotion {
            out.push_str(&promotion.lines());
        }
        out
    }

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
