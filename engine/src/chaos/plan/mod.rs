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

gates_core::sentence_error! {
    /// Why the plan refuses the run (the host, its VMs, a partition's devices, whole-host mode): a
    /// sentence said among the preflight's reasons.
    pub struct Refusal;
}
