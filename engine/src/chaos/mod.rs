//! The chaos step (gate 4): preflight, plan, journal, inject, observe, restore, verify.
//!
//! A run refuses unless the environment allows chaos (production also needs `--yes`), the
//! static gates 1 to 3 pass and the cluster is at steady state. It prints the plan, writes it
//! to a synced journal, samples every probe from before the fault until recovery, stops the
//! planned VMs, restores them at the outage deadline (or earlier when a probe breaks its
//! budget, or on SIGINT/SIGTERM), waits for full recovery and reports one trial per probe,
//! one for recovery and one for "no manual work". `gates recover` finishes a run that died.

pub mod act;
pub mod clients;
pub mod clock;
pub mod context;
pub mod error;
pub mod judge;
pub mod observe;
pub mod plan;
pub mod prediction;
pub mod reporters;
#[cfg(any(test, feature = "testing"))]
pub mod test_support;

pub use act::{journal, power};
pub use judge::{budget, report};
pub use observe::{events, probes, recovery, sampler, talos_pool, timeline, vip};
pub use plan::{host_power, preflight};

mod run;

use gates_core::exit::ExitCode;
use std::path::{Path, PathBuf};

use crate::config::{Config, Environment};

pub use error::{ChaosError, ChaosErrorKind, JournalStep};

/// What one chaos run is asked to do (the command line fills it from `gates chaos`'s flags).
#[derive(Debug, Clone)]
pub struct ChaosOptions {
    /// A host's name, `auto` (the first host that carries the environment's VMs) or `worst`
    /// (the host whose loss the model predicts hurts most).
    pub host: String,
    /// Plan and say the plan; touch nothing.
    pub dry_run: bool,
    /// The operator's consent, which a production environment needs.
    pub yes: bool,
    /// Shut the whole host down, not only the environment's VMs on it.
    pub whole_host: bool,
    /// Which fault to inject: power loss (the default) or a network partition.
    pub fault: journal::FaultKind,
    /// The model predicts this host's loss is not survivable and the run is to show it.
    pub expect_failure: bool,
    /// A JUnit file besides the timestamped reports.
    pub junit: Option<PathBuf>,
    /// The directory of the reports and, unless `journal` says otherwise, of the journal.
    pub reports: PathBuf,
    pub journal: Option<PathBuf>,
}

/// Where `gates recover` finds the journal of the run it restores.
#[derive(Debug, Clone)]
pub struct RecoverOptions {
    pub journal: Option<PathBuf>,
    pub reports: PathBuf,
}
pub use run::run;

/// `reports/chaos-ENV.journal` unless `--journal` says otherwise.
pub fn journal_path(explicit: Option<&Path>, reports: &Path, env: &str) -> PathBuf {
    explicit
        .map(Path::to_path_buf)
        .unwrap_or_else(|| reports.join(format!("chaos-{env}.journal")))
}

/// `gates recover ENV`: start what the journal's run still owes (VMs it stopped and did not
/// see started, a host it shut down), wait until it runs, and settle the journal. Safe to
/// run any number of times; a settled journal does nothing.
pub async fn recover(
    _config: &Config,
    env: &Environment,
    args: &RecoverOptions,
    out: act::recover::Out<'_>,
) -> Result<ExitCode, ChaosError> {
    let path = journal_path(args.journal.as_deref(), &args.reports, &env.name);
    act::recover::recover(env, &path, out).await
}
