//! A chaos run as its reports on disk tell it: `chaos-ENV-<ts>.json` and `.timeline.json`,
//! read back. The HTML page, the metrics and the history are drawn from these files rather
//! than from the chaos step's live structures, so they work the same for today's run, for a
//! run from last month and for a report copied off a CI artifact, and the chaos step can be
//! reshaped without touching them. Fields a report does not carry are left empty, never guessed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The `.json` report of one chaos run (the parts the readers here need).
#[derive(Debug, Clone, Deserialize)]
pub struct ChaosView {
    pub environment: String,
    #[serde(default)]
    pub decision: String,
    #[serde(default)]
    pub gate_title: String,
    pub host: String,
    #[serde(default)]
    pub host_choice: String,
    #[serde(default)]
    pub mode: String,
    #[serde(default)]
    pub vms: Vec<VmView>,
    #[serde(default)]
    pub untouched: Vec<String>,
    pub started_at: String,
    #[serde(default)]
    pub finished_at: String,
    #[serde(default)]
    pub sample_interval: f64,
    #[serde(default)]
    pub moments: MomentsView,
    #[serde(default)]
    pub outcome: String,
    /// `pass`, `fail`, `error`.
    pub verdict: String,
    #[serde(default)]
    pub trials: Vec<TrialView>,
    #[serde(default)]
    pub probes: Vec<ProbeView>,
    #[serde(default)]
    pub power_actions: Vec<PowerView>,
    #[serde(default)]
    pub handovers: Vec<EventView>,
    #[serde(default)]
    pub timeline_file: String,
    /// The host-loss prediction beside the measurement; absent in reports of runs the model
    /// could not predict, and in reports written before the chaos step compared them.
    #[serde(default)]
    pub prediction: Option<PredictionView>,
    /// A partition run's split-brain signals; absent for a power loss.
    #[serde(default)]
    pub split_brain: Option<Vec<SignalView>>,
}

/// One split-brain signal as judged.
#[derive(Debug, Clone, Deserialize)]
pub struct SignalView {
    pub signal: String,
    #[serde(default)]
    pub samples: usize,
    pub finding: SignalFindingView,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SignalFindingView {
    pub verdict: String,
    #[serde(default)]
    pub summary: String,
    #[serde(default)]
    pub evidence: Vec<String>,
}

/// The report's `prediction`: what the host-loss model expected for the target host, and
/// for each probe and each moved pod what was measured and whether they agree.
#[derive(Debug, Clone, Deserialize)]
pub struct PredictionView {
    #[serde(default)]
    pub host: String,
    /// `survives`, `degraded`, `unknown`, `lost`.
    #[serde(default)]
    pub outcome: String,
    #[serde(default)]
    pub reasons: Vec<ReasonView>,
    #[serde(default)]
    pub probes: Vec<ComparedView>,
    #[serde(default)]
    pub pods: Vec<ComparedView>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ReasonView {
    #[serde(default)]
    pub severity: String,
    pub text: String,
}

/// One probe (`probe`) or one moved pod (`pod`, `controller`), predicted beside measured;
/// `agrees` is absent where the model makes no claim.
#[derive(Debug, Clone, Deserialize)]
pub struct ComparedView {
    #[serde(default)]
    pub probe: String,
    #[serde(default)]
    pub pod: String,
    #[serde(default)]
    pub controller: String,
    pub predicted: String,
    pub measured: String,
    #[serde(default)]
    pub agrees: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct VmView {
    pub vmid: u32,
    pub name: String,
    #[serde(default)]
    pub node: String,
}

/// Seconds since the run's start.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct MomentsView {
    pub fault: Option<f64>,
    pub restore: Option<f64>,
    pub running_again: Option<f64>,
    pub recovered: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TrialView {
    pub name: String,
    pub verdict: String,
    #[serde(default)]
    pub summary: String,
    #[serde(default)]
    pub evidence: Vec<String>,
    #[serde(default)]
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ProbeView {
    pub probe: String,
    #[serde(default)]
    pub samples: usize,
    #[serde(default)]
    pub outages: Vec<IntervalView>,
    #[serde(default)]
    pub unknown: Vec<IntervalView>,
    #[serde(default)]
    pub longest: f64,
    #[serde(default)]
    pub total: f64,
    #[serde(default)]
    pub budget_longest: f64,
    #[serde(default)]
    pub budget_total: f64,
    /// The probe's verdict, from its finding.
    #[serde(default, rename = "finding")]
    pub finding: Option<FindingView>,
}

impl ProbeView {
    pub fn verdict(&self) -> &str {
        self.finding
            .as_ref()
            .map_or("error", |f| f.verdict.as_str())
    }

    pub fn unknown_total(&self) -> f64 {
        // A fold from +0.0: an empty f64 sum is -0.0, which prints as `-0`.
        self.unknown
            .iter()
            .map(IntervalView::length)
            .fold(0.0, |a, b| a + b)
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct FindingView {
    pub verdict: String,
    #[serde(default)]
    pub summary: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct IntervalView {
    pub start: f64,
    pub end: f64,
}

impl IntervalView {
    pub fn length(&self) -> f64 {
        (self.end - self.start).max(0.0)
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct PowerView {
    pub action: String,
    #[serde(default)]
    pub vmid: Option<u32>,
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub result: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct EventView {
    pub at: f64,
    pub kind: String,
    #[serde(default)]
    pub subject: String,
    #[serde(default)]
    pub detail: String,
}

/// The `.timeline.json` of a run: every sample and event.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TimelineView {
    #[serde(default)]
    pub probes: BTreeMap<String, Vec<SampleView>>,
    #[serde(default)]
    pub events: Vec<EventView>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SampleView {
    pub at: f64,
    pub observation: ObservationView,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ObservationView {
    /// `up`, `down`, `unknown`.
    pub state: String,
    #[serde(default)]
    pub detail: String,
}

impl ChaosView {
    /// Seconds from the start to recovery after the restore began, when both were seen.
    pub fn recovery_seconds(&self) -> Option<f64> {
        match (self.moments.restore, self.moments.recovered) {
            (Some(restore), Some(recovered)) if recovered >= restore => Some(recovered - restore),
            _ => None,
        }
    }

    /// Wall-clock length of the run, from its two timestamps.
    pub fn duration_seconds(&self) -> Option<f64> {
        let start = chrono::DateTime::parse_from_rfc3339(&self.started_at).ok()?;
        let end = chrono::DateTime::parse_from_rfc3339(&self.finished_at).ok()?;
        let ms = (end - start).num_milliseconds();
        (ms >= 0).then(|| ms as f64 / 1000.0)
    }
}

/// Read `<stem>.json` and, when present, `<stem>.timeline.json`.
pub fn read(stem: &Path) -> Result<(ChaosView, TimelineView), String> {
    let report_path = stem.with_extension("json");
    let report: ChaosView = parse(&report_path)?;
    let timeline_path = timeline_path(stem, &report);
    let timeline = if timeline_path.exists() {
        parse(&timeline_path)?
    } else {
        TimelineView::default()
    };
    Ok((report, timeline))
}

fn timeline_path(stem: &Path, report: &ChaosView) -> PathBuf {
    match stem.parent() {
        Some(dir) if !report.timeline_file.is_empty() => dir.join(&report.timeline_file),
        _ => stem.with_extension("timeline.json"),
    }
}

/// A report read back: refused by name when a newer gates wrote it (`schema_version`), else
/// decoded as `T`.
pub fn parse<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, String> {
    gates_engine::report_files::read(path).map_err(|err| err.to_string())
}
