//! What a chaos report says about gate 4, as `gates check` reads it back. The report itself is
//! written by the chaos run; only this summary is part of the state the checks see.

use serde::{Deserialize, Serialize};

/// What `gates check` needs from a chaos report to stand for gate 4.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub environment: String,
    pub host: String,
    pub started_at: String,
    pub finished_at: String,
    /// `pass`, `fail`, `error`.
    pub verdict: String,
    pub outcome: String,
    pub trials: Vec<SummaryTrial>,
    /// The file it was read from; set by the reader.
    #[serde(default)]
    pub file: String,
    /// The cluster the run acted on; absent in reports written before provenance.
    #[serde(default)]
    pub provenance: Option<super::provenance::Provenance>,
    /// Set when the run was interrupted (signal, crash) before it could judge.
    #[serde(default)]
    pub interrupted: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SummaryTrial {
    pub name: String,
    pub verdict: String,
    pub summary: String,
}
