//! The world as the Proxmox VE and Talos apid servers see it: implementations of their
//! backend traits over [`Shared`].

use super::*;
use crate::proxmox::{
    ActionError, HaInfo, HaState, HostCommand, HostInfo, ProxmoxBackend, StorageInfo, VmAction,
    VmConfig, VmInfo, VmStatus,
};
use crate::talos::{
    EtcdAlarm, EtcdError, EtcdMember, EtcdMemberStatus, NodeRole, ServiceEvent, ServiceState,
    TalosBackend, TalosVersion,
};
use std::time::SystemTime;

/// Both backends over one world.
#[derive(Clone)]
pub struct LabBackend {
    pub shared: Arc<Shared>,
}

fn action_error(e: PowerError) -> ActionError {
    ActionError::Failed(match e {
        PowerError::NoSuchVm(id) => {
            format!("Configuration file 'nodes/unknown/qemu-server/{id}.conf' does not exist")
        }
        PowerError::NoSuchHost(h) => format!(
            "hostname lookup '{h}' failed - failed to get address info for: {h}: Name or service not known"
        ),
        PowerError::HostOffline(h) => format!("no route to host {h}"),
    })
}

/// The MAC address the lab gives host `i` for wake-on-LAN.
pub fn host_mac(i: usize) -> String {
    format!("52:54:00:00:{:02x}:{:02x}", (i >> 8) & 0xff, i & 0xff)
}

impl ProxmoxBackend for LabBackend {
    fn cluster_name(&self) -> String {
        "gates-lab".into()
    }

    fn wakeonlan_property(&self, host: &str) -> Option<String> {
        self.shared
            .read(|w| w.host_by_name(host).filter(|&i| w.hosts[i].wakeonlan))
            .map(|i| format!("mac={}", host_mac(i)))
    }

    fn hosts(&self) -> Vec<HostInfo> {
        self.shared.read(|w| {
            let now = w.clock.now();
            // The running guests' memory and CPU per host, in one pass over the guests.
            let mut load = vec![(0i64, 0i64); w.hosts.len()];
            for n in w.nodes.iter().filter(|n| n.vm_running) {
                if let Some((mem, cpu)) = load.get_mut(n.host) {
                    *mem += n.memory_bytes;
                    *cpu += n.cpu_milli / 4;
                }
            }
            w.hosts
                .iter()
                .enumerate()
                .map(|(i, h)| {
                    let (mem, cpu) = load[i];
                    let mem = mem + (2 << 30);
                    HostInfo {
                        name: h.name.clone(),
                        ip: IpAddr::V4(w.plan.host_ip(i)),
                        online: h.online,
                        maxcpu: h.cpus,
                        maxmem: h.memory_bytes.max(0) as u64,
                        mem: if h.online { mem.max(0) as u64 } else { 0 },
                        cpu: if h.online {
                            (cpu as f64 / (f64::from(h.cpus) * 1000.0)).clamp(0.0, 1.0)
                        } else {
                            0.0
                        },
                        maxdisk: 100 << 30,
                        disk: 12 << 30,
                        uptime: if h.online {
                            now.saturating_sub(h.online_since).as_secs() + 86_400
                        } else {
                            0
                        },
                    }
                })
                .collect()
        })
    }

    fn host_online(&self, name: &str) -> Option<bool> {
        self.shared
            .read(|w| w.host_by_name(name).map(|i| w.hosts[i].online))
    }

    fn vms(&self) -> Vec<VmInfo> {
        self.shared
            .read(|w| (0..w.nodes.len()).map(|n| vm_info(w, n)).collect())
    }

    fn vm(&self, vmid: u32) -> Option<VmInfo> {
        self.shared
            .read(|w| w.node_by_vmid(vmid).map(|n| vm_info(w, n)))
    }

    fn vm_config(&self, vmid: u32) -> Option<VmConfig> {
        self.shared.read(|w| {
            let n = &w.nodes[w.node_by_vmid(vmid)?];
            Some(VmConfig {
                name: n.name.clone(),
                smbios_uuid: Some(n.uuid.clone()),
                tags: n.tags.clone(),
                cores: (n.cpu_milli / 1000).max(1) as u32,
                sockets: 1,
                memory_mib: (n.memory_bytes >> 20).max(0) as u64,
                onboot: false,
                disk_storage: n.storage.clone(),
                link_down: n.link_down,
            })
        })
    }

