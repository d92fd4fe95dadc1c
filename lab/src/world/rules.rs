//! The world's rules: what a power operation sets off, and when.

use super::*;
use crate::ids;
use crate::scenario::WorkloadKind;

impl World {
    // ---- power operations (called through `Shared`) ----

    fn vm(&self, vmid: u32) -> Result<usize, PowerError> {
        let n = self.node_by_vmid(vmid).ok_or(PowerError::NoSuchVm(vmid))?;
        let h = self.nodes[n].host;
        if !self.hosts[h].online {
            return Err(PowerError::HostOffline(self.hosts[h].name.clone()));
        }
        Ok(n)
    }

    fn host(&self, name: &str) -> Result<usize, PowerError> {
        self.host_by_name(name)
            .ok_or_else(|| PowerError::NoSuchHost(name.to_string()))
    }

    /// Why kube-controller-manager's node-lifecycle controller does not evict the pods of
    /// `node` now (`None`: it does). It groups an environment's nodes into zones by their
    /// region and zone labels (the beta labels first) and stops evicting in a zone with more
    /// than 2 NotReady nodes, at least `--unhealthy-zone-threshold` (0.55) of it, when the
    /// zone has at most `--large-cluster-size-threshold` (50) nodes; and everywhere when no
    /// zone has a Ready node (`pkg/controller/nodelifecycle`, `ComputeZoneState`,
    /// `ReducedQPSFunc`, `handleDisruption`).
    pub(crate) fn evictions_stopped(&self, node: usize) -> Option<String> {
        let zone = |n: usize| {
            let l = &self.nodes[n].labels;
            let pick = |beta: &str, ga: &str| l.get(beta).or_else(|| l.get(ga)).cloned();
            (
                pick(
                    "failure-domain.beta.kubernetes.io/region",
                    "topology.kubernetes.io/region",
                )
                .unwrap_or_default(),
                pick(
                    "failure-domain.beta.kubernetes.io/zone",
                    "topology.kubernetes.io/zone",
                )
                .unwrap_or_default(),
            )
        };
        let env = self.nodes[node].env;
        let mut zones: BTreeMap<(String, String), (usize, usize)> = BTreeMap::new();
        for &n in &self.envs[env].nodes {
            let z = zones.entry(zone(n)).or_default();
            z.0 += 1;
            if !self.nodes[n].ready {
                z.1 += 1;
            }
        }
        let full = |&(size, down): &(usize, usize)| down == size && down > 0;
        if zones.values().all(full) {
            return Some(
                "no zone has a Ready node: the node-lifecycle controller stops evicting".into(),
            );
        }
        let key = zone(node);
        let &(size, down) = zones.get(&key)?;
        (!full(&(size, down)) && down > 2 && down as f64 / size as f64 >= 0.55 && size <= 50).then(|| {
            format!(
                "zone {:?} has {down} of {size} nodes NotReady: the node-lifecycle controller stops evicting there",
                key.1
            )
        })
    }

    pub(crate) fn stop_vm(&mut self, vmid: u32, now: Duration) -> Result<(), PowerError> {
        let n = self.vm(vmid)?;
        self.hard_stop(n, now, "vm-stopped");
        Ok(())
    }

    fn hard_stop(&mut self, n: usize, now: Duration, kind: &str) {
        if !self.nodes[n].vm_running {
            return;
        }
        let node = &mut self.nodes[n];
        node.vm_running = false;
        node.shutting_down = false;
        node.epoch += 1;
        let (name, env) = (node.name.clone(), node.env);
        self.event(
            now,
            kind,
            Some(env),
            &name,
            format!("vmid {}", self.nodes[n].vmid),
        );
        if self.nodes[n].booted {
            self.machine_down(n, Down::PowerLost, now);
        }
    }

    /// A network device's link pulled or put back (the config update Proxmox applies live).
    /// A running machine cut off looks, from everywhere else, as one that lost power: its
    /// apid, API and etcd member go dark (etcd counts it out of the quorum), its kubelet stops
    /// renewing so the node goes NotReady after the grace period, the VIP and the L2 lease
    /// it held move only once their leases expire. Unlike power loss its pods keep running.
    /// Put back, it rejoins without a reboot: its kubelet reports again, Terminating pods
    /// finish deleting, the others are Ready again as they never stopped.
    pub(crate) fn set_link(
        &mut self,
        vmid: u32,
        down: bool,
        now: Duration,
    ) -> Result<(), PowerError> {
        let n = self.vm(vmid)?;
        if self.nodes[n].link_down == down {
            return Ok(());
        }
        self.nodes[n].link_down = down;
        let (name, env) = (self.nodes[n].name.clone(), self.nodes[n].env);
        let kind = if down { "link-down" } else { "link-up" };
        self.event(now, kind, Some(env), &name, format!("vmid {vmid}"));
        if down && self.nodes[n].booted {
            self.nodes[n].cut_off.held_vip = self.envs[env].vip_holder == Some(n);
            self.nodes[n].cut_off.held_lease = self.envs[env]
                .lease
                .as_ref()
                .filter(|l| l.holder == Some(n))
                .map(|l| l.acquired);
            self.machine_down(n, Down::CutOff, now);
        } else if !down && self.nodes[n].vm_running && !self.nodes[n].booted {
            self.rejoin(n, now);
        }
        Ok(())
    }

