//! The record of one `gates check` run: what every report (terminal, JSON, JUnit, HTML,
//! SARIF, metrics) says, made once by the engine and handed to the reporters.

use gates_core::exit::ExitCode;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::report_files as unique;
use crate::runner::{GateStatus, Tally, TrialResult};
use crate::state::Source;

/// Everything a report says about one `gates check` run.
#[derive(Debug, Clone, Serialize)]
pub struct CheckRecord {
    /// The report format's version ([`gates_core::schema::SCHEMA_VERSION`]), first in the file.
    pub schema_version: u32,
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

impl CheckRecord {
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
