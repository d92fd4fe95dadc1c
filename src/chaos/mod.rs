//! The chaos step (gate 4): preflight, plan, journal, inject, observe, restore, verify.
//!
//! A run refuses unless the environment allows chaos (production also needs `--yes`), the
//! static gates 1 to 3 pass and the cluster is at steady state. It prints the plan, writes it
//! to a synced journal, samples every probe from before the fault until recovery, stops the
//! planned VMs, restores them at the outage deadline (or earlier when a probe breaks its
//! budget, or on SIGINT/SIGTERM), waits for full recovery and reports one trial per probe,
//! one for recovery and one for "no manual work". `gates recover` finishes a run that died.

pub mod budget;
pub mod cluster;
pub mod events;
pub mod host_power;
pub mod journal;
pub mod plan;
pub mod power;
pub mod prediction;
pub mod preflight;
pub mod probes;
pub mod progress;
pub mod recovery;
pub mod report;
pub mod sampler;
pub mod talos_pool;
pub mod timeline;
pub mod vip;

mod run;

use std::path::{Path, PathBuf};

use crate::cli::RecoverArgs;
use crate::config::{Config, Environment};

pub use run::run;

/// Why a chaos run or a recovery stopped before it could report verdicts.
#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    /// Nothing was touched: not allowed, preflight refused, no such host, ...
    #[error("{0}")]
    Refused(String),
    /// The run could not go on (a client could not be built, the journal is unwritable).
    #[error("{0}")]
    Failed(String),
    /// VMs the run stopped may still be stopped.
    #[error("{0}")]
    RestoreFailed(String),
}

impl ChaosError {
    pub fn exit_code(&self) -> u8 {
        match self {
            ChaosError::Refused(_) | ChaosError::Failed(_) | ChaosError::RestoreFailed(_) => 2,
        }
    }
}

/// `reports/chaos-ENV.journal` unless `--journal` says otherwise.
pub fn journal_path(explicit: Option<&Path>, reports: &Path, env: &str) -> PathBuf {
    explicit
        .map(Path::to_path_buf)
        .unwrap_or_else(|| reports.join(format!("chaos-{env}.journal")))
}

/// `gates recover ENV`: start every VM the journal's run asked to stop and that is not
/// running, wait until it runs, and settle the journal. Safe to run any number of times.
pub async fn recover(
    _config: &Config,
    env: &Environment,
    args: RecoverArgs,
) -> Result<u8, ChaosError> {
    let path = journal_path(args.journal.as_deref(), &args.reports, &env.name);
    if !path.exists() {
        println!(
            "no chaos journal at {}: nothing to recover for {}",
            path.display(),
            env.name
        );
        return Ok(0);
    }
    let _lock = journal::RunLock::acquire(&path, &env.name)
        .map_err(|e| ChaosError::Refused(e.to_string()))?;
    let records = journal::read(&path).map_err(|e| ChaosError::Failed(e.to_string()))?;
    let Some(plan) = journal::plan(&records).cloned() else {
        return Err(ChaosError::Failed(
            journal::JournalError::NoPlan { path: path.clone() }.to_string(),
        ));
    };
    if plan.environment != env.name {
        return Err(ChaosError::Refused(format!(
            "{} is the journal of {}, not of {}",
            path.display(),
            plan.environment,
            env.name
        )));
    }
    let requested: Vec<journal::PlannedVm> = plan
        .vms
        .iter()
        .filter(|vm| {
            records.iter().any(|r| {
                matches!(&r.entry, journal::Entry::StopRequested { vmid, .. } if *vmid == vm.vmid)
            })
        })
        .cloned()
        .collect();
    let owed = journal::pending_restore(&records);
    let host_owed = journal::host_owed(&records);
    if requested.is_empty() && host_owed.is_none() {
        println!(
            "{}: the run stopped nothing; nothing to recover",
            path.display()
        );
        return Ok(0);
    }
    let access = env.proxmox.as_ref().ok_or_else(|| {
        ChaosError::Failed(format!("{} has no proxmox section", env.file.display()))
    })?;
    // A whole-host run acted through another host's API; so does its recovery, since the
    // host behind `url` may be the one that is off.
    let client = match &plan.host_power {
        Some(how) => crate::collect::proxmox::client_at(env, access, &how.wake_via_url),
        None => crate::collect::proxmox::client(env, access),
    }
    .map_err(ChaosError::Failed)?;
    let journal = journal::Journal::open(&path).map_err(|e| ChaosError::Failed(e.to_string()))?;
    let power = power::Power::new(client.clone(), std::time::Duration::from_secs(1), journal);
    if let (Some(host), Some(how)) = (&host_owed, &plan.host_power) {
        let online = client
            .cluster_members()
            .await
            .map_err(|err| {
                ChaosError::RestoreFailed(format!(
                    "cannot read the cluster status through {}: {err}; the journal {} still owes host {host}",
                    how.wake_via_url,
                    path.display()
                ))
            })?
            .iter()
            .any(|m| &m.name == host && m.online);
        if online {
            power
                .note(journal::Entry::HostOnline { host: host.clone() })
                .map_err(ChaosError::Failed)?;
            println!("host {host} is online");
        } else {
            println!(
                "host {host} is off: waking it through {} ({})",
                how.wake_via_host, how.wake_via_url
            );
            let patience = env.chaos.clone().unwrap_or_default().recovery_timeout;
            power
                .wake_host(host, &how.wake_via_host, patience.into())
                .await
                .map_err(|err| {
                    ChaosError::RestoreFailed(format!(
                        "{err}; run `gates recover {}` again or power {host} on by hand",
                        env.name
                    ))
                })?;
            println!("host {host} is online again");
        }
    }
    let mut to_start = Vec::new();
    let mut running = Vec::new();
    for vm in &requested {
        match client.locate_vm(vm.vmid).await {
            Ok(found) if found.status == "running" => running.push(vm.clone()),
            Ok(found) => {
                println!(
                    "VM {} {} on {} is {}: starting it",
                    vm.vmid, vm.name, found.node, found.status
                );
                to_start.push(vm.clone());
            }
            Err(err) => {
                return Err(ChaosError::RestoreFailed(format!(
                    "cannot find VM {} {}: {err}; the journal {} still owes it",
                    vm.vmid,
                    vm.name,
                    path.display()
                )));
            }
        }
    }
    for vm in running
        .iter()
        .filter(|vm| owed.iter().any(|o| o.vmid == vm.vmid))
    {
        // Started before the crash, but the journal never heard of it.
        power
            .note(journal::Entry::Started {
                vmid: vm.vmid,
                host: vm.host.clone(),
            })
            .map_err(ChaosError::Failed)?;
    }
    let errors = power.start_all(&to_start).await;
    if !errors.is_empty() {
        return Err(ChaosError::RestoreFailed(format!(
            "could not start every VM: {}; run `gates recover {}` again or start them by hand",
            errors.join("; "),
            env.name
        )));
    }
    if !owed.is_empty() || !to_start.is_empty() || host_owed.is_some() {
        power
            .note(journal::Entry::Restored)
            .and_then(|()| {
                power.note(journal::Entry::Finished {
                    outcome: "recovered by gates recover".into(),
                })
            })
            .map_err(ChaosError::Failed)?;
    }
    for vm in &requested {
        println!("VM {} {} (node {}) is running", vm.vmid, vm.name, vm.node);
    }
    if to_start.is_empty() {
        println!("nothing was stopped; {} is settled", path.display());
    } else {
        println!(
            "started {} VM(s); {} is settled",
            to_start.len(),
            path.display()
        );
    }
    Ok(0)
}
