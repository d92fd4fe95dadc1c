//! The reports of a chaos run: `reports/chaos-ENV-<UTC ts>.json` (everything, and what
//! `gates check` reads back for gate 4), `.xml` (JUnit, gate 4's testcases, in the Jenkins
//! junit-10.xsd profile) and `.timeline.json` (every probe sample and event on one timeline).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use super::budget::ProbeOutcome;
use super::events::Event;
use super::journal::PlannedVm;
use super::power::Issued;
use super::timeline::Sample;
use crate::report::junit::JunitWriter;
use crate::runner::{Tally, TrialResult};
use crate::verdict::Verdict;

/// Times on the run's timeline (seconds since `started_at`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Moments {
    pub fault: Option<f64>,
    pub restore: Option<f64>,
    pub running_again: Option<f64>,
    pub recovered: Option<f64>,
}

/// Everything one chaos run found.
#[derive(Debug, Clone, Serialize)]
pub struct ChaosReport {
    pub environment: String,
    pub decision: String,
    pub gate_title: String,
    pub host: String,
    /// How the host was chosen.
    pub host_choice: String,
    /// `environment-vms` or `whole-host`.
    pub mode: String,
    pub vms: Vec<PlannedVm>,
    /// VMs on the host that the run left running (other environments').
    pub untouched: Vec<String>,
    /// Wall-clock time of the timeline's zero, to the millisecond.
    pub started_at: String,
    pub finished_at: String,
    /// Seconds between two samples of a probe: the resolution of every measured interval.
    pub sample_interval: f64,
    pub moments: Moments,
    /// `completed`, `interrupted by SIGINT`, ...
    pub outcome: String,
    pub verdict: Verdict,
    pub tally: Tally,
    pub trials: Vec<TrialResult>,
    pub probes: Vec<ProbeOutcome>,
    pub power_actions: Vec<Issued>,
    /// Who took over what: API VIP, L2 lease and etcd leader changes, in time order.
    pub handovers: Vec<Event>,
    pub timeline_file: String,
    /// The host-loss prediction for the host, beside what was measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prediction: Option<super::prediction::Comparison>,
}

/// The event kinds that say who took over from whom.
pub const HANDOVER_KINDS: [&str; 3] = [
    "api-vip-holder-changed",
    "lease-holder-changed",
    "etcd-leader-changed",
];

/// Every sample and event, for plotting and for comparing with other sources.
#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    pub environment: String,
    pub host: String,
    pub started_at: String,
    pub moments: Moments,
    pub probes: BTreeMap<String, Vec<Sample>>,
    pub events: Vec<Event>,
}

