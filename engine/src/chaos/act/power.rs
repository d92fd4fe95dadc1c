//! The only writes the chaos step makes: Proxmox stop and start of the planned VMs, and in
//! whole-host mode the host's shutdown and wake-on-LAN. Every request is journaled (synced)
//! before it is sent and its result after, and every request sent is counted, so the
//! "no manual work" trial can compare what was done with the plan.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::join_all;
use gates_infra::proxmox::{NetDeviceError, PowerOptions, ProxmoxClient, ProxmoxError};

use crate::chaos::journal::{Entry, Journal, JournalError, PlannedVm};

/// The first pause between two attempts to start a VM; doubled up to [`START_BACKOFF_MAX`].
const START_BACKOFF: Duration = Duration::from_millis(500);
const START_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Whether trying a start again may succeed: anything but a token, a privilege or a TLS
/// trust the request itself is refused for.
fn retry_may_help(err: &ProxmoxError) -> bool {
    !matches!(
        err,
        ProxmoxError::InvalidSettings { .. }
            | ProxmoxError::Secret { .. }
            | ProxmoxError::Unauthorized { .. }
            | ProxmoxError::Forbidden { .. }
            | ProxmoxError::UnknownCa { .. }
            | ProxmoxError::NameMismatch { .. }
            | ProxmoxError::CertificateExpired { .. }
            | ProxmoxError::FingerprintMismatch { .. }
    )
}

pub use gates_core::record::power::{Issued, PowerAction};

/// Why a power or link action of the run did not happen or did not take, naming the VM or
/// host and the request; said one per line among the run's stop or start errors.
#[derive(Debug, thiserror::Error)]
pub enum PowerError {
    /// The journal line before a request could not be written: nothing was sent.
    #[error("journal: {0}; nothing was sent")]
    NotJournaled(JournalError),
    /// The journal line of a start attempt or of a request's result could not be written.
    #[error("journal: {0}")]
    Journal(JournalError),
    #[error("stop {vmid} {name}: {source}")]
    Stop {
        vmid: u32,
        name: String,
        source: ProxmoxError,
    },
    /// Every start until `chaos.recovery_timeout` failed, or one that trying again cannot
    /// help.
    #[error(
        "start {vmid} {name}: gave up after {attempts} attempts over {:.1}s (chaos.recovery_timeout {}): {source}",
        .spent.as_secs_f64(),
        humantime::format_duration(*.patience)
    )]
    StartGaveUp {
        vmid: u32,
        name: String,
        attempts: u32,
        spent: Duration,
        patience: Duration,
        source: ProxmoxError,
    },
    /// The host's request was refused, or the host did not reach the state in time.
    #[error(transparent)]
    Host(ProxmoxError),
    #[error("shut down host {host}: {source}")]
    Shutdown {
        host: String,
        source: Box<PowerError>,
    },
    #[error("wake host {host} through {via}: {source}")]
    Wake {
        host: String,
        via: String,
        source: Box<PowerError>,
    },
    /// The device could not be read before its link was pulled: nothing was sent.
    #[error("{0}; nothing was sent")]
    LinkUnread(LinkError),
    /// The link update was refused, or did not read back as applied.
    #[error(transparent)]
    Link(LinkError),
    #[error("pull the link of {net} of VM {vmid} {name}: {source}")]
    Pull {
        net: String,
        vmid: u32,
        name: String,
        source: Box<PowerError>,
    },
    /// Every attempt to put the link back until `chaos.recovery_timeout` failed.
    #[error(
        "put the link of {net} of VM {vmid} {name} back: gave up after {attempts} attempts over {:.1}s (chaos.recovery_timeout {}): {source}; run `gates recover` or set link_down=0 on {net} by hand",
        .spent.as_secs_f64(),
        humantime::format_duration(*.patience)
    )]
    PutBackGaveUp {
        net: String,
        vmid: u32,
        name: String,
        attempts: u32,
        spent: Duration,
        patience: Duration,
        source: LinkError,
    },
}

