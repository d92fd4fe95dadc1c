//! The collected state indexed for the host-loss model: nodes with their host, readiness,
//! taints, allocatable and what is already requested on them; pods with their node, owner,
//! requests and measured usage. Built once, then shared by the prediction of every host.
//!
//! A node's host is Proxmox's answer (VM matched by SMBIOS uuid) when Proxmox was read, else
//! the environment's host label. A node whose host is unknown, a quantity that does not
//! parse, or a list that could not be read makes every host's outcome `unknown`: the model
//! never guesses where a node runs or what a pod needs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use super::Input;
use crate::config::{CapacityBasis, Environment};
use crate::quantity::{Quantity, QuantityError};
use crate::requests::{RequestError, pod_request};
use crate::state::{Collected, Pod, State};

pub const CONTROL_PLANE_LABEL: &str = "node-role.kubernetes.io/control-plane";
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
/// What the kubelet offers when `status.allocatable` has no `pods` (the kubelet default).
const DEFAULT_MAX_PODS: i64 = 110;

pub use crate::meta::{labels, name, ns_name};

/// CPU in millicores and memory in bytes, as the scheduler counts them, and a pod count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Res {
    pub cpu_m: i64,
    pub mem: i64,
    pub pods: i64,
}

impl Res {
    pub fn plus(self, other: Res) -> Res {
        Res {
            cpu_m: self.cpu_m.saturating_add(other.cpu_m),
            mem: self.mem.saturating_add(other.mem),
            pods: self.pods.saturating_add(other.pods),
        }
    }

    pub fn minus(self, other: Res) -> Res {
        Res {
            cpu_m: self.cpu_m.saturating_sub(other.cpu_m),
            mem: self.mem.saturating_sub(other.mem),
            pods: self.pods.saturating_sub(other.pods),
        }
    }

    pub fn cpu_text(self) -> String {
        Quantity::from_nanos(self.cpu_m as i128 * 1_000_000).display_cpu()
    }

    pub fn mem_text(self) -> String {
        Quantity::from_units(self.mem).display_bytes()
    }
}

/// Who recreates a pod when its node is gone.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Owner {
    /// A ReplicaSet (normally a Deployment's): recreated elsewhere at once on eviction.
    ReplicaSet(String),
    /// A StatefulSet: recreated with the same name once the old pod object is gone.
    StatefulSet(String),
    /// A DaemonSet: belongs to its node, never moves.
    DaemonSet(String),
    /// A static pod mirrored by the kubelet: belongs to its node.
    Static,
    /// Longhorn's instance manager (owned by its `InstanceManager`, one per node, each with a
    /// PodDisruptionBudget of its own): goes with its node by design and comes back with it.
    NodeBound(String),
    /// Owned by something else (a Job, an operator's resource): not recreated by this model.
    Other(String),
    /// No controller: gone with its node.
    Bare,
}

impl Owner {
    fn of(pod: &Pod) -> Owner {
        let Some(owner) = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .or_else(|| pod.metadata.owner_references.iter().flatten().next())
        else {
            return Owner::Bare;
        };
        match owner.kind.as_str() {
            "ReplicaSet" => Owner::ReplicaSet(owner.name.clone()),
            "StatefulSet" => Owner::StatefulSet(owner.name.clone()),
            "DaemonSet" => Owner::DaemonSet(owner.name.clone()),
            "Node" => Owner::Static,
            "InstanceManager" if owner.api_version.starts_with("longhorn.io/") => {
                Owner::NodeBound(format!("Longhorn InstanceManager {}", owner.name))
            }
            kind => Owner::Other(format!("{kind} {}", owner.name)),
        }
    }

    /// Whether a controller puts the pod on another node when its node is lost.
    pub fn recreates(&self) -> bool {
        matches!(self, Owner::ReplicaSet(_) | Owner::StatefulSet(_))
    }
}

/// One node as the model sees it.
#[derive(Debug, Clone)]
pub struct NodeInfo<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    pub host: Option<String>,
    /// `VM 101 talos-cp-01`, when Proxmox placed the node.
    pub vm: Option<String>,
    pub ready: bool,
    pub control_plane: bool,
    pub unschedulable: bool,
    /// Its taints, plus the not-ready or unreachable taint the node controller sets on a node
    /// that is not Ready, when the snapshot does not already show it.
    pub taints: Vec<Taint>,
    pub allocatable: Res,
    /// What the pods bound to it request now (non-terminated pods).
    pub requested: Res,
    /// Measured CPU and memory (metrics.k8s.io), when read.
    pub usage: Option<Res>,
}

