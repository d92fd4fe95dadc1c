//! The world model: Proxmox hosts, VMs, Talos machines, and one Kubernetes cluster per
//! environment, with the rules that make a power operation have its real consequences
//! (node NotReady after the grace period, evictions after the toleration, L2 lease and VIP
//! failover, etcd quorum, Longhorn degradation). Everything happens in simulated time on one
//! event queue, so a scenario always unfolds the same way.

mod attachment;
pub mod backends;
mod build;
pub mod eviction;
mod longhorn_system;
mod node_facts;
mod render;
mod rules;
pub mod store;

use crate::addr::Plan;
use crate::clock::SimClock;
use crate::scenario::{EnvSpec, Role, Timings, WorkloadSpec};
use crate::selector::Selector;
use crate::truth::GroundTruth;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use store::{Key, Store};
use tokio::sync::{Notify, watch};

pub use build::BuildError;

#[derive(Debug, Clone)]
pub struct Host {
    pub name: String,
    pub online: bool,
    pub cpus: u32,
    pub memory_bytes: i64,
    /// Bumped on every power change; scheduled events of an older epoch are dropped.
    pub epoch: u64,
    pub shutting_down: bool,
    /// A reboot was requested: come back after the boot time once off.
    pub reboot: bool,
    pub online_since: Duration,
    /// A wake-on-LAN MAC is configured for it.
    pub wakeonlan: bool,
    /// What the environment file declares of it (`proxmox.hosts`).
    pub switch: Option<String>,
    pub power: Option<String>,
}

/// A storage `/storage` lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Storage {
    pub name: String,
    pub kind: String,
    pub shared: bool,
}

/// The storage types Proxmox always marks shared (`@SHARED_STORAGE` of
/// `PVE/Storage/Plugin.pm`).
const SHARED_TYPES: [&str; 9] = [
    "iscsi",
    "nfs",
    "cifs",
    "rbd",
    "cephfs",
    "iscsidirect",
    "zfs",
    "drbd",
    "pbs",
];

impl Storage {
    /// Proxmox's defaults and the scenario's.
    pub fn all(extra: &[crate::scenario::StorageSpec]) -> Vec<Storage> {
        let mut out = vec![
            Storage {
                name: "local".into(),
                kind: "dir".into(),
                shared: false,
            },
            Storage {
                name: "local-lvm".into(),
                kind: "lvmthin".into(),
                shared: false,
            },
        ];
        out.extend(extra.iter().map(|s| Storage {
            name: s.name.clone(),
            kind: s.kind.clone(),
            shared: s.shared || SHARED_TYPES.contains(&s.kind.as_str()),
        }));
        out
    }
}

/// One VM, the Talos machine in it and the Kubernetes node it registers.
#[derive(Debug, Clone)]
pub struct Node {
    pub index: usize,
    pub env: usize,
    pub name: String,
    pub role: Role,
    pub host: usize,
    pub vmid: u32,
    /// SMBIOS uuid as in the Proxmox config (the node's systemUUID is it lowercased).
    pub uuid: String,
    pub ha: bool,
    pub tags: Vec<String>,
    /// The storage its disk lives on.
    pub storage: String,
    pub cpu_milli: i64,
    pub memory_bytes: i64,
    pub vm_running: bool,
    pub vm_started_at: Duration,
    pub shutting_down: bool,
    /// Talos, the kubelet, etcd and (on control planes) kube-apiserver are running.
    pub booted: bool,
    pub booted_at: Duration,
    /// When the machine last went down (identifies the outage for delayed rules).
    pub down_since: Duration,
    pub epoch: u64,
    /// The Kubernetes Ready condition: true, or Unknown after the grace period.
    pub ready: bool,
    pub ready_changed: Duration,
    pub labels: BTreeMap<String, String>,
    /// Carries node-role.kubernetes.io/control-plane:NoSchedule.
    pub cp_taint: bool,
    /// Has a 127.S.1.j address (apid and, on control planes, the API are served).
    pub addressed: bool,
    /// Last kubelet heartbeat (renewTime of its Lease in kube-node-lease).
    pub heartbeat: Duration,
    pub etcd_member_id: u64,
    /// When the taint manager evicted the node's Longhorn instance-manager pod (it tolerates
    /// only the 300 s the admission plugin adds); cleared when the kubelet is back and Longhorn
    /// makes the pod anew.
    pub instance_manager_evicted: Option<Duration>,
    /// Its network device's link is pulled (Proxmox `link_down=1`): the VM runs, nobody
    /// reaches it and it reaches nobody.
    pub link_down: bool,
    /// What it held when cut off, and what a misbehaving one still claims after.
    pub cut_off: CutOff,
}

