//! Why a chaos run or a recovery stopped before it could report verdicts. Each variant says
//! what failed, on which environment, host, VM or file, keeps the error underneath as its
//! source, and ends with what to do about it. [`ChaosError::kind`] sorts them by what the
//! operator is left with: nothing touched, a run that could not go on, or VMs that may still
//! be stopped. `gates` maps every kind to exit code 2 (`src/app.rs`).

use gates_core::exit::ExitCode;
use std::path::PathBuf;

use super::act::lease::{EnvLockError, LeaseError};
use super::act::signals::SignalError;
use super::journal::JournalError;
use crate::collect::proxmox::ProxmoxAccessError;

/// What the operator is left with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChaosErrorKind {
    /// Nothing was touched: not allowed, preflight refused, another run holds the lock.
    Refused,
    /// The run could not go on (a client, the journal, the probes).
    Failed,
    /// VMs the run stopped, or the host it shut down, may still be off.
    RestoreFailed,
}

/// The journal operation that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalStep {
    Lock,
    Read,
    Create,
    Open,
    Append,
}

impl JournalStep {
    fn doing(self) -> &'static str {
        match self {
            JournalStep::Lock => "lock",
            JournalStep::Read => "read",
            JournalStep::Create => "create",
            JournalStep::Open => "open",
            JournalStep::Append => "write to",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    #[error(
        "chaos is not allowed on {env}: its file {} must say `chaos: {{allowed: true}}`",
        env_file.display()
    )]
    NotAllowed { env: String, env_file: PathBuf },

    #[error("{env} is a production environment: the chaos step needs --yes")]
    ProductionNeedsYes { env: String },

    #[error(
        "{} has no proxmox section: the chaos step powers {env}'s VMs off and on through Proxmox; add `proxmox:` with its url and API token",
        env_file.display()
    )]
    NoProxmox { env: String, env_file: PathBuf },

    #[error(
        "{}: an earlier chaos run has not restored what it stopped ({owed}); run `gates recover {env}` first",
        journal.display()
    )]
    RestoreOwed {
        env: String,
        journal: PathBuf,
        owed: String,
    },

    /// Another run on this machine holds the environment's lock.
    #[error(transparent)]
    Locked(#[from] EnvLockError),

    /// The journal (or its lock) could not be locked, read or written.
    #[error("cannot {} the chaos journal of {env}: {source}", step.doing())]
    Journal {
        env: String,
        step: JournalStep,
        #[source]
        source: JournalError,
    },

    #[error(
        "{} is the journal of {owner}, not of {env}; pass {env}'s journal with --journal, or run `gates recover {owner}`",
        journal.display()
    )]
    ForeignJournal {
        env: String,
        owner: String,
        journal: PathBuf,
    },

    #[error(
        "{} names {url} as the Proxmox API to act through, but {} lists only {} (proxmox.url, proxmox.fallback_urls): the token is sent only there; add the URL to the environment file if it is yours, or power the host on by hand",
        journal.display(),
        env_file.display(),
        known.join(", ")
    )]
    UntrustedUrl {
        journal: PathBuf,
        url: String,
        env_file: PathBuf,
        known: Vec<String>,
    },

    /// The cluster Lease says a run elsewhere is live (the source names the Lease and fix).
    #[error(transparent)]
    LeaseHeld(Box<LeaseError>),

    /// The Lease could not be taken before the first power action.
    #[error("{source}; nothing was touched on {env}")]
    LeaseNotTaken {
        env: String,
        #[source]
        source: Box<LeaseError>,
    },

    /// Gates 1 to 3, the steady state or the target refused the run; every reason at once.
    #[error(
        "preflight refused the run on {env}:\n  - {}\nnothing was touched; fix each reason, then run `gates chaos {env}` again (`--dry-run` shows the plan)",
        reasons.join("\n  - ")
    )]
    PreflightRefused { env: String, reasons: Vec<String> },

    #[error(
        "the prediction says losing {host} is not survivable: {reason}; fix it first, or pass --expect-failure to run anyway and measure it"
    )]
    PredictedLoss { host: String, reason: String },

    #[error(
        "steady state not met, nothing was touched on {env}: {}; wait until the probes are steady, then run `gates chaos {env}` again",
        why.join("; ")
    )]
    Unsteady { env: String, why: Vec<String> },

    /// The cluster access, the Talos client or a probe could not be set up.
    #[error("cannot set up the {what} of the run on {env}: {reason}")]
    Setup {
        env: String,
        what: &'static str,
        reason: String,
    },

    /// The event watcher and the Lease need the Kubernetes API (the source names the fix).
    #[error("no Kubernetes client for the event watcher on {env}: {source}")]
    NoKubeClient {
        env: String,
        #[source]
        source: Box<crate::collect::kube::KubeError>,
    },

    #[error(transparent)]
    Signals(#[from] SignalError),

    #[error("cannot build a Proxmox client for {env} at {url}: {source}")]
    ProxmoxClient {
        env: String,
        url: String,
        #[source]
        source: Box<ProxmoxAccessError>,
    },

    /// Some VMs did not start again (or the host did not come back): they may be off.
    #[error(
        "VMs of {env} may still be stopped: {}; run `gates recover {env}`, or start them by hand",
        errors.join("; ")
    )]
    NotStarted { env: String, errors: Vec<String> },

    #[error(
        "VM {vmid} {name} of {env} is running, but its tasks cannot be listed to tell whether the dead run's stop is still under way: {source}; the journal {} still owes it: run `gates recover {env}` again",
        journal.display()
    )]
    TasksUnreadable {
        env: String,
        vmid: u32,
        name: String,
        journal: PathBuf,
        #[source]
        source: Box<gates_infra::proxmox::ProxmoxError>,
    },

    #[error(
        "cannot find VM {vmid} {name} of {env}: {source}; the journal {} still owes it: run `gates recover {env}` again or start it by hand",
        journal.display()
    )]
    VmNotFound {
        env: String,
        vmid: u32,
        name: String,
        journal: PathBuf,
        #[source]
        source: Box<gates_infra::proxmox::ProxmoxError>,
    },

    #[error(
        "cannot read the cluster status through {url}: {source}; the journal {} still owes host {host}: run `gates recover {env}` again or power {host} on by hand",
        journal.display()
    )]
    HostStatusUnreadable {
        env: String,
        host: String,
        url: String,
        journal: PathBuf,
        #[source]
        source: Box<gates_infra::proxmox::ProxmoxError>,
    },

    #[error("{reason}; run `gates recover {env}` again or power {host} on by hand")]
    HostNotWoken {
        env: String,
        host: String,
        reason: String,
    },
}

