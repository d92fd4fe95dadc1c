//! Rescheduling after a host loss: which pods of the lost nodes a controller recreates, and
//! where the scheduler's filters would put each one on the nodes that remain.
//!
//! A lost node becomes unreachable: the node controller taints it
//! `node.kubernetes.io/unreachable` (NoSchedule and NoExecute), and each pod leaves after its
//! toleration of that taint (300 s as admission sets it by default). A ReplicaSet then creates
//! a replacement at once; a StatefulSet only once the old pod object is gone, which for a
//! powered-off node means the node returns or someone force-deletes the pod (or taints the
//! node out-of-service), so its pods are placed but marked as waiting. DaemonSet and static
//! pods belong to their node; bare pods and pods of other owners are not recreated.
//!
//! Pods are placed one at a time, highest priority first, each on the feasible node with the
//! most CPU and memory left (the scheduler's default "least allocated" score); every
//! placement counts for the next pod's resources, anti-affinity and spread.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use k8s_openapi::api::core::v1::Taint;

use super::cluster::{Cluster, Owner, PodInfo, Res, TAINT_UNREACHABLE, name};
use super::domains::Domains;
use super::filters::{self, PodTerm, Rejection, Spread};
pub use super::findings::{MoveOutcome, PodMove};
use super::lineage::Lineage;
use super::templates::{Templates, lost_taints};

mod fast;
mod score;

use score::{Score, Shapes};

/// How pods are placed: `Fast` walks only the nodes a pod's template allows, with the
/// per-template and per-domain indexes; `Reference` evaluates every filter on every node, as
/// the filters are written. Both give the same placements (a property test holds them to
/// it); the fast one also falls back to the reference to word why a pod fits nowhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Fast,
    Reference,
}

/// A pod that fits only by preempting pods of lower priority, as the scheduler does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preemption {
    /// `namespace/name` and priority of the pod placed.
    pub by: String,
    pub priority: i32,
    pub node: String,
    /// `namespace/name` and priority of each pod evicted for it.
    pub victims: Vec<(String, i32)>,
}

