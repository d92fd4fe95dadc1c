//! Building the initial world from a scenario: VMs on hosts, nodes with their labels and
//! capacity, pods placed by a small deterministic scheduler, leases, VIPs and Longhorn.

use super::node_facts::HOST_LABEL;
use super::*;
use crate::ids;
use crate::quantity;
use crate::scenario::{Scenario, WorkloadKind};
use crate::truth::Target;

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("scenario {scenario}: {message}")]
    Invalid { scenario: String, message: String },
}

/// The label Talos puts on control planes so that cloud load balancers leave them out.
pub(crate) const EXCLUDE_FROM_LB: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// Whether a Talos version such as `v1.11.5` is at least `major.minor`; `None` when it does
/// not read as a version.
fn talos_at_least(version: &str, major: u64, minor: u64) -> Option<bool> {
    let mut parts = version.strip_prefix('v')?.split('.');
    let a: u64 = parts.next()?.parse().ok()?;
    let b: u64 = parts.next()?.parse().ok()?;
    Some((a, b) >= (major, minor))
}
/// Longhorn's defaults for the settings a gate reads (types/setting.go).
const LONGHORN_DEFAULTS: &[(&str, &str)] = &[
    ("default-replica-count", "{\"v1\":\"3\",\"v2\":\"3\"}"),
    ("replica-soft-anti-affinity", "false"),
    ("replica-zone-soft-anti-affinity", "true"),
    ("replica-disk-soft-anti-affinity", "true"),
    ("create-default-disk-labeled-nodes", "false"),
    ("node-drain-policy", "block-if-contains-last-replica"),
    ("node-down-pod-deletion-policy", "do-nothing"),
    ("replica-replenishment-wait-interval", "600"),
    ("default-data-path", "/var/lib/longhorn/"),
    (
        "guaranteed-instance-manager-cpu",
        super::longhorn_system::GUARANTEED_IM_CPU_DEFAULT,
    ),
];

/// The error for a scenario that does not hold together, naming the scenario.
fn invalid_in(scenario: &str) -> impl Fn(String) -> BuildError + '_ {
    move |message| BuildError::Invalid {
        scenario: scenario.to_string(),
        message,
    }
}

/// The Proxmox hosts, all online from the start.
fn build_hosts(
    scenario: &Scenario,
    invalid: &impl Fn(String) -> BuildError,
) -> Result<Vec<Host>, BuildError> {
    scenario
        .hosts
        .iter()
        .map(|h| {
            Ok(Host {
                name: h.name.clone(),
                online: true,
                cpus: h.cpus,
                memory_bytes: quantity::bytes(&h.memory).map_err(invalid)?,
                epoch: 0,
                shutting_down: false,
                reboot: false,
                online_since: Duration::ZERO,
                wakeonlan: h.wakeonlan,
                switch: h.switch.clone(),
                power: h.power.clone(),
            })
        })
        .collect()
}

/// The ground truth's header: the scenario, the clock's speed and its wall-clock start.
fn ground_truth(scenario: &Scenario, clock: &SimClock) -> GroundTruth {
    GroundTruth {
        scenario: scenario.name.clone(),
        speed: clock.speed(),
        start: clock
            .start_wall()
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        ..Default::default()
    }
}

/// The Talos VMs as they are declared, environment after environment: the Proxmox hosts
/// and storages they may use, the VMIDs taken so far, and the nodes made.
struct Machines<'a> {
    hosts: &'a [Host],
    storages: &'a [super::Storage],
    used_vmids: BTreeSet<u32>,
    nodes: Vec<Node>,
}

