//! The node-lifecycle controller's zones: whether it evicts the pods of the lost nodes at all.
//!
//! kube-controller-manager groups nodes into zones by their region and zone labels
//! (`topology.kubernetes.io/region`/`zone`, the `failure-domain.beta` ones first when set; no
//! label is one zone of its own) and judges each zone by its NotReady nodes: none Ready is a
//! *full disruption*, more than two NotReady and at least `--unhealthy-zone-threshold` (0.55)
//! of the zone a *partial disruption*. In a partial disruption it taints, and so evicts, at
//! `--secondary-node-eviction-rate` (0.01 nodes a second), which is 0 in a zone of at most
//! `--large-cluster-size-threshold` (50) nodes: there the pods of the dead nodes stay bound
//! to them and nothing replaces them until the nodes return or someone drains them. When every
//! zone is fully disrupted it stops evicting everywhere. It judges a zone as it finds its
//! nodes NotReady, one pass at a time, so a node it found while the zone was still healthy
//! (normally the first of a host's nodes; which one is not predictable) is tainted anyway: the
//! model keeps the pods of every lost node of such a zone and says so. The defaults are the releases'; gates
//! cannot read the flags of a managed control plane and models them as shipped.

use std::collections::BTreeMap;

use super::cluster::Cluster;

/// `--unhealthy-zone-threshold`.
const UNHEALTHY_ZONE_THRESHOLD: f64 = 0.55;
/// `--large-cluster-size-threshold`.
const LARGE_CLUSTER_SIZE_THRESHOLD: usize = 50;

/// The controller's zone key of a node: `region:\0:zone`, empty without either label.
pub fn zone_key(labels: &BTreeMap<String, String>) -> String {
    let get = |beta: &str, ga: &str| {
        labels
            .get(beta)
            .or_else(|| labels.get(ga))
            .cloned()
            .unwrap_or_default()
    };
    let zone = get(
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/zone",
    );
    let region = get(
        "failure-domain.beta.kubernetes.io/region",
        "topology.kubernetes.io/region",
    );
    if region.is_empty() && zone.is_empty() {
        String::new()
    } else {
        format!("{region}:\0:{zone}")
    }
}

/// A zone's name for people: its zone label (`dc1`), or `the cluster` for nodes without one.
fn shown(key: &str) -> String {
    match key.split_once(":\0:") {
        Some((region, zone)) if !zone.is_empty() && !region.is_empty() => {
            format!("{region}/{zone}")
        }
        Some((region, zone)) => format!("zone {}", if zone.is_empty() { region } else { zone }),
        None => "the cluster (no zone labels)".to_string(),
    }
}

/// Per node, why the controller will not evict its pods when the `lost` nodes are down
/// (`None`: it evicts them, after their tolerations).
pub fn evictions_stopped(cluster: &Cluster<'_>, lost: &[bool]) -> Vec<Option<String>> {
    let keys: Vec<String> = cluster.nodes.iter().map(|n| zone_key(n.labels)).collect();
    // Per zone: (nodes, NotReady once the host is lost).
    let mut zones: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (n, node) in cluster.nodes.iter().enumerate() {
        let z = zones.entry(keys[n].as_str()).or_default();
        z.0 += 1;
        if lost[n] || !node.ready {
            z.1 += 1;
        }
    }
    let full = |&(size, not_ready): &(usize, usize)| not_ready == size && not_ready > 0;
    let everywhere = !zones.is_empty() && zones.values().all(full);
    let why: BTreeMap<&str, String> = zones
        .iter()
        .filter_map(|(&key, z)| {
            let (size, not_ready) = *z;
            let reason = if everywhere {
                "every zone has no Ready node, so the node-lifecycle controller stops evicting everywhere".to_string()
            } else if !full(z)
                && not_ready > 2
                && not_ready as f64 / size as f64 >= UNHEALTHY_ZONE_THRESHOLD
                && size <= LARGE_CLUSTER_SIZE_THRESHOLD
            {
                format!(
                    "{} has {not_ready} of {size} nodes NotReady (more than 2 and at least 55%, in a zone of at most 50 nodes), so the node-lifecycle controller stops evicting there (--secondary-node-eviction-rate is 0 below --large-cluster-size-threshold); only a node it found NotReady while the zone was still healthy, normally the first, is tainted and its pods evicted",
                    shown(key)
                )
            } else {
                return None;
            };
            Some((key, reason))
        })
        .collect();
    keys.iter()
        .enumerate()
        .map(|(n, key)| lost[n].then(|| why.get(key.as_str()).cloned()).flatten())
        .collect()
}