    fn storages(&self) -> Vec<StorageInfo> {
        self.shared.read(|w| {
            w.storages
                .iter()
                .map(|s| StorageInfo {
                    storage: s.name.clone(),
                    kind: s.kind.clone(),
                    shared: s.shared,
                })
                .collect()
        })
    }

    fn set_link(&self, vmid: u32, down: bool) -> Result<(), ActionError> {
        self.shared.set_link(vmid, down).map_err(action_error)
    }

    fn vm_power(&self, vmid: u32, action: VmAction) -> Result<(), ActionError> {
        match action {
            VmAction::Start => {
                let running = self
                    .shared
                    .read(|w| w.node_by_vmid(vmid).map(|n| w.nodes[n].vm_running));
                if running == Some(true) {
                    return Err(ActionError::AlreadyRunning);
                }
                self.shared.start_vm(vmid).map_err(action_error)
            }
            VmAction::Stop => self.shared.stop_vm(vmid).map_err(action_error),
            // The qmshutdown task ends when the guest is off.
            VmAction::Shutdown => self
                .shared
                .change(|w, now| w.shutdown_vm_now(vmid, now))
                .map_err(action_error),
        }
    }

    fn ha_request(&self, vmid: u32, state: HaState) -> Result<(), ActionError> {
        match state {
            HaState::Started => match self.shared.start_vm(vmid) {
                Ok(()) => Ok(()),
                Err(e) => Err(action_error(e)),
            },
            HaState::Stopped => self.shared.shutdown_vm(vmid).map_err(action_error),
            HaState::Disabled | HaState::Ignored => Ok(()),
        }
    }

    fn host_power(&self, host: &str, command: HostCommand) -> Result<(), ActionError> {
        self.shared
            .change(|w, now| {
                w.shutdown_host(host, now)?;
                if command == HostCommand::Reboot
                    && let Some(h) = w.host_by_name(host)
                {
                    w.hosts[h].reboot = true;
                }
                Ok(())
            })
            .map_err(action_error)
    }

    fn wake_on_lan(&self, _from: &str, target: &str) -> Result<String, ActionError> {
        let i = self
            .shared
            .read(|w| w.host_by_name(target).filter(|&i| w.hosts[i].wakeonlan))
            .ok_or_else(|| {
                ActionError::Failed(format!(
                    "No wake on LAN MAC address defined for '{target}'!"
                ))
            })?;
        self.shared.wake_host(target).map_err(action_error)?;
        Ok(host_mac(i))
    }
}

impl LabBackend {
    fn node(&self, name: &str) -> Option<usize> {
        self.shared.read(|w| w.node_by_name(name))
    }
}

fn system_time(w: &World, d: Duration) -> SystemTime {
    SystemTime::from(w.clock.wall_of(d))
}

impl TalosBackend for LabBackend {
    fn resolve(&self, target: &str) -> Option<String> {
        self.shared.read(|w| {
            w.nodes
                .iter()
                .find(|n| {
                    n.name == target
                        || (n.addressed && w.plan.node_ip(n.index).to_string() == target)
                })
                .map(|n| n.name.clone())
        })
    }

    fn is_up(&self, node: &str) -> bool {
        self.shared
            .read(|w| w.node_by_name(node).is_some_and(|n| w.nodes[n].booted))
    }

    fn role(&self, node: &str) -> NodeRole {
        self.shared
            .read(|w| match w.node_by_name(node).map(|n| w.nodes[n].role) {
                Some(Role::ControlPlane) => NodeRole::ControlPlane,
                _ => NodeRole::Worker,
            })
    }

    fn version(&self, node: &str) -> TalosVersion {
        let tag = self.shared.read(|w| {
            w.node_by_name(node)
                .map(|n| w.envs[w.nodes[n].env].spec.talos_version.clone())
        });
        TalosVersion {
            tag: tag.unwrap_or_else(|| TalosVersion::default().tag),
            ..TalosVersion::default()
        }
    }

