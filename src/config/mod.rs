//! Configuration: environments and gate definitions under `gates/`, validated on load with
//! errors that name the file, line, column and key, and suggest the nearest valid choice.

mod duration;
mod environment;
mod error;
mod gate;
mod load;
mod yaml;

pub use duration::Duration;
pub use environment::{
    ApiSpec, Budget, Budgets, CapacityBasis, CapacitySpec, ChaosSpec, Environment, IngressSpec,
    IngressUrl, KubeAccess, NodesSpec, ProxmoxAccess, ServiceRef, TalosAccess, VmScope,
};
pub use error::{ConfigError, ConfigErrors, nearest};
pub use gate::{EnvironmentSet, Gate};
pub use load::Config;

#[cfg(test)]
mod tests;