/// Why a VM's network device could not be read, written, or read back as written.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("reading its config: {0}")]
    ConfigUnread(ProxmoxError),
    #[error("{net} is no longer in its config")]
    Gone { net: String },
    #[error("{net} = {text:?} cannot be parsed ({source})")]
    Unparsable {
        net: String,
        text: String,
        source: NetDeviceError,
    },
    #[error(transparent)]
    Write(ProxmoxError),
    /// The update was accepted but the running device does not show it.
    #[error(
        "{net} reads back as {back:?} after the update: the change is pending, not applied (is network hotplug off for this VM?)"
    )]
    Pending { net: String, back: String },
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

    pub(super) fn client(&self) -> &ProxmoxClient {
        &self.client
    }

    /// Count one request about one network device of a VM.
    pub(super) fn count_device<T, E: std::fmt::Display>(
        &self,
        action: PowerAction,
        vm: &PlannedVm,
        device: &str,
        result: &Result<T, E>,
    ) {
        self.count(action, Some(vm.vmid), &vm.host, result);
        if let Ok(mut issued) = self.issued.lock()
            && let Some(last) = issued.last_mut()
        {
            last.device = Some(device.to_string());
        }
    }

    pub fn issued(&self) -> Vec<Issued> {
        self.issued.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Append to the journal; a journal that cannot be written is reported, not ignored.
    pub fn note(&self, entry: Entry) -> Result<(), JournalError> {
        let mut journal = self.journal.lock().map_err(|_| JournalError::Poisoned)?;
        journal.append(entry)
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
        results
            .into_iter()
            .filter_map(|r| r.err().map(|e| e.to_string()))
            .collect()
    }

    async fn stop(&self, vm: &PlannedVm) -> Result<(), PowerError> {
        let result = self.client.stop_vm(vm.vmid, &self.options).await;
        self.count(PowerAction::Stop, Some(vm.vmid), &vm.host, &result);
        match result {
            Ok(_) => self
                .note(Entry::Stopped {
                    vmid: vm.vmid,
                    host: vm.host.clone(),
                })
                .map_err(PowerError::Journal),
            Err(err) => {
                let _ = self.note(Entry::ActionFailed {
                    vmid: vm.vmid,
                    action: "stop".into(),
                    error: err.to_string(),
                });
                Err(PowerError::Stop {
                    vmid: vm.vmid,
                    name: vm.name.clone(),
                    source: err,
                })
            }
        }
    }

    /// Start every VM and wait until each runs, retrying each start (with backoff) until
    /// `patience` (`chaos.recovery_timeout`) is spent: a slow or stalled Proxmox must not leave
    /// a VM off. Every attempt is journaled. Returns the errors.
    pub async fn start_all(&self, vms: &[PlannedVm], patience: Duration) -> Vec<String> {
        let results = join_all(vms.iter().map(|vm| self.start(vm, patience))).await;
        results
            .into_iter()
            .filter_map(|r| r.err().map(|e| e.to_string()))
            .collect()
    }

    async fn start(&self, vm: &PlannedVm, patience: Duration) -> Result<(), PowerError> {
        let began = tokio::time::Instant::now();
        let mut backoff = START_BACKOFF;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            self.note(Entry::StartRequested {
                vmid: vm.vmid,
                host: vm.host.clone(),
            })
            .map_err(PowerError::Journal)?;
            // The task and the VM's state are awaited at most for what is left.
            let left = patience
                .saturating_sub(began.elapsed())
                .max(Duration::from_secs(1));
            let options = PowerOptions {
                task_deadline: self.options.task_deadline.min(left),
                state_deadline: self.options.state_deadline.min(left),
                ..self.options
            };
            let result = self.client.start_vm(vm.vmid, &options).await;
            let counted = if attempts == 1 {
                PowerAction::Start
            } else {
                PowerAction::StartRetry
            };
            self.count(counted, Some(vm.vmid), &vm.host, &result);
            let err = match result {
                Ok(report) => {
                    return self
                        .note(Entry::Started {
                            vmid: vm.vmid,
                            host: report.node,
                        })
                        .map_err(PowerError::Journal);
                }
                Err(err) => err,
            };
            let _ = self.note(Entry::ActionFailed {
                vmid: vm.vmid,
                action: "start".into(),
                error: err.to_string(),
            });
            let spent = began.elapsed();
            if !retry_may_help(&err) || spent >= patience {
                return Err(PowerError::StartGaveUp {
                    vmid: vm.vmid,
                    name: vm.name.clone(),
                    attempts,
                    spent,
                    patience,
                    source: err,
                });
            }
            tokio::time::sleep(backoff.min(patience - spent)).await;
            backoff = (backoff * 2).min(START_BACKOFF_MAX);
        }
    }

    /// Orderly shutdown of the whole host, then wait until the cluster sees it offline.
    pub async fn shutdown_host(&self, host: &str, deadline: Duration) -> Result<(), PowerError> {
        let request = Entry::HostShutdownRequested {
            host: host.to_string(),
        };
        let sent = async { self.client.shutdown_host(host).await };
        self.host_action(host, request, sent, false, deadline)
            .await
            .map_err(|e| PowerError::Shutdown {
                host: host.to_string(),
                source: Box::new(e),
            })
    }

    /// Wake-on-LAN for the host (sent by the host this client talks to), then wait until the
    /// cluster sees it online.
    pub async fn wake_host(
        &self,
        host: &str,
        via: &str,
        deadline: Duration,
    ) -> Result<(), PowerError> {
        let request = Entry::HostWakeRequested {
            host: host.to_string(),
            via: via.to_string(),
        };
        let sent = async { self.client.wake_host(host).await.map(|_mac| ()) };
        self.host_action(host, request, sent, true, deadline)
            .await
            .map_err(|e| PowerError::Wake {
                host: host.to_string(),
                via: via.to_string(),
                source: Box::new(e),
            })
    }

    /// Journal the request, send it, wait until the host is `online` (or not), journal the
    /// outcome.
    async fn host_action(
        &self,
        host: &str,
        request: Entry,
        sent: impl std::future::Future<Output = Result<(), gates_infra::proxmox::ProxmoxError>>,
        online: bool,
        deadline: Duration,
    ) -> Result<(), PowerError> {
        self.note(request).map_err(PowerError::NotJournaled)?;
        let result = sent.await;
        let action = if online { "wake" } else { "shutdown" };
        let counted = if online {
            PowerAction::HostWake
        } else {
            PowerAction::HostShutdown
        };
        self.count(counted, None, host, &result);
        let waited = match result {
            Ok(()) => self
                .client
                .wait_host(host, online, deadline, self.options.poll_interval)
                .await
                .map(|_| ()),
            Err(err) => Err(err),
        };
        let host = host.to_string();
        match waited {
            Ok(()) => self
                .note(if online {
                    Entry::HostOnline { host }
                } else {
                    Entry::HostOffline { host }
                })
                .map_err(PowerError::Journal),
            Err(err) => {
                let _ = self.note(Entry::HostActionFailed {
                    host,
                    action: action.into(),
                    error: err.to_string(),
                });
                Err(PowerError::Host(err))
            }
        }
    }

    /// Count one request sent: a VM's (`vmid`) or the host's (`None`).
    fn count<T, E: std::fmt::Display>(
        &self,
        action: PowerAction,
        vmid: Option<u32>,
        host: &str,
        result: &Result<T, E>,
    ) {
        if let Ok(mut issued) = self.issued.lock() {
            issued.push(Issued {
                action,
                vmid,
                host: host.to_string(),
                device: None,
                result: match result {
                    Ok(_) => "ok".to_string(),
                    Err(err) => err.to_string(),
                },
            });
        }
    }
}

