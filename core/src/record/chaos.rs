//! The record of one chaos run (`chaos-ENV-<ts>.json`): what was planned, what each probe
//! measured, the verdicts, and the moments in between. The chaos step writes it, the chaos
//! page is drawn from it, and gate 4's `chaos-report` check, `gates history` and the metrics
//! read it back: one type for all of them. The chaos journal lists the planned VMs in the
//! same words.
//!
//! Fields were added over time; a report from before one existed reads with it empty (and a
//! report from before `schema_version` without one), so every report a gates wrote still
//! reads, and reads back to the text it was read from.

use serde::{Deserialize, Serialize};

use super::event::Event;
use super::power::Issued;
use super::prediction::Comparison;
use super::probe::ProbeOutcome;
use super::split_brain::SignalOutcome;
pub use super::timeline::Moments;
use super::trial::{Tally, TrialResult};
use crate::state::provenance::Provenance;
use crate::verdict::Verdict;

/// Everything one chaos run found, in the order the file holds it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChaosRecord {
    /// The report format's version ([`crate::schema::SCHEMA_VERSION`]), first in the file;
    /// `None` in reports written before versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<u32>,
    pub environment: String,
    #[serde(default)]
    pub decision: String,
    #[serde(default)]
    pub gate_title: String,
    pub host: String,
    /// How the host was chosen.
    #[serde(default)]
    pub host_choice: String,
    pub mode: Mode,
    #[serde(default)]
    pub vms: Vec<PlannedVm>,
    /// VMs on the host that the run left running (other environments').
    #[serde(default)]
    pub untouched: Vec<String>,
    /// Wall-clock time of the timeline's zero, to the millisecond.
    pub started_at: String,
    pub finished_at: String,
    /// Seconds between two samples of a probe: the resolution of every measured interval.
    #[serde(default)]
    pub sample_interval: f64,
    #[serde(default)]
    pub moments: Moments,
    /// `completed`, `interrupted by SIGINT`, ...
    pub outcome: String,
    /// The signal that interrupted the run (`SIGINT`, `SIGTERM`); null when none did. An
    /// interrupted run restored early: its verdicts do not stand for gate 4.
    #[serde(default, deserialize_with = "signal_or_flag")]
    pub interrupted: Option<String>,
    pub verdict: Verdict,
    #[serde(default)]
    pub tally: Tally,
    pub trials: Vec<TrialResult>,
    #[serde(default)]
    pub probes: Vec<ProbeOutcome>,
    #[serde(default)]
    pub power_actions: Vec<Issued>,
    /// Who took over what: API VIP, L2 lease and etcd leader changes, in time order.
    #[serde(default)]
    pub handovers: Vec<Event>,
    /// The timeline's file name, beside this one.
    #[serde(default)]
    pub timeline_file: String,
    /// The cluster the run acted on, as read at preflight; gate 4 counts the report only
    /// for a cluster with the same identity and topology.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    /// The host-loss prediction for the host, beside what was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction: Option<Comparison>,
    /// A partition run's split-brain signals (API VIP, L2 announcement, etcd minority).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_brain: Option<Vec<SignalOutcome>>,
}

/// What the run did to the host's VMs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// The environment's VMs on the host lost power; other environments' kept running.
    EnvironmentVms,
    /// The whole host was shut down and woken again.
    WholeHost,
    /// The VMs kept running with their network links pulled.
    Partition,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::EnvironmentVms => "environment-vms",
            Mode::WholeHost => "whole-host",
            Mode::Partition => "partition",
        }
    }
}

impl ChaosRecord {
    /// Seconds from the restore's start to recovery, when both were seen.
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

/// One VM the plan powers off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedVm {
    pub vmid: u32,
    pub name: String,
    /// The Proxmox host it runs on.
    pub host: String,
    /// The Kubernetes node it carries.
    pub node: String,
    /// A partition: the network devices (`netN`) whose link the plan pulls, read and parsed
    /// before anything was touched. Empty for a power fault.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nets: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every chaos report under `fixtures/reports`: real runs on the lab, written by the
    /// chaos step before this type wrote them.
    const CAPTURED: [(&str, &str); 7] = [
        (
            "chaos-lab-20261201T140155Z.json",
            include_str!("../../../fixtures/reports/chaos-lab-20261201T140155Z.json"),
        ),
        (
            "history/chaos-lab-20261201T135809Z.json",
            include_str!("../../../fixtures/reports/history/chaos-lab-20261201T135809Z.json"),
        ),
        (
            "history/chaos-lab-20261201T135900Z.json",
            include_str!("../../../fixtures/reports/history/chaos-lab-20261201T135900Z.json"),
        ),
        (
            "history/chaos-lab-20261201T135934Z.json",
            include_str!("../../../fixtures/reports/history/chaos-lab-20261201T135934Z.json"),
        ),
        (
            "history/chaos-lab-20261201T135955Z.json",
            include_str!("../../../fixtures/reports/history/chaos-lab-20261201T135955Z.json"),
        ),
        (
            "history/chaos-lab-20261201T140009Z.json",
            include_str!("../../../fixtures/reports/history/chaos-lab-20261201T140009Z.json"),
        ),
        (
            "history/chaos-lab-20261201T140032Z.json",
            include_str!("../../../fixtures/reports/history/chaos-lab-20261201T140032Z.json"),
        ),
    ];

    #[test]
    fn every_captured_chaos_report_reads_back_and_writes_the_same_text() {
        for (name, text) in CAPTURED {
            let record: ChaosRecord =
                serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            let written = serde_json::to_string_pretty(&record).unwrap();
            assert!(written == text, "{name} is written differently:\n{written}");
        }
    }

    #[test]
    fn a_record_of_this_version_writes_it_first() {
        let (_, text) = CAPTURED[0];
        let mut record: ChaosRecord = serde_json::from_str(text).unwrap();
        record.schema_version = Some(crate::schema::SCHEMA_VERSION);
        let written = serde_json::to_string_pretty(&record).unwrap();
        let want = format!(
            "{{\n  \"schema_version\": {},\n{}",
            crate::schema::SCHEMA_VERSION,
            &text[2..]
        );
        assert!(written == want, "{written}");
    }

    fn with_interrupted(interrupted: &str) -> ChaosRecord {
        serde_json::from_str(&format!(
            r#"{{"environment": "lab", "host": "pve1", "mode": "environment-vms",
                "started_at": "2026-12-01T12:00:00.000Z", "finished_at": "2026-12-01T12:01:00.000Z",
                "verdict": "pass", "outcome": "completed", "trials": [], "interrupted": {interrupted}}}"#
        ))
        .expect("a chaos record")
    }

    #[test]
    fn a_finished_run_writes_interrupted_as_null_and_reads_as_not_interrupted() {
        let record = with_interrupted("null");
        assert_eq!(record.interrupted, None);
        let written = serde_json::to_value(&record).unwrap();
        assert_eq!(written["interrupted"], serde_json::Value::Null);
    }

    #[test]
    fn an_interrupted_run_reads_with_its_signal_or_as_a_flag() {
        assert_eq!(
            with_interrupted(r#""SIGINT""#).interrupted.as_deref(),
            Some("SIGINT")
        );
        assert_eq!(
            with_interrupted("true").interrupted.as_deref(),
            Some("interrupted")
        );
        assert_eq!(with_interrupted("false").interrupted, None);
    }
}
