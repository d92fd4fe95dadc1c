//! Observe: probes sampled on one timeline from before the fault until recovery, the events
//! the cluster shows meanwhile, and the recovery criteria read from a fresh state.

pub mod baseline;
pub mod events;
pub mod leaders;
pub mod observers;
pub mod outage;
pub mod probes;
pub mod recover;
pub mod recovery;
pub mod sampler;
pub mod split_brain;
pub mod talos_pool;
pub mod timeline;
pub mod vip;