/// "No manual work": the harness's writes were exactly the plan's stops and the starts that
/// undo them, and in whole-host mode one shutdown and one wake of the planned host. Returns
/// what went beyond the plan, empty when nothing did.
pub fn beyond_plan(vms: &[PlannedVm], whole_host: Option<&str>, issued: &[Issued]) -> Vec<String> {
    let mut out = Vec::new();
    for action in issued {
        match action.vmid {
            Some(vmid) if !vms.iter().any(|v| v.vmid == vmid) => out.push(format!(
                "{} of VM {vmid} which is not in the plan",
                action.action
            )),
            None if whole_host != Some(action.host.as_str()) => out.push(format!(
                "{} of host {} which the plan does not power off",
                action.action, action.host
            )),
            _ => {}
        }
    }
    // VM actions are counted by vmid, host actions by host.
    let times = |action: PowerAction, vmid: Option<u32>, host: &str| {
        issued
            .iter()
            .filter(|a| a.action == action && a.vmid == vmid && (vmid.is_some() || a.host == host))
            .count()
    };
    for vm in vms {
        let subject = format!("VM {} {}", vm.vmid, vm.name);
        let stops = times(PowerAction::Stop, Some(vm.vmid), "");
        let starts = times(PowerAction::Start, Some(vm.vmid), "");
        if vm.nets.is_empty() {
            paired(&mut out, &subject, (stops, "stopped"), (starts, "started"));
        } else {
            links_paired(&mut out, vm, issued);
            if stops + starts > 0 {
                out.push(format!(
                    "{subject} was stopped or started, but the plan only pulls its links"
                ));
            }
        }
    }
    if let Some(host) = whole_host {
        let shutdowns = times(PowerAction::HostShutdown, None, host);
        let wakes = times(PowerAction::HostWake, None, host);
        paired(
            &mut out,
            &format!("host {host}"),
            (shutdowns, "shut down"),
            (wakes, "woken"),
        );
    }
    out
}

