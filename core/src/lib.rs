//! The pure core of gates: what a verdict is, what was collected about an environment, the
//! checks that judge it, and the configuration that names them.
//!
//! Nothing here talks to a system, reads a file or a clock: collectors, clients, the chaos
//! step, reporters and the command line live in the `gates` crate and depend on this one,
//! never the reverse. Cargo enforces it: this crate has no runtime or client in its
//! dependencies (`tests/purity.rs` proves it against `cargo tree`).

pub mod chart_values;
pub mod checks;
pub mod cluster;
pub mod config;
pub mod declared;
pub mod exit;
pub mod guard;
pub mod hostloss;
pub mod load;
pub mod meta;
pub mod pause;
pub mod quantity;
pub mod record;
pub mod requests;
pub mod schema;
pub mod selector;
pub mod sentence_error;
pub mod side_by_side;
pub mod state;
pub mod trials;
pub mod verdict;
pub mod words;
pub mod yaml;
