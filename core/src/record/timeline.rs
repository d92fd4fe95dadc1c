//! A chaos run's timeline (`chaos-ENV-<ts>.timeline.json`): every probe sample and every
//! event, at seconds since the run's start, for plotting and for comparing with other
//! sources.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::event::Event;
use super::seconds::millis;

/// Times on the run's timeline (seconds since `started_at`, to the millisecond).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Moments {
    pub fault: Option<f64>,
    pub restore: Option<f64>,
    pub running_again: Option<f64>,
    pub recovered: Option<f64>,
}

/// Every sample and event of one run. A reader draws what the file holds: a timeline written
/// before a field existed reads with it empty.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Timeline {
    #[serde(default)]
    pub environment: String,
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub started_at: String,
    #[serde(default)]
    pub moments: Moments,
    #[serde(default)]
    pub probes: BTreeMap<String, Vec<Sample>>,
    /// Per probe, the intervals in which it could not tell (down or up).
    #[serde(default)]
    pub unknown: BTreeMap<String, Vec<Interval>>,
    #[serde(default)]
    pub events: Vec<Event>,
}

/// What one probe saw at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", content = "detail", rename_all = "lowercase")]
pub enum Observation {
    Up,
    Down(String),
    Unknown(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// Since the start of the run.
    #[serde(with = "millis")]
    pub at: Duration,
    pub observation: Observation,
}

/// `[start, end)` since the start of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interval {
    #[serde(with = "millis")]
    pub start: Duration,
    #[serde(with = "millis")]
    pub end: Duration,
}

impl Interval {
    pub fn length(&self) -> Duration {
        self.end.saturating_sub(self.start)
    }
}

impl std::fmt::Display for Interval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "[{:.1}s, {:.1}s) {:.1}s",
            self.start.as_secs_f64(),
            self.end.as_secs_f64(),
            self.length().as_secs_f64()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_captured_runs_timeline_reads_back_and_writes_the_same_text() {
        let file =
            include_str!("../../../fixtures/reports/chaos-lab-20261201T140155Z.timeline.json");
        let timeline: Timeline = serde_json::from_str(file).expect("a timeline");
        assert!(!timeline.events.is_empty() && !timeline.probes.is_empty());
        assert_eq!(serde_json::to_string_pretty(&timeline).unwrap(), file);
    }
}