impl Machines<'_> {
    /// One declared node of environment `k`: its VM on its host (VMID, SMBIOS UUID,
    /// storage), its Kubernetes labels and capacity, booted and Ready from the start.
    fn add(
        &mut self,
        k: usize,
        es: &EnvSpec,
        tag: &str,
        ns: &crate::scenario::NodeSpec,
        invalid: &impl Fn(String) -> BuildError,
    ) -> Result<usize, BuildError> {
        let index = self.nodes.len();
        let host = self
            .hosts
            .iter()
            .position(|h| h.name == ns.host)
            .ok_or_else(|| invalid(format!("unknown host {}", ns.host)))?;
        let vmid = ns.vmid.unwrap_or(1000 + index as u32);
        if !self.used_vmids.insert(vmid) {
            return Err(invalid(format!("vmid {vmid} is used twice")));
        }
        let cp = ns.role == Role::ControlPlane;
        let labels = node_labels(es, ns, invalid)?;
        self.nodes.push(Node {
            index,
            env: k,
            name: ns.name.clone(),
            role: ns.role,
            host,
            vmid,
            uuid: ns
                .uuid
                .clone()
                .unwrap_or_else(|| ids::uuid(&["smbios", &ns.name])),
            ha: ns.ha,
            tags: vec!["talos".into(), tag.to_string()],
            storage: self.storage(ns, invalid)?,
            cpu_milli: quantity::cpu_milli(&ns.cpu).map_err(invalid)?,
            memory_bytes: quantity::bytes(&ns.memory).map_err(invalid)?,
            vm_running: true,
            vm_started_at: Duration::ZERO,
            shutting_down: false,
            booted: true,
            booted_at: Duration::ZERO,
            down_since: Duration::ZERO,
            epoch: 0,
            ready: true,
            ready_changed: Duration::ZERO,
            labels,
            cp_taint: cp && !es.allow_scheduling_on_control_planes,
            addressed: index < crate::addr::MAX_ADDRESSED,
            heartbeat: Duration::ZERO,
            etcd_member_id: ids::hash64(&["etcd-member", &ns.name]),
            instance_manager_evicted: None,
            link_down: false,
            cut_off: Default::default(),
        });
        Ok(index)
    }

    /// The storage the node's disk is on (`local-lvm` unless declared), which must exist.
    fn storage(
        &self,
        ns: &crate::scenario::NodeSpec,
        invalid: &impl Fn(String) -> BuildError,
    ) -> Result<String, BuildError> {
        let storage = ns.storage.clone().unwrap_or_else(|| "local-lvm".into());
        if !self.storages.iter().any(|s| s.name == storage) {
            return Err(invalid(format!(
                "node {}: storage {storage:?} is not among the storages (local, local-lvm and the scenario's `storages`)",
                ns.name
            )));
        }
        Ok(storage)
    }
}

/// A node's labels as the kubelet and Talos set them (the control-plane role, and since
/// Talos 1.8 the exclusion from external load balancers), then the scenario's, less those
/// the environment deletes.
fn node_labels(
    es: &EnvSpec,
    ns: &crate::scenario::NodeSpec,
    invalid: &impl Fn(String) -> BuildError,
) -> Result<BTreeMap<String, String>, BuildError> {
    let cp = ns.role == Role::ControlPlane;
    let mut labels = BTreeMap::from([
        ("beta.kubernetes.io/arch".to_string(), "amd64".to_string()),
        ("beta.kubernetes.io/os".to_string(), "linux".to_string()),
        ("kubernetes.io/arch".to_string(), "amd64".to_string()),
        ("kubernetes.io/hostname".to_string(), ns.name.clone()),
        ("kubernetes.io/os".to_string(), "linux".to_string()),
        (HOST_LABEL.to_string(), ns.host.clone()),
    ]);
    if cp {
        labels.insert(
            "node-role.kubernetes.io/control-plane".into(),
            String::new(),
        );
        // Talos's config generation since 1.8 (`AddExcludeFromExternalLoadBalancer`
        // in pkg/machinery/config/generate).
        let since_1_8 = talos_at_least(&es.talos_version, 1, 8).ok_or_else(|| {
            invalid(format!(
                "environment {}: talos_version {:?} is not vMAJOR.MINOR.PATCH",
                es.name, es.talos_version
            ))
        })?;
        if since_1_8 {
            labels.insert(EXCLUDE_FROM_LB.into(), String::new());
        }
    }
    labels.extend(ns.labels.clone());
    for key in &es.delete_node_labels {
        labels.remove(key);
    }
    Ok(labels)
}