/// One non-terminated pod.
#[derive(Debug, Clone)]
pub struct PodInfo<'a> {
    pub pod: &'a Pod,
    pub namespace: &'a str,
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    pub node: Option<usize>,
    pub owner: Owner,
    pub requests: Res,
    pub ready: bool,
    pub terminating: bool,
    pub priority: i32,
    /// `preemptionPolicy: Never`: it waits for room rather than evict lower-priority pods.
    pub never_preempts: bool,
    /// Measured CPU and memory of its containers, when pod metrics were read.
    pub usage: Option<Res>,
}

impl PodInfo<'_> {
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn tolerations(&self) -> &[Toleration] {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.as_deref())
            .unwrap_or(&[])
    }
}

/// The indexed cluster. Node indices are positions in `nodes`, sorted by name.
#[derive(Debug)]
pub struct Cluster<'a> {
    pub env: &'a Environment,
    pub state: &'a State,
    /// Where the prediction over this model may be held (see [`crate::pause`]).
    pub pause: &'a dyn crate::pause::Pause,
    pub nodes: Vec<NodeInfo<'a>>,
    pub pods: Vec<PodInfo<'a>>,
    pub node_index: HashMap<&'a str, usize>,
    /// Pod indices per node.
    pub pods_on: Vec<Vec<usize>>,
    hosts: Vec<String>,
    /// Node indices per host, ascending.
    by_host: HashMap<String, Vec<usize>>,
    /// Why every host's outcome is unknown (an unreadable placement, a bad quantity).
    pub unknown: Vec<String>,
    /// Nodes whose host is unknown (no host label, no VM): every host's loss is then lost,
    /// as the ADR's placement is broken (distinct-hosts fails the same nodes).
    pub unplaced: Vec<String>,
    /// Things worth knowing about the whole prediction.
    pub notes: Vec<String>,
    /// Whether the measured usage is part of the capacity judgement (`capacity.basis: usage`).
    pub usage_basis: bool,
    /// Why no node's measured usage is known, when the basis is usage and the node metrics
    /// could not be read.
    pub usage_unknown: Option<String>,
}

impl<'a> Cluster<'a> {
    /// Indexes the state; `Err` when the nodes or pods themselves could not be read.
    pub fn build(input: Input<'a>) -> Result<Self, Unreadable> {
        let state = input.state;
        let nodes = required(&state.nodes, "nodes")?;
        let pods = required(&state.pods, "pods")?;
        let mut said = Said::default();
        let placed = placements(input.env, state, &mut said);
        let unread_vm_configs: &[String] = match (&state.proxmox, &placed) {
            (Collected::Present(proxmox), Some(_)) => &proxmox.unread_vm_configs,
            _ => &[],
        };
        let usage = Usage::of(input.env, state, &mut said.notes);
        let mut sorted: Vec<&Node> = nodes.iter().map(|n| &**n).collect();
        sorted.sort_by(|a, b| name(&a.metadata).cmp(name(&b.metadata)));
        let mut infos: Vec<NodeInfo<'a>> = sorted
            .into_iter()
            .map(|node| {
                input.pause.point();
                let at = Placement {
                    env: input.env,
                    placed: placed.as_ref(),
                    unread_vm_configs,
                };
                node_info(node, &at, &usage, &mut said)
            })
            .collect();
        let node_index: HashMap<&str, usize> =
            infos.iter().enumerate().map(|(i, n)| (n.name, i)).collect();
        let (pod_infos, pods_on) = index_pods(pods, input, &node_index, &mut infos, &mut said);
        let hosts: BTreeSet<String> = infos.iter().filter_map(|n| n.host.clone()).collect();
        let mut by_host: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, n) in infos.iter().enumerate() {
            if let Some(h) = &n.host {
                by_host.entry(h.clone()).or_default().push(i);
            }
        }
        Ok(Cluster {
            env: input.env,
            state,
            pause: input.pause,
            nodes: infos,
            pods: pod_infos,
            node_index,
            pods_on,
            hosts: hosts.into_iter().collect(),
            by_host,
            unknown: said.unknown,
            unplaced: said.unplaced,
            notes: said.notes,
            usage_basis: usage.basis,
            usage_unknown: usage.unknown,
        })
    }

    /// The hosts that run at least one node of the environment, sorted.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// Indices of the nodes on `host`.
    pub fn nodes_on(&self, host: &str) -> Vec<usize> {
        self.by_host.get(host).cloned().unwrap_or_default()
    }

    /// `node cp-1 (host pve1)` for messages.
    pub fn describe(&self, node: usize) -> String {
        let n = &self.nodes[node];
        format!(
            "{} ({})",
            n.name,
            n.host.as_deref().unwrap_or("host unknown")
        )
    }
}

