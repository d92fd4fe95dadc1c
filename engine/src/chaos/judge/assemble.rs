//! The report and the timeline of a run, assembled from the plan, the measurements and the
//! verdicts.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Utc};

use super::report::{self, ChaosRecord, Mode, Moments, Timeline};
use super::verdicts::Judged;
use crate::chaos::events::Event;
use crate::chaos::plan::{self, Target};
use crate::chaos::power::Issued;
use crate::chaos::probes::Probe;
use crate::chaos::timeline::Sample;
use crate::config::Config;

pub struct Assembly<'a> {
    pub config: &'a Config,
    pub environment: &'a str,
    pub target: &'a Target,
    pub reports: &'a Path,
    /// The report files' path without extension, as claimed by the run.
    pub stem: &'a Path,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub sample_interval: std::time::Duration,
    pub moments: Moments,
    pub probes: &'a [Probe],
    pub samples: Vec<Vec<Sample>>,
    pub issued: Vec<Issued>,
    pub events: Vec<Event>,
    /// The host-loss prediction for the target, compared with what was measured.
    pub prediction: Option<crate::chaos::prediction::Comparison>,
    /// Which cluster the run acted on (environment, identity, topology, time).
    pub provenance: Option<crate::state::provenance::Provenance>,
}

pub fn assemble(a: Assembly<'_>, judged: &Judged) -> (ChaosRecord, Timeline) {
    // The stem the run claimed once (`report::stem` claims a new name on every call).
    let timeline_file = a
        .stem
        .with_extension("timeline.json")
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let target = a.target;
    let chaos_report = ChaosRecord {
        schema_version: Some(gates_core::schema::SCHEMA_VERSION),
        environment: a.environment.to_string(),
        decision: decision(a.config),
        gate_title: a
            .config
            .gates
            .iter()
            .find(|g| g.number == 4)
            .map(|g| g.title.clone())
            .unwrap_or_else(|| "A host failure leaves the cluster available.".into()),
        host: target.host.clone(),
        host_choice: target.reason.clone(),
        mode: match (target.fault, target.whole_host) {
            (crate::chaos::journal::FaultKind::Partition, _) => Mode::Partition,
            (crate::chaos::journal::FaultKind::Power, true) => Mode::WholeHost,
            (crate::chaos::journal::FaultKind::Power, false) => Mode::EnvironmentVms,
        },
        vms: target.vms.clone(),
        untouched: target
            .bystanders
            .iter()
            .map(plan::describe_bystander)
            .collect(),
        started_at: report::timestamp(a.started_at),
        finished_at: report::timestamp(a.finished_at),
        sample_interval: gates_core::record::seconds::rounded(a.sample_interval),
        moments: a.moments.clone(),
        outcome: judged.outcome.clone(),
        interrupted: judged.interrupted.map(str::to_string),
        verdict: judged.verdict,
        tally: judged.tally,
        trials: judged.trials.clone(),
        probes: judged.outcomes.clone(),
        power_actions: a.issued,
        handovers: a
            .events
            .iter()
            .filter(|e| report::HANDOVER_KINDS.contains(&e.kind.as_str()))
            .cloned()
            .collect(),
        timeline_file,
        provenance: a.provenance,
        prediction: a.prediction,
        split_brain: judged.split_brain.clone(),
    };
    let timeline = Timeline {
        environment: a.environment.to_string(),
        host: target.host.clone(),
        started_at: report::timestamp(a.started_at),
        moments: a.moments,
        probes: a
            .probes
            .iter()
            .zip(a.samples)
            .map(|(p, s)| (p.name.clone(), s))
            .collect::<BTreeMap<_, _>>(),
        unknown: judged
            .outcomes
            .iter()
            .filter(|o| !o.unknown.is_empty())
            .map(|o| (o.probe.clone(), o.unknown.clone()))
            .collect(),
        events: a.events,
    };
    (chaos_report, timeline)
}

/// The decision the gates come from (`adr-007`), for the JUnit classname.
pub fn decision(config: &Config) -> String {
    config
        .gates
        .first()
        .and_then(|g| g.file.parent())
        .and_then(|dir| dir.file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "gates".to_string())
}