/// A partitioned VM: each planned device's link pulled once and put back once (retries of
/// the put-back aside), and no other device of it touched.
fn links_paired(out: &mut Vec<String>, vm: &PlannedVm, issued: &[Issued]) {
    let times = |action: PowerAction, device: &str| {
        issued
            .iter()
            .filter(|a| {
                a.action == action && a.vmid == Some(vm.vmid) && a.device.as_deref() == Some(device)
            })
            .count()
    };
    for net in &vm.nets {
        let subject = format!("{net} of VM {} {}", vm.vmid, vm.name);
        let (downs, ups) = (
            times(PowerAction::LinkDown, net),
            times(PowerAction::LinkUp, net),
        );
        paired(out, &subject, (downs, "pulled"), (ups, "put back"));
    }
    for action in issued.iter().filter(|a| a.vmid == Some(vm.vmid)) {
        if let Some(device) = action.device.as_ref().filter(|d| !vm.nets.contains(d)) {
            out.push(format!(
                "{} of {device} of VM {} which the plan does not pull",
                action.action, vm.vmid
            ));
        }
    }
}

/// A fault and its undo each happen at most once, and the undo only after the fault.
fn paired(out: &mut Vec<String>, subject: &str, fault: (usize, &str), undo: (usize, &str)) {
    let ((faults, did), (undos, undid)) = (fault, undo);
    if faults > 1 {
        out.push(format!("{subject} was {did} {faults} times"));
    }
    if undos > 1 {
        out.push(format!("{subject} was {undid} {undos} times"));
    }
    if faults == 0 && undos > 0 {
        out.push(format!("{subject} was {undid} without having been {did}"));
    }
}

