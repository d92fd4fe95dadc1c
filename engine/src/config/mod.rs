//! Configuration: environments and gate definitions under `gates/`, validated on load with
//! errors that name the file, line, column and key, and suggest the nearest valid choice.
//! The types live in the pure core (`gates_core::config`); reading files is done here.

mod invisible;
mod load;
mod node_de;
mod paths;
mod selectors;
pub mod spans;
mod validate;
mod yaml;

pub use gates_core::config::*;
pub use load::{Config, UnknownEnvironment};
pub use paths::resolve;

#[cfg(test)]
mod tests;
