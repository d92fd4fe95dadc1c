//! A chaos run's `prediction`: what the host-loss model expected for the target host, beside
//! what was measured, per probe and per moved pod.

use serde::{Deserialize, Serialize};

use crate::hostloss::{Outcome, Reason};

/// The report's `prediction` section.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    pub host: String,
    pub outcome: Outcome,
    pub reasons: Vec<Reason>,
    pub probes: Vec<ProbeComparison>,
    pub pods: Vec<PodComparison>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbeComparison {
    pub probe: String,
    pub predicted: String,
    pub measured: String,
    /// Whether the measurement agrees: an outage where one was predicted, none where none was.
    /// `None` when the model makes no claim about the probe.
    pub agrees: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PodComparison {
    pub pod: String,
    pub controller: String,
    /// `talos-stg-cp-02 after 300s`, `nowhere: 0/3 nodes are available: ...`
    pub predicted: String,
    /// `talos-stg-cp-02 after 4m12s (kube-system/coredns-xyz)`, or why it was not seen.
    pub measured: String,
    pub agrees: Option<bool>,
}