/// The environment's workloads with their requests, usage (half the requests unless
/// declared) and the names their controllers derive.
fn build_workloads(
    es: &EnvSpec,
    invalid: &impl Fn(String) -> BuildError,
) -> Result<Vec<Workload>, BuildError> {
    es.workloads
        .iter()
        .map(|w| {
            let sidecar = match &w.sidecar {
                Some(s) => Some((
                    quantity::cpu_milli(&s.cpu).map_err(invalid)?,
                    quantity::bytes(&s.memory).map_err(invalid)?,
                )),
                None => None,
            };
            let (side_cpu, side_mem) = sidecar.unwrap_or((0, 0));
            let cpu = quantity::cpu_milli(&w.requests.cpu).map_err(invalid)? + side_cpu;
            let mem = quantity::bytes(&w.requests.memory).map_err(invalid)? + side_mem;
            let (ucpu, umem) = match &w.usage {
                Some(u) => (
                    quantity::cpu_milli(&u.cpu).map_err(invalid)?,
                    quantity::bytes(&u.memory).map_err(invalid)?,
                ),
                None => (cpu / 2, mem / 2),
            };
            Ok(Workload {
                spec: w.clone(),
                uid: ids::uuid(&[&es.name, "workload", &w.namespace, &w.name]),
                cpu_milli: cpu,
                memory_bytes: mem,
                sidecar,
                usage_cpu_milli: ucpu,
                usage_memory_bytes: umem,
                template_hash: ids::suffix(&[&es.name, &w.namespace, &w.name, "template"], 10),
                created_pods: 0,
                selector: Selector::from_map(&w.labels),
            })
        })
        .collect()
}

/// The PodDisruptionBudgets: each workload's own, the scenario's standalone ones, and with
/// Longhorn the ones its CSI components get.
fn build_pdbs(es: &EnvSpec) -> Vec<Pdb> {
    let mut pdbs = Vec::new();
    for w in &es.workloads {
        if let Some(rule) = &w.pdb {
            let name = rule.name.clone().unwrap_or_else(|| w.name.clone());
            pdbs.push(Pdb {
                namespace: w.namespace.clone(),
                uid: ids::uuid(&[&es.name, "pdb", &w.namespace, &name]),
                name,
                selector: Some(rule.selector.clone().unwrap_or_else(|| w.labels.clone())),
                min_available: rule.min_available.clone(),
                max_unavailable: rule.max_unavailable.clone(),
                made_by: PdbMaker::Scenario,
            });
        }
    }
    for p in &es.pdbs {
        pdbs.push(Pdb {
            namespace: p.namespace.clone(),
            name: p.name.clone(),
            uid: ids::uuid(&[&es.name, "pdb", &p.namespace, &p.name]),
            selector: p.selector.clone(),
            min_available: p.min_available.clone(),
            max_unavailable: p.max_unavailable.clone(),
            made_by: PdbMaker::Scenario,
        });
    }
    if es.longhorn.is_some() {
        let longhorn = super::longhorn_system::csi_pdbs(es, &pdbs);
        pdbs.extend(longhorn);
    }
    pdbs
}

/// Cilium's L2 announcement policies with their node and Service selectors read.
fn build_policies(
    es: &EnvSpec,
    invalid: &impl Fn(String) -> BuildError,
) -> Result<Vec<L2Policy>, BuildError> {
    es.l2_policies
        .iter()
        .map(|p| {
            let ns = match &p.node_selector {
                Some(v) => Selector::from_label_selector(v)
                    .map_err(|m| invalid(format!("L2 policy {}: {m}", p.name)))?,
                None => None,
            };
            let ss = match &p.service_selector {
                Some(v) => Selector::from_label_selector(v)
                    .map_err(|m| invalid(format!("L2 policy {}: {m}", p.name)))?,
                None => None,
            };
            Ok(L2Policy {
                name: p.name.clone(),
                uid: ids::uuid(&[&es.name, "l2policy", &p.name]),
                node_selector_json: p.node_selector.clone(),
                node_selector: ns,
                service_selector_json: p.service_selector.clone(),
                service_selector: ss,
                load_balancer_ips: p.load_balancer_ips,
            })
        })
        .collect()
}

