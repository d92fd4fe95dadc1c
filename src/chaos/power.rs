//! The only writes the chaos step makes: Proxmox stop and start of the planned VMs. Every
//! request is journaled (synced) before it is sent and its result after, and every request
//! sent is counted, so the "no manual work" trial can compare what was done with the plan.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::join_all;
use gates_infra::proxmox::{PowerOptions, ProxmoxClient};
use serde::Serialize;

use super::journal::{Entry, Journal, PlannedVm};

/// One power request the harness sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Issued {
    pub action: &'static str,
    pub vmid: u32,
    pub host: String,
    /// `ok`, or the error.
    pub result: String,
}

/// Sends power actions for the planned VMs and keeps the journal and the count.
#[derive(Clone)]
pub struct Power {
    client: ProxmoxClient,
    options: PowerOptions,
    journal: Arc<Mutex<Journal>>,
    issued: Arc<Mutex<Vec<Issued>>>,
}

impl Power {
    pub fn new(client: ProxmoxClient, poll: Duration, journal: Journal) -> Power {
        Power {
            client,
            options: PowerOptions {
                poll_interval: poll,
                ..PowerOptions::default()
            },
            journal: Arc::new(Mutex::new(journal)),
            issued: Arc::default(),
        }
    }

    pub fn issued(&self) -> Vec<Issued> {
        self.issued.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Append to the journal; a journal that cannot be written is reported, not ignored.
    pub fn note(&self, entry: Entry) -> Result<(), String> {
        let mut journal = self
            .journal
            .lock()
            .map_err(|_| "the journal lock is poisoned".to_string())?;
        journal.append(entry).map_err(|e| e.to_string())
    }

    /// Stop every VM at once (as a host losing power does); each stop is journaled before
    /// it is sent. Returns the errors, one per VM that did not stop.
    pub async fn stop_all(&self, vms: &[PlannedVm]) -> Vec<String> {
        for vm in vms {
            if let Err(err) = self.note(Entry::StopRequested {
                vmid: vm.vmid,
                host: vm.host.clone(),
            }) {
                // Without the journal line nothing may be stopped.
                return vec![format!("journal: {err}; nothing was stopped")];
            }
        }
        let results = join_all(vms.iter().map(|vm| self.stop(vm))).await;
        results.into_iter().filter_map(Result::err).collect()
    }

    async fn stop(&self, vm: &PlannedVm) -> Result<(), String> {
        let result = self.client.stop_vm(vm.vmid, &self.options).await;
        self.count("stop", vm, &result);
        match result {
            Ok(_) => self
                .note(Entry::Stopped {
                    vmid: vm.vmid,
                    host: vm.host.clone(),
                })
                .map_err(|e| format!("journal: {e}")),
            Err(err) => {
                let text = format!("stop {} {}: {err}", vm.vmid, vm.name);
                let _ = self.note(Entry::ActionFailed {
                    vmid: vm.vmid,
                    action: "stop".into(),
                    error: err.to_string(),
                });
                Err(text)
            }
        }
    }

    /// Start every VM and wait until each runs. Returns the errors.
    pub async fn start_all(&self, vms: &[PlannedVm]) -> Vec<String> {
        let results = join_all(vms.iter().map(|vm| self.start(vm))).await;
        results.into_iter().filter_map(Result::err).collect()
    }

    async fn start(&self, vm: &PlannedVm) -> Result<(), String> {
        self.note(Entry::StartRequested {
            vmid: vm.vmid,
            host: vm.host.clone(),
        })
        .map_err(|e| format!("journal: {e}"))?;
        let result = self.client.start_vm(vm.vmid, &self.options).await;
        self.count("start", vm, &result);
        match result {
            Ok(report) => self
                .note(Entry::Started {
                    vmid: vm.vmid,
                    host: report.node,
                })
                .map_err(|e| format!("journal: {e}")),
            Err(err) => {
                let _ = self.note(Entry::ActionFailed {
                    vmid: vm.vmid,
                    action: "start".into(),
                    error: err.to_string(),
                });
                Err(format!("start {} {}: {err}", vm.vmid, vm.name))
            }
        }
    }

    fn count<T, E: std::fmt::Display>(
        &self,
        action: &'static str,
        vm: &PlannedVm,
        result: &Result<T, E>,
    ) {
        if let Ok(mut issued) = self.issued.lock() {
            issued.push(Issued {
                action,
                vmid: vm.vmid,
                host: vm.host.clone(),
                result: match result {
                    Ok(_) => "ok".to_string(),
                    Err(err) => err.to_string(),
                },
            });
        }
    }
}

/// "No manual work": the harness's writes were exactly the plan's stops and the starts that
/// undo them. Returns what went beyond the plan, empty when nothing did.
pub fn beyond_plan(vms: &[PlannedVm], issued: &[Issued]) -> Vec<String> {
    let mut out = Vec::new();
    for action in issued {
        if !vms.iter().any(|v| v.vmid == action.vmid) {
            out.push(format!(
                "{} of VM {} which is not in the plan",
                action.action, action.vmid
            ));
        }
    }
    for vm in vms {
        let stops = issued
            .iter()
            .filter(|a| a.vmid == vm.vmid && a.action == "stop")
            .count();
        let starts = issued
            .iter()
            .filter(|a| a.vmid == vm.vmid && a.action == "start")
            .count();
        if stops > 1 {
            out.push(format!(
                "VM {} {} was stopped {stops} times",
                vm.vmid, vm.name
            ));
        }
        if starts > 1 {
            out.push(format!(
                "VM {} {} was started {starts} times",
                vm.vmid, vm.name
            ));
        }
        if stops == 0 && starts > 0 {
            out.push(format!(
                "VM {} {} was started without having been stopped",
                vm.vmid, vm.name
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(vmid: u32) -> PlannedVm {
        PlannedVm {
            vmid,
            name: format!("cp-{vmid}"),
            host: "pve3".into(),
            node: format!("cp-{vmid}"),
        }
    }

    fn issued(action: &'static str, vmid: u32) -> Issued {
        Issued {
            action,
            vmid,
            host: "pve3".into(),
            result: "ok".into(),
        }
    }

    #[test]
    fn one_stop_and_one_start_per_planned_vm_is_the_plan() {
        let plan = [vm(103)];
        assert!(beyond_plan(&plan, &[issued("stop", 103), issued("start", 103)]).is_empty());
    }

    #[test]
    fn anything_else_is_beyond_the_plan() {
        let plan = [vm(103)];
        let extra = beyond_plan(
            &plan,
            &[
                issued("stop", 103),
                issued("stop", 201),
                issued("start", 103),
                issued("start", 103),
            ],
        );
        assert_eq!(extra.len(), 2, "{extra:?}");
        assert!(extra[0].contains("201 which is not in the plan"));
        assert!(extra[1].contains("started 2 times"));
    }
}
