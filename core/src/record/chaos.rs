//! The record of one chaos run (`chaos-ENV-<ts>.json`): what was planned, what each probe
//! measured, the verdicts, and the moments in between.

use serde::{Deserialize, Serialize};

/// Times on the run's timeline (seconds since `started_at`, to the millisecond).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Moments {
    pub fault: Option<f64>,
    pub restore: Option<f64>,
    pub running_again: Option<f64>,
    pub recovered: Option<f64>,
}