/// What an environment's Longhorn starts with.
struct LonghornSetup {
    longhorn_settings: BTreeMap<String, String>,
    disk_nodes: BTreeSet<usize>,
    instance_manager_cpu_percent: f64,
}

/// Longhorn's settings (its defaults, then the scenario's), the nodes with a Longhorn disk
/// (those declared, else every node that takes workloads) and the guaranteed instance
/// manager CPU as a percentage.
fn longhorn_setup(
    es: &EnvSpec,
    env_nodes: &[usize],
    nodes: &[Node],
    invalid: &impl Fn(String) -> BuildError,
) -> Result<LonghornSetup, BuildError> {
    let mut longhorn_settings: BTreeMap<String, String> = LONGHORN_DEFAULTS
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut disk_nodes = BTreeSet::new();
    if let Some(lh) = &es.longhorn {
        longhorn_settings.extend(lh.settings.clone());
        match &lh.disk_nodes {
            Some(names) => {
                for n in names {
                    let i = env_nodes
                        .iter()
                        .copied()
                        .find(|&i| nodes[i].name == *n)
                        .ok_or_else(|| {
                            invalid(format!("longhorn disk node {n} is not in {}", es.name))
                        })?;
                    disk_nodes.insert(i);
                }
            }
            None => disk_nodes.extend(env_nodes.iter().copied().filter(|&i| !nodes[i].cp_taint)),
        }
    }
    let setting = &longhorn_settings["guaranteed-instance-manager-cpu"];
    let instance_manager_cpu_percent =
        super::longhorn_system::guaranteed_cpu_percent(setting).ok_or_else(|| {
            invalid(format!(
                "environment {}: longhorn setting guaranteed-instance-manager-cpu {setting:?} is neither a percentage nor {{\"v1\": \"<percentage>\"}}",
                es.name
            ))
        })?;
    Ok(LonghornSetup {
        longhorn_settings,
        disk_nodes,
        instance_manager_cpu_percent,
    })
}

/// The ground truth's targets of environment `k`: its API behind the VIP and each ingress
/// host.
fn add_targets(truth: &mut GroundTruth, plan: &Plan, k: usize, es: &EnvSpec) {
    let url_api = format!("https://{}:{}", plan.vip_ip(k), crate::addr::KUBE_PORT);
    truth.targets.insert(
        format!("api/{}", es.name),
        Target {
            kind: "api".into(),
            env: es.name.clone(),
            url: url_api,
            host: None,
            outages: vec![],
        },
    );
    if let Some(ing) = &es.ingress {
        for h in &ing.hosts {
            truth.targets.insert(
                format!("ingress/{}/{h}", es.name),
                Target {
                    kind: "ingress".into(),
                    env: es.name.clone(),
                    url: format!(
                        "http://{}:{}/",
                        plan.ingress_ip(k),
                        crate::addr::INGRESS_HTTP_PORT
                    ),
                    host: Some(h.clone()),
                    outages: vec![],
                },
            );
        }
    }
}

