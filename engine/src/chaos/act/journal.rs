//! The chaos journal: the plan is on disk (synced) before the first power action, every
//! action and its result is appended, and `gates recover` reads it back to start whatever
//! the plan stopped. One JSON object per line, so a crash mid-write loses at most the last
//! line: a torn last line (no newline after it) is skipped, any other line that is not a
//! record stops the reader with its line number, since a damaged journal may hide a stop.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use gates_core::record::chaos::PlannedVm;

/// Which fault a plan injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// The VMs are hard-stopped, as a host losing power.
    #[default]
    Power,
    /// The VMs keep running with every network device's link pulled (`link_down=1`), as a
    /// host that drops off the network.
    Partition,
}

impl FaultKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Power => "power",
            FaultKind::Partition => "partition",
        }
    }
}

/// What a run is allowed to touch. Nothing outside it is ever powered off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedFault {
    pub environment: String,
    pub host: String,
    /// Journals written before partitions existed planned a power fault.
    #[serde(default)]
    pub fault: FaultKind,
    pub vms: Vec<PlannedVm>,
    /// When the VMs must be running again at the latest.
    pub restore_by: DateTime<Utc>,
    /// Set in whole-host mode: the host itself is shut down and woken again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_power: Option<HostPower>,
    /// The cluster the plan acts on (environment, time, identity, topology).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Box<crate::state::provenance::Provenance>>,
}

/// How a whole-host run brings the host back: wake-on-LAN sent by another host's API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPower {
    /// The Proxmox API (of another host) that sends the wake-on-LAN packet.
    pub wake_via_url: String,
    pub wake_via_host: String,
    /// The MAC the target host has configured for wake-on-LAN.
    pub mac: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Entry {
    Plan {
        plan: PlannedFault,
    },
    StopRequested {
        vmid: u32,
        host: String,
    },
    Stopped {
        vmid: u32,
        host: String,
    },
    StartRequested {
        vmid: u32,
        host: String,
    },
    Started {
        vmid: u32,
        host: String,
    },
    ActionFailed {
        vmid: u32,
        action: String,
        error: String,
    },
    /// The link of one network device is about to be pulled; `before` is the property string
    /// as read, for a person restoring by hand.
    LinkDownRequested {
        vmid: u32,
        host: String,
        device: String,
        before: String,
    },
    /// Read back after the update: the link is down.
    LinkDown {
        vmid: u32,
        host: String,
        device: String,
    },
    LinkUpRequested {
        vmid: u32,
        host: String,
        device: String,
    },
    /// Read back after the update: the link is up again.
    LinkUp {
        vmid: u32,
        host: String,
        device: String,
    },
    HostShutdownRequested {
        host: String,
    },
    HostOffline {
        host: String,
    },
    HostWakeRequested {
        host: String,
        via: String,
    },
    HostOnline {
        host: String,
    },
    HostActionFailed {
        host: String,
        action: String,
        error: String,
    },
    /// The run took the cluster's Lease (before the first power action).
    LeaseTaken {
        namespace: String,
        name: String,
        holder: String,
    },
    LeaseReleased {
        namespace: String,
        name: String,
    },
    Restored,
    Finished {
        outcome: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub at: DateTime<Utc>,
    #[serde(flatten)]
    pub entry: Entry,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error(
        "{path}: an earlier chaos run has not restored everything it stopped ({vms}); run `gates recover {environment}` first"
    )]
    Unfinished {
        path: PathBuf,
        environment: String,
        vms: String,
    },
    #[error(
        "{path}:{line}: not a journal record ({message}); the journal is damaged: check by hand which VMs of its plan are stopped, start them, then move the file away"
    )]
    Corrupt {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: no plan in the journal; nothing to recover")]
    NoPlan { path: PathBuf },
    /// A power action panicked while it held the journal.
    #[error(
        "the journal is unusable after a power action panicked; check by hand which VMs of the plan are stopped and start them"
    )]
    Poisoned,
    #[error(
        "a chaos run on {environment} is in progress ({holder}); it restores on its own: interrupt it (Ctrl-C or SIGTERM) instead"
    )]
    Busy { environment: String, holder: String },
}