/// A cut-off node's split brain, when the world's [`Misbehaviour`] asks for one.
#[derive(Debug, Clone, Default)]
pub struct CutOff {
    /// It held the VIP when its link was pulled.
    pub held_vip: bool,
    /// When it acquired the L2 lease it held when its link was pulled.
    pub held_lease: Option<Duration>,
    /// Back on the network, it still lists the VIP until then.
    pub stale_vip_until: Duration,
    /// Back on the network, it still calls itself etcd leader with entries of its own
    /// until then.
    pub minority_until: Duration,
}

/// How a cut-off node misbehaves once its link is back: a test hook that makes each
/// split-brain signal happen (Talos and Cilium do none of it by design; docs/reality.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Misbehaviour {
    /// It keeps listing the VIP it held for a while.
    pub keep_vip: bool,
    /// It renews the L2 lease term it held, as if it never lost it.
    pub keep_l2_lease: bool,
    /// Its etcd member led a minority and accepted writes the quorum never had.
    pub accept_writes: bool,
}

impl Misbehaviour {
    /// Every split-brain signal at once.
    pub const ALL: Misbehaviour = Misbehaviour {
        keep_vip: true,
        keep_l2_lease: true,
        accept_writes: true,
    };
}

impl Node {
    pub fn is_control_plane(&self) -> bool {
        self.role == Role::ControlPlane
    }
}

#[derive(Debug, Clone)]
pub struct Workload {
    pub spec: WorkloadSpec,
    pub uid: String,
    /// The pod's request as the scheduler counts it (`PodRequests`): the app container's
    /// and the sidecar's, which runs beside it.
    pub cpu_milli: i64,
    pub memory_bytes: i64,
    /// The sidecar's part of that request (CPU millicores, memory bytes), when it has one.
    pub sidecar: Option<(i64, i64)>,
    /// The whole pod's usage: the app container uses what is left of it beside the sidecar.
    pub usage_cpu_milli: i64,
    pub usage_memory_bytes: i64,
    /// pod-template-hash of the ReplicaSet (Deployments).
    pub template_hash: String,
    /// Pods created so far (names are derived from it).
    pub created_pods: u64,
    pub selector: Selector,
}

#[derive(Debug, Clone)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub workload: usize,
    pub uid: String,
    pub node: Option<usize>,
    pub created: Duration,
    /// Serial of the pod's address; the address itself lies in its node's podCIDR.
    pub ip_serial: u64,
    /// Containers really run (the node is up and the pod started).
    pub running: bool,
    pub started_at: Option<Duration>,
    /// What the API reports as the Ready condition.
    pub api_ready: bool,
    pub ready_changed: Duration,
    /// deletionTimestamp: Terminating since.
    pub deleting: Option<Duration>,
    pub ordinal: Option<usize>,
    /// Container restarts (the node rebooted under the pod).
    pub restarts: i32,
}

#[derive(Debug, Clone)]
pub struct Pdb {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// None: a null selector, which matches nothing.
    pub selector: Option<BTreeMap<String, String>>,
    pub min_available: Option<IntOrString>,
    pub max_unavailable: Option<IntOrString>,
    /// Who makes it, which decides when it exists.
    pub made_by: PdbMaker,
}

