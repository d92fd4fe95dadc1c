//! The record of one chaos run (`chaos-ENV-<ts>.json`): what was planned, what each probe
//! measured, the verdicts, and the moments in between. The chaos journal lists the planned
//! VMs in the same words.

use serde::{Deserialize, Serialize};

/// Times on the run's timeline (seconds since `started_at`, to the millisecond).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Moments {
    pub fault: Option<f64>,
    pub restore: Option<f64>,
    pub running_again: Option<f64>,
    pub recovered: Option<f64>,
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