/// Held by a chaos run for its whole life (an OS file lock next to the journal, so it is
/// released even when the process is killed): a second run or a `gates recover` under a
/// live run is refused instead of racing it.
pub struct RunLock {
    _file: File,
}

impl RunLock {
    pub fn acquire(journal: &Path, environment: &str) -> Result<RunLock, JournalError> {
        let path = journal.with_extension("lock");
        let io = |err: std::io::Error| JournalError::Io {
            path: path.clone(),
            message: err.to_string(),
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(io)?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                let holder = fs::read_to_string(&path).unwrap_or_default();
                return Err(JournalError::Busy {
                    environment: environment.to_string(),
                    holder: match holder.trim() {
                        "" => "another process".to_string(),
                        pid => format!("pid {pid}"),
                    },
                });
            }
            Err(fs::TryLockError::Error(err)) => return Err(io(err)),
        }
        file.set_len(0).map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        Ok(RunLock { _file: file })
    }
}

pub struct Journal {
    path: PathBuf,
    file: File,
}

impl Journal {
    /// Start a journal with the plan, refusing while an earlier run still owes a restore.
    pub fn create(path: &Path, plan: &PlannedFault) -> Result<Journal, JournalError> {
        if path.exists() {
            let records = read(path)?;
            if let Some(owed) = owed_text(&records) {
                return Err(JournalError::Unfinished {
                    path: path.to_path_buf(),
                    environment: plan.environment.clone(),
                    vms: owed,
                });
            }
        }
        let io = |err: std::io::Error| JournalError::Io {
            path: path.to_path_buf(),
            message: err.to_string(),
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(io)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(path)
            .map_err(io)?;
        let mut journal = Journal {
            path: path.to_path_buf(),
            file,
        };
        journal.append(Entry::Plan { plan: plan.clone() })?;
        // The directory entry must survive a crash too.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && let Ok(dir) = File::open(dir)
        {
            let _ = dir.sync_all();
        }
        Ok(journal)
    }

    /// Reopen an existing journal to append (for `gates recover`).
    pub fn open(path: &Path) -> Result<Journal, JournalError> {
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|err| JournalError::Io {
                path: path.to_path_buf(),
                message: err.to_string(),
            })?;
        Ok(Journal {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Append one entry and sync it to disk before returning.
    pub fn append(&mut self, entry: Entry) -> Result<(), JournalError> {
        let record = Record {
            at: Utc::now(),
            entry,
        };
        let mut line = serde_json::to_string(&record).map_err(|err| JournalError::Io {
            path: self.path.clone(),
            message: err.to_string(),
        })?;
        line.push('\n');
        let io = |err: std::io::Error| JournalError::Io {
            path: self.path.clone(),
            message: err.to_string(),
        };
        self.file.write_all(line.as_bytes()).map_err(io)?;
        self.file.sync_all().map_err(io)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Every record of a journal; a torn last line is skipped, any other bad line is an error.
pub fn read(path: &Path) -> Result<Vec<Record>, JournalError> {
    let text = fs::read_to_string(path).map_err(|err| JournalError::Io {
        path: path.to_path_buf(),
        message: err.to_string(),
    })?;
    let torn_tail = !text.is_empty() && !text.ends_with('\n');
    let count = text.lines().count();
    let mut records = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(record) => records.push(record),
            Err(_) if torn_tail && index + 1 == count => {}
            Err(err) => {
                return Err(JournalError::Corrupt {
                    path: path.to_path_buf(),
                    line: index + 1,
                    message: err.to_string(),
                });
            }
        }
    }
    Ok(records)
}

/// The plan a journal starts with.
pub fn plan(records: &[Record]) -> Option<&PlannedFault> {
    records.iter().find_map(|r| match &r.entry {
        Entry::Plan { plan } => Some(plan),
        _ => None,
    })
}

/// The planned VMs whose stop was requested (whether or not it was confirmed) and that have
/// not been confirmed started since.
pub fn pending_restore(records: &[Record]) -> Vec<PlannedVm> {
    let Some(plan) = plan(records) else {
        return Vec::new();
    };
    plan.vms
        .iter()
        .filter(|vm| {
            let mut owed = false;
            for record in records {
                match &record.entry {
                    Entry::StopRequested { vmid, .. } if *vmid == vm.vmid => owed = true,
                    Entry::Started { vmid, .. } if *vmid == vm.vmid => owed = false,
                    _ => {}
                }
            }
            owed
        })
        .cloned()
        .collect()
}

/// The planned VMs with a network device whose link-down was requested and whose link-up has
/// not been read back since, each with those devices in the plan's order.
pub fn links_owed(records: &[Record]) -> Vec<(PlannedVm, Vec<String>)> {
    let Some(plan) = plan(records) else {
        return Vec::new();
    };
    let mut owed: Vec<(PlannedVm, Vec<String>)> = Vec::new();
    for vm in &plan.vms {
        let devices: Vec<String> = vm
            .nets
            .iter()
            .filter(|net| link_owed(records, vm.vmid, net))
            .cloned()
            .collect();
        if !devices.is_empty() {
            owed.push((vm.clone(), devices));
        }
    }
    owed
}

fn link_owed(records: &[Record], vm: u32, net: &str) -> bool {
    let mut owed = false;
    for record in records {
        match &record.entry {
            Entry::LinkDownRequested { vmid, device, .. } if *vmid == vm && device == net => {
                owed = true
            }
            Entry::LinkUp { vmid, device, .. } if *vmid == vm && device == net => owed = false,
            _ => {}
        }
    }
    owed
}

/// The host a whole-host run asked to shut down and has not seen online again since.
pub fn host_owed(records: &[Record]) -> Option<String> {
    let mut owed = None;
    for record in records {
        match &record.entry {
            Entry::HostShutdownRequested { host } => owed = Some(host.clone()),
            Entry::HostOnline { host } if owed.as_ref() == Some(host) => owed = None,
            _ => {}
        }
    }
    owed
}

/// What an earlier run still owes, for refusals: VMs and the host, if any.
pub fn owed_text(records: &[Record]) -> Option<String> {
    let mut parts: Vec<String> = pending_restore(records)
        .iter()
        .map(|v| format!("{} {}", v.vmid, v.name))
        .collect();
    for (vm, devices) in links_owed(records) {
        parts.push(format!(
            "{} {} link of {} pulled",
            vm.vmid,
            vm.name,
            devices.join(", ")
        ));
    }
    if let Some(host) = host_owed(records) {
        parts.insert(0, format!("host {host}"));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> PlannedFault {
        PlannedFault {
            environment: "staging".into(),
            host: "pve2".into(),
            vms: vec![
                PlannedVm {
                    vmid: 201,
                    name: "talos-stag-cp-02".into(),
                    host: "pve2".into(),
                    node: "talos-stag-cp-02".into(),
                    nets: vec!["net0".into(), "net1".into()],
                },
                PlannedVm {
                    vmid: 202,
                    name: "talos-stag-w-02".into(),
                    host: "pve2".into(),
                    node: "talos-stag-w-02".into(),
                    nets: Vec::new(),
                },
            ],
            restore_by: Utc::now(),
            fault: FaultKind::Partition,
            host_power: None,
            provenance: None,
        }
    }

    #[test]
    fn a_pulled_link_is_owed_until_its_link_up_is_read_back_and_refuses_a_new_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("staging.journal");
        let mut journal = Journal::create(&path, &plan()).unwrap();
        for device in ["net0", "net1"] {
            journal
                .append(Entry::LinkDownRequested {
                    vmid: 201,
                    host: "pve2".into(),
                    device: device.into(),
                    before: "virtio=AA:BB,bridge=vmbr0".into(),
                })
                .unwrap();
        }
        journal
            .append(Entry::LinkUpRequested {
                vmid: 201,
                host: "pve2".into(),
                device: "net0".into(),
            })
            .unwrap();
        let owed = links_owed(&read(&path).unwrap());
        assert_eq!(owed.len(), 1);
        assert_eq!(
            owed[0].1,
            vec!["net0".to_string(), "net1".to_string()],
            "asked, not read back"
        );
        journal
            .append(Entry::LinkUp {
                vmid: 201,
                host: "pve2".into(),
                device: "net0".into(),
            })
            .unwrap();
        let records = read(&path).unwrap();
        assert_eq!(links_owed(&records)[0].1, vec!["net1".to_string()]);
        assert!(pending_restore(&records).is_empty(), "nothing was stopped");
        let err = Journal::create(&path, &plan()).err().expect("refused");
        assert!(
            err.to_string()
                .contains("201 talos-stag-cp-02 link of net1 pulled"),
            "{err}"
        );
        journal
            .append(Entry::LinkUp {
                vmid: 201,
                host: "pve2".into(),
                device: "net1".into(),
            })
            .unwrap();
        assert!(owed_text(&read(&path).unwrap()).is_none());
    }

    #[test]
    fn a_journal_written_before_partitions_reads_as_a_power_fault() {
        let old = r#"{"environment":"staging","host":"pve2","vms":[{"vmid":201,"name":"a","host":"pve2","node":"a"}],"restore_by":"2026-11-29T10:00:00Z"}"#;
        let plan: PlannedFault = serde_json::from_str(old).unwrap();
        assert_eq!(plan.fault, FaultKind::Power);
        assert!(plan.vms[0].nets.is_empty());
    }

    #[test]
    fn the_journal_records_the_cluster_the_plan_acts_on() {
        use crate::state::provenance::{ClusterIdentity, Provenance, Topology};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("staging.journal");
        let mut planned = plan();
        planned.provenance = Some(Box::new(Provenance {
            environment: "staging".into(),
            collected_at: Utc::now(),
            cluster: ClusterIdentity {
                kube_system_uid: Some("3f1c".into()),
                ..Default::default()
            },
            topology: Topology::default(),
        }));
        let _journal = Journal::create(&path, &planned).unwrap();
        let records = read(&path).unwrap();
        let written = super::plan(&records).expect("the plan is the first record");
        assert_eq!(written.provenance, planned.provenance);
    }

    #[test]
    fn the_plan_is_on_disk_before_any_action() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j/staging.journal");
        let _journal = Journal::create(&path, &plan()).unwrap();
        let records = read(&path).unwrap();
        assert_eq!(records.len(), 1);
        let written = super::plan(&records).expect("the plan is the first record");
        assert_eq!((written.host.as_str(), &written.vms), ("pve2", &plan().vms));
        assert!(pending_restore(&records).is_empty(), "nothing stopped yet");
    }

    #[test]
    fn a_requested_stop_is_owed_until_the_start_is_confirmed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("staging.journal");
        let mut journal = Journal::create(&path, &plan()).unwrap();
        journal
            .append(Entry::StopRequested {
                vmid: 201,
                host: "pve2".into(),
            })
            .unwrap();
        journal
            .append(Entry::StopRequested {
                vmid: 202,
                host: "pve2".into(),
            })
            .unwrap();
        journal
            .append(Entry::Stopped {
                vmid: 201,
                host: "pve2".into(),
            })
            .unwrap();
        let owed: Vec<u32> = pending_restore(&read(&path).unwrap())
            .iter()
            .map(|v| v.vmid)
            .collect();
        assert_eq!(owed, vec![201, 202]);
        journal
            .append(Entry::Started {
                vmid: 201,
                host: "pve2".into(),
            })
            .unwrap();
        let owed: Vec<u32> = pending_restore(&read(&path).unwrap())
            .iter()
            .map(|v| v.vmid)
            .collect();
        assert_eq!(owed, vec![202]);
    }

    #[test]
    fn a_new_run_is_refused_while_a_restore_is_owed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("staging.journal");
        let mut journal = Journal::create(&path, &plan()).unwrap();
        journal
            .append(Entry::StopRequested {
                vmid: 201,
                host: "pve2".into(),
            })
            .unwrap();
        drop(journal);
        let err = Journal::create(&path, &plan()).err().expect("refused");
        let text = err.to_string();
        assert!(
            text.contains("gates recover staging") && text.contains("201 talos-stag-cp-02"),
            "{text}"
        );
    }

