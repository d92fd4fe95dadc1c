//! `gates recover ENV`: finish what a chaos run that died still owes, and nothing else. The
//! journal is read strictly (a damaged line other than a torn last one stops it), only the
//! VMs and the host the journal still owes are touched (a settled journal does nothing), and
//! credentials go only to the Proxmox URLs of the environment file, never to one named only
//! in the journal.

use gates_core::exit::ExitCode;
use std::io::Write;
use std::path::Path;

use super::journal::{self, Entry, Journal, PlannedVm, RunLock};
use super::lease::{LeaseError, LeaseStep};
use super::power::Power;
use crate::chaos::{ChaosError, JournalStep};
use crate::config::{Environment, ProxmoxAccess};

/// What a journal still owes: VMs whose stop was asked for and whose start was not seen,
/// network devices whose link was pulled and not read back up, and a host shut down and not
/// seen online again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owed {
    pub vms: Vec<PlannedVm>,
    /// Each VM with only the devices still owed in `nets`.
    pub links: Vec<PlannedVm>,
    pub host: Option<String>,
}

impl Owed {
    pub fn of(records: &[journal::Record]) -> Owed {
        Owed {
            vms: journal::pending_restore(records),
            links: journal::links_owed(records)
                .into_iter()
                .map(|(vm, nets)| PlannedVm { nets, ..vm })
                .collect(),
            host: journal::host_owed(records),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.vms.is_empty() && self.links.is_empty() && self.host.is_none()
    }
}

/// `url` when the environment file lists it (`proxmox.url` or `proxmox.fallback_urls`).
pub fn trusted_url<'a>(
    env: &Environment,
    access: &'a ProxmoxAccess,
    url: &str,
    journal: &Path,
) -> Result<&'a str, ChaosError> {
    let same = |a: &str, b: &str| a.trim_end_matches('/') == b.trim_end_matches('/');
    std::iter::once(&access.url)
        .chain(&access.fallback_urls)
        .find(|known| same(known, url))
        .map(String::as_str)
        .ok_or_else(|| ChaosError::UntrustedUrl {
            journal: journal.to_path_buf(),
            url: url.to_string(),
            env_file: env.file.clone(),
            known: std::iter::once(&access.url)
                .chain(&access.fallback_urls)
                .cloned()
                .collect(),
        })
}

/// One line of what recovery did, for the person who ran it; a closed stdout does not stop
/// a recovery half way.
macro_rules! say {
    ($out:expr, $($arg:tt)*) => {
        let _ = writeln!($out, $($arg)*);
    };
}

/// Where recovery tells what it did (stdout on the command line, a buffer in tests).
pub type Out<'a> = &'a mut (dyn Write + Send);

pub async fn recover(env: &Environment, path: &Path, out: Out<'_>) -> Result<ExitCode, ChaosError> {
    if !path.exists() {
        say!(
            out,
            "no chaos journal at {}: nothing to recover for {}",
            path.display(),
            env.name
        );
        return Ok(ExitCode::Passed);
    }
    let _env_lock = super::lease::EnvLock::acquire(env)?;
    let _lock = RunLock::acquire(path, &env.name)
        .map_err(ChaosError::journal(&env.name, JournalStep::Lock))?;
    let records = journal::read(path).map_err(ChaosError::journal(&env.name, JournalStep::Read))?;
    let Some(plan) = journal::plan(&records).cloned() else {
        return Err(ChaosError::journal(&env.name, JournalStep::Read)(
            journal::JournalError::NoPlan {
                path: path.to_path_buf(),
            },
        ));
    };
    if plan.environment != env.name {
        return Err(ChaosError::ForeignJournal {
            env: env.name.clone(),
            owner: plan.environment,
            journal: path.to_path_buf(),
        });
    }
    let settled = settle(env, path, &records, &plan, &mut *out).await;
    // Whatever the journal still owes, the dead run's Lease would refuse every new run.
    release_lease(env, path, &records, out).await;
    settled.map(|()| ExitCode::Passed)
}

