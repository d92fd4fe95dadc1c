//! The reports of a chaos run: `reports/chaos-ENV-<UTC ts>.json` (everything, and what
//! `gates check` reads back for gate 4), `.xml` (JUnit), `.timeline.json` (every probe sample
//! and event on one timeline) and `.html`. The run assembles the record and the timeline and
//! claims the files' name; its reporters write them.

use std::path::{Path, PathBuf};

use chrono::{DateTime, SecondsFormat, Utc};

pub use gates_core::record::chaos::{ChaosRecord, Mode, Moments};
pub use gates_core::record::event::HANDOVER_KINDS;
pub use gates_core::record::timeline::Timeline;

pub fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// `reports/chaos-lab-20261129T201500Z` (extensions added by the writer), claimed so that
/// a second run in the same second writes `...Z-2` instead of overwriting this one.
pub fn stem(dir: &Path, environment: &str, at: DateTime<Utc>) -> PathBuf {
    crate::report_files::claim(
        &dir.join(format!(
            "chaos-{environment}-{}",
            at.format("%Y%m%dT%H%M%SZ")
        )),
        "json",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_chaos_runs_in_the_same_second_keep_both_reports() {
        let dir = tempfile::tempdir().unwrap();
        let at = DateTime::parse_from_rfc3339("2026-11-29T20:15:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let first = stem(dir.path(), "lab", at);
        let second = stem(dir.path(), "lab", at);
        assert_ne!(first, second);
        assert!(second.ends_with("chaos-lab-20261129T201500Z-2"));
    }
}