impl ChaosError {
    pub fn kind(&self) -> ChaosErrorKind {
        use ChaosErrorKind::{Failed, Refused, RestoreFailed};
        match self {
            ChaosError::NotAllowed { .. }
            | ChaosError::ProductionNeedsYes { .. }
            | ChaosError::NoProxmox { .. }
            | ChaosError::RestoreOwed { .. }
            | ChaosError::Locked(_)
            | ChaosError::ForeignJournal { .. }
            | ChaosError::UntrustedUrl { .. }
            | ChaosError::LeaseHeld(_)
            | ChaosError::LeaseNotTaken { .. }
            | ChaosError::PreflightRefused { .. }
            | ChaosError::PredictedLoss { .. }
            | ChaosError::Unsteady { .. } => Refused,
            ChaosError::Journal { step, .. } => match step {
                JournalStep::Lock | JournalStep::Create => Refused,
                JournalStep::Read | JournalStep::Open | JournalStep::Append => Failed,
            },
            ChaosError::Setup { .. }
            | ChaosError::NoKubeClient { .. }
            | ChaosError::Signals(_)
            | ChaosError::ProxmoxClient { .. } => Failed,
            ChaosError::NotStarted { .. }
            | ChaosError::VmNotFound { .. }
            | ChaosError::TasksUnreadable { .. }
            | ChaosError::HostStatusUnreadable { .. }
            | ChaosError::HostNotWoken { .. } => RestoreFailed,
        }
    }

    pub fn exit_code(&self) -> ExitCode {
        match self.kind() {
            ChaosErrorKind::Refused | ChaosErrorKind::Failed | ChaosErrorKind::RestoreFailed => {
                ExitCode::CannotTell
            }
        }
    }

