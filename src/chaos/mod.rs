//! The chaos step (gate 4): preflight, plan, journal, inject, observe, restore, verify.

pub mod budget;
pub mod journal;
pub mod sampler;
pub mod timeline;

use crate::cli::{ChaosArgs, RecoverArgs};
use crate::config::{Config, Environment};

/// Why a chaos run or a recovery stopped before it could report verdicts.
#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    #[error("{0}")]
    Refused(String),
}

impl ChaosError {
    pub fn exit_code(&self) -> u8 {
        match self {
            ChaosError::Refused(_) => 2,
        }
    }
}

/// `gates chaos ENV`.
pub async fn run(_config: &Config, env: &Environment, _args: ChaosArgs) -> Result<u8, ChaosError> {
    Err(ChaosError::Refused(format!(
        "the chaos step for {} is being built",
        env.name
    )))
}

/// `gates recover ENV`.
pub async fn recover(
    _config: &Config,
    env: &Environment,
    _args: RecoverArgs,
) -> Result<u8, ChaosError> {
    Err(ChaosError::Refused(format!(
        "recovery for {} is being built",
        env.name
    )))
}