    /// The link is back: the machine never stopped, so only what the network hid changes.
    fn rejoin(&mut self, n: usize, now: Duration) {
        // Restarted while cut off: it comes back as a machine that booted.
        if self.nodes[n].vm_started_at > self.nodes[n].down_since {
            self.machine_up(n, now);
            return;
        }
        let env = self.nodes[n].env;
        let name = self.nodes[n].name.clone();
        self.nodes[n].booted = true;
        self.nodes[n].heartbeat = now;
        self.event(now, "machine-rejoined", Some(env), &name, String::new());
        self.misbehave_on_return(n, now);
        if !self.nodes[n].ready {
            self.nodes[n].ready = true;
            self.nodes[n].ready_changed = now;
            self.event(now, "node-ready", Some(env), &name, String::new());
        }
        let keys: Vec<Key> = self.envs[env]
            .pods
            .iter()
            .filter(|(_, p)| p.node == Some(n))
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            let deleting = self.envs[env]
                .pods
                .get(&k)
                .is_some_and(|p| p.deleting.is_some());
            if deleting {
                self.remove_pod(env, &k, now);
                continue;
            }
            if let Some(p) = self.envs[env].pods.get_mut(&k)
                && p.running
                && !p.api_ready
            {
                p.api_ready = true;
                p.ready_changed = now;
                self.envs[env].dirty.pods.insert(k);
            }
        }
        self.after_return(n, now);
    }

    /// A misbehaving node back from a partition: what it kept claiming while cut off shows
    /// for [`SPLIT_BRAIN_FOR`] (the L2 lease term it renews stays renewed).
    fn misbehave_on_return(&mut self, n: usize, now: Duration) {
        let (env, name) = (self.nodes[n].env, self.nodes[n].name.clone());
        let m = self.misbehave;
        let held = std::mem::take(&mut self.nodes[n].cut_off);
        if m.keep_vip && held.held_vip {
            self.nodes[n].cut_off.stale_vip_until = now + SPLIT_BRAIN_FOR;
            self.event(now, "vip-kept", Some(env), &name, "split brain".into());
        }
        if m.accept_writes {
            self.nodes[n].cut_off.minority_until = now + SPLIT_BRAIN_FOR;
            self.event(
                now,
                "minority-writes",
                Some(env),
                &name,
                "split brain".into(),
            );
        }
        if m.keep_l2_lease
            && let Some(acquired) = held.held_lease
            && let Some(l) = self.envs[env].lease.as_mut()
        {
            l.holder = Some(n);
            l.acquired = acquired;
            l.renewed = now;
            self.envs[env].dirty.leases = true;
            self.event(now, "lease-kept", Some(env), &name, "split brain".into());
        }
    }

    pub(crate) fn start_vm(&mut self, vmid: u32, now: Duration) -> Result<(), PowerError> {
        let n = self.vm(vmid)?;
        if self.nodes[n].vm_running {
            return Ok(());
        }
        let node = &mut self.nodes[n];
        node.vm_running = true;
        node.vm_started_at = now;
        node.epoch += 1;
        let (name, env, epoch) = (node.name.clone(), node.env, node.epoch);
        self.event(now, "vm-started", Some(env), &name, format!("vmid {vmid}"));
        self.schedule(now + self.timings.boot, Action::Booted { node: n, epoch });
        Ok(())
    }

    pub(crate) fn shutdown_vm(&mut self, vmid: u32, now: Duration) -> Result<(), PowerError> {
        let n = self.vm(vmid)?;
        self.begin_shutdown(n, now);
        Ok(())
    }

    /// An ACPI shutdown that has already completed (the qmshutdown task ends with the guest off).
    pub(crate) fn shutdown_vm_now(&mut self, vmid: u32, now: Duration) -> Result<(), PowerError> {
        let n = self.vm(vmid)?;
        if !self.nodes[n].vm_running {
            return Ok(());
        }
        let node = &mut self.nodes[n];
        node.vm_running = false;
        node.shutting_down = false;
        node.epoch += 1;
        let (name, env) = (node.name.clone(), node.env);
        self.event(now, "vm-off", Some(env), &name, "guest shut down".into());
        if self.nodes[n].booted {
            self.machine_down(n, Down::Graceful, now);
        }
        Ok(())
    }

    fn begin_shutdown(&mut self, n: usize, now: Duration) {
        let node = &mut self.nodes[n];
        if !node.vm_running || node.shutting_down {
            return;
        }
        node.shutting_down = true;
        let (name, env, epoch) = (node.name.clone(), node.env, node.epoch);
        self.event(
            now,
            "vm-shutdown-requested",
            Some(env),
            &name,
            String::new(),
        );
        self.schedule(
            now + self.timings.shutdown,
            Action::ShutdownDone { node: n, epoch },
        );
    }

    pub(crate) fn shutdown_host(&mut self, host: &str, now: Duration) -> Result<(), PowerError> {
        let h = self.host(host)?;
        if !self.hosts[h].online {
            return Err(PowerError::HostOffline(host.to_string()));
        }
        if self.hosts[h].shutting_down {
            return Ok(());
        }
        self.hosts[h].shutting_down = true;
        self.hosts[h].epoch += 1;
        let epoch = self.hosts[h].epoch;
        self.event(now, "host-shutdown-requested", None, host, String::new());
        for n in 0..self.nodes.len() {
            if self.nodes[n].host == h {
                self.begin_shutdown(n, now);
            }
        }
        self.schedule(
            now + self.timings.shutdown + Duration::from_secs(5),
            Action::HostOff { host: h, epoch },
        );
        Ok(())
    }

    pub(crate) fn wake_host(&mut self, host: &str, now: Duration) -> Result<(), PowerError> {
        let h = self.host(host)?;
        if self.hosts[h].online {
            return Ok(());
        }
        self.hosts[h].epoch += 1;
        let epoch = self.hosts[h].epoch;
        self.event(now, "host-wake-requested", None, host, String::new());
        self.schedule(
            now + self.timings.host_boot,
            Action::HostOnline { host: h, epoch },
        );
        Ok(())
    }

    pub(crate) fn power_loss_host(&mut self, host: &str, now: Duration) -> Result<(), PowerError> {
        let h = self.host(host)?;
        if !self.hosts[h].online {
            return Ok(());
        }
        self.hosts[h].online = false;
        self.hosts[h].shutting_down = false;
        self.hosts[h].epoch += 1;
        self.event(now, "host-power-lost", None, host, String::new());
        for n in 0..self.nodes.len() {
            if self.nodes[n].host == h {
                self.hard_stop(n, now, "vm-stopped");
            }
        }
        Ok(())
    }

    // ---- consequences ----

    /// The machine is gone: endpoints go dark now, the rest follows on the timings. Cut off
    /// the network, its pods keep running where nobody sees them.
    fn machine_down(&mut self, n: usize, why: Down, now: Duration) {
        let env = self.nodes[n].env;
        let graceful = why == Down::Graceful;
        self.nodes[n].booted = false;
        self.nodes[n].down_since = now;
        let name = self.nodes[n].name.clone();
        let (kind, detail) = match why {
            Down::Graceful => ("machine-down", "graceful"),
            Down::PowerLost => ("machine-down", "power lost"),
            Down::CutOff => ("machine-cut-off", "link down: running, unreachable"),
        };
        self.event(now, kind, Some(env), &name, detail.into());
        let keys: Vec<Key> = self.envs[env]
            .pods
            .iter()
            .filter(|(_, p)| p.node == Some(n))
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            if let Some(p) = self.envs[env].pods.get_mut(&k)
                && why != Down::CutOff
            {
                p.running = false;
            }
            self.envs[env].dirty.pods.insert(k);
        }
        self.envs[env].dirty.nodes = true;
        self.update_quorum(env, now);
        if self.envs[env].vip_holder == Some(n) && !self.envs[env].vip_pending {
            let delay = if graceful {
                self.timings.vip_graceful_failover
            } else {
                self.timings.vip_failover
            };
            self.envs[env].vip_pending = true;
            self.schedule(now + delay, Action::VipElect { env });
        }
        if let Some(lease) = self.envs[env].lease.as_mut()
            && lease.holder == Some(n)
            && !lease.pending
        {
            lease.pending = true;
            let delay = if graceful {
                // ReleaseOnCancel: the holder empties the lease; others acquire on their next try.
                lease.holder = None;
                lease.renewed = now;
                self.envs[env].dirty.leases = true;
                Duration::from_secs(2)
            } else {
                self.timings.lease_duration
            };
            if graceful {
                self.event(now, "lease-released", Some(env), &name, String::new());
            }
            self.schedule(now + delay, Action::LeaseElect { env });
        }
        for v in self.envs[env].volumes.iter_mut() {
            for r in v.replicas.iter_mut().filter(|r| r.node == n && r.running) {
                r.running = false;
                r.failed_at = Some(now);
            }
        }
        self.envs[env].dirty.longhorn = true;
        self.schedule(
            now + self.timings.node_monitor_grace,
            Action::NodeUnready {
                node: n,
                since: now,
            },
        );
    }

    fn update_quorum(&mut self, env: usize, now: Duration) {
        let q = self.has_quorum(env);
        if q == self.envs[env].quorum {
            return;
        }
        self.envs[env].quorum = q;
        let name = self.envs[env].spec.name.clone();
        if q {
            self.event(now, "quorum-regained", Some(env), &name, String::new());
            self.vip_elect_soon(env, now);
        } else {
            self.event(now, "quorum-lost", Some(env), &name, String::new());
            // The VIP is bound to etcd: without quorum nobody holds it.
            if let Some(h) = self.envs[env].vip_holder.take() {
                let holder = self.nodes[h].name.clone();
                self.event(
                    now,
                    "vip-released",
                    Some(env),
                    &holder,
                    "etcd quorum lost".into(),
                );
            }
        }
    }

    fn vip_elect_soon(&mut self, env: usize, now: Duration) {
        let holder_up = self.envs[env]
            .vip_holder
            .is_some_and(|h| self.nodes[h].booted);
        if !holder_up && !self.envs[env].vip_pending {
            self.envs[env].vip_pending = true;
            self.schedule(now + Duration::from_secs(1), Action::VipElect { env });
        }
    }

    /// Apply a scheduled action at its time: each kind of consequence has its own rule.
    pub(crate) fn apply(&mut self, now: Duration, action: Action) {
        match action {
            Action::NodeUnready { node, since } => self.node_unready(node, since, now),
            Action::Evict { node, since } => self.evict_node(node, since, now),
            Action::Booted { node, epoch } => self.on_booted(node, epoch, now),
            Action::ShutdownDone { node, epoch } => self.shutdown_done(node, epoch, now),
            Action::PodStarted { env, key, uid } => self.pod_started(env, key, uid, now),
            Action::LeaseElect { env } => self.lease_elect(env, now),
            Action::VipElect { env } => self.vip_elect(env, now),
            Action::LonghornRebuilt { node, epoch } => self.longhorn_rebuilt(node, epoch, now),
            Action::HostOff { host, epoch } => self.host_off(host, epoch, now),
            Action::HostOnline { host, epoch } => self.host_came_online(host, epoch, now),
            Action::PodGone { env, key, uid } => {
                self.pod_gone(env, &key, &uid, now);
            }
            Action::LonghornForceDelete { env, key, uid } => {
                self.longhorn_force_delete(env, &key, &uid, now);
            }
            Action::RenewLeases => self.renew_leases(now),
        }
    }

    /// The node monitor grace period ran out on a node that is still down: NotReady with the
    /// unreachable taints, its pods no longer Ready, and eviction after the toleration unless
    /// the node lifecycle controller stops evicting.
    fn node_unready(&mut self, node: usize, since: Duration, now: Duration) {
        let n = &self.nodes[node];
        // Back up since, or down again later (that outage has its own timer).
        if n.booted || !n.ready || n.down_since != since {
            return;
        }
        let env = n.env;
        let name = n.name.clone();
        self.nodes[node].ready = false;
        self.nodes[node].ready_changed = now;
        self.event(
            now,
            "node-not-ready",
            Some(env),
            &name,
            "Ready=Unknown, unreachable taints added".into(),
        );
        let keys: Vec<Key> = self.envs[env]
            .pods
            .iter()
            .filter(|(_, p)| p.node == Some(node))
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            if let Some(p) = self.envs[env].pods.get_mut(&k)
                && p.api_ready
            {
                p.api_ready = false;
                p.ready_changed = now;
                self.envs[env].dirty.pods.insert(k);
            }
        }
        self.envs[env].dirty.nodes = true;
        self.envs[env].dirty.longhorn = true;
        // Judged as the controller does, when it finds the node NotReady: nodes of a
        // zone found before it crosses the threshold are still tainted.
        if let Some(why) = self.evictions_stopped(node) {
            self.event(now, "eviction-stopped", Some(env), &name, why);
            return;
        }
        self.schedule(now + self.timings.toleration, Action::Evict { node, since });
    }

    /// The toleration ran out on a node still NotReady: its pods (not a DaemonSet's, not
    /// those tolerating everything) are evicted and replaced, its instance manager too, and
    /// Longhorn reacts to the node being gone.
    fn evict_node(&mut self, node: usize, since: Duration, now: Duration) {
        let n = &self.nodes[node];
        if n.ready || n.booted || n.down_since != since {
            return;
        }
        let env = self.nodes[node].env;
        let keys: Vec<Key> = self.envs[env]
            .pods
            .iter()
            .filter(|(_, p)| p.node == Some(node) && p.deleting.is_none())
            .filter(|(_, p)| {
                let w = &self.envs[env].workloads[p.workload].spec;
                // A DaemonSet's pods, and pods that tolerate every taint, stay.
                w.kind != WorkloadKind::DaemonSet && !w.tolerate_all
            })
            .map(|(k, _)| k.clone())
            .collect();
        let mut touched = BTreeSet::new();
        for k in keys.iter().cloned() {
            if let Some(p) = self.envs[env].pods.get_mut(&k) {
                p.deleting = Some(now);
                touched.insert(p.workload);
                let wi = p.workload;
                self.index_terminating(env, wi, node);
            }
            self.event(
                now,
                "pod-evicted",
                Some(env),
                &format!("{}/{}", k.0, k.1),
                format!("from {}", self.nodes[node].name),
            );
            self.envs[env].dirty.pods.insert(k);
        }
        for w in touched {
            self.reconcile_workload(env, w, now);
        }
        // The instance manager tolerates only the admission plugin's 300 s: it is
        // evicted with the rest and, bound by name to its node, not made elsewhere.
        if self.runs_instance_manager(env, node) {
            self.nodes[node].instance_manager_evicted = Some(now);
            self.envs[env].dirty.longhorn = true;
        }
        self.longhorn_node_down(env, &keys, now);
    }

    /// Talos finished booting a VM that is still running the same power cycle: the machine
    /// comes up (unless its link is down).
    fn on_booted(&mut self, node: usize, epoch: u64, now: Duration) {
        if self.nodes[node].epoch != epoch
            || !self.nodes[node].vm_running
            || self.nodes[node].booted
            || self.nodes[node].link_down
        {
            return;
        }
        self.machine_up(node, now);
    }

    /// A guest shutdown finished: the VM is off and, if Talos was up, the machine goes down
    /// gracefully.
    fn shutdown_done(&mut self, node: usize, epoch: u64, now: Duration) {
        let n = &self.nodes[node];
        if n.epoch != epoch || !n.vm_running || !n.shutting_down {
            return;
        }
        let env = n.env;
        let name = n.name.clone();
        self.nodes[node].vm_running = false;
        self.nodes[node].shutting_down = false;
        self.nodes[node].epoch += 1;
        self.event(now, "vm-off", Some(env), &name, "guest shut down".into());
        if self.nodes[node].booted {
            self.machine_down(node, Down::Graceful, now);
        }
    }

    /// A pod's container started on a booted node: running and Ready, once its Longhorn
    /// volume is attached there.
    fn pod_started(&mut self, env: usize, key: Key, uid: String, now: Duration) {
        let Some(p) = self.envs[env].pods.get(&key) else {
            return;
        };
        if p.uid != uid
            || p.deleting.is_some()
            || p.running
            || !p.node.is_some_and(|n| self.nodes[n].booted)
        {
            return;
        }
        if !self.attach_for(env, &key, now) {
            return;
        }
        if let Some(p) = self.envs[env].pods.get_mut(&key) {
            p.running = true;
            p.api_ready = true;
            p.started_at = Some(now);
            p.ready_changed = now;
        }
        self.envs[env].dirty.pods.insert(key);
        self.envs[env].dirty.nodes = true;
    }

    /// Talos's VIP election: with etcd quorum, the VIP moves to the first booted etcd member
    /// when its holder is down; without quorum nobody holds it.
    fn vip_elect(&mut self, env: usize, now: Duration) {
        self.envs[env].vip_pending = false;
        if !self.envs[env].quorum {
            self.envs[env].vip_holder = None;
            return;
        }
        let old = self.envs[env].vip_holder;
        if old.is_some_and(|h| self.nodes[h].booted) {
            return;
        }
        let new = self
            .etcd_members(env)
            .into_iter()
            .find(|&n| self.nodes[n].booted);
        self.envs[env].vip_holder = new;
        if let Some(h) = new {
            let from = old
                .map(|o| self.nodes[o].name.clone())
                .unwrap_or_else(|| "nobody".into());
            let to = self.nodes[h].name.clone();
            self.event(now, "vip-moved", Some(env), &to, format!("from {from}"));
        }
    }

    /// Longhorn finished rebuilding the failed replicas on a node that stayed up: they run
    /// again.
    fn longhorn_rebuilt(&mut self, node: usize, epoch: u64, now: Duration) {
        if self.nodes[node].epoch != epoch || !self.nodes[node].booted {
            return;
        }
        let env = self.nodes[node].env;
        let mut rebuilt = Vec::new();
        for v in self.envs[env].volumes.iter_mut() {
            for r in v
                .replicas
                .iter_mut()
                .filter(|r| r.node == node && !r.running)
            {
                r.running = true;
                r.failed_at = None;
                rebuilt.push(v.name.clone());
            }
        }
        for v in rebuilt {
            self.event(
                now,
                "longhorn-replica-rebuilt",
                Some(env),
                &v,
                format!("on {}", self.nodes[node].name),
            );
        }
        self.envs[env].dirty.longhorn = true;
    }

    /// A Proxmox host finished powering off: its VMs stop hard, and after a reboot request
    /// it comes back after the host boot time.
    fn host_off(&mut self, host: usize, epoch: u64, now: Duration) {
        if self.hosts[host].epoch != epoch || !self.hosts[host].online {
            return;
        }
        self.hosts[host].online = false;
        self.hosts[host].shutting_down = false;
        let name = self.hosts[host].name.clone();
        self.event(now, "host-off", None, &name, String::new());
        if std::mem::take(&mut self.hosts[host].reboot) {
            self.hosts[host].epoch += 1;
            let epoch = self.hosts[host].epoch;
            self.schedule(
                now + self.timings.host_boot,
                Action::HostOnline { host, epoch },
            );
        }
        for n in 0..self.nodes.len() {
            if self.nodes[n].host == host {
                self.hard_stop(n, now, "vm-stopped");
            }
        }
    }

    /// A Proxmox host is online again (its VMs stay off until started).
    fn host_came_online(&mut self, host: usize, epoch: u64, now: Duration) {
        if self.hosts[host].epoch != epoch || self.hosts[host].online {
            return;
        }
        self.hosts[host].online = true;
        self.hosts[host].online_since = now;
        let name = self.hosts[host].name.clone();
        self.event(now, "host-online", None, &name, String::new());
    }

    /// The periodic lease renewals: Cilium's L2 lease by a holder that is up, every booted
    /// kubelet's node Lease each 10 s; and the next round scheduled.
    fn renew_leases(&mut self, now: Duration) {
        for e in 0..self.envs.len() {
            let holder_up = self.envs[e]
                .lease
                .as_ref()
                .and_then(|l| l.holder)
                .is_some_and(|h| self.nodes[h].booted);
            if holder_up && let Some(l) = self.envs[e].lease.as_mut() {
                l.renewed = now;
                self.envs[e].dirty.leases = true;
            }
        }
        // The kubelet renews its node Lease every 10 s (a quarter of its 40 s duration).
        for n in 0..self.nodes.len() {
            let node = &mut self.nodes[n];
            if node.booted && now.saturating_sub(node.heartbeat) >= Duration::from_secs(10) {
                node.heartbeat = now;
                let env = node.env;
                self.envs[env].dirty.node_leases.insert(n);
            }
        }
        self.schedule(now + self.timings.lease_renew, Action::RenewLeases);
    }

    fn machine_up(&mut self, n: usize, now: Duration) {
        let env = self.nodes[n].env;
        let name = self.nodes[n].name.clone();
        self.nodes[n].booted = true;
        self.nodes[n].booted_at = now;
        // The kubelet finishes deleting an evicted instance manager; Longhorn makes it anew.
        self.nodes[n].instance_manager_evicted = None;
        self.envs[env].dirty.longhorn = true;
        self.event(now, "machine-up", Some(env), &name, String::new());
        if !self.nodes[n].ready {
            self.nodes[n].ready = true;
            self.nodes[n].ready_changed = now;
            self.event(now, "node-ready", Some(env), &name, String::new());
        }
        // The kubelet is back: Terminating pods finish deleting, the others restart.
        let keys: Vec<Key> = self.envs[env]
            .pods
            .iter()
            .filter(|(_, p)| p.node == Some(n))
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            let Some(p) = self.envs[env].pods.get_mut(&k) else {
                continue;
            };
            if p.deleting.is_some() {
                self.remove_pod(env, &k, now);
                continue;
            }
            p.running = false;
            p.restarts += 1;
            if p.api_ready {
                p.api_ready = false;
                p.ready_changed = now;
            }
            let uid = p.uid.clone();
            self.envs[env].dirty.pods.insert(k.clone());
            self.schedule(
                now + self.timings.pod_start,
                Action::PodStarted { env, key: k, uid },
            );
        }
        self.after_return(n, now);
    }

    /// A machine is back in the cluster (booted, or its link put back): quorum, the VIP and
    /// the L2 lease are elected again where nobody up holds them, Longhorn rebuilds, and
    /// pending pods may now fit.
    fn after_return(&mut self, n: usize, now: Duration) {
        let env = self.nodes[n].env;
        let epoch = self.nodes[n].epoch;
        self.envs[env].dirty.nodes = true;
        self.envs[env].dirty.longhorn = true;
        self.update_quorum(env, now);
        self.vip_elect_soon(env, now);
        if let Some(l) = self.envs[env].lease.as_mut()
            && !l.holder.is_some_and(|h| self.nodes[h].booted)
            && !l.pending
        {
            l.pending = true;
            self.schedule(now + Duration::from_secs(2), Action::LeaseElect { env });
        }
        self.schedule(
            now + self.timings.longhorn_rebuild,
            Action::LonghornRebuilt { node: n, epoch },
        );
        // Pending pods and DaemonSets may now fit.
        for w in 0..self.envs[env].workloads.len() {
            self.reconcile_workload(env, w, now);
        }
    }

    fn lease_elect(&mut self, env: usize, now: Duration) {
        let candidates = self.l2_candidates(env);
        let Some(lease) = self.envs[env].lease.as_mut() else {
            return;
        };
        lease.pending = false;
        let old = lease.holder;
        if old.is_some_and(|h| self.nodes[h].booted) {
            return;
        }
        match candidates.first() {
            Some(&new) => {
                lease.holder = Some(new);
                lease.ever_held = true;
                lease.acquired = now;
                lease.renewed = now;
                lease.transitions += 1;
                self.envs[env].dirty.leases = true;
                let from = old
                    .map(|o| self.nodes[o].name.clone())
                    .unwrap_or_else(|| "nobody".into());
                let to = self.nodes[new].name.clone();
                self.event(now, "lease-moved", Some(env), &to, format!("from {from}"));
            }
            None => {
                self.event(
                    now,
                    "lease-no-candidate",
                    Some(env),
                    "ingress",
                    "no live node is selected by an L2 policy".into(),
                );
            }
        }
    }

    /// Live nodes an L2 policy selecting the ingress Service would announce from, in order.
    pub fn l2_candidates(&self, env: usize) -> Vec<usize> {
        self.l2_selected(env)
            .into_iter()
            .filter(|&n| self.nodes[n].booted)
            .collect()
    }

    /// Nodes selected by a policy that selects the ingress Service (alive or not).
    pub fn l2_selected(&self, env: usize) -> Vec<usize> {
        let e = &self.envs[env];
        let Some(ing) = &e.spec.ingress else {
            return vec![];
        };
        let mut svc_labels = ing.labels.clone();
        svc_labels.insert(
            "io.kubernetes.service.namespace".into(),
            ing.namespace.clone(),
        );
        svc_labels.insert("io.kubernetes.service.name".into(), ing.service.clone());
        let policies: Vec<&L2Policy> = e
            .policies
            .iter()
            .filter(|p| {
                p.load_balancer_ips
                    && p.service_selector
                        .as_ref()
                        .is_none_or(|s| s.matches(&svc_labels))
            })
            .collect();
        e.nodes
            .iter()
            .copied()
            .filter(|&n| {
                policies.iter().any(|p| {
                    p.node_selector
                        .as_ref()
                        .is_none_or(|s| s.matches(&self.nodes[n].labels))
                })
            })
            .collect()
    }

    // ---- scheduling ----

    /// Bring a workload's pods to what its controller wants, creating pods where they fit.
    pub(crate) fn reconcile_workload(&mut self, env: usize, wi: usize, now: Duration) {
        let kind = self.envs[env].workloads[wi].spec.kind;
        match kind {
            WorkloadKind::DaemonSet => {
                let nodes = self.envs[env].nodes.clone();
                for n in nodes {
                    if !self.eligible(env, wi, n, true) {
                        continue;
                    }
                    let has = self.envs[env]
                        .load
                        .by_node
                        .get(&(wi, n))
                        .is_some_and(|&c| c > 0);
                    if !has {
                        self.create_pod(env, wi, Some(n), None, now);
                    }
                }
            }
            WorkloadKind::Deployment => {
                // Pending pods first: try to place them.
                let pending: Vec<Key> = self
                    .pods_of(env, wi)
                    .filter(|p| p.node.is_none())
                    .map(|p| (p.namespace.clone(), p.name.clone()))
                    .collect();
                for k in pending {
                    if let Some(n) = self.place(env, wi) {
                        self.bind(env, &k, n, now);
                    }
                }
                let active = self
                    .pods_of(env, wi)
                    .filter(|p| p.deleting.is_none())
                    .count() as i32;
                let want = self.envs[env].workloads[wi].spec.replicas;
                for _ in active..want {
                    let node = self.place(env, wi);
                    self.create_pod(env, wi, node, None, now);
                }
            }
            WorkloadKind::StatefulSet => {
                let want = self.envs[env].workloads[wi].spec.replicas.max(0) as usize;
                for ord in 0..want {
                    let existing = self
                        .pods_of(env, wi)
                        .find(|p| p.ordinal == Some(ord))
                        .map(|p| ((p.namespace.clone(), p.name.clone()), p.node));
                    match existing {
                        Some((k, None)) => {
                            if let Some(n) = self.place(env, wi) {
                                self.bind(env, &k, n, now);
                            }
                        }
                        Some(_) => {}
                        None => {
                            let node = self.place(env, wi);
                            self.create_pod(env, wi, node, Some(ord), now);
                        }
                    }
                }
            }
        }
    }

    /// The pods of workload `wi`.
    fn pods_of(&self, env: usize, wi: usize) -> impl Iterator<Item = &Pod> + '_ {
        let e = &self.envs[env];
        e.load
            .by_workload
            .get(wi)
            .into_iter()
            .flatten()
            .filter_map(|k| e.pods.get(k))
    }

    /// A pod of workload `wi` now runs on node `n`.
    fn index_bound(&mut self, env: usize, wi: usize, n: usize) {
        let (cpu, mem) = (
            self.envs[env].workloads[wi].cpu_milli,
            self.envs[env].workloads[wi].memory_bytes,
        );
        let host = self.nodes[n].host;
        let idx = &mut self.envs[env].load;
        if let Some(l) = idx.load.get_mut(n) {
            l.0 += cpu;
            l.1 += mem;
        }
        *idx.by_node.entry((wi, n)).or_default() += 1;
        *idx.by_host.entry((wi, host)).or_default() += 1;
    }

    /// A pod of workload `wi` on node `n` is Terminating: it still holds its resources but
    /// no longer counts as a replica.
    pub(crate) fn index_terminating(&mut self, env: usize, wi: usize, n: usize) {
        let host = self.nodes[n].host;
        let idx = &mut self.envs[env].load;
        if let Some(c) = idx.by_node.get_mut(&(wi, n)) {
            *c = c.saturating_sub(1);
        }
        if let Some(c) = idx.by_host.get_mut(&(wi, host)) {
            *c = c.saturating_sub(1);
        }
    }

    /// A Terminating pod of workload `wi` on node `n` is gone.
    pub(crate) fn index_removed(&mut self, env: usize, wi: usize, n: usize) {
        let (cpu, mem) = (
            self.envs[env].workloads[wi].cpu_milli,
            self.envs[env].workloads[wi].memory_bytes,
        );
        if let Some(l) = self.envs[env].load.load.get_mut(n) {
            l.0 -= cpu;
            l.1 -= mem;
        }
    }

    fn bind(&mut self, env: usize, key: &Key, n: usize, now: Duration) {
        let Some(p) = self.envs[env].pods.get_mut(key) else {
            return;
        };
        p.node = Some(n);
        let uid = p.uid.clone();
        let wi = p.workload;
        self.index_bound(env, wi, n);
        let name = format!("{}/{}", key.0, key.1);
        self.envs[env].dirty.pods.insert(key.clone());
        self.envs[env].dirty.nodes = true;
        self.event(
            now,
            "pod-scheduled",
            Some(env),
            &name,
            format!("on {}", self.nodes[n].name),
        );
        if self.nodes[n].booted {
            self.schedule(
                now + self.timings.pod_start,
                Action::PodStarted {
                    env,
                    key: key.clone(),
                    uid,
                },
            );
        }
    }

    /// Whether a pod of workload `wi` may run on node `n` (taints, selector, readiness;
    /// `daemon` pods tolerate not-ready nodes and ignore capacity, as DaemonSets do).
    fn eligible(&self, env: usize, wi: usize, n: usize, daemon: bool) -> bool {
        let node = &self.nodes[n];
        let w = &self.envs[env].workloads[wi];
        if node.cp_taint && !w.spec.tolerate_control_plane && !w.spec.tolerate_all {
            return false;
        }
        if !w
            .spec
            .node_selector
            .iter()
            .all(|(k, v)| node.labels.get(k) == Some(v))
        {
            return false;
        }
        daemon || node.ready
    }

    /// Pick a node for a new pod of workload `wi`: eligible, fits, anti-affinity; prefer
    /// nodes (then hosts) with fewer pods of the workload, then the least requested CPU.
    fn place(&self, env: usize, wi: usize) -> Option<usize> {
        let e = &self.envs[env];
        let w = &e.workloads[wi];
        let mut best: Option<((usize, usize, i64), usize)> = None;
        for &n in &e.nodes {
            if !self.eligible(env, wi, n, false) {
                continue;
            }
            let node = &self.nodes[n];
            let (cpu, mem) = e.load.load.get(n).copied().unwrap_or((0, 0));
            let cpu = cpu + self.instance_manager_cpu_milli(env, n);
            if cpu + w.cpu_milli > node.cpu_milli - super::node_facts::RESERVED_CPU_MILLI
                || mem + w.memory_bytes > node.memory_bytes - super::node_facts::RESERVED_MEMORY
            {
                continue;
            }
            let score = if w.spec.anti_affinity == crate::scenario::AntiAffinity::None {
                (0, 0, cpu)
            } else {
                let same = e.load.by_node.get(&(wi, n)).copied().unwrap_or(0);
                if same > 0 && w.spec.anti_affinity == crate::scenario::AntiAffinity::Required {
                    continue;
                }
                let same_host = e.load.by_host.get(&(wi, node.host)).copied().unwrap_or(0);
                (same, same_host, cpu)
            };
            if best.as_ref().is_none_or(|(s, _)| score < *s) {
                best = Some((score, n));
            }
        }
        best.map(|(_, n)| n)
    }

    fn create_pod(
        &mut self,
        env: usize,
        wi: usize,
        node: Option<usize>,
        ordinal: Option<usize>,
        now: Duration,
    ) {
        let e = &mut self.envs[env];
        let w = &mut e.workloads[wi];
        w.created_pods += 1;
        let serial = w.created_pods.to_string();
        let name = match (w.spec.kind, ordinal) {
            (WorkloadKind::StatefulSet, Some(o)) => format!("{}-{o}", w.spec.name),
            (WorkloadKind::DaemonSet, _) => format!(
                "{}-{}",
                w.spec.name,
                ids::suffix(&[&e.spec.name, &w.spec.name, &serial], 5)
            ),
            _ => format!(
                "{}-{}-{}",
                w.spec.name,
                w.template_hash,
                ids::suffix(&[&e.spec.name, &w.spec.name, &serial], 5)
            ),
        };
        let ns = w.spec.namespace.clone();
        e.pod_ips += 1;
        let ip_serial = e.pod_ips;
        let uid = ids::uuid(&[&e.spec.name, "pod", &ns, &name, &serial]);
        let key = (ns.clone(), name.clone());
        e.pods.insert(
            key.clone(),
            Pod {
                namespace: ns,
                name,
                workload: wi,
                uid: uid.clone(),
                node,
                created: now,
                ip_serial,
                running: false,
                started_at: None,
                api_ready: false,
                ready_changed: now,
                deleting: None,
                ordinal,
                restarts: 0,
            },
        );
        e.dirty.pods.insert(key.clone());
        e.dirty.nodes = true;
        if let Some(set) = e.load.by_workload.get_mut(wi) {
            set.insert(key.clone());
        }
        if let Some(n) = node {
            self.index_bound(env, wi, n);
        }
        if now > Duration::ZERO {
            let where_ = node
                .map(|n| self.nodes[n].name.clone())
                .unwrap_or_else(|| "nowhere (Pending)".into());
            self.event(
                now,
                "pod-created",
                Some(env),
                &format!("{}/{}", key.0, key.1),
                format!("on {where_}"),
            );
        }
        if let Some(n) = node
            && self.nodes[n].booted
        {
            self.schedule(
                now + self.timings.pod_start,
                Action::PodStarted { env, key, uid },
            );
        }
    }
}

/// How long a misbehaving node's split brain shows once its link is back.
pub const SPLIT_BRAIN_FOR: Duration = Duration::from_secs(40);

/// How a machine leaves the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Down {
    /// An orderly shutdown: the VIP is resigned, the L2 lease released.
    Graceful,
    /// Power lost: everything on it stops at once.
    PowerLost,
    /// Its link pulled: it runs on, unreachable; leases expire as after power loss.
    CutOff,
}