    fn etcd_members(&self, node: &str) -> Result<Vec<EtcdMember>, EtcdError> {
        let n = self
            .node(node)
            .ok_or_else(|| EtcdError::Failed(format!("unknown node {node}")))?;
        self.shared.read(|w| {
            let env = w.nodes[n].env;
            if !w.envs[env].quorum {
                return Err(EtcdError::NoQuorum);
            }
            Ok(w.etcd_members(env)
                .into_iter()
                .map(|m| {
                    let ip = w.plan.node_ip(m);
                    EtcdMember {
                        id: w.nodes[m].etcd_member_id,
                        hostname: w.nodes[m].name.clone(),
                        peer_urls: vec![format!("https://{ip}:2380")],
                        client_urls: vec![format!("https://{ip}:2379")],
                        is_learner: false,
                    }
                })
                .collect())
        })
    }

    fn etcd_status(&self, node: &str) -> Result<EtcdMemberStatus, EtcdError> {
        let n = self
            .node(node)
            .ok_or_else(|| EtcdError::Failed(format!("unknown node {node}")))?;
        self.shared.read(|w| {
            let env = w.nodes[n].env;
            let leader = w
                .etcd_leader(env)
                .map(|l| w.nodes[l].etcd_member_id)
                .unwrap_or(0);
            // A misbehaving node back from a partition: it led a minority that took writes.
            let minority = w.clock.now() < w.nodes[n].cut_off.minority_until;
            let (leader, ahead) = if minority {
                (w.nodes[n].etcd_member_id, 1_000)
            } else {
                (leader, 0)
            };
            let rv = w.envs[env].store.rv() + ahead;
            Ok(EtcdMemberStatus {
                member_id: w.nodes[n].etcd_member_id,
                protocol_version: "3.6.0".into(),
                storage_version: "3.6.0".into(),
                db_size: 48 << 20,
                db_size_in_use: 21 << 20,
                leader,
                raft_index: 10_000 + rv,
                raft_term: 2 + w
                    .truth
                    .events
                    .iter()
                    .filter(|e| e.kind == "quorum-regained")
                    .count() as u64,
                raft_applied_index: 10_000 + rv,
                errors: if leader == 0 {
                    vec!["etcdserver: no leader".into()]
                } else {
                    vec![]
                },
                is_learner: false,
            })
        })
    }

    fn etcd_alarms(&self, node: &str) -> Result<Vec<EtcdAlarm>, EtcdError> {
        let n = self
            .node(node)
            .ok_or_else(|| EtcdError::Failed(format!("unknown node {node}")))?;
        self.shared.read(|w| {
            if w.envs[w.nodes[n].env].quorum {
                Ok(vec![])
            } else {
                Err(EtcdError::NoQuorum)
            }
        })
    }

    fn services(&self, node: &str) -> Vec<ServiceState> {
        let Some(n) = self.node(node) else {
            return vec![];
        };
        self.shared.read(|w| {
            let nd = &w.nodes[n];
            let since = system_time(w, nd.booted_at);
            let mk = |id: &str, healthy: Option<bool>, msg: &str| ServiceState {
                id: id.into(),
                state: "Running".into(),
                healthy,
                last_message: msg.into(),
                last_change: since,
                events: vec![
                    ServiceEvent {
                        msg: "Starting service".into(),
                        state: "Starting".into(),
                        at: since,
                    },
                    ServiceEvent {
                        msg: msg.into(),
                        state: "Running".into(),
                        at: since,
                    },
                ],
            };
            let mut out = vec![
                mk("apid", Some(true), "Health check successful"),
                mk("containerd", Some(true), "Health check successful"),
                mk("cri", Some(true), "Health check successful"),
            ];
            if nd.is_control_plane() {
                let quorum = w.envs[nd.env].quorum;
                out.push(mk(
                    "etcd",
                    Some(quorum),
                    if quorum {
                        "Health check successful"
                    } else {
                        "Health check failed: context deadline exceeded"
                    },
                ));
            }
            out.push(mk("kubelet", Some(true), "Health check successful"));
            out.push(mk("machined", None, "Service started as goroutine"));
            if nd.is_control_plane() {
                out.push(mk("trustd", Some(true), "Health check successful"));
            }
            out.push(mk("udevd", Some(true), "Health check successful"));
            out.sort_by(|a, b| a.id.cmp(&b.id));
            out
        })
    }