/// What indexing the state learned on the way: what makes outcomes unknown, the nodes without
/// a host, and notes for the reader.
#[derive(Default)]
struct Said {
    unknown: Vec<String>,
    unplaced: Vec<String>,
    notes: Vec<String>,
}

/// Each node's host and VM (`VM 101 talos-cp-01`), by node name, when Proxmox was read.
type Placed<'s> = BTreeMap<&'s str, (&'s str, String)>;

/// Proxmox's placement of the nodes: `None` when it was not read (the host label then says)
/// or could not be (every node's host is then unknown).
fn placements<'s>(env: &Environment, state: &'s State, said: &mut Said) -> Option<Placed<'s>> {
    match &state.proxmox {
        Collected::Present(proxmox) => {
            if let Some(err) = &proxmox.mapping_error {
                said.unknown
                    .push(format!("Proxmox placement could not be mapped: {err}"));
            }
            Some(
                proxmox
                    .placements
                    .iter()
                    .map(|p| {
                        (
                            p.node.as_str(),
                            (p.host.as_str(), format!("VM {} {}", p.vmid, p.vm_name)),
                        )
                    })
                    .collect(),
            )
        }
        Collected::Absent(why) => {
            said.unknown.push(format!(
                "Proxmox could not be read ({why}), so which host runs which node is unknown"
            ));
            None
        }
        Collected::NotApplicable(_) => {
            said.notes.push(format!(
                "hosts come from the node label {} (no Proxmox placement)",
                env.nodes.host_label
            ));
            None
        }
    }
}

/// Where nodes run: Proxmox's placement or the host label, and the VM configs that could not
/// be read (a node matching no VM may be one of them).
struct Placement<'p, 's> {
    env: &'p Environment,
    placed: Option<&'p Placed<'s>>,
    unread_vm_configs: &'p [String],
}

/// The measured usage the capacity judgement reads, by the environment's `capacity.basis`.
struct Usage<'s> {
    /// Whether measured usage is part of the judgement (`usage` or `prometheus`).
    basis: bool,
    /// Why no node's usage is known, when it should be.
    unknown: Option<String>,
    nodes: Option<HashMap<&'s str, &'s crate::state::NodeMetrics>>,
}

