//! Configuration: environments and gate definitions under `gates/`, validated on load with
//! errors that name the file, line, column and key.

mod duration;
mod environment;

pub use duration::Duration;
pub use environment::{
    ApiSpec, CapacityBasis, CapacitySpec, ChaosSpec, Environment, IngressSpec, IngressUrl,
    KubeAccess, NodesSpec, ProxmoxAccess, ServiceRef, TalosAccess, VmScope,
};
