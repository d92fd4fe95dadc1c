//! Workloads after a host loss: every protected controller keeps a ready replica on the
//! survivors at once and gets its replicas back after rescheduling; every pod that must move
//! finds a node; and the PodDisruptionBudgets that would then block evictions are named.
//!
//! Protected are the controllers the gates name (gate 2's `replicated-controller` checks) and
//! every Deployment or StatefulSet a PodDisruptionBudget covers: a PDB is the cluster's own
//! statement that a workload must stay available. A protected controller with no ready replica
//! left makes the loss not survivable; so does a pod a controller recreates that fits nowhere.

use k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::ProtectedRef;
use super::cluster::{Cluster, Owner, ns_name};
pub use super::findings::{ControllerLoss, NEVER_EVICTED, PdbLoss};
use super::outcome::{HostLoss, Outcome};
use super::schedule::{MoveOutcome, Placement};
use crate::selector::{Selector, WhenNil};

/// A protected controller and its pods (indices into the cluster's pods).
#[derive(Debug, Clone)]
pub struct Protected {
    pub name: String,
    pub pods: Vec<usize>,
}

/// A PodDisruptionBudget over controller-owned pods, with the healthy count it requires.
#[derive(Debug, Clone)]
pub struct Budget {
    pub name: String,
    pub pods: Vec<usize>,
    pub desired: usize,
}

/// What the workload predictions need, computed once per cluster.
#[derive(Debug, Clone, Default)]
pub struct Workloads {
    pub protected: Vec<Protected>,
    pub budgets: Vec<Budget>,
    /// Pods by (namespace, owner), for the replicas a moved pod's controller has elsewhere.
    pub by_owner: HashMap<(String, Owner), Vec<usize>>,
    /// Per pod, the protected controllers it belongs to (indices into `protected`).
    pub protected_of: HashMap<usize, Vec<usize>>,
    /// Per pod, the budgets that select it (indices into `budgets`).
    pub budgets_of: HashMap<usize, Vec<usize>>,
    /// Per protected controller, whether a pod of it is ready on a ready node now.
    pub ready_now: Vec<bool>,
}

/// The protected controllers (the named ones, then each PDB over controller-owned pods that
/// does not cover the same pods as a named one) and the budgets.
pub fn index(cluster: &Cluster<'_>, named: &[ProtectedRef]) -> Workloads {
    let mut by_namespace: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, p) in cluster.pods.iter().enumerate() {
        cluster.pause.point();
        if p.node.is_some() {
            by_namespace.entry(p.namespace).or_default().push(i);
        }
    }
    let in_namespace = |ns: Option<&str>| -> Vec<usize> {
        match ns {
            Some(ns) => by_namespace.get(ns).cloned().unwrap_or_default(),
            None => by_namespace.values().flatten().copied().collect(),
        }
    };
    let mut protected: Vec<Protected> = named
        .iter()
        .map(|c| {
            let selector = Selector::from_labels(&c.selector);
            let mut pods: Vec<usize> = in_namespace(c.namespace.as_deref())
                .into_iter()
                .filter(|&i| selector.matches(cluster.pods[i].labels))
                .collect();
            pods.sort_unstable();
            Protected {
                name: c.name.clone(),
                pods,
            }
        })
        .collect();
    let covered: BTreeSet<Vec<usize>> = protected.iter().map(|p| p.pods.clone()).collect();
    let mut budgets = Vec::new();
    for pdb in cluster.state.pdbs.present().into_iter().flatten() {
        let Ok(selector) = Selector::compile(
            pdb.spec.as_ref().and_then(|s| s.selector.as_ref()),
            WhenNil::MatchesNothing,
        ) else {
            continue;
        };
        let ns = pdb.metadata.namespace.as_deref().unwrap_or("");
        let pods: Vec<usize> = in_namespace(Some(ns))
            .into_iter()
            .filter(|&i| {
                let p = &cluster.pods[i];
                p.owner.recreates() && selector.matches(p.labels)
            })
            .collect();
        if pods.is_empty() {
            continue;
        }
        let name = format!("PDB {}", ns_name(&pdb.metadata));
        let desired = desired_healthy(pdb.spec.as_ref(), pods.len());
        if !covered.contains(&pods) {
            protected.push(Protected {
                name: name.clone(),
                pods: pods.clone(),
            });
        }
        budgets.push(Budget {
            name,
            pods,
            desired,
        });
    }
    let mut by_owner: HashMap<(String, Owner), Vec<usize>> = HashMap::new();
    for (i, p) in cluster.pods.iter().enumerate() {
        if p.owner.recreates() {
            by_owner
                .entry((p.namespace.to_string(), p.owner.clone()))
                .or_default()
                .push(i);
        }
    }
    let protected_of = per_pod(protected.iter().map(|c| &c.pods));
    let budgets_of = per_pod(budgets.iter().map(|b| &b.pods));
    let ready_now = protected
        .iter()
        .map(|c| {
            c.pods.iter().any(|&i| {
                let p = &cluster.pods[i];
                p.ready && p.node.is_some_and(|n| cluster.nodes[n].ready)
            })
        })
        .collect();
    Workloads {
        protected,
        budgets,
        by_owner,
        protected_of,
        budgets_of,
        ready_now,
    }
}