/// Start what the journal owes and settle it.
async fn settle(
    env: &Environment,
    path: &Path,
    records: &[journal::Record],
    plan: &journal::PlannedFault,
    out: Out<'_>,
) -> Result<(), ChaosError> {
    let owed = Owed::of(records);
    if owed.is_empty() {
        say!(
            out,
            "{}: nothing was stopped that is not running again; the journal owes nothing and is settled",
            path.display()
        );
        return Ok(());
    }
    let access = env.proxmox.as_ref().ok_or_else(|| ChaosError::NoProxmox {
        env: env.name.clone(),
        env_file: env.file.clone(),
    })?;
    // A whole-host run acted through another host's API; so does its recovery, since the
    // host behind `url` may be the one that is off. That API must be one the file names.
    let url = match &plan.host_power {
        Some(how) => trusted_url(env, access, &how.wake_via_url, path)?,
        None => access.url.as_str(),
    };
    let client = crate::collect::proxmox::client_at(env, access, url).map_err(|source| {
        ChaosError::ProxmoxClient {
            env: env.name.clone(),
            url: url.to_string(),
            source: Box::new(source),
        }
    })?;
    let journal = Journal::open(path).map_err(ChaosError::journal(&env.name, JournalStep::Open))?;
    let append = || ChaosError::journal(&env.name, JournalStep::Append);
    let power = Power::new(client.clone(), std::time::Duration::from_secs(1), journal);
    if let (Some(host), Some(how)) = (&owed.host, &plan.host_power) {
        wake_owed_host(env, &power, &client, host, how, url, path, out).await?;
    }
    let to_start = vms_to_start(env, &client, &power, &owed.vms, path, &mut *out).await?;
    let patience = env.chaos.clone().unwrap_or_default().recovery_timeout;
    let mut errors = power.start_all(&to_start, patience.into()).await;
    for vm in &owed.links {
        say!(
            out,
            "VM {} {}: the link of {} is still pulled: putting it back (link_down=0)",
            vm.vmid,
            vm.name,
            vm.nets.join(", ")
        );
    }
    errors.extend(power.restore_links(&owed.links, patience.into()).await);
    if !errors.is_empty() {
        return Err(ChaosError::NotStarted {
            env: env.name.clone(),
            errors,
        });
    }
    power
        .note(Entry::Restored)
        .and_then(|()| {
            power.note(Entry::Finished {
                outcome: "recovered by gates recover".into(),
            })
        })
        .map_err(append())?;
    say_settled(&owed, to_start.len(), path, out);
    Ok(())
}

/// What `gates recover` did, VM by VM, and that the journal is settled.
fn say_settled(owed: &Owed, started: usize, path: &Path, out: Out<'_>) {
    for vm in &owed.vms {
        say!(
            out,
            "VM {} {} (node {}) is running",
            vm.vmid,
            vm.name,
            vm.node
        );
    }
    for vm in &owed.links {
        say!(
            out,
            "VM {} {} (node {}) is back on the network",
            vm.vmid,
            vm.name,
            vm.node
        );
    }
    say!(
        out,
        "started {started} VM(s), put back the links of {}; {} is settled",
        owed.links.len(),
        path.display()
    );
}

/// The owed VMs that are not running: each judged once no task for it is under way (the dead
/// run's stop may still be), a running one noted as started.
async fn vms_to_start(
    env: &Environment,
    client: &gates_infra::proxmox::ProxmoxClient,
    power: &Power,
    owed: &[PlannedVm],
    path: &Path,
    out: Out<'_>,
) -> Result<Vec<PlannedVm>, ChaosError> {
    let append = || ChaosError::journal(&env.name, JournalStep::Append);
    let mut to_start = Vec::new();
    for vm in owed {
        let mut located = client.locate_vm(vm.vmid).await;
        // Running, but the dead run's stop may still be under way (Proxmox stops a VM in a
        // task of its own): wait for the VM's active tasks to end before judging it.
        if let Ok(found) = &located
            && found.status == "running"
            && wait_for_tasks(env, client, vm, &found.node, path, &mut *out).await?
        {
            located = client.locate_vm(vm.vmid).await;
        }
        match located {
            // Started before the crash, but the journal never heard of it.
            Ok(found) if found.status == "running" => power
                .note(Entry::Started {
                    vmid: vm.vmid,
                    host: vm.host.clone(),
                })
                .map_err(append())?,
            Ok(found) => {
                say!(
                    out,
                    "VM {} {} on {} is {}: starting it",
                    vm.vmid,
                    vm.name,
                    found.node,
                    found.status
                );
                to_start.push(vm.clone());
            }
            Err(source) => {
                return Err(ChaosError::VmNotFound {
                    env: env.name.clone(),
                    vmid: vm.vmid,
                    name: vm.name.clone(),
                    journal: path.to_path_buf(),
                    source: Box::new(source),
                });
            }
        }
    }
    Ok(to_start)
}

