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
    /// Per pod, the index of its template in `list`.
    of_pod: Vec<Option<usize>>,
}

impl Templates {
    /// Evaluates the template of every bound pod a controller recreates.
    pub fn new(cluster: &Cluster<'_>) -> Templates {
        let lost_taints = lost_taints();
        let mut by_key: HashMap<String, usize> = HashMap::new();
        let mut out = Templates {
            list: Vec::new(),
            of_pod: vec![None; cluster.pods.len()],
        };
        // A pod whose inputs equal the pod's before it (a controller's pods come one after
        // another) shares its template without its key being written out. Equal inputs
        // write equal keys, so this only saves the writing.
        let mut runs = super::runs::Runs::new();
        for (i, p) in cluster.pods.iter().enumerate() {
            cluster.pause.point();
            if p.node.is_none() || p.terminating || !p.owner.recreates() {
                continue;
            }
            let t = runs.get(inputs(p), || {
                let text = key(&inputs(p));
                *by_key.entry(text).or_insert_with(|| {
                    out.list.push(evaluate(cluster, p, &lost_taints));
                    out.list.len() - 1
                })
            });
            out.of_pod[i] = Some(t);
        }
        out
    }

    /// The template of pod `i`, when it is one that may move.
    pub fn of(&self, i: usize) -> Option<&Template> {
        self.of_pod.get(i).copied().flatten().map(|t| &self.list[t])
    }

    /// How many distinct templates there are.
    #[cfg(test)]
    pub fn count(&self) -> usize {
        self.list.len()
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

/// What the static filters read of a pod: its node selector, its required node affinity and
/// its tolerations.
type Inputs<'p> = (
    Option<&'p std::collections::BTreeMap<String, String>>,
    Option<&'p k8s_openapi::api::core::v1::NodeSelector>,
    &'p [k8s_openapi::api::core::v1::Toleration],
);

fn inputs<'p>(p: &PodInfo<'p>) -> Inputs<'p> {
    let spec = p.pod.spec.as_ref();
    let required = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    (
        spec.and_then(|s| s.node_selector.as_ref()),
        required,
        spec.and_then(|s| s.tolerations.as_deref()).unwrap_or(&[]),
    )
}

/// The inputs as text, to find equal ones anywhere in the list (the API types are not
/// `Hash`).
fn key(inputs: &Inputs<'_>) -> String {
    serde_json::to_string(inputs).unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostloss::Input;
    use crate::hostloss::testing::{PodExt, app_pod, env, node, state};
    use crate::state::Pod;

    fn on_ssd(app: &str, i: usize) -> Pod {
        app_pod(app, i, "n1", "100m", "64Mi").node_selector(&[("disk", "ssd")])
    }

    fn anywhere(app: &str, i: usize) -> Pod {
        app_pod(app, i, "n2", "100m", "64Mi")
    }

    #[test]
    fn pods_with_equal_inputs_share_a_template_whether_or_not_they_come_one_after_another() {
        let nodes = [("n1", "ssd"), ("n2", "hdd"), ("n3", "ssd")].map(|(name, disk)| {
            node(name)
                .label("disk", disk)
                .host(&format!("pve-{name}"))
                .ready()
                .allocatable("4", "8Gi")
                .build()
        });
        let pods = vec![
            on_ssd("a", 0),
            on_ssd("a", 1),
            anywhere("b", 0),
            on_ssd("a", 2),
            anywhere("b", 1),
            anywhere("b", 2),
            anywhere("c", 0).tolerating("node.kubernetes.io/unreachable", "", None),
            on_ssd("a", 3),
        ];
        let state = state().nodes(nodes).pods(pods).build();
        let env = env();
        let cluster = Cluster::build(Input {
            env: &env,
            state: &state,
            protected: &[],
            pause: &crate::pause::NEVER,
        })
        .expect("a cluster");
        let templates = Templates::new(&cluster);
        assert_eq!(templates.count(), 3);
        let lost = lost_taints();
        for (i, p) in cluster.pods.iter().enumerate() {
            let own = evaluate(&cluster, p, &lost);
            let shared = templates.of(i).expect("a template");
            assert_eq!(shared.feasible, own.feasible, "{}", p.name);
            assert_eq!(shared.tolerates_lost, own.tolerates_lost, "{}", p.name);
        }
        let feasible = |i: usize| templates.of(i).map(|t| t.feasible.clone());
        assert_eq!(feasible(0), Some(vec![0, 2]));
        assert_eq!(feasible(3), feasible(0));
        assert_eq!(feasible(7), feasible(0));
        assert_eq!(feasible(2), Some(vec![0, 1, 2]));
        assert!(!templates.of(2).unwrap().tolerates_lost);
        assert!(templates.of(6).unwrap().tolerates_lost);
    }
}