/// The healthy pods a budget over `expected` pods requires.
fn desired_healthy(spec: Option<&PodDisruptionBudgetSpec>, expected: usize) -> usize {
    match (
        spec.and_then(|s| s.min_available.as_ref()),
        spec.and_then(|s| s.max_unavailable.as_ref()),
    ) {
        (Some(min), _) => scaled(min, expected),
        (None, Some(max)) => expected.saturating_sub(scaled(max, expected)),
        // policy/v1 does not default either field; the disruption controller then
        // expects no pods and allows no disruption (kubernetes
        // `pkg/controller/disruption`), so the budget keeps every pod it selects.
        (None, None) => expected,
    }
}

/// For each pod, the indexes of the lists (controllers, budgets) it is in.
fn per_pod<'p>(lists: impl Iterator<Item = &'p Vec<usize>>) -> HashMap<usize, Vec<usize>> {
    let mut of: HashMap<usize, Vec<usize>> = HashMap::new();
    for (list, pods) in lists.enumerate() {
        for &i in pods {
            of.entry(i).or_default().push(list);
        }
    }
    of
}

pub fn predict(
    cluster: &Cluster<'_>,
    workloads: &Workloads,
    lost: &[usize],
    placement: &Placement,
    loss: &mut HostLoss,
) {
    let left = Left::new(cluster, lost, placement);
    // Only the controllers and budgets with a pod on a lost node can change; the others are
    // read as they are now.
    let mut hit_protected: BTreeSet<usize> = BTreeSet::new();
    let mut hit_budgets: BTreeSet<usize> = BTreeSet::new();
    for &n in lost {
        for i in &cluster.pods_on[n] {
            hit_protected.extend(workloads.protected_of.get(i).into_iter().flatten().copied());
            hit_budgets.extend(workloads.budgets_of.get(i).into_iter().flatten().copied());
        }
    }
    protected_controllers(&left, workloads, &hit_protected, loss);
    let moves = Moves::sort(workloads, placement, loss);
    moves.say(loss);
    waiting_controllers(&left, workloads, moves.waiting, loss);
    budgets(&left, workloads, &hit_budgets, loss);
}

/// What one host's loss leaves of the cluster's pods.
struct Left<'l, 'c> {
    cluster: &'l Cluster<'c>,
    is_lost: Vec<bool>,
    /// Pods placed again on a surviving node (StatefulSet pods wait for their old object's
    /// deletion, so they do not count).
    moved_back: BTreeSet<usize>,
}

impl<'l, 'c> Left<'l, 'c> {
    fn new(cluster: &'l Cluster<'c>, lost: &[usize], placement: &Placement) -> Self {
        let mut is_lost = vec![false; cluster.nodes.len()];
        for &n in lost {
            is_lost[n] = true;
        }
        let moved_back = placement
            .placed
            .iter()
            .map(|&(i, _)| i)
            .filter(|&i| !matches!(cluster.pods[i].owner, Owner::StatefulSet(_)))
            .collect();
        Left {
            cluster,
            is_lost,
            moved_back,
        }
    }

