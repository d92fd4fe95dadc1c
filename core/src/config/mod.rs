//! Configuration types: environments and gate definitions, as validated values. Reading the
//! files and locating errors in them is the `gates` crate's loader; these are the shapes.

mod duration;
mod environment;
mod error;
mod gate;
mod repo;

pub use duration::Duration;
pub use environment::{
    ApiSpec, Budget, Budgets, CapacityBasis, CapacitySpec, ChaosSpec, DEFAULT_CPU_QUERY,
    DEFAULT_MEMORY_QUERY, Environment, HostDomains, IngressSpec, IngressUrl, KubeAccess,
    LoadQueries, LoadStatistic, NodesSpec, PrometheusLoad, ProxmoxAccess, ServiceRef, TalosAccess,
    VmScope,
};
pub use error::{ConfigError, ConfigErrors, nearest};
pub use gate::{EnvironmentSet, Gate, GateRole};
pub use repo::{RepoSpec, RoleTags, TemplateEnv};
