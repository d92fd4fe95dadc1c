//! gates: turns the rollout gates of an architecture decision into tests, runs them against
//! live infrastructure or snapshots, and writes libtest-style output, JUnit and JSON reports.

pub mod app;
pub mod chaos;
pub mod checks;
pub mod cli;
pub mod collect;
pub mod config;
pub mod demo;
pub mod quantity;
pub mod report;
pub mod runner;
pub mod selector;
pub mod state;
pub mod verdict;
