//! Plan: what a run may touch and whether it may start. The target host and its VMs (the
//! blast radius), the preflight refusals, and how a whole host is woken again. Nothing here
//! writes anything.

pub mod admit;
pub mod host_power;
pub mod partition;
pub mod phase;
pub mod preflight;
pub mod target;
pub mod timings;

pub use target::*;

/// Why the plan refuses the run (the host, its VMs, a partition's devices, whole-host mode): a
/// sentence said among the preflight's reasons.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

impl From<String> for Refusal {
    fn from(why: String) -> Self {
        Refusal(why)
    }
}

impl From<&str> for Refusal {
    fn from(why: &str) -> Self {
        Refusal(why.to_string())
    }
}
