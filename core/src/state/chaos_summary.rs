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
    /// The signal that interrupted the run before it could judge (`"SIGINT"`), as the chaos
    /// report writes it; `null` or absent for a run that finished.
    #[serde(default, deserialize_with = "signal_or_flag")]
    pub interrupted: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SummaryTrial {
    pub name: String,
    pub verdict: String,
    pub summary: String,
}

/// `interrupted` as the chaos report writes it (`null` or the signal's name), or as a flag.
fn signal_or_flag<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Interrupted {
        Signal(String),
        Flag(bool),
    }
    Ok(match Option::<Interrupted>::deserialize(d)? {
        None | Some(Interrupted::Flag(false)) => None,
        Some(Interrupted::Signal(signal)) => Some(signal),
        Some(Interrupted::Flag(true)) => Some("interrupted".to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(interrupted: &str) -> Summary {
        serde_json::from_str(&format!(
            r#"{{"environment": "lab", "host": "pve1", "started_at": "2026-12-01T12:00:00.000Z",
                "finished_at": "2026-12-01T12:01:00.000Z", "verdict": "pass",
                "outcome": "completed", "trials": [], "interrupted": {interrupted}}}"#
        ))
        .expect("a chaos report summary")
    }

    #[test]
    fn a_finished_run_writes_interrupted_as_null_and_reads_as_not_interrupted() {
        assert_eq!(read("null").interrupted, None);
    }

    #[test]
    fn an_interrupted_run_reads_with_its_signal_or_as_a_flag() {
        assert_eq!(read(r#""SIGINT""#).interrupted.as_deref(), Some("SIGINT"));
        assert_eq!(read("true").interrupted.as_deref(), Some("interrupted"));
        assert_eq!(read("false").interrupted, None);
    }
}
