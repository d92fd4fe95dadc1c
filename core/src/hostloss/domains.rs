//! Topology domains by number: for each topology key that an anti-affinity term or a spread
//! constraint names, every node's value of that label as a small integer. Placing a pod then
//! compares integers per node instead of looking labels up by string, and counts pods per
//! domain in a vector.

use std::collections::HashMap;

use super::cluster::Cluster;

/// A node without the label.
pub const NONE: u32 = u32::MAX;

/// One topology key's domains.
#[derive(Debug, Default)]
pub struct Topology {
    /// Per node, its domain, or [`NONE`].
    pub of_node: Vec<u32>,
    /// How many distinct values the key has.
    pub count: usize,
}

/// The domains of every topology key the cluster's pods name.
#[derive(Debug, Default)]
pub struct Domains {
    keys: HashMap<String, Topology>,
}

impl Domains {
    /// Indexes the keys named by any pod's required anti-affinity or spread constraint.
    pub fn new(cluster: &Cluster<'_>) -> Domains {
        let mut keys: HashMap<String, Topology> = HashMap::new();
        for p in &cluster.pods {
            let Some(spec) = p.pod.spec.as_ref() else {
                continue;
            };
            let anti = spec
                .affinity
                .as_ref()
                .and_then(|a| a.pod_anti_affinity.as_ref())
                .and_then(|a| {
                    a.required_during_scheduling_ignored_during_execution
                        .as_ref()
                })
                .into_iter()
                .flatten()
                .map(|t| &t.topology_key);
            let spread = spec
                .topology_spread_constraints
                .iter()
                .flatten()
                .map(|c| &c.topology_key);
            for key in anti.chain(spread) {
                if !keys.contains_key(key) {
                    keys.insert(key.clone(), topology(cluster, key));
                }
            }
        }
        Domains { keys }
    }

    /// The domains of `key`; `None` for a key no pod named when the index was built.
    pub fn get(&self, key: &str) -> Option<&Topology> {
        self.keys.get(key)
    }
}

fn topology(cluster: &Cluster<'_>, key: &str) -> Topology {
    let mut ids: HashMap<&str, u32> = HashMap::new();
    let of_node = cluster
        .nodes
        .iter()
        .map(|node| match node.labels.get(key) {
            None => NONE,
            Some(value) => {
                let next = ids.len() as u32;
                *ids.entry(value.as_str()).or_insert(next)
            }
        })
        .collect();
    Topology {
        of_node,
        count: ids.len(),
    }
}