    /// A journal error of `env` while doing `step`.
    pub fn journal(env: &str, step: JournalStep) -> impl FnOnce(JournalError) -> ChaosError {
        let env = env.to_string();
        move |source| ChaosError::Journal { env, step, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn says(err: &ChaosError, wants: &[&str]) {
        let text = err.to_string();
        for want in wants {
            assert!(text.contains(want), "{want:?} missing from {text:?}");
        }
    }

    #[test]
    fn a_refused_plan_names_the_environment_file_and_what_to_add() {
        let err = ChaosError::NoProxmox {
            env: "lab".into(),
            env_file: "gates/environments/lab.yaml".into(),
        };
        says(
            &err,
            &["gates/environments/lab.yaml", "lab's VMs", "add `proxmox:`"],
        );
        assert_eq!(err.kind(), ChaosErrorKind::Refused);
    }

    #[test]
    fn an_unsteady_cluster_names_the_environment_each_reason_and_says_to_wait() {
        let err = ChaosError::Unsteady {
            env: "lab".into(),
            why: vec!["api is down: refused".into(), "etcd has 2 members".into()],
        };
        says(
            &err,
            &[
                "nothing was touched on lab",
                "api is down: refused; etcd has 2 members",
                "run `gates chaos lab` again",
            ],
        );
        assert_eq!(err.kind(), ChaosErrorKind::Refused);
    }

    #[test]
    fn a_failed_restore_names_every_vm_and_says_to_recover() {
        let err = ChaosError::NotStarted {
            env: "lab".into(),
            errors: vec![
                "VM 201 on pve2: HTTP 500".into(),
                "VM 202 on pve2: timeout".into(),
            ],
        };
        says(
            &err,
            &[
                "VMs of lab may still be stopped",
                "VM 201 on pve2: HTTP 500; VM 202 on pve2: timeout",
                "run `gates recover lab`, or start them by hand",
            ],
        );
        assert_eq!(err.kind(), ChaosErrorKind::RestoreFailed);
    }

    #[test]
    fn a_host_that_does_not_wake_names_the_host_and_both_fixes() {
        let err = ChaosError::HostNotWoken {
            env: "lab".into(),
            host: "pve2".into(),
            reason: "pve2 did not come online within 10m".into(),
        };
        says(
            &err,
            &[
                "pve2 did not come online",
                "`gates recover lab`",
                "power pve2 on by hand",
            ],
        );
        assert_eq!(err.kind(), ChaosErrorKind::RestoreFailed);
    }

    #[test]
    fn a_journal_that_cannot_be_created_refuses_and_one_that_cannot_be_written_fails() {
        let io = || JournalError::Io {
            path: "reports/chaos-lab.journal".into(),
            message: "permission denied".into(),
        };
        let created = ChaosError::journal("lab", JournalStep::Create)(io());
        says(
            &created,
            &[
                "cannot create the chaos journal of lab",
                "reports/chaos-lab.journal: permission denied",
            ],
        );
        assert_eq!(created.kind(), ChaosErrorKind::Refused);
        let appended = ChaosError::journal("lab", JournalStep::Append)(io());
        says(&appended, &["cannot write to the chaos journal of lab"]);
        assert_eq!(appended.kind(), ChaosErrorKind::Failed);
    }

    #[test]
    fn a_lease_taken_at_the_same_moment_names_it_and_says_nothing_was_touched() {
        let err = ChaosError::LeaseNotTaken {
            env: "lab".into(),
            source: Box::new(LeaseError::Raced {
                env: "lab".into(),
                namespace: "kube-system".into(),
                name: "gates-chaos-lab".into(),
            }),
        };
        assert_eq!(
            err.to_string(),
            "another chaos run on lab took the Lease kube-system/gates-chaos-lab at the same moment; nothing was touched on lab"
        );
        assert_eq!(err.kind(), ChaosErrorKind::Refused);
    }

    #[test]
    fn every_kind_exits_with_two() {
        for err in [
            ChaosError::ProductionNeedsYes { env: "prod".into() },
            ChaosError::Setup {
                env: "lab".into(),
                what: "probes",
                reason: "no endpoint".into(),
            },
            ChaosError::NotStarted {
                env: "lab".into(),
                errors: Vec::new(),
            },
        ] {
            assert_eq!(err.exit_code(), ExitCode::CannotTell, "{err}");
        }
    }
}