impl<'s> Usage<'s> {
    fn of(env: &Environment, state: &'s State, notes: &mut Vec<String>) -> Usage<'s> {
        let basis = env.capacity.basis;
        let usage_basis = matches!(basis, CapacityBasis::Usage | CapacityBasis::Prometheus);
        let mut unknown = None;
        let nodes = match (&state.node_metrics, &state.node_load) {
            (_, Collected::Absent(why) | Collected::NotApplicable(why))
                if basis == CapacityBasis::Prometheus =>
            {
                unknown = Some(format!(
                    "the load over the window (capacity.basis: prometheus) could not be read: {why}"
                ));
                None
            }
            (Collected::Present(m), _) => {
                Some(m.iter().map(|m| (name(&m.metadata), &**m)).collect())
            }
            (Collected::Absent(why) | Collected::NotApplicable(why), _) if usage_basis => {
                unknown = Some(format!(
                    "node metrics (metrics.k8s.io) could not be read ({why}). Install metrics-server, or set `capacity: {{basis: requests}}` in environment {} to judge by requests alone",
                    env.name
                ));
                None
            }
            (Collected::Absent(_) | Collected::NotApplicable(_), _) => None,
        };
        if usage_basis && state.pod_metrics.present().is_none() {
            notes.push(
                "pod metrics (metrics.k8s.io) were not read: each moved pod counts at its requests on the node it moves to".to_string(),
            );
        }
        Usage {
            basis: usage_basis,
            unknown,
            nodes,
        }
    }
}

/// One node as the model sees it: its host (or why it is unknown), readiness with the taints
/// the node lifecycle controller adds, allocatable and measured usage.
fn node_info<'s>(
    node: &'s Node,
    at: &Placement<'_, 's>,
    usage: &Usage<'s>,
    said: &mut Said,
) -> NodeInfo<'s> {
    let node_name = name(&node.metadata);
    let node_labels = labels(&node.metadata);
    let host = match at.placed {
        Some(placed) => placed.get(node_name).map(|(h, _)| h.to_string()),
        None => node_labels
            .get(&at.env.nodes.host_label)
            .filter(|h| !h.is_empty())
            .cloned(),
    };
    if host.is_none() && !at.unread_vm_configs.is_empty() {
        // Its VM may be one whose config could not be read: unknown, not lost.
        said.unknown.push(format!(
            "the host of node {node_name} is unknown: it matches no VM while {} Proxmox VM config(s) could not be read ({})",
            at.unread_vm_configs.len(),
            at.unread_vm_configs.join("; ")
        ));
    } else if host.is_none() {
        said.unplaced.push(match at.placed {
            Some(_) => format!(
                "node {node_name} has no VM in Proxmox: no host's loss can be shown survivable while a node's host is unknown"
            ),
            None => format!(
                "node {node_name} has no host label {}: no host's loss can be shown survivable while a node's host is unknown",
                at.env.nodes.host_label
            ),
        });
    }
    let (ready, taints) = readiness(node);
    let allocatable = match allocatable(node) {
        Ok(a) => a,
        Err(why) => {
            said.unknown.push(format!("node {node_name}: {why}"));
            Res::default()
        }
    };
    let measured = match usage.nodes.as_ref().map(|m| m.get(node_name)) {
        None => None,
        Some(None) => None,
        Some(Some(m)) => match usage_res(&m.usage) {
            Ok(u) => Some(u),
            Err(why) => {
                said.unknown
                    .push(format!("node metrics of {node_name}: {why}"));
                None
            }
        },
    };
    NodeInfo {
        name: node_name,
        labels: node_labels,
        host,
        vm: at
            .placed
            .and_then(|p| p.get(node_name))
            .map(|(_, vm)| vm.clone()),
        ready,
        control_plane: node_labels.contains_key(CONTROL_PLANE_LABEL),
        unschedulable: node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false),
        taints,
        allocatable,
        requested: Res::default(),
        usage: measured,
    }
}

/// Whether the node is Ready, and its taints with the `NoSchedule` taint the node lifecycle
/// controller adds to a node that is not (`not-ready` when Ready is False, else `unreachable`).
fn readiness(node: &Node) -> (bool, Vec<Taint>) {
    let ready_status = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.as_str());
    let ready = ready_status == Some("True");
    let mut taints: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    if !ready {
        let key = if ready_status == Some("False") {
            TAINT_NOT_READY
        } else {
            TAINT_UNREACHABLE
        };
        if !taints
            .iter()
            .any(|t| t.key == key && t.effect == "NoSchedule")
        {
            taints.push(Taint {
                key: key.to_string(),
                effect: "NoSchedule".to_string(),
                ..Default::default()
            });
        }
    }
    (ready, taints)
}

/// The running pods (finished ones hold nothing) with their node, requests and usage, each
/// node's pods, and what is requested on each node. Only the first three pods whose requests
/// do not parse are named.
fn index_pods<'s>(
    pods: &'s [Arc<Pod>],
    Input { state, pause, .. }: Input<'s>,
    node_index: &HashMap<&str, usize>,
    infos: &mut [NodeInfo<'s>],
    said: &mut Said,
) -> (Vec<PodInfo<'s>>, Vec<Vec<usize>>) {
    let pod_metrics: Option<HashMap<(&str, &str), &crate::state::PodMetrics>> =
        state.pod_metrics.present().map(|all| {
            all.iter()
                .map(|m| {
                    pause.point();
                    (
                        (
                            m.metadata.namespace.as_deref().unwrap_or(""),
                            name(&m.metadata),
                        ),
                        &**m,
                    )
                })
                .collect()
        });
    let mut pod_infos = Vec::with_capacity(pods.len());
    let mut pods_on = vec![Vec::new(); infos.len()];
    let mut bad_requests = 0usize;
    for pod in pods {
        pause.point();
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded") | Some("Failed")) {
            continue;
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        let pod_name = name(&pod.metadata);
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .and_then(|n| node_index.get(n).copied());
        let requests = match pod_requests(pod) {
            Ok(r) => r,
            Err(why) => {
                bad_requests += 1;
                if bad_requests <= 3 {
                    said.unknown
                        .push(format!("pod {namespace}/{pod_name}: {why}"));
                }
                Res::default()
            }
        };
        let usage = pod_metrics
            .as_ref()
            .and_then(|m| m.get(&(namespace, pod_name)))
            .and_then(|m| {
                m.containers.iter().try_fold(Res::default(), |sum, c| {
                    usage_res(&c.usage).ok().map(|u| sum.plus(u))
                })
            });
        let index = pod_infos.len();
        if let Some(n) = node {
            pods_on[n].push(index);
            let requested = infos[n].requested;
            infos[n].requested = requested.plus(requests);
        }
        pod_infos.push(pod_info(pod, namespace, pod_name, node, requests, usage));
    }
    if bad_requests > 3 {
        said.unknown.push(format!(
            "{} more pods have requests that do not parse",
            bad_requests - 3
        ));
    }
    (pod_infos, pods_on)
}

