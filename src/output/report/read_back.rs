//! Reports read back from disk: the chaos page redrawn from a run copied off a CI artifact,
//! `gates history` over last month's runs, the metrics of the chaos run that just wrote its
//! files. They are read as the types that wrote them (`gates_core::record`), so a reader
//! sees what the run saw; a report a newer gates wrote is refused by its version.

use std::path::{Path, PathBuf};

use gates_core::record::chaos::ChaosRecord;
use gates_core::record::timeline::Timeline;

/// Read `<stem>.json` and, when present, its timeline (an empty one when it is missing).
pub fn chaos(stem: &Path) -> Result<(ChaosRecord, Timeline), String> {
    let record: ChaosRecord = parse(&stem.with_extension("json"))?;
    let timeline_path = timeline_path(stem, &record);
    let timeline = if timeline_path.exists() {
        parse(&timeline_path)?
    } else {
        Timeline::default()
    };
    Ok((record, timeline))
}

/// The file the record names, beside it; `<stem>.timeline.json` when it names none.
fn timeline_path(stem: &Path, record: &ChaosRecord) -> PathBuf {
    match stem.parent() {
        Some(dir) if !record.timeline_file.is_empty() => dir.join(&record.timeline_file),
        _ => stem.with_extension("timeline.json"),
    }
}

/// A report read back: refused by name when a newer gates wrote it (`schema_version`), else
/// decoded as `T`.
pub fn parse<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, String> {
    gates_engine::report_files::read(path).map_err(|err| err.to_string())
}