/// Who creates a PodDisruptionBudget of the lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PdbMaker {
    /// The scenario (a chart or a manifest): always there.
    Scenario,
    /// longhorn-manager's kubernetes-pdb controller, for `csi-attacher` and `csi-provisioner`:
    /// only while some Longhorn volume is not detached.
    LonghornWhileInUse,
}

#[derive(Debug, Clone)]
pub struct L2Policy {
    pub name: String,
    pub uid: String,
    pub node_selector_json: Option<Value>,
    pub node_selector: Option<Selector>,
    pub service_selector_json: Option<Value>,
    pub service_selector: Option<Selector>,
    pub load_balancer_ips: bool,
}

/// The Cilium L2 announcement lease of the ingress Service.
#[derive(Debug, Clone)]
pub struct L2Lease {
    pub holder: Option<usize>,
    pub acquired: Duration,
    pub renewed: Duration,
    pub transitions: i32,
    /// A takeover is scheduled.
    pub pending: bool,
    /// Some node has held it: before that, no Lease object exists.
    pub ever_held: bool,
}

#[derive(Debug, Clone)]
pub struct Replica {
    pub name: String,
    pub node: usize,
    pub running: bool,
    pub failed_at: Option<Duration>,
}

#[derive(Debug, Clone)]
pub struct Volume {
    pub name: String,
    pub uid: String,
    pub size_bytes: i64,
    pub attached_to: Option<usize>,
    pub pvc: Option<String>,
    /// The workload whose pods mount it, by index.
    pub used_by: Option<usize>,
    pub replicas: Vec<Replica>,
    pub number_of_replicas: usize,
}

/// Where pods run, kept up to date so the scheduler need not scan every pod.
#[derive(Debug, Clone, Default)]
pub struct LoadIndex {
    /// Requested (CPU millicores, memory bytes) of the pods bound to each node, by node index.
    pub load: Vec<(i64, i64)>,
    /// Non-terminating pods per (workload, node).
    pub by_node: std::collections::HashMap<(usize, usize), usize>,
    /// Non-terminating pods per (workload, host).
    pub by_host: std::collections::HashMap<(usize, usize), usize>,
    /// Keys of every pod (Terminating too) of each workload, by workload index.
    pub by_workload: Vec<BTreeSet<Key>>,
}

/// Which derived objects must be re-rendered into the store.
#[derive(Debug, Clone, Default)]
pub struct Dirty {
    pub all: bool,
    pub nodes: bool,
    pub pods: BTreeSet<Key>,
    pub removed_pods: BTreeSet<Key>,
    pub leases: bool,
    /// Node heartbeat Leases to re-render, by node index.
    pub node_leases: BTreeSet<usize>,
    pub longhorn: bool,
    /// Kubernetes Events waiting to be written.
    pub events: Vec<KubeEvent>,
}

/// A Kubernetes Event the world emits for something that happened (`kubectl get events`).
#[derive(Debug, Clone)]
pub struct KubeEvent {
    pub at: Duration,
    /// `Node` or `Pod`.
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub reason: &'static str,
    pub message: String,
    pub component: &'static str,
    pub warning: bool,
}

impl Dirty {
    pub fn any_pods(&self) -> bool {
        !self.pods.is_empty() || !self.removed_pods.is_empty()
    }
}

#[derive(Debug)]
pub struct Env {
    pub index: usize,
    pub spec: EnvSpec,
    pub tag: String,
    pub nodes: Vec<usize>,
    pub store: Store,
    pub workloads: Vec<Workload>,
    pub pods: BTreeMap<Key, Pod>,
    pub pdbs: Vec<Pdb>,
    pub policies: Vec<L2Policy>,
    pub lease: Option<L2Lease>,
    pub vip_holder: Option<usize>,
    pub vip_pending: bool,
    pub quorum: bool,
    pub volumes: Vec<Volume>,
    pub disk_nodes: BTreeSet<usize>,
    pub longhorn_settings: BTreeMap<String, String>,
    /// The v1 share of `guaranteed-instance-manager-cpu`, in percent of allocatable CPU.
    pub instance_manager_cpu_percent: f64,
    pub dirty: Dirty,
    pub load: LoadIndex,
    pub pod_ips: u64,
    pub cluster_uid: String,
}

