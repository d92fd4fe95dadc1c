//! The chaos step (gate 4): preflight, plan, journal, inject, observe, restore, verify.

pub mod budget;
pub mod journal;
pub mod sampler;
pub mod timeline;