/// The journal hears how the run finished.
impl crate::chaos::reporters::Reporter for Power {
    fn report(&self, event: &crate::chaos::reporters::RunEvent<'_>) {
        use crate::chaos::reporters::RunEvent;
        match event {
            RunEvent::Finished(outcome) => {
                let _ = self.note(Entry::Finished {
                    outcome: outcome.to_string(),
                });
            }
            RunEvent::Begin(_)
            | RunEvent::Phase(_)
            | RunEvent::Log(_)
            | RunEvent::Probes(_)
            | RunEvent::Plan(_)
            | RunEvent::Timeline(_)
            | RunEvent::Quiet
            | RunEvent::Note(_)
            | RunEvent::Record { .. } => {}
        }
    }
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
            nets: Vec::new(),
        }
    }

    fn issued(action: PowerAction, vmid: u32) -> Issued {
        Issued {
            action,
            vmid: Some(vmid),
            host: "pve3".into(),
            device: None,
            result: "ok".into(),
        }
    }

    fn host_action(action: PowerAction, host: &str) -> Issued {
        Issued {
            action,
            vmid: None,
            host: host.into(),
            device: None,
            result: "ok".into(),
        }
    }

    #[tokio::test]
    async fn a_failing_start_is_retried_until_the_recovery_timeout_and_says_how_long_it_tried() {
        let (power, path, _dir) = crate::chaos::act::test_power::unreachable_power();
        let vm = crate::chaos::test_support::planned_fault("lab").vms[0].clone();
        power
            .note(Entry::StopRequested {
                vmid: vm.vmid,
                host: vm.host.clone(),
            })
            .unwrap();
        let began = std::time::Instant::now();
        let errors = power
            .start_all(std::slice::from_ref(&vm), Duration::from_secs(3))
            .await;
        let took = began.elapsed().as_secs_f64();
        assert_eq!(errors.len(), 1, "{errors:?}");
        let text = &errors[0];
        assert!(took >= 3.0, "tried until the patience was spent: {took}s");
        let claimed: f64 = text
            .split(" attempts over ")
            .nth(1)
            .and_then(|rest| rest.split('s').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no duration in {text}"));
        assert!(
            (claimed - took).abs() < 0.3,
            "claims {claimed}s, took {took}s: {text}"
        );
        assert!(
            text.contains("(chaos.recovery_timeout 3s)"),
            "names the setting: {text}"
        );
        // Every attempt is journaled; the journal still owes the VM.
        let records = crate::chaos::journal::read(&path).unwrap();
        let requested = records
            .iter()
            .filter(|r| matches!(r.entry, Entry::StartRequested { .. }))
            .count();
        assert!(requested > 1, "{requested} start requests journaled");
        assert_eq!(crate::chaos::journal::pending_restore(&records).len(), 1);
        // One start counted, the rest as retries: no manual work beyond the plan.
        let issued = power.issued();
        assert_eq!(
            issued
                .iter()
                .filter(|i| i.action == PowerAction::Start)
                .count(),
            1
        );
        assert_eq!(
            issued
                .iter()
                .filter(|i| i.action == PowerAction::StartRetry)
                .count(),
            requested - 1
        );
    }

    #[test]
    fn one_stop_and_one_start_per_planned_vm_is_the_plan() {
        let plan = [vm(103)];
        assert!(
            beyond_plan(
                &plan,
                None,
                &[
                    issued(PowerAction::Stop, 103),
                    issued(PowerAction::Start, 103)
                ]
            )
            .is_empty()
        );
    }

    #[test]
    fn anything_else_is_beyond_the_plan() {
        let plan = [vm(103)];
        let extra = beyond_plan(
            &plan,
            None,
            &[
                issued(PowerAction::Stop, 103),
                issued(PowerAction::Stop, 201),
                issued(PowerAction::Start, 103),
                issued(PowerAction::Start, 103),
            ],
        );
        assert_eq!(extra.len(), 2, "{extra:?}");
        assert!(extra[0].contains("201 which is not in the plan"));
        assert!(extra[1].contains("started 2 times"));
    }

    #[test]
    fn a_partition_pulls_and_puts_back_each_planned_link_once_and_stops_nothing() {
        let mut planned = vm(103);
        planned.nets = vec!["net0".into(), "net1".into()];
        let link = |action: PowerAction, device: &str| Issued {
            device: Some(device.into()),
            ..issued(action, 103)
        };
        let clean = [
            link(PowerAction::LinkDown, "net0"),
            link(PowerAction::LinkDown, "net1"),
            link(PowerAction::LinkUp, "net0"),
            link(PowerAction::LinkUpRetry, "net1"),
            link(PowerAction::LinkUp, "net1"),
        ];
        assert!(beyond_plan(std::slice::from_ref(&planned), None, &clean).is_empty());
        let extra = beyond_plan(
            std::slice::from_ref(&planned),
            None,
            &[
                link(PowerAction::LinkDown, "net0"),
                link(PowerAction::LinkDown, "net2"),
                issued(PowerAction::Stop, 103),
                issued(PowerAction::Start, 103),
            ],
        );
        assert!(
            extra
                .iter()
                .any(|e| e.contains("link-down of net2 of VM 103 which the plan does not pull")),
            "{extra:?}"
        );
        assert!(
            extra
                .iter()
                .any(|e| e.contains("stopped or started, but the plan only pulls its links")),
            "{extra:?}"
        );
    }

    #[test]
    fn host_power_is_in_the_plan_only_in_whole_host_mode() {
        let plan = [vm(103)];
        let run = [
            issued(PowerAction::Stop, 103),
            host_action(PowerAction::HostShutdown, "pve3"),
            host_action(PowerAction::HostWake, "pve3"),
            issued(PowerAction::Start, 103),
        ];
        assert!(beyond_plan(&plan, Some("pve3"), &run).is_empty());
        let extra = beyond_plan(&plan, None, &run);
        assert_eq!(extra.len(), 2, "{extra:?}");
        assert!(extra[0].contains("host-shutdown of host pve3 which the plan does not power off"));
        let extra = beyond_plan(
            &plan,
            Some("pve3"),
            &[
                host_action(PowerAction::HostWake, "pve3"),
                host_action(PowerAction::HostShutdown, "pve1"),
            ],
        );
        assert!(
            extra.iter().any(|e| e.contains("of host pve1")),
            "{extra:?}"
        );
        assert!(
            extra
                .iter()
                .any(|e| e.contains("woken without having been shut down")),
            "{extra:?}"
        );
    }
}
