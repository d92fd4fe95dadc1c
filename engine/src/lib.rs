//! The engine of gates: reads the configuration, collects an environment's state (live, from
//! snapshots, from its repository), names and selects its trials and evaluates them. It
//! prints nothing and knows no command line: the `gates` crate parses arguments and reports.

pub mod chaos;
pub mod check;
pub mod collect;
pub mod config;
pub mod fleet;
pub mod policy_report;
pub mod predict;
pub mod promotion;
pub mod record;
pub mod repo;
pub mod report_files;
pub mod runner;
pub mod selection;
pub mod watch;

// The pure core, under the paths this code has always used.
pub use gates_core::{checks, cluster, hostloss, quantity, selector, state, verdict, words};
