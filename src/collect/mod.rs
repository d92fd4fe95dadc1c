//! Collectors: the only code that talks to a system for checks. Each fills a [`State`]
//! once; checks then evaluate it without I/O.
//!
//! [`State`]: crate::state::State

pub mod api;
pub mod kinds;
pub mod kube;
pub mod raw;
pub mod snapshot;
pub mod snapshot_writer;
