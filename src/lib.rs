//! gates: turns the rollout gates of an architecture decision into tests, runs them against
//! live infrastructure or snapshots, and writes libtest-style output, JUnit and JSON reports.

pub mod app;
pub mod cli;
pub mod commands;
pub mod error;
pub mod fuzzing;
pub mod output;
pub mod streams;
pub mod version;

// The engine and the pure core, under the paths the rest of this crate has always used.
pub use gates_core::{checks, hostloss, quantity, selector, state, verdict, words};
pub use gates_engine::{collect, config, promotion, repo, runner, selection};