impl Env {
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub fn control_planes<'a>(&'a self, nodes: &'a [Node]) -> impl Iterator<Item = &'a Node> + 'a {
        self.nodes
            .iter()
            .map(move |&i| &nodes[i])
            .filter(|n| n.is_control_plane())
    }
}

/// Which addresses answer right now. Listeners follow it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reachability {
    /// Proxmox host online, by host index.
    pub hosts: Vec<bool>,
    /// Talos apid up, by node index.
    pub apid: Vec<bool>,
    /// Kubernetes API up on the node's own address, by node index.
    pub node_api: Vec<bool>,
    /// API VIP served, by environment index.
    pub vip: Vec<bool>,
    /// Ingress address answers, by environment index.
    pub ingress: Vec<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Action {
    NodeUnready { node: usize, since: Duration },
    Evict { node: usize, since: Duration },
    Booted { node: usize, epoch: u64 },
    ShutdownDone { node: usize, epoch: u64 },
    PodStarted { env: usize, key: Key, uid: String },
    LeaseElect { env: usize },
    VipElect { env: usize },
    LonghornRebuilt { node: usize, epoch: u64 },
    HostOff { host: usize, epoch: u64 },
    HostOnline { host: usize, epoch: u64 },
    RenewLeases,
    PodGone { env: usize, key: Key, uid: String },
    LonghornForceDelete { env: usize, key: Key, uid: String },
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Due {
    at: Duration,
    seq: u64,
    action: Action,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PowerError {
    #[error("no VM with id {0}")]
    NoSuchVm(u32),
    #[error("no host named {0}")]
    NoSuchHost(String),
    #[error("host {0} is offline")]
    HostOffline(String),
}

pub struct World {
    pub clock: SimClock,
    pub plan: Plan,
    pub timings: Timings,
    pub scenario: String,
    pub hosts: Vec<Host>,
    pub nodes: Vec<Node>,
    pub envs: Vec<Env>,
    pub storages: Vec<Storage>,
    pub truth: GroundTruth,
    queue: BinaryHeap<Reverse<Due>>,
    seq: u64,
    last_reach: Reachability,
    /// How cut-off nodes misbehave (none by default): set by tests.
    pub misbehave: Misbehaviour,
}

impl World {
    pub(crate) fn schedule(&mut self, at: Duration, action: Action) {
        self.seq += 1;
        self.queue.push(Reverse(Due {
            at,
            seq: self.seq,
            action,
        }));
    }

    fn next_due(&self) -> Option<Duration> {
        self.queue.peek().map(|Reverse(d)| d.at)
    }

    /// Apply every queued action due at or before `now`, each at its own time.
    fn run_due(&mut self, now: Duration) {
        while let Some(Reverse(d)) = self.queue.peek() {
            if d.at > now {
                break;
            }
            let Some(Reverse(d)) = self.queue.pop() else {
                break;
            };
            self.apply(d.at, d.action);
            self.settle(d.at);
        }
    }

    /// Record a ground-truth event at simulated time `t`.
    pub(crate) fn event(
        &mut self,
        t: Duration,
        kind: &str,
        env: Option<usize>,
        subject: &str,
        detail: String,
    ) {
        let at = self
            .clock
            .wall_of(t)
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        if let Some(e) = env
            && let Some(ev) = kube_event(t, kind, subject, &detail)
        {
            self.envs[e].dirty.events.push(ev);
        }
        let env = env.map(|e| self.envs[e].spec.name.clone());
        self.truth
            .push(t, at, kind, env.as_deref(), subject, detail);
    }

    pub fn reachability(&self) -> Reachability {
        Reachability {
            hosts: self.hosts.iter().map(|h| h.online).collect(),
            apid: self.nodes.iter().map(|n| n.booted && n.addressed).collect(),
            node_api: self
                .nodes
                .iter()
                .map(|n| n.booted && n.addressed && n.is_control_plane())
                .collect(),
            vip: (0..self.envs.len()).map(|e| self.vip_up(e)).collect(),
            ingress: (0..self.envs.len()).map(|e| self.ingress_up(e)).collect(),
        }
    }

    /// The VIP answers while it has a holder that is up and etcd has quorum.
    pub fn vip_up(&self, env: usize) -> bool {
        let e = &self.envs[env];
        e.quorum && e.vip_holder.is_some_and(|h| self.nodes[h].booted)
    }

    /// Ingress answers while the L2 lease holder is up and a running Traefik pod can take
    /// the traffic: any node with externalTrafficPolicy Cluster, only the holder with Local.
    pub fn ingress_up(&self, env: usize) -> bool {
        let e = &self.envs[env];
        let Some(ing) = &e.spec.ingress else {
            return false;
        };
        let Some(holder) = e.lease.as_ref().and_then(|l| l.holder) else {
            return false;
        };
        if !self.nodes[holder].booted {
            return false;
        }
        let sel = Selector::from_map(&ing.selector);
        let local = ing.external_traffic_policy == "Local";
        e.pods.values().any(|p| {
            p.running
                && p.deleting.is_none()
                && p.node
                    .is_some_and(|n| self.nodes[n].booted && (!local || n == holder))
                && e.workloads
                    .get(p.workload)
                    .is_some_and(|w| sel.matches(&self.pod_labels(w)))
        })
    }

    pub(crate) fn pod_labels(&self, w: &Workload) -> BTreeMap<String, String> {
        let mut l = w.spec.labels.clone();
        l.extend(w.spec.pod_labels.clone());
        l
    }

    /// After a change: render what is dirty, and record availability changes.
    fn settle(&mut self, now: Duration) {
        for e in 0..self.envs.len() {
            self.flush(e);
        }
        let reach = self.reachability();
        for e in 0..self.envs.len() {
            let name = self.envs[e].spec.name.clone();
            let was_vip = self.last_reach.vip.get(e).copied().unwrap_or(true);
            if reach.vip[e] != was_vip {
                self.event(
                    now,
                    if reach.vip[e] {
                        "api-vip-up"
                    } else {
                        "api-vip-down"
                    },
                    Some(e),
                    &name,
                    String::new(),
                );
                self.truth
                    .set_available(&format!("api/{name}"), reach.vip[e], now);
            }
            let was_ing = self.last_reach.ingress.get(e).copied().unwrap_or(true);
            if reach.ingress[e] != was_ing {
                self.event(
                    now,
                    if reach.ingress[e] {
                        "ingress-up"
                    } else {
                        "ingress-down"
                    },
                    Some(e),
                    &name,
                    String::new(),
                );
                let hosts = self.envs[e]
                    .spec
                    .ingress
                    .as_ref()
                    .map(|i| i.hosts.clone())
                    .unwrap_or_default();
                for h in hosts {
                    self.truth
                        .set_available(&format!("ingress/{name}/{h}"), reach.ingress[e], now);
                }
            }
        }
        self.last_reach = reach;
    }

    pub fn node_by_vmid(&self, vmid: u32) -> Option<usize> {
        self.nodes.iter().position(|n| n.vmid == vmid)
    }

    pub fn node_by_name(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    pub fn host_by_name(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h.name == name)
    }

    /// etcd members of an environment: its control-plane nodes.
    pub fn etcd_members(&self, env: usize) -> Vec<usize> {
        self.envs[env]
            .nodes
            .iter()
            .copied()
            .filter(|&n| self.nodes[n].is_control_plane())
            .collect()
    }

    pub fn has_quorum(&self, env: usize) -> bool {
        let members = self.etcd_members(env);
        let healthy = members.iter().filter(|&&n| self.nodes[n].booted).count();
        healthy * 2 > members.len()
    }

    /// The etcd leader: the healthy member with the lowest id, while quorum holds.
    pub fn etcd_leader(&self, env: usize) -> Option<usize> {
        if !self.envs[env].quorum {
            return None;
        }
        self.etcd_members(env)
            .into_iter()
            .filter(|&n| self.nodes[n].booted)
            .min_by_key(|&n| self.nodes[n].etcd_member_id)
    }
}

/// The world behind a lock, with the driver that runs scheduled actions on time and a
/// watch channel that tells listeners which addresses are up.
pub struct Shared {
    pub clock: SimClock,
    world: Mutex<World>,
    notify: Notify,
    reach_tx: watch::Sender<Reachability>,
    stopped: std::sync::atomic::AtomicBool,
    /// Open Kubernetes watches end when this changes, as they end on a real API server.
    watch_ends: watch::Sender<WatchEnd>,
}

/// How the API server ends every open watch (a test hook).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WatchEnd {
    /// Nothing has ended them yet.
    #[default]
    None,
    /// The connections close, as when the API server restarts: a client resumes each watch
    /// from the last revision it saw.
    Close(u64),
    /// Every watch gets a 410 Expired error event and every revision before now is compacted
    /// away, as when etcd compacts past a watcher that fell behind: a client must list again.
    Expire(u64),
}

impl Shared {
    pub fn new(world: World) -> Arc<Shared> {
        let reach = world.reachability();
        let (reach_tx, _) = watch::channel(reach);
        Arc::new(Shared {
            clock: world.clock.clone(),
            world: Mutex::new(world),
            notify: Notify::new(),
            reach_tx,
            stopped: std::sync::atomic::AtomicBool::new(false),
            watch_ends: watch::channel(WatchEnd::None).0,
        })
    }

    /// End every open Kubernetes watch `how` (a test hook: an API server restarting, or a
    /// compaction past every watcher).
    pub fn end_watches(&self, expire: bool) {
        if expire {
            let mut w = self.lock();
            for env in &mut w.envs {
                env.store.compact();
            }
        }
        self.watch_ends.send_modify(|end| {
            let n = match *end {
                WatchEnd::None => 1,
                WatchEnd::Close(n) | WatchEnd::Expire(n) => n + 1,
            };
            *end = if expire {
                WatchEnd::Expire(n)
            } else {
                WatchEnd::Close(n)
            };
        });
    }

    /// Told when open watches are to end.
    pub fn subscribe_watch_ends(&self) -> watch::Receiver<WatchEnd> {
        self.watch_ends.subscribe()
    }

    fn lock(&self) -> MutexGuard<'_, World> {
        // A panic while holding the lock would be a bug; keep serving the last state.
        self.world.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Read the world.
    pub fn read<R>(&self, f: impl FnOnce(&World) -> R) -> R {
        f(&self.lock())
    }

    /// Change the world at the current simulated time; consequences are scheduled.
    pub fn change<R>(&self, f: impl FnOnce(&mut World, Duration) -> R) -> R {
        let (r, reach) = {
            let mut w = self.lock();
            let now = self.clock.now();
            w.run_due(now);
            let r = f(&mut w, now);
            w.settle(now);
            (r, w.reachability())
        };
        self.publish(reach);
        self.notify.notify_one();
        r
    }

    pub fn subscribe_reachability(&self) -> watch::Receiver<Reachability> {
        self.reach_tx.subscribe()
    }

    pub fn reachability(&self) -> Reachability {
        self.reach_tx.borrow().clone()
    }

    /// Take every address down for good (the lab is stopping).
    pub fn shutdown(&self) {
        self.stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
        // Its connections close with it, as a server process's do when it exits.
        self.end_watches(false);
        self.reach_tx.send_modify(|r| {
            for v in r
                .hosts
                .iter_mut()
                .chain(r.apid.iter_mut())
                .chain(r.node_api.iter_mut())
                .chain(r.vip.iter_mut())
                .chain(r.ingress.iter_mut())
            {
                *v = false;
            }
        });
    }

    fn publish(&self, reach: Reachability) {
        if self.stopped.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        self.reach_tx.send_if_modified(|cur| {
            if *cur != reach {
                *cur = reach;
                true
            } else {
                false
            }
        });
    }

    /// Run scheduled actions when they fall due, until the task is aborted.
    pub async fn drive(self: Arc<Self>) {
        loop {
            let next = self.read(|w| w.next_due());
            match next {
                Some(at) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(self.clock.instant_of(at)) => {
                            let reach = {
                                let mut w = self.lock();
                                let now = self.clock.now().max(at);
                                w.run_due(now);
                                w.reachability()
                            };
                            self.publish(reach);
                        }
                        _ = self.notify.notified() => {}
                    }
                }
                None => self.notify.notified().await,
            }
        }
    }

    // Power operations, as the Proxmox API performs them.

    /// Evict a pod through the Eviction API (the PDB check is the API's).
    pub fn evict_pod(&self, env: usize, key: &Key) -> Result<(), eviction::EvictError> {
        self.change(|w, now| w.evict_pod(env, key, now))
    }

    pub fn set_link(&self, vmid: u32, down: bool) -> Result<(), PowerError> {
        self.change(|w, now| w.set_link(vmid, down, now))
    }

    pub fn stop_vm(&self, vmid: u32) -> Result<(), PowerError> {
        self.change(|w, now| w.stop_vm(vmid, now))
    }

    pub fn start_vm(&self, vmid: u32) -> Result<(), PowerError> {
        self.change(|w, now| w.start_vm(vmid, now))
    }

    pub fn shutdown_vm(&self, vmid: u32) -> Result<(), PowerError> {
        self.change(|w, now| w.shutdown_vm(vmid, now))
    }

    pub fn shutdown_host(&self, host: &str) -> Result<(), PowerError> {
        self.change(|w, now| w.shutdown_host(host, now))
    }

    pub fn wake_host(&self, host: &str) -> Result<(), PowerError> {
        self.change(|w, now| w.wake_host(host, now))
    }

    /// Pull the plug of a host: every VM on it stops at once (tests and chaos drills).
    pub fn power_loss_host(&self, host: &str) -> Result<(), PowerError> {
        self.change(|w, now| w.power_loss_host(host, now))
    }
}