impl Preemption {
    pub fn describe(&self) -> String {
        format!(
            "pod {} (priority {}) fits only by preempting lower-priority pods on {}: {}; they are evicted and made again where they fit",
            self.by,
            self.priority,
            self.node,
            self.victims
                .iter()
                .map(|(pod, priority)| format!("{pod} (priority {priority})"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// The outcome of rescheduling one host's pods.
#[derive(Debug, Clone, Default)]
pub struct Placement {
    pub moves: Vec<PodMove>,
    pub preemptions: Vec<Preemption>,
    /// Pod index → node index, for placed pods.
    pub placed: Vec<(usize, usize)>,
    /// What placed pods add per node: requests, and measured usage where known.
    pub added: HashMap<usize, Res>,
    pub added_usage: HashMap<usize, Res>,
}

/// Indexes built once per cluster and shared by every host's simulation.
pub struct Shared {
    by_namespace: HashMap<String, Vec<usize>>,
    /// Existing pods' required anti-affinity terms, by the namespace they apply to.
    holders_by_namespace: HashMap<String, Vec<(usize, PodTerm)>>,
    /// Terms that apply to every namespace.
    holders_everywhere: Vec<(usize, PodTerm)>,
    controllers: Vec<String>,
    /// Every pod's required anti-affinity terms, compiled once (pods without any are absent).
    terms_of: HashMap<usize, Vec<PodTerm>>,
    templates: Templates,
    domains: Domains,
    /// The nodes by shape, ranked by what they carry before any loss.
    shapes: Shapes,
}

impl Shared {
    pub fn new(cluster: &Cluster<'_>) -> Shared {
        // The templates and controller names are the larger part on a large cluster and
        // need nothing of the rest: they are built on a second thread.
        std::thread::scope(|scope| {
            let second = scope.spawn(|| (Templates::new(cluster), controller_names(cluster)));
            Shared::indexed(cluster, || {
                second
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
        })
    }

    /// The indexes, with the templates and controller names `rest` gives once the others
    /// are built.
    fn indexed(cluster: &Cluster<'_>, rest: impl FnOnce() -> (Templates, Vec<String>)) -> Shared {
        let mut by_namespace: HashMap<String, Vec<usize>> = HashMap::new();
        let mut holders_by_namespace: HashMap<String, Vec<(usize, PodTerm)>> = HashMap::new();
        let mut holders_everywhere = Vec::new();
        let mut terms_of = HashMap::new();
        for (i, p) in cluster.pods.iter().enumerate() {
            cluster.pause.point();
            match by_namespace.get_mut(p.namespace) {
                Some(pods) => pods.push(i),
                None => {
                    by_namespace.insert(p.namespace.to_string(), vec![i]);
                }
            }
            let terms = filters::anti_affinity_terms(p.pod, p.namespace, p.labels);
            if terms.is_empty() {
                continue;
            }
            terms_of.insert(i, terms.clone());
            if p.node.is_none() || p.terminating {
                continue;
            }
            for term in terms {
                match &term.namespaces {
                    Some(list) => {
                        for ns in list.clone() {
                            holders_by_namespace
                                .entry(ns)
                                .or_default()
                                .push((i, term.clone()));
                        }
                    }
                    None => holders_everywhere.push((i, term)),
                }
            }
        }
        let (templates, controllers) = rest();
        Shared {
            by_namespace,
            holders_by_namespace,
            holders_everywhere,
            controllers,
            terms_of,
            templates,
            domains: Domains::new(cluster),
            shapes: Shapes::new(
                &cluster
                    .nodes
                    .iter()
                    .map(|n| n.allocatable)
                    .collect::<Vec<_>>(),
                &cluster
                    .nodes
                    .iter()
                    .map(|n| n.requested)
                    .collect::<Vec<_>>(),
            ),
        }
    }

    /// The compiled required anti-affinity terms of pod `i`.
    fn terms(&self, i: usize) -> &[PodTerm] {
        self.terms_of.get(&i).map_or(&[], Vec::as_slice)
    }
}

/// `Deployment ns/name` for ReplicaSet-owned pods whose Deployment is known (the ReplicaSet's
/// name is the Deployment's plus a hash), else the owner itself; one per pod, in order.
fn controller_names(cluster: &Cluster<'_>) -> Vec<String> {
    let deployments: HashSet<(&str, &str)> = cluster
        .state
        .deployments
        .present()
        .into_iter()
        .flatten()
        .map(|d| {
            (
                d.metadata.namespace.as_deref().unwrap_or(""),
                name(&d.metadata),
            )
        })
        .collect();
    let mut runs = super::runs::Runs::new();
    cluster
        .pods
        .iter()
        .map(|p| {
            cluster.pause.point();
            runs.get((p.namespace, &p.owner), || name_of(p, &deployments))
        })
        .collect()
}

/// The name of pod `p`'s controller, with the Deployments that exist.
fn name_of(p: &PodInfo<'_>, deployments: &HashSet<(&str, &str)>) -> String {
    match &p.owner {
        // The longest Deployment name that the ReplicaSet's name continues with `-`.
        Owner::ReplicaSet(rs) => rs
            .char_indices()
            .rev()
            .filter(|&(_, c)| c == '-')
            .map(|(at, _)| &rs[..at])
            .find(|d| deployments.contains(&(p.namespace, *d)))
            .map(|d| format!("Deployment {}/{d}", p.namespace))
            .unwrap_or_else(|| format!("ReplicaSet {}/{rs}", p.namespace)),
        Owner::StatefulSet(s) => format!("StatefulSet {}/{s}", p.namespace),
        Owner::DaemonSet(d) => format!("DaemonSet {}/{d}", p.namespace),
        Owner::Static => "static pod".to_string(),
        Owner::NodeBound(o) | Owner::Other(o) => o.clone(),
        Owner::Bare => "no controller".to_string(),
    }
}

/// A pod waiting to be placed.
struct Pending {
    pod: usize,
    after: i64,
    /// Evicted from a surviving node by a preemption: its old pod object goes at once.
    preempted: bool,
}

/// The running picture during one host's simulation.
struct Sim<'c, 'a> {
    cluster: &'c Cluster<'a>,
    shared: &'c Shared,
    lost: Vec<bool>,
    /// Per pod, whether it has left (evicted from a lost node).
    gone: Vec<bool>,
    requested: Vec<Res>,
    /// The nodes by shape, ranked by what they carry now.
    shapes: Shapes,
    placed: Vec<(usize, usize)>,
    /// The placed pods that have required anti-affinity terms (pod, node).
    placed_holders: Vec<(usize, usize)>,
    lost_taints: Vec<Taint>,
    /// The lowest priority of any pod: a pod at it has nobody to preempt.
    lowest_priority: i32,
}

/// Reschedules the pods of the `lost` nodes on the others.
pub fn reschedule(cluster: &Cluster<'_>, shared: &Shared, lost: &[usize], mode: Mode) -> Placement {
    let mut is_lost = vec![false; cluster.nodes.len()];
    for &n in lost {
        is_lost[n] = true;
    }
    let mut sim = Sim {
        cluster,
        shared,
        lost: is_lost,
        gone: vec![false; cluster.pods.len()],
        requested: cluster.nodes.iter().map(|n| n.requested).collect(),
        shapes: shared.shapes.clone(),
        placed: Vec::new(),
        placed_holders: Vec::new(),
        lost_taints: lost_taints(),
        lowest_priority: cluster.pods.iter().map(|p| p.priority).min().unwrap_or(0),
    };
    sim.shapes.set_apart(lost, &sim.requested);
    let mut out = Placement::default();
    let mut pending = sim.pending(lost, &mut out);
    pending.sort_by(|a, b| {
        let (pa, pb) = (&cluster.pods[a.pod], &cluster.pods[b.pod]);
        pb.priority
            .cmp(&pa.priority)
            .then_with(|| (pa.namespace, pa.name).cmp(&(pb.namespace, pb.name)))
    });
    let mut queue: VecDeque<Pending> = pending.into();
    while let Some(job) = queue.pop_front() {
        cluster.pause.point();
        let p = &cluster.pods[job.pod];
        let from = cluster.nodes[p.node.unwrap_or_default()].name.to_string();
        let controller = shared.controllers.get(job.pod).cloned().unwrap_or_default();
        let placed = match mode {
            Mode::Fast => sim.place_fast(job.pod).map_or_else(|| sim.place(p), Ok),
            Mode::Reference => sim.place(p),
        };
        let placed = match placed {
            Err(why) => sim.preempt_for(&job, &mut queue, &mut out).ok_or(why),
            placed => placed,
        };
        let outcome = match placed {
            Ok(node) => sim.commit(&job, node, &mut out),
            Err(why) => MoveOutcome::Unschedulable {
                why: why.to_string(),
            },
        };
        out.moves.push(PodMove {
            index: job.pod,
            pod: p.id(),
            controller,
            from,
            lineage: Lineage::of(p.pod),
            outcome,
        });
    }
    out.placed = sim.placed;
    out
}

impl Sim<'_, '_> {
    /// The lost nodes' pods that are recreated, to place; the others (DaemonSet and static
    /// pods aside) are said in `out` at once: not recreated, or staying bound to their node.
    fn pending(&mut self, lost: &[usize], out: &mut Placement) -> Vec<Pending> {
        let (cluster, shared) = (self.cluster, self.shared);
        let stopped = super::zones::evictions_stopped(cluster, &self.lost);
        let mut pending = Vec::new();
        for &node in lost {
            for &i in &cluster.pods_on[node] {
                cluster.pause.point();
                let p = &cluster.pods[i];
                if p.terminating {
                    continue;
                }
                // Built only for the pods that stay or are not recreated: the others are
                // described once placed.
                let base = || PodMove {
                    index: i,
                    pod: p.id(),
                    controller: shared.controllers.get(i).cloned().unwrap_or_default(),
                    from: cluster.nodes[node].name.to_string(),
                    lineage: Lineage::of(p.pod),
                    outcome: MoveOutcome::NotRecreated { why: String::new() },
                };
                let why = match &p.owner {
                    Owner::DaemonSet(_) | Owner::Static | Owner::NodeBound(_) => continue,
                    Owner::Bare => Some("no controller recreates it".to_string()),
                    Owner::Other(owner) => Some(format!(
                        "owned by {owner}, which is not a ReplicaSet or StatefulSet"
                    )),
                    Owner::ReplicaSet(_) | Owner::StatefulSet(_) => None,
                };
                if let Some(why) = why {
                    self.gone[i] = true;
                    out.moves.push(PodMove {
                        outcome: MoveOutcome::NotRecreated { why },
                        ..base()
                    });
                    continue;
                }
                match filters::eviction_delay(p.tolerations(), TAINT_UNREACHABLE) {
                    Some(_) if stopped[node].is_some() => out.moves.push(PodMove {
                        outcome: MoveOutcome::Stays {
                            why: format!(
                                "{}{}",
                                super::findings::NEVER_EVICTED,
                                stopped[node].as_deref().unwrap_or_default()
                            ),
                        },
                        ..base()
                    }),
                    None => out.moves.push(PodMove {
                        outcome: MoveOutcome::Stays {
                            why: format!(
                                "tolerates {TAINT_UNREACHABLE} without tolerationSeconds, so it is never evicted and never replaced"
                            ),
                        },
                        ..base()
                    }),
                    Some(after) => {
                        self.gone[i] = true;
                        pending.push(Pending {
                            pod: i,
                            after,
                            preempted: false,
                        });
                    }
                }
            }
        }
        pending
    }

    /// Makes room for a pod that fits nowhere by preempting lower-priority pods, as the
    /// scheduler's preemption does: the node, with the victims evicted (queued again in
    /// priority order when a controller recreates them); `None` when no preemption helps.
    fn preempt_for(
        &mut self,
        job: &Pending,
        queue: &mut VecDeque<Pending>,
        out: &mut Placement,
    ) -> Option<usize> {
        let cluster = self.cluster;
        let p = &cluster.pods[job.pod];
        let (node, victims) = self.preempt(p)?;
        out.preemptions.push(Preemption {
            by: p.id(),
            priority: p.priority,
            node: cluster.nodes[node].name.to_string(),
            victims: victims
                .iter()
                .map(|&v| (cluster.pods[v].id(), cluster.pods[v].priority))
                .collect(),
        });
        let order = |pod: usize| {
            let p = &cluster.pods[pod];
            (std::cmp::Reverse(p.priority), p.namespace, p.name)
        };
        for v in victims {
            self.evict(v);
            let again = Pending {
                pod: v,
                after: job.after,
                preempted: true,
            };
            if matches!(
                cluster.pods[v].owner,
                Owner::ReplicaSet(_) | Owner::StatefulSet(_)
            ) {
                let at = queue
                    .iter()
                    .position(|q| order(q.pod) > order(v))
                    .unwrap_or(queue.len());
                queue.insert(at, again);
            } else {
                out.moves.push(PodMove {
                    index: v,
                    pod: cluster.pods[v].id(),
                    controller: self.shared.controllers.get(v).cloned().unwrap_or_default(),
                    from: cluster.nodes[node].name.to_string(),
                    lineage: Lineage::of(cluster.pods[v].pod),
                    outcome: MoveOutcome::NotRecreated {
                        why: "preempted, and nothing recreates it".into(),
                    },
                });
            }
        }
        Some(node)
    }

    /// Places the pod on `node`: its requests (and usage, when known) are added there.
    fn commit(&mut self, job: &Pending, node: usize, out: &mut Placement) -> MoveOutcome {
        let cluster = self.cluster;
        let p = &cluster.pods[job.pod];
        let before = self.requested[node];
        self.requested[node] = before.plus(p.requests);
        self.shapes.carry(node, before, self.requested[node]);
        self.placed.push((job.pod, node));
        if !self.shared.terms(job.pod).is_empty() {
            self.placed_holders.push((job.pod, node));
        }
        let added = out.added.entry(node).or_default();
        *added = added.plus(p.requests);
        if let Some(u) = p.usage {
            let added = out.added_usage.entry(node).or_default();
            *added = added.plus(u);
        }
        MoveOutcome::Placed {
            node: cluster.nodes[node].name.to_string(),
            host: cluster.nodes[node].host.clone().unwrap_or_default(),
            after_seconds: job.after,
            waits_for_deletion: matches!(p.owner, Owner::StatefulSet(_)) && !job.preempted,
        }
    }
}

/// Why a pod fits on no node, as the scheduler's FailedScheduling event says it: how many
/// nodes turned it away for each reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("0/{nodes} nodes are available: {}", .reasons.join(", "))]
pub struct Unschedulable {
    pub nodes: usize,
    /// `COUNT REASON`, in the scheduler's order of reasons.
    pub reasons: Vec<String>,
}

impl Sim<'_, '_> {
    /// The node the pod goes to, or the scheduler's "0/N nodes are available: ..." message:
    /// every filter on every node, in the scheduler's order (the reference).
    fn place(&self, p: &PodInfo<'_>) -> Result<usize, Unschedulable> {
        let cluster = self.cluster;
        let ask = Ask::new(self, p);
        let mut best: Option<(Score, usize)> = None;
        let mut reasons: BTreeMap<Rejection, usize> = BTreeMap::new();
        for (n, node) in cluster.nodes.iter().enumerate() {
            match ask.rejection(self, n, true) {
                Some(list) => {
                    for r in list {
                        *reasons.entry(r).or_default() += 1;
                    }
                }
                None => {
                    let score = Score::of(node.allocatable, self.requested[n].plus(p.requests));
                    if best.is_none_or(|(b, _)| score.beats(b)) {
                        best = Some((score, n));
                    }
                }
            }
        }
        match best {
            Some((_, n)) => Ok(n),
            None => Err(Unschedulable {
                nodes: cluster.nodes.len(),
                reasons: reasons
                    .iter()
                    .map(|(r, count)| format!("{count} {r}"))
                    .collect(),
            }),
        }
    }

    /// Where pod `p`, which fits nowhere, goes by preempting pods of lower priority, as the
    /// scheduler's DefaultPreemption does: on a node that passes every filter but room (CPU,
    /// memory, pod count, host ports) once all its lower-priority pods are gone, the fewest
    /// of them are taken (those of highest priority kept first); among nodes, the one whose
    /// victims' highest priority is lowest, then the lowest sum of their priorities, then the
    /// fewest victims. `None` when no node would do or the pod never preempts. Simplified:
    /// victims are not taken to lift anti-affinity or spread, and PodDisruptionBudgets are
    /// not weighed among the candidates.
    fn preempt(&self, p: &PodInfo<'_>) -> Option<(usize, Vec<usize>)> {
        if p.never_preempts || p.priority <= self.lowest_priority {
            return None;
        }
        let cluster = self.cluster;
        let ask = Ask::new(self, p);
        // (highest victim priority, sum of priorities, victims), the node, the victims.
        type Candidate = ((i32, i64, usize), usize, Vec<usize>);
        let mut best: Option<Candidate> = None;
        for (n, node) in cluster.nodes.iter().enumerate() {
            if ask.rejection(self, n, false).is_some() {
                continue;
            }
            let mut lower: Vec<usize> = cluster.pods_on[n]
                .iter()
                .copied()
                .filter(|&j| {
                    let q = &cluster.pods[j];
                    // A pod bound to its node would only come back there.
                    self.present(j)
                        && q.priority < p.priority
                        && !matches!(
                            q.owner,
                            Owner::DaemonSet(_) | Owner::Static | Owner::NodeBound(_)
                        )
                })
                .collect();
            let fits = |victims: &[usize]| {
                let freed = victims
                    .iter()
                    .fold(Res::default(), |a, &j| a.plus(cluster.pods[j].requests));
                let left = Res {
                    cpu_m: self.requested[n].cpu_m - freed.cpu_m,
                    mem: self.requested[n].mem - freed.mem,
                    pods: self.requested[n].pods - freed.pods,
                };
                filters::resources_fit(p.requests, node.allocatable, left).is_empty()
                    && !self.ports_taken_but(n, &ask.want_ports, victims)
            };
            if lower.is_empty() || !fits(&lower) {
                continue;
            }
            // Reprieve the highest priority first.
            lower.sort_by(|&a, &b| {
                (cluster.pods[b].priority, cluster.pods[a].name)
                    .cmp(&(cluster.pods[a].priority, cluster.pods[b].name))
            });
            let mut victims = lower.clone();
            for &keep in &lower {
                let without: Vec<usize> = victims.iter().copied().filter(|&v| v != keep).collect();
                if fits(&without) {
                    victims = without;
                }
            }
            let key = (
                victims
                    .iter()
                    .map(|&v| cluster.pods[v].priority)
                    .max()
                    .unwrap_or(i32::MIN),
                victims
                    .iter()
                    .map(|&v| i64::from(cluster.pods[v].priority))
                    .sum::<i64>(),
                victims.len(),
            );
            if best.as_ref().is_none_or(|(k, _, _)| key < *k) {
                best = Some((key, n, victims));
            }
        }
        best.map(|(_, n, victims)| (n, victims))
    }

    /// Whether a port of `want` is bound on node `n` already, by a pod still there (a
    /// Terminating one too: the scheduler counts it until it is deleted) or one placed there.
    fn ports_taken(&self, n: usize, want: &[filters::HostPort]) -> bool {
        self.ports_taken_but(n, want, &[])
    }

    /// [`Sim::ports_taken`] with the pods `but` gone.
    fn ports_taken_but(&self, n: usize, want: &[filters::HostPort], but: &[usize]) -> bool {
        if want.is_empty() {
            return false;
        }
        let cluster = self.cluster;
        let there = cluster.pods_on[n]
            .iter()
            .copied()
            .filter(|&i| !self.gone[i] && !but.contains(&i));
        let placed = self
            .placed
            .iter()
            .filter(|&&(_, m)| m == n)
            .map(|&(i, _)| i);
        there.chain(placed).any(|i| {
            filters::host_ports(cluster.pods[i].pod)
                .iter()
                .any(|bound| want.iter().any(|w| filters::ports_conflict(w, bound)))
        })
    }

    /// Pod `i` leaves its node, preempted: it no longer counts there.
    fn evict(&mut self, i: usize) {
        self.gone[i] = true;
        let Some(n) = self.cluster.pods[i].node else {
            return;
        };
        let before = self.requested[n];
        let freed = self.cluster.pods[i].requests;
        self.requested[n] = Res {
            cpu_m: before.cpu_m - freed.cpu_m,
            mem: before.mem - freed.mem,
            pods: before.pods - freed.pods,
        };
        self.shapes.carry(n, before, self.requested[n]);
    }

    /// Whether pod `i` still counts where it runs: not evicted, not terminating.
    fn present(&self, i: usize) -> bool {
        !self.gone[i] && !self.cluster.pods[i].terminating
    }

    /// The pods (index, node) a term may count: in its namespaces, including placed ones.
    fn candidates(&self, namespaces: Option<&[String]>) -> Vec<(usize, usize)> {
        let cluster = self.cluster;
        let mut out: Vec<(usize, usize)> = Vec::new();
        let push_ns = |ns: &str, out: &mut Vec<(usize, usize)>| {
            for &i in self.shared.by_namespace.get(ns).into_iter().flatten() {
                if let Some(n) = cluster.pods[i].node
                    && self.present(i)
                {
                    out.push((i, n));
                }
            }
        };
        match namespaces {
            Some(list) => {
                for ns in list {
                    push_ns(ns, &mut out);
                }
            }
            None => {
                for ns in self.shared.by_namespace.keys() {
                    push_ns(ns, &mut out);
                }
            }
        }
        out.extend(self.placed.iter().copied());
        out
    }

    /// The topology domains that hold a pod the term counts.
    fn domains_with(&self, term: &PodTerm) -> HashSet<&str> {
        let cluster = self.cluster;
        self.candidates(term.namespaces.as_deref())
            .into_iter()
            .filter(|&(i, _)| {
                let q = &cluster.pods[i];
                term.counts(q.namespace, q.labels)
            })
            .filter_map(|(_, n)| cluster.nodes[n].labels.get(&term.topology_key))
            .map(String::as_str)
            .collect()
    }

    /// (topology key, value) pairs where an existing pod's required anti-affinity repels `p`.
    fn forbidden_by_others(&self, p: &PodInfo<'_>) -> Vec<(&str, String)> {
        let cluster = self.cluster;
        let mut out = Vec::new();
        let existing = self
            .shared
            .holders_by_namespace
            .get(p.namespace)
            .into_iter()
            .flatten()
            .chain(&self.shared.holders_everywhere);
        for (holder, term) in existing {
            if !self.present(*holder) || !term.counts(p.namespace, p.labels) {
                continue;
            }
            if let Some(n) = cluster.pods[*holder].node
                && let Some(v) = cluster.nodes[n].labels.get(&term.topology_key)
            {
                out.push((term.topology_key.as_str(), v.clone()));
            }
        }
        // Pods placed earlier in this simulation repel too.
        for &(i, n) in &self.placed {
            let q = &cluster.pods[i];
            for term in filters::anti_affinity_terms(q.pod, q.namespace, q.labels) {
                if term.counts(p.namespace, p.labels)
                    && let Some(v) = cluster.nodes[n].labels.get(&term.topology_key)
                {
                    let key: &str = cluster.nodes[n]
                        .labels
                        .get_key_value(&term.topology_key)
                        .map(|(k, _)| k.as_str())
                        .unwrap_or_default();
                    out.push((key, v.clone()));
                }
            }
        }
        out
    }

    /// Matching pods per eligible domain for one spread constraint of `p`.
    fn spread_counts(&self, p: &PodInfo<'_>, spread: &Spread) -> SpreadCounts<'_> {
        let cluster = self.cluster;
        let tolerations = p.tolerations();
        let mut eligible = vec![false; cluster.nodes.len()];
        let mut by_domain: HashMap<&str, i64> = HashMap::new();
        for (n, node) in cluster.nodes.iter().enumerate() {
            let Some(domain) = node.labels.get(&spread.topology_key) else {
                continue;
            };
            if spread.honor_affinity
                && filters::node_affinity(p.pod, node.name, node.labels).is_some()
            {
                continue;
            }
            if spread.honor_taints {
                let lost_taints: &[Taint] = if self.lost[n] { &self.lost_taints } else { &[] };
                if filters::untolerated_taint(&node.taints, tolerations).is_some()
                    || filters::untolerated_taint(lost_taints, tolerations).is_some()
                {
                    continue;
                }
            }
            eligible[n] = true;
            by_domain.entry(domain.as_str()).or_insert(0);
        }
        let ns = [p.namespace.to_string()];
        for (i, n) in self.candidates(Some(&ns)) {
            let q = &cluster.pods[i];
            if eligible[n]
                && spread.selector.matches(q.labels)
                && let Some(domain) = cluster.nodes[n].labels.get(&spread.topology_key)
            {
                *by_domain.entry(domain.as_str()).or_insert(0) += 1;
            }
        }
        let min = by_domain.values().copied().min().unwrap_or(0);
        SpreadCounts { by_domain, min }
    }
}

/// One pod's filters, compiled once against the picture of the moment: what the reference
/// placement and the preemption dry run ask of each node.
struct Ask<'s> {
    p: &'s PodInfo<'s>,
    terms: Vec<PodTerm>,
    /// Per own term, the topology domains that already hold a pod it counts.
    blocked_by_own: Vec<HashSet<&'s str>>,
    /// Node labels other pods' anti-affinity keeps it off.
    forbidden: Vec<(&'s str, String)>,
    spreads: Vec<Spread>,
    spread_counts: Vec<SpreadCounts<'s>>,
    want_ports: Vec<filters::HostPort>,
}

impl<'s> Ask<'s> {
    fn new(sim: &'s Sim<'_, '_>, p: &'s PodInfo<'s>) -> Ask<'s> {
        let terms = filters::anti_affinity_terms(p.pod, p.namespace, p.labels);
        let blocked_by_own = terms.iter().map(|t| sim.domains_with(t)).collect();
        let spreads = filters::spread_constraints(p.pod, p.labels);
        let spread_counts = spreads.iter().map(|s| sim.spread_counts(p, s)).collect();
        Ask {
            p,
            terms,
            blocked_by_own,
            forbidden: sim.forbidden_by_others(p),
            spreads,
            spread_counts,
            want_ports: filters::host_ports(p.pod),
        }
    }

    /// Why node `n` cannot take the pod, the first filter that says no, in the scheduler's
    /// order; without `room`, the filters evicting pods could satisfy (host ports, CPU,
    /// memory, pod count) are left out.
    fn rejection(&self, sim: &Sim<'_, '_>, n: usize, room: bool) -> Option<Vec<Rejection>> {
        let p = self.p;
        let node = &sim.cluster.nodes[n];
        let tolerations = p.tolerations();
        let lost_taints: &[Taint] = if sim.lost[n] { &sim.lost_taints } else { &[] };
        filters::node_unschedulable(node.unschedulable, tolerations)
            .map(|r| vec![r])
            .or_else(|| {
                filters::untolerated_taint(lost_taints, tolerations)
                    .or_else(|| filters::untolerated_taint(&node.taints, tolerations))
                    .map(|r| vec![r])
            })
            .or_else(|| filters::node_affinity(p.pod, node.name, node.labels).map(|r| vec![r]))
            .or_else(|| {
                (room && sim.ports_taken(n, &self.want_ports)).then(|| vec![Rejection::HostPorts])
            })
            .or_else(|| {
                let fit = filters::resources_fit(p.requests, node.allocatable, sim.requested[n]);
                (room && !fit.is_empty()).then_some(fit)
            })
            .or_else(|| {
                self.terms
                    .iter()
                    .zip(&self.blocked_by_own)
                    .any(|(t, blocked)| {
                        node.labels
                            .get(&t.topology_key)
                            .is_some_and(|v| blocked.contains(v.as_str()))
                    })
                    .then(|| vec![Rejection::AntiAffinity])
            })
            .or_else(|| {
                self.forbidden
                    .iter()
                    .any(|(k, v)| node.labels.get(*k).is_some_and(|have| have == v))
                    .then(|| vec![Rejection::ExistingAntiAffinity])
            })
            .or_else(|| {
                self.spreads
                    .iter()
                    .zip(&self.spread_counts)
                    .find_map(|(s, counts)| {
                        let Some(domain) = node.labels.get(&s.topology_key) else {
                            return Some(vec![Rejection::TopologySpreadMissingLabel]);
                        };
                        let here = counts.by_domain.get(domain.as_str()).copied().unwrap_or(0);
                        (!filters::spread_allows(
                            s,
                            here,
                            s.selector.matches(p.labels),
                            counts.min,
                            counts.by_domain.len(),
                        ))
                        .then(|| vec![Rejection::TopologySpread])
                    })
            })
    }
}

struct SpreadCounts<'a> {
    by_domain: HashMap<&'a str, i64>,
    min: i64,
}
