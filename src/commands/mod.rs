//! One file per command: each takes its parsed arguments and the loaded configuration, runs
//! the engine, and prints through the reporters under `output/`.

pub mod adr;
pub mod chaos;
pub mod chart_values;
pub mod check;
pub mod completions;
#[cfg(feature = "lab")]
pub mod demo;
pub mod fleet;
pub mod guard;
pub mod history;
pub mod list;
pub mod predict;
pub mod snapshot;
pub mod validate;
pub mod watch;