/// The Kubernetes Event that goes with a world event, when Kubernetes records one.
fn kube_event(at: Duration, kind: &str, subject: &str, detail: &str) -> Option<KubeEvent> {
    let pod = |reason, message: String, component, warning| {
        let (ns, name) = subject.split_once('/')?;
        Some(KubeEvent {
            at,
            kind: "Pod",
            namespace: ns.to_string(),
            name: name.to_string(),
            reason,
            message,
            component,
            warning,
        })
    };
    let node = |reason: &'static str, component| {
        Some(KubeEvent {
            at,
            kind: "Node",
            namespace: "default".into(),
            name: subject.to_string(),
            reason,
            message: format!("Node {subject} status is now: {reason}"),
            component,
            warning: false,
        })
    };
    match kind {
        "node-not-ready" => node("NodeNotReady", "node-controller"),
        "node-ready" => node("NodeReady", "kubelet"),
        "pod-evicted" => pod(
            "TaintManagerEviction",
            format!("Marking for deletion Pod {subject}"),
            "taint-eviction-controller",
            false,
        ),
        "pod-scheduled" => pod(
            "Scheduled",
            format!(
                "Successfully assigned {subject} to {}",
                detail.trim_start_matches("on ")
            ),
            "default-scheduler",
            false,
        ),
        _ => None,
    }
}
