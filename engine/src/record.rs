//! The record of one `gates check` run: what every report (terminal, JSON, JUnit, HTML,
//! SARIF, metrics) says, made once by the engine and handed to the reporters.

use gates_core::exit::ExitCode;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Serialize;

pub use gates_core::record::check::{CheckRecord, GateStatus, Promotion};

use crate::report_files as unique;

/// `reports/staging-20261129T191500Z` (extension added by the writer), claimed so that
/// a second run in the same second writes `...Z-2` instead of overwriting this one.
pub fn default_stem(record: &CheckRecord, dir: &Path) -> PathBuf {
    unique::claim(
        &dir.join(format!(
            "{}-{}",
            record.environment,
            record.started_at.format("%Y%m%dT%H%M%SZ")
        )),
        "json",
    )
}

/// Everything a report says about one fleet run (`gates check --all` or `--envs`): each
/// environment's outcome, in the order they were checked.
#[derive(Debug, Clone, Serialize)]
pub struct FleetRecord {
    /// The report format's version, first in the file.
    pub schema_version: u32,
    pub started_at: DateTime<Utc>,
    pub environments: Vec<FleetMember>,
}

/// One environment of a fleet run.
#[derive(Debug, Clone, Serialize)]
pub struct FleetMember {
    pub environment: String,
    #[serde(flatten)]
    pub outcome: MemberOutcome,
}

/// How one environment of a fleet run ended.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum MemberOutcome {
    /// Judged: the record a check of that environment alone gives.
    Judged { record: Box<CheckRecord> },
    /// The filter leaves none of its trials (a gate that does not apply to it).
    NothingSelected { reason: String },
    /// It could not be checked at all (its configuration or repository): an error for it
    /// alone, the others judged as usual.
    Refused { error: String },
}

impl FleetMember {
    /// The exit code this environment alone would give (nothing selected is no failure: the
    /// run as a whole refuses when no environment has a trial selected).
    pub fn exit_code(&self) -> ExitCode {
        match &self.outcome {
            MemberOutcome::Judged { record } => record.exit_code(),
            MemberOutcome::NothingSelected { .. } => ExitCode::Passed,
            MemberOutcome::Refused { .. } => ExitCode::CannotTell,
        }
    }

    pub fn record(&self) -> Option<&CheckRecord> {
        match &self.outcome {
            MemberOutcome::Judged { record } => Some(record),
            MemberOutcome::NothingSelected { .. } | MemberOutcome::Refused { .. } => None,
        }
    }
}

impl FleetRecord {
    /// The worst of the environments' exit codes.
    pub fn exit_code(&self) -> ExitCode {
        self.environments
            .iter()
            .map(FleetMember::exit_code)
            .fold(ExitCode::Passed, ExitCode::worst)
    }

    /// `reports/gates-fleet-20261206T120000Z`, claimed as a check report's stem is.
    pub fn default_stem(&self, dir: &Path) -> PathBuf {
        unique::claim(
            &dir.join(format!(
                "gates-fleet-{}",
                self.started_at.format("%Y%m%dT%H%M%SZ")
            )),
            "json",
        )
    }
}

/// The fleet as a table: one row per environment, one column per gate any of them has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetMatrix {
    /// The gate numbers, ascending.
    pub gates: Vec<u32>,
    pub rows: Vec<FleetRow>,
}

/// One environment's row: each gate's verdict (`None` where the gate does not apply to it),
/// or the reason it has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetRow {
    pub environment: String,
    pub cells: Vec<Option<gates_core::verdict::Verdict>>,
    /// Why the row has no verdicts: the refusal, or that nothing was selected.
    pub instead: Option<String>,
}

impl FleetRecord {
    /// Environment × gate: what `gates check --all` prints last and its HTML page shows.
    pub fn matrix(&self) -> FleetMatrix {
        let mut gates: Vec<u32> = self
            .environments
            .iter()
            .filter_map(FleetMember::record)
            .flat_map(|r| r.gates.iter().map(|g| g.gate))
            .collect();
        gates.sort_unstable();
        gates.dedup();
        let rows = self
            .environments
            .iter()
            .map(|member| {
                let (cells, instead) = match &member.outcome {
                    MemberOutcome::Judged { record } => (
                        gates
                            .iter()
                            .map(|n| {
                                record
                                    .gates
                                    .iter()
                                    .find(|g| g.gate == *n)
                                    .map(|g| g.verdict)
                            })
                            .collect(),
                        None,
                    ),
                    MemberOutcome::NothingSelected { .. } => (
                        vec![None; gates.len()],
                        Some("nothing selected".to_string()),
                    ),
                    MemberOutcome::Refused { error } => {
                        (vec![None; gates.len()], Some(format!("error: {error}")))
                    }
                };
                FleetRow {
                    environment: member.environment.clone(),
                    cells,
                    instead,
                }
            })
            .collect();
        FleetMatrix { gates, rows }
    }
}