    fn on_lost(&self, i: usize) -> bool {
        self.cluster.pods[i].node.is_some_and(|n| self.is_lost[n])
    }

    /// Ready, and on a Ready node the host does not take with it.
    fn ready_left(&self, i: usize) -> bool {
        let p = &self.cluster.pods[i];
        p.ready && !self.on_lost(i) && p.node.is_some_and(|n| self.cluster.nodes[n].ready)
    }

    /// Ready replicas left at once, and once the moved pods are placed.
    fn counts(&self, pods: &[usize]) -> (usize, usize) {
        let left = pods.iter().filter(|&&i| self.ready_left(i)).count();
        let after = left + pods.iter().filter(|i| self.moved_back.contains(i)).count();
        (left, after)
    }
}

/// The protected controllers (gate 2's) with a pod on the lost host: lost when no ready
/// replica is left.
fn protected_controllers(
    left: &Left<'_, '_>,
    workloads: &Workloads,
    hit: &BTreeSet<usize>,
    loss: &mut HostLoss,
) {
    let cluster = left.cluster;
    for (index, c) in workloads.protected.iter().enumerate() {
        if !hit.contains(&index) && workloads.ready_now[index] {
            continue;
        }
        let (ready, after) = left.counts(&c.pods);
        let here: Vec<&str> = c
            .pods
            .iter()
            .filter(|&&i| left.on_lost(i))
            .map(|&i| cluster.pods[i].name)
            .collect();
        if !c.pods.is_empty() && ready == 0 {
            loss.reason(
                Outcome::Lost,
                format!(
                    "protected controller {} keeps no ready replica: {}",
                    c.name,
                    if here.is_empty() {
                        "none of its pods is ready now".to_string()
                    } else {
                        format!("{} go with the host", here.join(", "))
                    }
                ),
            );
        }
        if !here.is_empty() {
            loss.controllers.push(ControllerLoss {
                name: c.name.clone(),
                pods: c.pods.len(),
                ready_left: ready,
                after_rescheduling: after,
            });
        }
    }
}

/// The lost host's pods by what becomes of them, per controller.
struct Moves<'p> {
    /// Pods that fit nowhere (not survivable), and the first reason why.
    unschedulable: BTreeMap<&'p str, Vec<&'p str>>,
    first_why: BTreeMap<&'p str, &'p str>,
    /// Unprotected controllers whose pods are recreated: the first pod and when it is evicted.
    waiting: BTreeMap<&'p str, (usize, i64)>,
    /// Pods the node-lifecycle controller's zone rule keeps bound, per zone rule.
    never_evicted: BTreeMap<&'p str, Vec<&'p str>>,
}

impl<'p> Moves<'p> {
    /// Sorts the moves; a pod that stays or is not recreated is said at once.
    fn sort(workloads: &Workloads, placement: &'p Placement, loss: &mut HostLoss) -> Self {
        let mut moves = Moves {
            unschedulable: BTreeMap::new(),
            first_why: BTreeMap::new(),
            waiting: BTreeMap::new(),
            never_evicted: BTreeMap::new(),
        };
        for m in &placement.moves {
            match &m.outcome {
                MoveOutcome::Unschedulable { why } => {
                    moves
                        .unschedulable
                        .entry(&m.controller)
                        .or_default()
                        .push(&m.pod);
                    moves.first_why.entry(&m.controller).or_insert(why);
                }
                MoveOutcome::Stays { why } => match why.strip_prefix(NEVER_EVICTED) {
                    // One reason for all the pods the controller's zone rule keeps.
                    Some(zone) => moves.never_evicted.entry(zone).or_default().push(&m.pod),
                    None => loss.reason(
                        Outcome::Degraded,
                        format!("pod {} stays on the lost node {}: it {why}", m.pod, m.from),
                    ),
                },
                MoveOutcome::NotRecreated { why } => loss.reason(
                    Outcome::Degraded,
                    format!("pod {} on {} is lost: {why}", m.pod, m.from),
                ),
                MoveOutcome::Placed { after_seconds, .. } => {
                    if !workloads.protected_of.contains_key(&m.index) {
                        moves
                            .waiting
                            .entry(&m.controller)
                            .or_insert((m.index, *after_seconds));
                    }
                }
            }
        }
        moves
    }

