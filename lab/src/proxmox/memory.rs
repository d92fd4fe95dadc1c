//! A small in-memory [`ProxmoxBackend`]: the reference semantics for the lab's world model and
//! the backend of the server's own tests (and of client tests elsewhere).
//!
//! Guests change state immediately when their task finishes; HA requests apply immediately;
//! host shutdown takes effect after `host_shutdown_delay` (Proxmox waits 2 s before powering
//! off, so the HTTP answer gets out first). Each host has a power watch for [`super::serve`].

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::watch;

use super::backend::{
    ActionError, HaInfo, HaState, HostCommand, HostInfo, ProxmoxBackend, VmAction, VmConfig,
    VmInfo, VmStatus,
};

#[derive(Debug)]
struct State {
    hosts: Vec<HostInfo>,
    vms: Vec<VmInfo>,
    configs: HashMap<u32, VmConfig>,
    macs: HashMap<String, String>,
}

/// In-memory cluster.
#[derive(Debug)]
pub struct MemoryProxmox {
    cluster: String,
    state: Mutex<State>,
    power: Mutex<HashMap<String, watch::Sender<bool>>>,
    host_shutdown_delay: Duration,
    /// Self-reference for delayed work spawned from `&self` methods.
    me: Weak<MemoryProxmox>,
}

/// One guest to put in a [`MemoryProxmox`].
#[derive(Debug, Clone)]
pub struct GuestSpec {
    pub vmid: u32,
    pub name: String,
    pub node: String,
    pub running: bool,
    pub tags: Vec<String>,
    pub ha: bool,
    pub smbios_uuid: Option<String>,
}

impl MemoryProxmox {
    /// Hosts named `pve1..pveN` at `ips` (all online), with the given guests.
    pub fn new(
        cluster: &str,
        ips: &[IpAddr],
        guests: &[GuestSpec],
        host_shutdown_delay: Duration,
    ) -> Arc<Self> {
        let hosts: Vec<HostInfo> = ips
            .iter()
            .enumerate()
            .map(|(i, ip)| HostInfo {
                name: format!("pve{}", i + 1),
                ip: *ip,
                online: true,
                maxcpu: 16,
                maxmem: 64 << 30,
                mem: 8 << 30,
                cpu: 0.05,
                maxdisk: 512 << 30,
                disk: 20 << 30,
                uptime: 86_400,
            })
            .collect();
        let mut power = HashMap::new();
        let mut macs = HashMap::new();
        for (i, h) in hosts.iter().enumerate() {
            power.insert(h.name.clone(), watch::channel(true).0);
            macs.insert(h.name.clone(), format!("BC:24:11:00:00:{:02X}", i + 1));
        }
        let vms = guests
            .iter()
            .map(|g| VmInfo {
                vmid: g.vmid,
                name: g.name.clone(),
                node: g.node.clone(),
                status: if g.running {
                    VmStatus::Running
                } else {
                    VmStatus::Stopped
                },
                tags: g.tags.clone(),
                ha: g.ha.then(|| HaInfo {
                    requested: if g.running {
                        HaState::Started
                    } else {
                        HaState::Stopped
                    },
                    crm_state: if g.running { "started" } else { "stopped" }.into(),
                }),
                uptime: if g.running { 3600 } else { 0 },
                maxcpu: 4,
                cpu: 0.1,
                maxmem: 8 << 30,
                mem: 4 << 30,
                maxdisk: 64 << 30,
            })
            .collect();
        let configs = guests
            .iter()
            .map(|g| {
                (
                    g.vmid,
                    VmConfig {
                        name: g.name.clone(),
                        smbios_uuid: g.smbios_uuid.clone(),
                        tags: g.tags.clone(),
                        cores: 4,
                        sockets: 1,
                        memory_mib: 8192,
                        onboot: true,
                        disk_storage: "local-lvm".into(),
                        link_down: false,
                    },
                )
            })
            .collect();
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            cluster: cluster.to_string(),
            state: Mutex::new(State {
                hosts,
                vms,
                configs,
                macs,
            }),
            power: Mutex::new(power),
            host_shutdown_delay,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a panicking test thread; the data is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The power watch of `host` (true = on), for [`super::serve`].
    pub fn power_watch(&self, host: &str) -> watch::Receiver<bool> {
        let mut power = self.power.lock().unwrap_or_else(|e| e.into_inner());
        power
            .entry(host.to_string())
            .or_insert_with(|| watch::channel(false).0)
            .subscribe()
    }

    /// A guest by id (test helper).
    pub fn vm(&self, vmid: u32) -> Option<VmInfo> {
        self.lock().vms.iter().find(|v| v.vmid == vmid).cloned()
    }

    /// Powers a host on or off right away, as a crash or a power button would.
    pub fn set_host_online(&self, host: &str, online: bool) {
        {
            let mut st = self.lock();
            if let Some(h) = st.hosts.iter_mut().find(|h| h.name == host) {
                h.online = online;
                h.uptime = 0;
            }
            if !online {
                for vm in st.vms.iter_mut().filter(|v| v.node == host) {
                    vm.status = VmStatus::Stopped;
                    vm.uptime = 0;
                }
            }
        }
        if let Some(tx) = self
            .power
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(host)
        {
            tx.send_replace(online);
        }
    }

    fn set_vm(&self, vmid: u32, running: bool) {
        let mut st = self.lock();
        if let Some(vm) = st.vms.iter_mut().find(|v| v.vmid == vmid) {
            vm.status = if running {
                VmStatus::Running
            } else {
                VmStatus::Stopped
            };
            vm.uptime = 0;
        }
    }
}

impl ProxmoxBackend for MemoryProxmox {
    fn cluster_name(&self) -> String {
        self.cluster.clone()
    }

