//! What one probe of a chaos run measured, against its budget: the run's evidence per probe.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::seconds::{millis, rounded};
use super::timeline::Interval;
use crate::verdict::Finding;

/// Everything a probe measured, and what that means against its budget. The fields after
/// `probe` were added over time; a report without one reads with it empty.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbeOutcome {
    pub probe: String,
    #[serde(default)]
    pub samples: usize,
    /// The first and last sample's time: what the probe measured. Not written: a record read
    /// back from a file has none.
    #[serde(skip)]
    pub samples_span: Option<(Duration, Duration)>,
    #[serde(default)]
    pub outages: Vec<Interval>,
    #[serde(default)]
    pub unknown: Vec<Interval>,
    /// The unknown intervals an API outage holds: the API's downtime, judged by its probe.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown_during_api_outage: Vec<Interval>,
    /// The longest and total time the probe could not tell.
    #[serde(default, with = "millis")]
    pub unknown_longest: Duration,
    #[serde(default, with = "millis")]
    pub unknown_total: Duration,
    #[serde(default, with = "millis")]
    pub longest: Duration,
    #[serde(default, with = "millis")]
    pub total: Duration,
    #[serde(default, with = "millis")]
    pub budget_longest: Duration,
    #[serde(default, with = "millis")]
    pub budget_total: Duration,
    #[serde(default = "no_finding")]
    pub finding: Finding,
}

impl ProbeOutcome {
    /// The seconds the probe could not tell, added up from its unknown intervals as the file
    /// holds them (each to the millisecond): what the chaos page and the metrics show.
    pub fn unknown_seconds(&self) -> f64 {
        // A fold from +0.0: an empty f64 sum is -0.0, which prints as `-0`.
        self.unknown
            .iter()
            .map(|i| (rounded(i.end) - rounded(i.start)).max(0.0))
            .fold(0.0, |a, b| a + b)
    }
}

/// A probe's finding in a report that holds none: nothing was judged, so nothing passed.
fn no_finding() -> Finding {
    Finding::error("the report holds no finding for this probe")
}