    /// The pods kept bound by the zone rule, and those that fit nowhere.
    fn say(&self, loss: &mut HostLoss) {
        for (zone, pods) in &self.never_evicted {
            loss.reason(
                Outcome::Degraded,
                format!(
                    "{} of the lost nodes stay bound to them and are not replaced until the host returns or they are deleted by hand: {zone}",
                    match pods.as_slice() {
                        [one] => format!("pod {one}"),
                        many => format!("{} pods ({})", many.len(), many.join(", ")),
                    }
                ),
            );
        }
        for (controller, pods) in &self.unschedulable {
            loss.reason(
                Outcome::Lost,
                format!(
                    "{controller}: {} cannot be rescheduled: {}",
                    if pods.len() == 1 {
                        format!("pod {}", pods[0])
                    } else {
                        format!("{} pods ({})", pods.len(), pods.join(", "))
                    },
                    self.first_why.get(controller).copied().unwrap_or_default()
                ),
            );
        }
    }
}

/// Controllers that are not protected and have no ready replica elsewhere: down until their
/// pods are recreated.
fn waiting_controllers(
    left: &Left<'_, '_>,
    workloads: &Workloads,
    waiting: BTreeMap<&str, (usize, i64)>,
    loss: &mut HostLoss,
) {
    if waiting.is_empty() {
        return;
    }
    let cluster = left.cluster;
    let owners: BTreeSet<(&str, &Owner)> = waiting
        .values()
        .map(|&(i, _)| (cluster.pods[i].namespace, &cluster.pods[i].owner))
        .collect();
    let mut ready_elsewhere = BTreeSet::new();
    for &(namespace, owner) in &owners {
        let key = (namespace.to_string(), owner.clone());
        let siblings = workloads.by_owner.get(&key).map_or(&[][..], Vec::as_slice);
        if siblings.iter().any(|&i| left.ready_left(i)) {
            ready_elsewhere.insert((namespace, owner));
        }
    }
    for (controller, (i, after)) in waiting {
        let p = &cluster.pods[i];
        if !ready_elsewhere.contains(&(p.namespace, &p.owner)) {
            loss.reason(
                Outcome::Degraded,
                format!(
                    "{controller} has no ready replica until its pods are recreated elsewhere (evicted after {after}s)"
                ),
            );
        }
    }
}

/// The PodDisruptionBudgets over the lost host's pods: how many healthy pods each keeps, and
/// whether it still allows an eviction elsewhere.
fn budgets(left: &Left<'_, '_>, workloads: &Workloads, hit: &BTreeSet<usize>, loss: &mut HostLoss) {
    let cluster = left.cluster;
    for &index in hit {
        let budget = &workloads.budgets[index];
        // A budget over pods that belong to their node (Longhorn's per-node instance
        // manager) goes down with it by design: no drain elsewhere depends on it.
        if budget
            .pods
            .iter()
            .all(|&i| matches!(cluster.pods[i].owner, Owner::NodeBound(_)))
        {
            continue;
        }
        let (healthy, after) = left.counts(&budget.pods);
        if healthy <= budget.desired {
            loss.reason(
                Outcome::Degraded,
                format!(
                    "{} allows no eviction while the host is down ({healthy} healthy, {} required): draining another node blocks{}",
                    budget.name,
                    budget.desired,
                    if after > budget.desired {
                        " until the pods are rescheduled"
                    } else {
                        ""
                    }
                ),
            );
        }
        loss.pdbs.push(PdbLoss {
            pdb: budget.name.clone(),
            expected: budget.pods.len(),
            desired_healthy: budget.desired,
            healthy_left: healthy,
            healthy_after_rescheduling: after,
        });
    }
}

/// An int-or-percent of `total`; percentages round up as the disruption controller does.
fn scaled(value: &IntOrString, total: usize) -> usize {
    match value {
        IntOrString::Int(n) => (*n).max(0) as usize,
        IntOrString::String(s) => {
            let pct: f64 = s.trim_end_matches('%').parse().unwrap_or(0.0);
            (pct * total as f64 / 100.0).ceil() as usize
        }
    }
}