/// Environment `k` as declared: its nodes (added to `machines`), workloads, PDBs, L2
/// policies, Longhorn setup and ground-truth targets; its pods come later.
fn build_env(
    machines: &mut Machines,
    truth: &mut GroundTruth,
    plan: &Plan,
    scenario: &Scenario,
    k: usize,
    es: &EnvSpec,
    invalid: &impl Fn(String) -> BuildError,
) -> Result<Env, BuildError> {
    let tag = es.tag.clone().unwrap_or_else(|| es.like.clone());
    let mut env_nodes = Vec::new();
    for ns in &es.nodes {
        env_nodes.push(machines.add(k, es, &tag, ns, invalid)?);
    }
    let workloads = build_workloads(es, invalid)?;
    let pdbs = build_pdbs(es);
    let policies = build_policies(es, invalid)?;
    let LonghornSetup {
        longhorn_settings,
        disk_nodes,
        instance_manager_cpu_percent,
    } = longhorn_setup(es, &env_nodes, &machines.nodes, invalid)?;
    add_targets(truth, plan, k, es);
    Ok(Env {
        index: k,
        spec: es.clone(),
        tag,
        nodes: env_nodes,
        store: Store::with_history(scenario.watch_history),
        workloads,
        pods: BTreeMap::new(),
        pdbs,
        policies,
        lease: es.ingress.as_ref().map(|_| L2Lease {
            holder: None,
            acquired: Duration::ZERO,
            renewed: Duration::ZERO,
            transitions: 0,
            pending: false,
            ever_held: false,
        }),
        vip_holder: None,
        vip_pending: false,
        quorum: true,
        volumes: Vec::new(),
        disk_nodes,
        instance_manager_cpu_percent,
        longhorn_settings,
        load: LoadIndex::default(),
        dirty: Dirty {
            all: true,
            ..Default::default()
        },
        pod_ips: 0,
        cluster_uid: ids::uuid(&[&es.name, "cluster"]),
    })
}

impl World {
    pub fn build(scenario: &Scenario, plan: Plan, clock: SimClock) -> Result<World, BuildError> {
        let invalid = invalid_in(&scenario.name);
        let storages = super::Storage::all(&scenario.storages);
        let hosts = build_hosts(scenario, &invalid)?;
        let mut truth = ground_truth(scenario, &clock);
        let mut machines = Machines {
            hosts: &hosts,
            storages: &storages,
            used_vmids: BTreeSet::new(),
            nodes: Vec::new(),
        };
        let mut envs = Vec::new();
        for (k, es) in scenario.environments.iter().enumerate() {
            envs.push(build_env(
                &mut machines,
                &mut truth,
                &plan,
                scenario,
                k,
                es,
                &invalid,
            )?);
        }
        let nodes = machines.nodes;

        let mut world = World {
            clock,
            plan,
            timings: scenario.timings.clone(),
            scenario: scenario.name.clone(),
            hosts,
            nodes,
            envs,
            storages,
            truth,
            queue: BinaryHeap::new(),
            seq: 0,
            last_reach: Reachability::default(),
            misbehave: Default::default(),
        };
        world.start_initial_state(&invalid)?;
        Ok(world)
    }

    /// The initial state: every environment's pods placed and running, volumes and leases
    /// held, lease renewal scheduled, everything rendered, and the targets that start out
    /// unreachable recorded so.
    fn start_initial_state(
        &mut self,
        invalid: &impl Fn(String) -> BuildError,
    ) -> Result<(), BuildError> {
        let node_count = self.nodes.len();
        for e in self.envs.iter_mut() {
            e.load.load = vec![(0, 0); node_count];
            e.load.by_workload = vec![BTreeSet::new(); e.workloads.len()];
        }
        for e in 0..self.envs.len() {
            self.start_env(e, invalid)?;
        }
        self.schedule(self.timings.lease_renew, Action::RenewLeases);
        for e in 0..self.envs.len() {
            self.flush(e);
        }
        self.last_reach = self.reachability();
        self.record_unreachable_at_start();
        Ok(())
    }

    /// Environment `e` at time zero: etcd quorum, the VIP on the first booted member, pods
    /// placed (DaemonSets first) and running for a while, Longhorn volumes, the L2 lease.
    fn start_env(
        &mut self,
        e: usize,
        invalid: &impl Fn(String) -> BuildError,
    ) -> Result<(), BuildError> {
        let t0 = Duration::ZERO;
        self.envs[e].quorum = self.has_quorum(e);
        self.envs[e].vip_holder = self
            .etcd_members(e)
            .into_iter()
            .find(|&n| self.nodes[n].booted);
        // DaemonSets first, then the rest, in scenario order.
        let order: Vec<usize> = {
            let ws = &self.envs[e].workloads;
            let mut v: Vec<usize> = (0..ws.len())
                .filter(|&i| ws[i].spec.kind == WorkloadKind::DaemonSet)
                .collect();
            v.extend((0..ws.len()).filter(|&i| ws[i].spec.kind != WorkloadKind::DaemonSet));
            v
        };
        for wi in order {
            self.reconcile_workload(e, wi, t0);
        }
        // Pods of the initial state have been running for a while.
        for p in self.envs[e].pods.values_mut() {
            if p.node.is_some() {
                p.running = true;
                p.api_ready = true;
                p.started_at = Some(t0);
            }
        }
        self.build_volumes(e).map_err(invalid)?;
        if self.envs[e].lease.is_some() {
            let holder = self.l2_candidates(e).into_iter().next();
            if let Some(l) = self.envs[e].lease.as_mut() {
                l.holder = holder;
                l.ever_held = holder.is_some();
            }
        }
        Ok(())
    }

