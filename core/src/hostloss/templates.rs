//! The filters that depend only on a pod's template and a node, evaluated once per distinct
//! template instead of once per pod, node and host: a cordoned node, the node's own taints,
//! the node selector and required node affinity. The replicas of a Deployment share one
//! template, and a cluster of 100,000 pods has a few hundred templates at most, so placing a
//! pod then only walks the nodes its template allows and checks what changes while pods move
//! (room, anti-affinity, spread).
//!
//! A template is what those filters read: `nodeSelector`, the required node affinity and the
//! tolerations. Whether the pod tolerates the unreachable taint a lost node carries is part
//! of it too, as the taint is the same on every lost node.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Taint;

use super::cluster::{Cluster, PodInfo, TAINT_UNREACHABLE};
use super::filters;

/// A set of node indices, one bit each.
#[derive(Debug, Clone)]
pub struct NodeSet {
    words: Vec<u64>,
}

impl NodeSet {
    fn new(nodes: usize) -> NodeSet {
        NodeSet {
            words: vec![0; nodes.div_ceil(64)],
        }
    }

    fn insert(&mut self, n: usize) {
        self.words[n / 64] |= 1 << (n % 64);
    }

    pub fn contains(&self, n: usize) -> bool {
        self.words[n / 64] & (1 << (n % 64)) != 0
    }
}

/// One template's static verdicts over every node.
#[derive(Debug, Clone)]
pub struct Template {
    /// Nodes that pass every static filter, ascending (the scheduler's node order matters
    /// for ties).
    pub feasible: Vec<usize>,
    /// The same nodes as a set.
    pub feasible_set: NodeSet,
    /// Nodes whose own taints the pod tolerates (a spread's `nodeTaintsPolicy: Honor`).
    pub taints_ok: NodeSet,
    /// Nodes the pod's node selector and required node affinity accept (a spread's
    /// `nodeAffinityPolicy: Honor`).
    pub affinity_ok: NodeSet,
    /// Whether the pod tolerates the unreachable taint (NoSchedule and NoExecute) that every
    /// lost node carries.
    pub tolerates_lost: bool,
}

/// The templates of the pods that may have to move, and which pod has which.
#[derive(Debug, Default)]
pub struct Templates {
    list: Vec<Template>,
    of_pod: HashMap<usize, usize>,
}

impl Templates {
    /// Evaluates the template of every bound pod a controller recreates.
    pub fn new(cluster: &Cluster<'_>) -> Templates {
        let lost_taints = lost_taints();
        let mut by_key: HashMap<String, usize> = HashMap::new();
        let mut out = Templates::default();
        for (i, p) in cluster.pods.iter().enumerate() {
            if p.node.is_none() || p.terminating || !p.owner.recreates() {
                continue;
            }
            let text = key(p);
            let t = match by_key.get(&text) {
                Some(&t) => t,
                None => {
                    out.list.push(evaluate(cluster, p, &lost_taints));
                    by_key.insert(text, out.list.len() - 1);
                    out.list.len() - 1
                }
            };
            out.of_pod.insert(i, t);
        }
        out
    }

    /// The template of pod `i`, when it is one that may move.
    pub fn of(&self, i: usize) -> Option<&Template> {
        self.of_pod.get(&i).map(|&t| &self.list[t])
    }
}

/// The unreachable taint a lost node carries.
pub fn lost_taints() -> Vec<Taint> {
    ["NoSchedule", "NoExecute"]
        .into_iter()
        .map(|effect| Taint {
            key: TAINT_UNREACHABLE.to_string(),
            effect: effect.to_string(),
            ..Default::default()
        })
        .collect()
}

/// What the static filters read of a pod, as text (the API types are not `Hash`).
fn key(p: &PodInfo<'_>) -> String {
    let spec = p.pod.spec.as_ref();
    let required = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    serde_json::to_string(&(
        spec.and_then(|s| s.node_selector.as_ref()),
        required,
        p.tolerations(),
    ))
    .unwrap_or_default()
}

fn evaluate(cluster: &Cluster<'_>, p: &PodInfo<'_>, lost_taints: &[Taint]) -> Template {
    let tolerations = p.tolerations();
    let count = cluster.nodes.len();
    let mut template = Template {
        feasible: Vec::new(),
        feasible_set: NodeSet::new(count),
        taints_ok: NodeSet::new(count),
        affinity_ok: NodeSet::new(count),
        tolerates_lost: filters::untolerated_taint(lost_taints, tolerations).is_none(),
    };
    for (n, node) in cluster.nodes.iter().enumerate() {
        let taints_ok = filters::untolerated_taint(&node.taints, tolerations).is_none();
        let affinity_ok = filters::node_affinity(p.pod, node.name, node.labels).is_none();
        if taints_ok {
            template.taints_ok.insert(n);
        }
        if affinity_ok {
            template.affinity_ok.insert(n);
        }
        if taints_ok
            && affinity_ok
            && filters::node_unschedulable(node.unschedulable, tolerations).is_none()
        {
            template.feasible.push(n);
            template.feasible_set.insert(n);
        }
    }
    template
}