/// One pod as the model sees it.
fn pod_info<'s>(
    pod: &'s Pod,
    namespace: &'s str,
    pod_name: &'s str,
    node: Option<usize>,
    requests: Res,
    usage: Option<Res>,
) -> PodInfo<'s> {
    PodInfo {
        pod,
        namespace,
        name: pod_name,
        labels: labels(&pod.metadata),
        node,
        owner: Owner::of(pod),
        requests,
        ready: pod.metadata.deletion_timestamp.is_none()
            && pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
        terminating: pod.metadata.deletion_timestamp.is_some(),
        priority: pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0),
        never_preempts: pod
            .spec
            .as_ref()
            .and_then(|s| s.preemption_policy.as_deref())
            == Some("Never"),
        usage,
    }
}

/// Why the model cannot use a node's figures, or the cluster at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    /// The nodes or the pods themselves.
    #[error("{what} could not be read: {why}")]
    Source { what: &'static str, why: String },
    #[error("status.allocatable has no {0}")]
    NoAllocatable(&'static str),
    #[error("allocatable {key}: {source}")]
    Allocatable {
        key: &'static str,
        #[source]
        source: QuantityError,
    },
    #[error("no {0} usage")]
    NoUsage(&'static str),
    #[error("{what} usage: {source}")]
    Usage {
        what: &'static str,
        #[source]
        source: QuantityError,
    },
}

fn required<'s, T>(list: &'s Collected<T>, what: &'static str) -> Result<&'s T, Unreadable> {
    match list {
        Collected::Present(v) => Ok(v),
        Collected::Absent(why) | Collected::NotApplicable(why) => Err(Unreadable::Source {
            what,
            why: why.clone(),
        }),
    }
}

fn quantity(
    map: Option<&BTreeMap<String, K8sQuantity>>,
    key: &'static str,
) -> Result<Option<Quantity>, Unreadable> {
    match map.and_then(|m| m.get(key)) {
        None => Ok(None),
        Some(q) => Quantity::parse(&q.0)
            .map(Some)
            .map_err(|source| Unreadable::Allocatable { key, source }),
    }
}

fn to_res(cpu: Quantity, mem: Quantity) -> Res {
    Res {
        cpu_m: clamp(cpu.millis_ceil()),
        mem: clamp(mem.units_ceil()),
        pods: 0,
    }
}

fn clamp(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

fn allocatable(node: &Node) -> Result<Res, Unreadable> {
    let alloc = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let cpu = quantity(alloc, "cpu")?.ok_or(Unreadable::NoAllocatable("cpu"))?;
    let mem = quantity(alloc, "memory")?.ok_or(Unreadable::NoAllocatable("memory"))?;
    let pods = quantity(alloc, "pods")?.map_or(DEFAULT_MAX_PODS, |q| clamp(q.units_ceil()));
    let mut res = to_res(cpu, mem);
    res.pods = pods;
    Ok(res)
}

fn usage_res(usage: &crate::state::ResourceUsage) -> Result<Res, Unreadable> {
    let parse = |raw: &Option<String>, what: &'static str| -> Result<Quantity, Unreadable> {
        let raw = raw.as_deref().ok_or(Unreadable::NoUsage(what))?;
        Quantity::parse(raw).map_err(|source| Unreadable::Usage { what, source })
    };
    Ok(to_res(
        parse(&usage.cpu, "cpu")?,
        parse(&usage.memory, "memory")?,
    ))
}

/// What the scheduler accounts for a pod (`requests::pod_request`), as one pod of the node's
/// pod count.
pub fn pod_requests(pod: &Pod) -> Result<Res, RequestError> {
    let mut res = to_res(pod_request(pod, "cpu")?, pod_request(pod, "memory")?);
    res.pods = 1;
    Ok(res)
}