    /// The API and ingress targets unreachable in the initial state are unavailable from
    /// time zero in the ground truth.
    fn record_unreachable_at_start(&mut self) {
        let t0 = Duration::ZERO;
        for e in 0..self.envs.len() {
            if !self.last_reach.vip[e] {
                let name = self.envs[e].spec.name.clone();
                self.truth.set_available(&format!("api/{name}"), false, t0);
            }
            if !self.last_reach.ingress[e] {
                let name = self.envs[e].spec.name.clone();
                for h in self.envs[e]
                    .spec
                    .ingress
                    .as_ref()
                    .map(|i| i.hosts.clone())
                    .unwrap_or_default()
                {
                    self.truth
                        .set_available(&format!("ingress/{name}/{h}"), false, t0);
                }
            }
        }
    }

    fn build_volumes(&mut self, e: usize) -> Result<(), String> {
        let Some(lh) = self.envs[e].spec.longhorn.clone() else {
            return Ok(());
        };
        let disk_nodes: Vec<usize> = self.envs[e].disk_nodes.iter().copied().collect();
        for (vi, v) in lh.volumes.iter().enumerate() {
            let attached_to = match &v.attached_to {
                Some(n) => Some(
                    self.envs[e]
                        .nodes
                        .iter()
                        .copied()
                        .find(|&i| self.nodes[i].name == *n)
                        .ok_or(format!("volume {} attached to unknown node {n}", v.name))?,
                ),
                None => None,
            };
            // Replicas on distinct nodes (hard anti-affinity), starting at a different node
            // per volume so replicas spread.
            let count = v.replicas.min(disk_nodes.len());
            let replicas = (0..count)
                .map(|r| {
                    let node = disk_nodes[(vi + r) % disk_nodes.len()];
                    Replica {
                        name: format!(
                            "{}-r-{}",
                            v.name,
                            ids::suffix(&[&v.name, &r.to_string()], 8)
                        ),
                        node,
                        running: true,
                        failed_at: None,
                    }
                })
                .collect();
            let used_by = match &v.used_by {
                Some(w) => Some(
                    self.envs[e]
                        .workloads
                        .iter()
                        .position(|x| x.spec.name == *w)
                        .ok_or(format!("volume {} is used by unknown workload {w}", v.name))?,
                ),
                None => None,
            };
            // A volume a workload mounts is attached where its pod runs.
            let attached_to = match used_by {
                Some(wi) => {
                    let at = self.envs[e].load.by_workload[wi]
                        .iter()
                        .find_map(|k| self.envs[e].pods.get(k).and_then(|p| p.node));
                    if let (Some(want), Some(at)) = (attached_to, at)
                        && want != at
                    {
                        return Err(format!(
                            "volume {} is attached to {} but its workload's pod runs on {}; leave attached_to out, the volume follows the pod",
                            v.name, self.nodes[want].name, self.nodes[at].name
                        ));
                    }
                    at.or(attached_to)
                }
                None => attached_to,
            };
            let env_name = self.envs[e].spec.name.clone();
            self.envs[e].volumes.push(Volume {
                name: v.name.clone(),
                uid: ids::uuid(&[&env_name, "volume", &v.name]),
                size_bytes: quantity::bytes(&v.size)?,
                attached_to,
                pvc: v.pvc.clone(),
                used_by,
                replicas,
                number_of_replicas: v.replicas,
            });
        }
        Ok(())
    }
}
