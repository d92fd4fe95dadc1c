//! gates: turns the rollout gates of an architecture decision into tests, runs them against
//! live infrastructure or snapshots, and writes libtest-style output, JUnit and JSON reports.

pub mod checks;
pub mod config;
pub mod quantity;
pub mod selector;
pub mod state;
pub mod verdict;