    #[test]
    fn a_torn_last_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("staging.journal");
        let mut journal = Journal::create(&path, &plan()).unwrap();
        journal
            .append(Entry::StopRequested {
                vmid: 201,
                host: "pve2".into(),
            })
            .unwrap();
        drop(journal);
        let mut text = fs::read_to_string(&path).unwrap();
        text.push_str("{\"at\":\"2026-11-29T10:00:00Z\",\"event\":\"star");
        fs::write(&path, text).unwrap();
        let records = read(&path).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(pending_restore(&records).len(), 1);
    }

    #[test]
    fn a_corrupt_line_that_is_not_the_torn_last_one_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("staging.journal");
        let mut journal = Journal::create(&path, &plan()).unwrap();
        journal
            .append(Entry::StopRequested {
                vmid: 201,
                host: "pve2".into(),
            })
            .unwrap();
        drop(journal);
        let good = fs::read_to_string(&path).unwrap();
        let damaged = "{\"at\":\"2026-11-29T10:00:00Z\",\"event\":\"stop-req";
        let mut lines: Vec<&str> = good.lines().collect();
        lines.insert(1, damaged);
        fs::write(&path, lines.join("\n") + "\n").unwrap();
        let err = read(&path).expect_err("corrupt");
        assert!(
            err.to_string()
                .contains(&format!("{}:2: not a journal record", path.display())),
            "{err}"
        );
        // The same damage as the last line, newline and all, is no torn write either.
        fs::write(&path, format!("{good}{damaged}\n")).unwrap();
        assert!(read(&path).is_err());
    }

    #[test]
    fn a_shut_down_host_is_owed_until_it_is_seen_online() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("staging.journal");
        let mut journal = Journal::create(&path, &plan()).unwrap();
        journal
            .append(Entry::HostShutdownRequested {
                host: "pve2".into(),
            })
            .unwrap();
        assert_eq!(host_owed(&read(&path).unwrap()).as_deref(), Some("pve2"));
        journal
            .append(Entry::HostWakeRequested {
                host: "pve2".into(),
                via: "pve1".into(),
            })
            .unwrap();
        let records = read(&path).unwrap();
        assert_eq!(
            host_owed(&records).as_deref(),
            Some("pve2"),
            "asked, not seen"
        );
        assert_eq!(owed_text(&records).as_deref(), Some("host pve2"));
        let err = Journal::create(&path, &plan()).err().expect("refused");
        assert!(err.to_string().contains("host pve2"), "{err}");
        journal
            .append(Entry::HostOnline {
                host: "pve2".into(),
            })
            .unwrap();
        assert_eq!(host_owed(&read(&path).unwrap()), None);
    }

    #[test]
    fn a_second_holder_of_the_run_lock_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chaos-staging.journal");
        let first = RunLock::acquire(&path, "staging").unwrap();
        let err = RunLock::acquire(&path, "staging").err().expect("refused");
        let text = err.to_string();
        assert!(
            text.contains(&format!("pid {}", std::process::id())) && text.contains("in progress"),
            "{text}"
        );
        drop(first);
        assert!(RunLock::acquire(&path, "staging").is_ok());
    }
}