    /// Loopback, the node's lab address as a /24 and, while this node holds its environment's
    /// API VIP and the VIP is up, the VIP as a /32.
    fn addresses(&self, node: &str) -> Vec<crate::talos::LabAddress> {
        let Some(n) = self.node(node) else {
            return vec![];
        };
        self.shared.read(|w| {
            let nd = &w.nodes[n];
            let since = system_time(w, nd.booted_at);
            let at = |link: &str, address: std::net::Ipv4Addr, prefix_len: u8| {
                crate::talos::LabAddress {
                    link: link.into(),
                    address: address.into(),
                    prefix_len,
                    since,
                }
            };
            let mut out = vec![
                at("lo", std::net::Ipv4Addr::LOCALHOST, 8),
                at("eth0", w.plan.node_ip(n), 24),
            ];
            let stale = w.clock.now() < nd.cut_off.stale_vip_until;
            if (w.envs[nd.env].vip_holder == Some(n) && w.vip_up(nd.env)) || stale {
                out.push(at("eth0", w.plan.vip_ip(nd.env), 32));
            }
            out
        })
    }
}

use std::net::IpAddr;

/// Guest `n` of the world as Proxmox shows it: its state follows its host's and its own power.
fn vm_info(w: &World, n: usize) -> VmInfo {
    let now = w.clock.now();
    let n = &w.nodes[n];
    let online = w.hosts[n.host].online;
    let status = if !online {
        VmStatus::Unknown
    } else if n.vm_running {
        VmStatus::Running
    } else {
        VmStatus::Stopped
    };
    VmInfo {
        vmid: n.vmid,
        name: n.name.clone(),
        node: w.hosts[n.host].name.clone(),
        status,
        tags: n.tags.clone(),
        ha: n.ha.then(|| HaInfo {
            requested: if n.vm_running {
                HaState::Started
            } else {
                HaState::Stopped
            },
            crm_state: if !online {
                "fence".into()
            } else if n.vm_running {
                "started".into()
            } else {
                "stopped".into()
            },
        }),
        uptime: if n.vm_running && online {
            now.saturating_sub(n.vm_started_at).as_secs()
        } else {
            0
        },
        maxcpu: (n.cpu_milli / 1000).max(1) as u32,
        cpu: if n.booted { 0.12 } else { 0.0 },
        maxmem: n.memory_bytes.max(0) as u64,
        mem: if n.vm_running {
            (n.memory_bytes / 2).max(0) as u64
        } else {
            0
        },
        maxdisk: 64 << 30,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Plan;
    use crate::clock::SimClock;
    use crate::scenario::Scenario;

    fn backend() -> LabBackend {
        let scenario = Scenario::load("adr-007").expect("built-in scenario");
        let world =
            World::build(&scenario, Plan::new(90), SimClock::new(1.0)).expect("world builds");
        LabBackend {
            shared: Shared::new(world),
        }
    }

    #[test]
    fn a_pulled_link_cuts_a_running_machine_off_and_putting_it_back_restarts_nothing() {
        let lab = backend();
        let (vmid, n, env) = lab.shared.read(|w| {
            let n = w.nodes.iter().position(|n| n.is_control_plane()).unwrap();
            (w.nodes[n].vmid, n, w.nodes[n].env)
        });
        let pods_on = |w: &World| -> Vec<(bool, i32)> {
            w.envs[env]
                .pods
                .values()
                .filter(|p| p.node == Some(n))
                .map(|p| (p.running, p.restarts))
                .collect()
        };
        let before = lab.shared.read(pods_on);
        assert!(before.iter().all(|(running, _)| *running), "{before:?}");
        lab.set_link(vmid, true).expect("the link is pulled");
        lab.shared.read(|w| {
            assert!(w.nodes[n].vm_running, "the VM runs on");
            let reach = w.reachability();
            assert!(!reach.apid[n] && !reach.node_api[n], "nobody reaches it");
            assert!(w.has_quorum(env), "two of three members keep the quorum");
            assert_ne!(
                w.etcd_leader(env),
                Some(n),
                "the cut-off member leads nothing"
            );
            assert_eq!(pods_on(w), before, "its pods keep running");
        });
        assert_eq!(lab.vm_config(vmid).map(|c| c.link_down), Some(true));
        lab.set_link(vmid, false).expect("the link is put back");
        lab.shared.read(|w| {
            assert!(w.reachability().apid[n], "reachable again");
            assert_eq!(
                pods_on(w),
                before,
                "no pod restarted: the machine never stopped"
            );
        });
        assert_eq!(lab.vm_config(vmid).map(|c| c.link_down), Some(false));
    }

    #[test]
    fn a_misbehaving_node_back_from_a_partition_shows_each_split_brain_signal_for_a_while() {
        let scenario = Scenario::load("adr-007").expect("built-in scenario");
        let world =
            World::build(&scenario, Plan::new(91), SimClock::new(400.0)).expect("world builds");
        let lab = LabBackend {
            shared: Shared::new(world),
        };
        lab.shared
            .change(|w, _| w.misbehave = crate::world::Misbehaviour::ALL);
        let (n, vmid, name, acquired) = lab.shared.read(|w| {
            let n = w.envs[0].vip_holder.expect("a VIP holder");
            let lease = w.envs[0].lease.as_ref().expect("an L2 lease");
            assert_eq!(lease.holder, Some(n), "the VIP holder announces too");
            (n, w.nodes[n].vmid, w.nodes[n].name.clone(), lease.acquired)
        });
        lab.set_link(vmid, true).expect("pulled");
        // 100 simulated seconds: the VIP (60 s) and the lease (15 s) moved to the majority.
        std::thread::sleep(Duration::from_millis(250));
        lab.shared.change(|_, _| ());
        let moved = lab.shared.read(|w| {
            (
                w.envs[0].vip_holder,
                w.envs[0].lease.as_ref().and_then(|l| l.holder),
            )
        });
        assert!(
            moved.0.is_some_and(|h| h != n) && moved.1.is_some_and(|h| h != n),
            "{moved:?}"
        );
        lab.set_link(vmid, false).expect("put back");
        let vip = lab.shared.read(|w| w.plan.vip_ip(0));
        let listed = |node: usize| {
            let name = lab.shared.read(|w| w.nodes[node].name.clone());
            lab.addresses(&name)
                .iter()
                .any(|a| a.address == std::net::IpAddr::from(vip))
        };
        assert!(listed(n) && listed(moved.0.unwrap()), "both list the VIP");
        let status = lab.etcd_status(&name).expect("status");
        assert_eq!(status.leader, status.member_id, "it leads its minority");
        let lease = lab.shared.read(|w| w.envs[0].lease.clone().unwrap());
        assert_eq!(
            (lease.holder, lease.acquired),
            (Some(n), acquired),
            "the old term renewed"
        );
        // Past the split brain's time it behaves again.
        std::thread::sleep(Duration::from_millis(150));
        assert!(!listed(n), "the stale VIP is gone");
        let status = lab.etcd_status(&name).expect("status");
        assert_ne!(status.leader, status.member_id);
    }

    #[test]
    fn a_host_is_online_as_the_host_list_says_and_an_unknown_host_is_not_there() {
        let lab = backend();
        lab.shared.change(|w, _| w.hosts[1].online = false);
        let hosts = lab.hosts();
        assert!(hosts.iter().any(|h| !h.online) && hosts.iter().any(|h| h.online));
        for h in &hosts {
            assert_eq!(lab.host_online(&h.name), Some(h.online), "{}", h.name);
        }
        assert_eq!(lab.host_online("pve9"), None);
    }

    #[test]
    fn each_host_carries_the_memory_and_cpu_of_its_running_guests() {
        let lab = backend();
        let stopped = lab.shared.read(|w| w.nodes[0].vmid);
        lab.shared.stop_vm(stopped).expect("a guest stops");
        let hosts = lab.hosts();
        lab.shared.read(|w| {
            for (i, h) in hosts.iter().enumerate().filter(|(_, h)| h.online) {
                let running = || w.nodes.iter().filter(|n| n.host == i && n.vm_running);
                let mem = running().map(|n| n.memory_bytes).sum::<i64>() + (2 << 30);
                let cpu = running().map(|n| n.cpu_milli / 4).sum::<i64>();
                assert_eq!(h.mem, mem as u64, "{}", h.name);
                let want = (cpu as f64 / (f64::from(h.maxcpu) * 1000.0)).clamp(0.0, 1.0);
                assert!((h.cpu - want).abs() < 1e-12, "{}", h.name);
            }
            assert!(!w.nodes[0].vm_running);
        });
    }
}
