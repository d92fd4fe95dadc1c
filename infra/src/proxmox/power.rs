//! Stopping and starting a VM and waiting until it really is stopped or running.
//! A task that ends `OK` is not proof: for HA-managed VMs the task only asks the HA
//! manager for a state (and stopping sets the HA requested state to `stopped`, so HA
//! will not restart the VM), so the VM's real state is polled afterwards.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::client::ProxmoxClient;
use super::error::ProxmoxError;
use super::model::{HaRequestedState, TaskStatus};
use super::upid::Upid;

/// Deadlines and poll cadence of a power action.
#[derive(Debug, Clone, Copy)]
pub struct PowerOptions {
    /// Until the task has ended.
    pub task_deadline: Duration,
    /// Until the VM reports the wanted state, after the task ended.
    pub state_deadline: Duration,
    pub poll_interval: Duration,
}

impl Default for PowerOptions {
    fn default() -> Self {
        Self {
            task_deadline: Duration::from_secs(120),
            state_deadline: Duration::from_secs(180),
            poll_interval: Duration::from_secs(1),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PowerAction {
    Stop,
    Start,
}

impl PowerAction {
    fn endpoint(self) -> &'static str {
        match self {
            PowerAction::Stop => "stop",
            PowerAction::Start => "start",
        }
    }

    /// The `status` the VM must reach.
    pub fn target_status(self) -> &'static str {
        match self {
            PowerAction::Stop => "stopped",
            PowerAction::Start => "running",
        }
    }
}

/// How a finished task ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskOutcome {
    Ok,
    /// Success with warnings (`WARNINGS: n`).
    Warnings(String),
}

/// What a power action did and what it observed.
/// Serializable, so the chaos journal can record it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PowerReport {
    pub vmid: u32,
    pub action: PowerAction,
    /// Proxmox node the VM was on when the action was sent.
    pub node: String,
    /// The task, unless nothing was sent because the VM already was in the wanted state.
    pub upid: Option<Upid>,
    pub task: Option<TaskOutcome>,
    /// The VM already was in the wanted state (not HA-managed), so nothing was sent.
    pub already_in_state: bool,
    /// HA manages the VM: the action was a request to the HA manager.
    pub ha_managed: bool,
    /// HA requested state after the action (`stopped` after a stop: HA will not restart
    /// the VM until it is started through the API), when readable.
    pub ha_requested_state: Option<HaRequestedState>,
    /// The VM's `status` at the end (`stopped` or `running`).
    pub final_status: String,
    /// Time from sending the request to observing the final state.
    pub elapsed: Duration,
}

impl ProxmoxClient {
    /// Polls a task on the node named in its UPID until it has stopped, then judges its
    /// exit status. A 400 right after creation (task not visible yet) is retried.
    pub async fn wait_task(
        &self,
        upid: &Upid,
        deadline: Duration,
        poll: Duration,
    ) -> Result<TaskOutcome, ProxmoxError> {
        let until = Instant::now() + deadline;
        loop {
            let status: Option<TaskStatus> = match self.task_status(upid).await {
                Ok(s) => Some(s),
                Err(ProxmoxError::BadRequest { .. }) if Instant::now() < until => None,
                Err(e) => return Err(e),
            };
            if let Some(s) = status
                && !s.is_running()
            {
                let exit = s.exitstatus.clone().unwrap_or_default();
                return if exit == "OK" {
                    Ok(TaskOutcome::Ok)
                } else if s.succeeded() {
                    Ok(TaskOutcome::Warnings(exit))
                } else {
                    Err(ProxmoxError::TaskFailed {
                        upid: upid.to_string(),
                        exitstatus: if exit.is_empty() {
                            "no exit status".into()
                        } else {
                            exit
                        },
                    })
                };
            }
            if Instant::now() + poll > until {
                return Err(ProxmoxError::TaskTimeout {
                    upid: upid.to_string(),
                    after: deadline,
                });
            }
            tokio::time::sleep(poll).await;
        }
    }

    /// Stops a VM ("pull the plug", `status/stop`) and waits until it is `stopped`.
    pub async fn stop_vm(
        &self,
        vmid: u32,
        options: &PowerOptions,
    ) -> Result<PowerReport, ProxmoxError> {
        self.power(vmid, PowerAction::Stop, options).await
    }

    /// Starts a VM (`status/start`) and waits until it is `running`.
    pub async fn start_vm(
        &self,
        vmid: u32,
        options: &PowerOptions,
    ) -> Result<PowerReport, ProxmoxError> {
        self.power(vmid, PowerAction::Start, options).await
    }

    async fn power(
        &self,
        vmid: u32,
        action: PowerAction,
        options: &PowerOptions,
    ) -> Result<PowerReport, ProxmoxError> {
        // Re-resolve the node every time: HA recovery moves VMs.
        let located = self.locate_vm(vmid).await?;
        let node = located.node.clone();
        let before = self.vm_status(&node, vmid).await?;
        let ha_managed = before.ha_managed || located.hastate.is_some();
        let wanted = action.target_status();
        let started = Instant::now();

        // Starting a running VM is a task error in Proxmox; stopping a stopped one is not,
        // but there is nothing to do either. HA-managed VMs always get the request, so
        // their HA requested state matches what was asked.
        if before.status == wanted && !ha_managed {
            return Ok(PowerReport {
                vmid,
                action,
                node,
                upid: None,
                task: None,
                already_in_state: true,
                ha_managed,
                ha_requested_state: None,
                final_status: before.status,
                elapsed: started.elapsed(),
            });
        }

        let upid = self.vm_power_task(&node, vmid, action.endpoint()).await?;
        let task = self
            .wait_task(&upid, options.task_deadline, options.poll_interval)
            .await?;
        let final_status = self.wait_vm_status(vmid, &node, wanted, options).await?;
        let ha_requested_state = if ha_managed {
            self.ha_resources()
                .await
                .ok()
                .and_then(|list| list.into_iter().find(|r| r.vmid == Some(vmid)))
                .map(|r| r.state)
        } else {
            None
        };
        Ok(PowerReport {
            vmid,
            action,
            node,
            upid: Some(upid),
            task: Some(task),
            already_in_state: false,
            ha_managed,
            ha_requested_state,
            final_status,
            elapsed: started.elapsed(),
        })
    }

    /// Polls `status/current` until `status == wanted`; follows the VM if HA moved it.
    async fn wait_vm_status(
        &self,
        vmid: u32,
        node: &str,
        wanted: &str,
        options: &PowerOptions,
    ) -> Result<String, ProxmoxError> {
        let until = Instant::now() + options.state_deadline;
        let mut node = node.to_string();
        let mut last = String::from("unknown");
        loop {
            match self.vm_status(&node, vmid).await {
                Ok(s) if s.status == wanted => return Ok(s.status),
                Ok(s) => last = s.status,
                Err(ProxmoxError::NotFound { .. }) => {
                    node = self.locate_vm(vmid).await?.node;
                }
                Err(e) => return Err(e),
            }
            if Instant::now() + options.poll_interval > until {
                return Err(ProxmoxError::StateTimeout {
                    vmid,
                    wanted: wanted.to_string(),
                    last,
                    after: options.state_deadline,
                });
            }
            tokio::time::sleep(options.poll_interval).await;
        }
    }
}