/// Wait for the VM's tasks still under way; whether there were any (its state is then read
/// again). A failed or timed-out task is judged by the VM's state that follows.
async fn wait_for_tasks(
    env: &Environment,
    client: &gates_infra::proxmox::ProxmoxClient,
    vm: &PlannedVm,
    node: &str,
    path: &Path,
    out: Out<'_>,
) -> Result<bool, ChaosError> {
    let active = client
        .active_vm_tasks(node, vm.vmid)
        .await
        .map_err(|source| ChaosError::TasksUnreadable {
            env: env.name.clone(),
            vmid: vm.vmid,
            name: vm.name.clone(),
            journal: path.to_path_buf(),
            source: Box::new(source),
        })?;
    for upid in &active {
        say!(
            out,
            "VM {} {} is running, but a task for it is still under way ({}): waiting for it before judging it",
            vm.vmid,
            vm.name,
            upid.as_str()
        );
        let deadline = gates_infra::proxmox::PowerOptions::default().task_deadline;
        let _ = client
            .wait_task(upid, deadline, std::time::Duration::from_secs(1))
            .await;
    }
    Ok(!active.is_empty())
}

/// The dead run's Lease, if it took one and never gave it up and still holds it (the holder
/// identity the run wrote in the journal).
async fn release_lease(env: &Environment, path: &Path, records: &[journal::Record], out: Out<'_>) {
    let mut taken = None;
    for record in records {
        match &record.entry {
            Entry::LeaseTaken {
                namespace,
                name,
                holder,
            } => taken = Some((namespace.clone(), name.clone(), holder.clone())),
            Entry::LeaseReleased { .. } => taken = None,
            _ => {}
        }
    }
    let Some((namespace, name, holder)) = taken else {
        return;
    };
    let released = match crate::collect::kube::client(env).await {
        Ok(client) => {
            super::lease::release_if_held(client, &namespace, &name, &holder, chrono::Utc::now())
                .await
                .map_err(|err| match err {
                    // Says already that the Lease expires on its own.
                    LeaseError::Api {
                        step: LeaseStep::Release,
                        ..
                    } => err.to_string(),
                    other => format!("{other}; the Lease expires on its own"),
                })
        }
        Err(err) => Err(format!("{err}; the Lease expires on its own")),
    };
    match released {
        Ok(true) => {
            let noted = Journal::open(path).and_then(|mut journal| {
                journal.append(Entry::LeaseReleased {
                    namespace: namespace.clone(),
                    name: name.clone(),
                })
            });
            say!(out, "released the run's Lease {namespace}/{name}");
            if let Err(err) = noted {
                say!(out, "warning: the journal did not hear it: {err}");
            }
        }
        Ok(false) => {}
        Err(err) => {
            say!(out, "warning: {err}");
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn wake_owed_host(
    env: &Environment,
    power: &Power,
    client: &gates_infra::proxmox::ProxmoxClient,
    host: &str,
    how: &journal::HostPower,
    url: &str,
    path: &Path,
    out: Out<'_>,
) -> Result<(), ChaosError> {
    let online = client
        .cluster_members()
        .await
        .map_err(|source| ChaosError::HostStatusUnreadable {
            env: env.name.clone(),
            host: host.to_string(),
            url: url.to_string(),
            journal: path.to_path_buf(),
            source: Box::new(source),
        })?
        .iter()
        .any(|m| m.name == host && m.online);
    if online {
        power
            .note(Entry::HostOnline {
                host: host.to_string(),
            })
            .map_err(ChaosError::journal(&env.name, JournalStep::Append))?;
        say!(out, "host {host} is online");
        return Ok(());
    }
    say!(
        out,
        "host {host} is off: waking it through {} ({url})",
        how.wake_via_host
    );
    let patience = env.chaos.clone().unwrap_or_default().recovery_timeout;
    power
        .wake_host(host, &how.wake_via_host, patience.into())
        .await
        .map_err(|reason| ChaosError::HostNotWoken {
            env: env.name.clone(),
            host: host.to_string(),
            reason: reason.to_string(),
        })?;
    say!(out, "host {host} is online again");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::journal::HostPower;
    use crate::chaos::test_support::{environment, journal_owing_a_start, planned_fault};

    fn started(journal: &mut Journal, vmid: u32) {
        for entry in [
            Entry::StopRequested {
                vmid,
                host: "pve2".into(),
            },
            Entry::Stopped {
                vmid,
                host: "pve2".into(),
            },
            Entry::StartRequested {
                vmid,
                host: "pve2".into(),
            },
            Entry::Started {
                vmid,
                host: "pve2".into(),
            },
        ] {
            journal.append(entry).unwrap();
        }
    }

    /// A Proxmox API nobody should call: counts the connections it gets.
    async fn tripwire() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = hits.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                drop(socket);
            }
        });
        (url, hits)
    }

    /// The lab environment, its token in a file, its Proxmox API at `url`.
    fn env_at(url: &str, dir: &Path) -> Environment {
        let secret = dir.join("token");
        std::fs::write(&secret, "not-a-secret").unwrap();
        let mut env = environment("lab", "allowed: true");
        let access = env.proxmox.as_mut().unwrap();
        access.url = url.to_string();
        access.token_secret_env = None;
        access.token_secret_file = Some(secret);
        env
    }

    #[tokio::test]
    async fn a_settled_journal_does_nothing_and_calls_no_api() {
        let (url, hits) = tripwire().await;
        let dir = tempfile::tempdir().unwrap();
        let env = env_at(&url, dir.path());
        let path = dir.path().join("chaos-lab.journal");
        let mut journal = Journal::create(&path, &planned_fault("lab")).unwrap();
        started(&mut journal, 201);
        started(&mut journal, 202);
        journal.append(Entry::Restored).unwrap();
        let before = std::fs::read_to_string(&path).unwrap();
        let mut said = Vec::new();
        assert_eq!(
            recover(&env, &path, &mut said).await.unwrap(),
            ExitCode::Passed
        );
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
        let said = String::from_utf8(said).unwrap();
        assert!(
            said.contains("owes nothing and is settled"),
            "recover says why it did nothing: {said}"
        );
    }

    #[tokio::test]
    async fn a_url_named_only_in_the_journal_gets_no_credentials() {
        let (forged, hits) = tripwire().await;
        let dir = tempfile::tempdir().unwrap();
        let env = env_at("https://127.0.0.1:1", dir.path());
        let path = dir.path().join("chaos-lab.journal");
        let mut fault = planned_fault("lab");
        fault.host_power = Some(HostPower {
            wake_via_url: forged.clone(),
            wake_via_host: "pve1".into(),
            mac: "aa:bb:cc:dd:ee:ff".into(),
        });
        let mut journal = Journal::create(&path, &fault).unwrap();
        journal
            .append(Entry::HostShutdownRequested {
                host: "pve2".into(),
            })
            .unwrap();
        let err = recover(&env, &path, &mut Vec::new())
            .await
            .expect_err("refused");
        let text = err.to_string();
        assert!(
            text.contains(&forged) && text.contains("environments/lab.yaml"),
            "{text}"
        );
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_corrupt_line_in_the_middle_stops_recover_naming_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let env = env_at("https://127.0.0.1:1", dir.path());
        let path = dir.path().join("chaos-lab.journal");
        journal_owing_a_start(&path);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text = text.replacen("\n", "\n{\"event\":\"stop-req\n", 1);
        std::fs::write(&path, text).unwrap();
        let err = recover(&env, &path, &mut Vec::new())
            .await
            .expect_err("stopped");
        assert!(err.to_string().contains("chaos-lab.journal:2"), "{err}");
    }

    #[tokio::test]
    async fn a_vm_the_journal_owes_that_cannot_be_found_is_a_failed_restore_naming_it_and_the_fix()
    {
        let (url, _hits) = tripwire().await;
        let dir = tempfile::tempdir().unwrap();
        let env = env_at(&url, dir.path());
        let path = dir.path().join("chaos-lab.journal");
        journal_owing_a_start(&path);
        let err = recover(&env, &path, &mut Vec::new())
            .await
            .expect_err("the API answers nothing");
        assert_eq!(err.kind(), crate::chaos::ChaosErrorKind::RestoreFailed);
        let text = err.to_string();
        for want in [
            "cannot find VM 201",
            "chaos-lab.journal still owes it",
            "run `gates recover lab` again or start it by hand",
        ] {
            assert!(text.contains(want), "{want:?} missing from {text}");
        }
    }

    #[tokio::test]
    async fn the_journal_of_another_environment_is_refused_naming_both_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let env = env_at("https://127.0.0.1:1", dir.path());
        let path = dir.path().join("chaos-lab.journal");
        Journal::create(&path, &planned_fault("staging")).unwrap();
        let err = recover(&env, &path, &mut Vec::new())
            .await
            .expect_err("refused");
        assert_eq!(err.kind(), crate::chaos::ChaosErrorKind::Refused);
        let text = err.to_string();
        assert!(
            text.contains("is the journal of staging, not of lab")
                && text.contains("--journal")
                && text.contains("`gates recover staging`"),
            "{text}"
        );
    }

    #[test]
    fn the_fallback_urls_of_the_environment_file_are_trusted() {
        let env = environment("lab", "allowed: true");
        let access = env.proxmox.as_ref().unwrap();
        let journal = Path::new("chaos-lab.journal");
        assert_eq!(
            trusted_url(&env, access, "https://127.0.0.2:1/", journal).unwrap(),
            "https://127.0.0.2:1"
        );
        assert!(trusted_url(&env, access, "https://pve.evil:8006", journal).is_err());
    }
}