pub fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub fn seconds(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// `reports/chaos-lab-20261129T201500Z` (extensions added by the writer).
pub fn stem(dir: &Path, environment: &str, at: DateTime<Utc>) -> PathBuf {
    dir.join(format!(
        "chaos-{environment}-{}",
        at.format("%Y%m%dT%H%M%SZ")
    ))
}

/// Write the three files (and `--junit` when given); returns the paths written.
pub fn write(
    report: &ChaosReport,
    timeline: &Timeline,
    stem: &Path,
    junit: Option<&Path>,
) -> Result<Vec<PathBuf>, String> {
    let xml = render_junit(report);
    let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    let timeline_json = serde_json::to_string_pretty(timeline).map_err(|e| e.to_string())?;
    let mut files = vec![
        (stem.with_extension("xml"), xml.clone()),
        (stem.with_extension("json"), json),
        (stem.with_extension("timeline.json"), timeline_json),
    ];
    if let Some(path) = junit {
        files.push((path.to_path_buf(), xml));
    }
    let mut written = Vec::new();
    for (path, text) in files {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// JUnit for gate 4: one suite `adr007.gate4`, host, VMs and measured outages as suite
/// properties (the schema allows none on testcases), the intervals in failure bodies.
pub fn render_junit(report: &ChaosReport) -> String {
    let total: f64 = report.trials.iter().map(|t| t.duration.as_secs_f64()).sum();
    let classname = format!("{}.gate4", report.decision.replace('-', ""));
    let mut junit = JunitWriter::new(
        &format!("gates chaos {} {}", report.decision, report.environment),
        &report.tally,
        total,
    );
    let stamp = report.started_at.get(..19).unwrap_or(&report.started_at);
    junit.start_suite(&classname, &report.tally, total, stamp);
    let vms = report
        .vms
        .iter()
        .map(|v| format!("{} {} (node {})", v.vmid, v.name, v.node))
        .collect::<Vec<_>>()
        .join(", ");
    let mut properties: Vec<(String, String)> = vec![
        ("environment".into(), report.environment.clone()),
        ("decision".into(), report.decision.clone()),
        ("gate".into(), report.gate_title.clone()),
        ("host".into(), report.host.clone()),
        ("host-choice".into(), report.host_choice.clone()),
        ("mode".into(), report.mode.clone()),
        ("vms".into(), vms),
        (
            "untouched".into(),
            if report.untouched.is_empty() {
                "none".into()
            } else {
                report.untouched.join(", ")
            },
        ),
        ("started-at".into(), report.started_at.clone()),
        ("outcome".into(), report.outcome.clone()),
    ];
    for probe in &report.probes {
        properties.push((
            format!("outage.{}", probe.probe),
            format!(
                "longest {:.3}s, total {:.3}s, {} interval(s); budget longest {:.3}s, total {:.3}s",
                probe.longest.as_secs_f64(),
                probe.total.as_secs_f64(),
                probe.outages.len(),
                probe.budget_longest.as_secs_f64(),
                probe.budget_total.as_secs_f64()
            ),
        ));
    }
    if !report.handovers.is_empty() {
        let handovers: Vec<String> = report
            .handovers
            .iter()
            .map(|e| {
                format!(
                    "{:.1}s {} {}: {}",
                    e.at.as_secs_f64(),
                    e.kind,
                    e.subject,
                    e.detail
                )
            })
            .collect();
        properties.push(("handovers".into(), handovers.join("; ")));
    }
    junit.properties(&properties);
    for case in &report.trials {
        junit.testcase(case, &classname);
    }
    junit.end_suite();
    junit.finish()
}

pub use gates_core::state::{Summary, SummaryTrial};

/// The newest `chaos-ENV-*.json` under `dir` (by the timestamp in its name), read back.
/// `Ok(None)` when there is none.
pub fn newest(dir: &Path, environment: &str) -> Result<Option<Summary>, String> {
    let prefix = format!("chaos-{environment}-");
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(format!("{}: {err}", dir.display())),
    };
    let newest = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| {
            name.strip_prefix(&prefix)
                .and_then(|rest| rest.strip_suffix(".json"))
                .is_some_and(is_stamp)
        })
        .max();
    let Some(name) = newest else {
        return Ok(None);
    };
    let path = dir.join(&name);
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut summary: Summary =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    summary.file = path.display().to_string();
    Ok(Some(summary))
}

/// `20261129T201500Z`: the stamp alone, so `chaos-lab-production-…` is not read for `lab`.
fn is_stamp(text: &str) -> bool {
    text.len() == 16
        && text.ends_with('Z')
        && text.as_bytes()[8] == b'T'
        && text
            .bytes()
            .enumerate()
            .all(|(i, b)| i == 8 || i == 15 || b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_environments_reports_are_read_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let body = |host: &str| {
            format!(
                r#"{{"environment":"lab","host":"{host}","started_at":"2026-11-29T20:00:00.000Z","finished_at":"2026-11-29T20:01:00.000Z","verdict":"pass","outcome":"completed","trials":[]}}"#
            )
        };
        fs::write(
            dir.path().join("chaos-lab-20261128T200000Z.json"),
            body("pve1"),
        )
        .unwrap();
        fs::write(
            dir.path().join("chaos-lab-20261129T200000Z.json"),
            body("pve2"),
        )
        .unwrap();
        fs::write(
            dir.path()
                .join("chaos-lab-production-20261130T200000Z.json"),
            body("pve9"),
        )
        .unwrap();
        fs::write(
            dir.path().join("chaos-lab-20261130T200000Z.timeline.json"),
            "{}",
        )
        .unwrap();
        let got = newest(dir.path(), "lab").unwrap().unwrap();
        assert_eq!(got.host, "pve2");
        assert!(newest(dir.path(), "staging").unwrap().is_none());
        assert!(
            newest(&dir.path().join("missing"), "lab")
                .unwrap()
                .is_none()
        );
    }
}