    fn hosts(&self) -> Vec<HostInfo> {
        self.lock().hosts.clone()
    }

    fn vms(&self) -> Vec<VmInfo> {
        self.lock().vms.clone()
    }

    fn vm_config(&self, vmid: u32) -> Option<VmConfig> {
        self.lock().configs.get(&vmid).cloned()
    }

    fn vm_power(&self, vmid: u32, action: VmAction) -> Result<(), ActionError> {
        let running = self
            .vm(vmid)
            .map(|v| v.status == VmStatus::Running)
            .ok_or_else(|| ActionError::Failed(format!("VM {vmid} does not exist")))?;
        match action {
            VmAction::Start if running => Err(ActionError::AlreadyRunning),
            VmAction::Start => {
                self.set_vm(vmid, true);
                Ok(())
            }
            VmAction::Stop | VmAction::Shutdown => {
                self.set_vm(vmid, false);
                Ok(())
            }
        }
    }

    fn ha_request(&self, vmid: u32, state: HaState) -> Result<(), ActionError> {
        {
            let mut st = self.lock();
            let vm = st
                .vms
                .iter_mut()
                .find(|v| v.vmid == vmid)
                .ok_or_else(|| ActionError::Failed(format!("VM {vmid} does not exist")))?;
            if let Some(ha) = vm.ha.as_mut() {
                ha.requested = state;
                ha.crm_state = state.as_str().to_string();
            }
        }
        self.set_vm(vmid, state == HaState::Started);
        Ok(())
    }

    fn host_power(&self, host: &str, command: HostCommand) -> Result<(), ActionError> {
        let Some(this) = self.power_handle() else {
            return Err(ActionError::Failed("backend is gone".into()));
        };
        let host = host.to_string();
        let delay = self.host_shutdown_delay;
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            this.set_host_online(&host, false);
            if command == HostCommand::Reboot {
                tokio::time::sleep(delay).await;
                this.set_host_online(&host, true);
            }
        });
        Ok(())
    }

    fn wake_on_lan(&self, _from: &str, target: &str) -> Result<String, ActionError> {
        let mac = self.lock().macs.get(target).cloned().ok_or_else(|| {
            ActionError::Failed(format!(
                "No wake on LAN MAC address defined for '{target}'!"
            ))
        })?;
        self.set_host_online(target, true);
        Ok(mac)
    }

    fn wakeonlan_property(&self, host: &str) -> Option<String> {
        self.lock().macs.get(host).map(|mac| format!("mac={mac}"))
    }
}

impl MemoryProxmox {
    /// An owning handle for delayed work; the backend is always held in an `Arc` (see `new`).
    fn power_handle(&self) -> Option<Arc<MemoryProxmox>> {
        self.me.upgrade()
    }
}
