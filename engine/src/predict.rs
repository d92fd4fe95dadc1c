//! The host-loss prediction's entry points over a collected state: which controllers the
//! gates protect by name, and the model run for every host (or one), for a power loss or a
//! partition. `gates predict` and the
//! chaos step's refusal both start here.

use crate::config::{Config, Environment};
use crate::hostloss::{self, Fault, Input, Prediction, ProtectedRef};
use crate::state::State;

/// The controllers the gates protect by name, as the host-loss model takes them.
pub fn protected(config: &Config) -> Vec<ProtectedRef> {
    crate::cluster::protected_controllers(&config.gates)
        .into_iter()
        .map(|c| ProtectedRef {
            name: c.name,
            namespace: c.namespace,
            selector: c.selector,
        })
        .collect()
}

/// The prediction of a power loss over an already collected state.
pub fn over(config: &Config, env: &Environment, state: &State, host: Option<&str>) -> Prediction {
    over_fault(config, env, state, host, Fault::Power)
}

/// The prediction of `fault` over an already collected state.
pub fn over_fault(
    config: &Config,
    env: &Environment,
    state: &State,
    host: Option<&str>,
    fault: Fault,
) -> Prediction {
    let named = protected(config);
    let input = Input {
        env,
        state,
        protected: &named,
        pause: &gates_core::pause::NEVER,
    };
    hostloss::predict_fault(input, host, fault)
}
