//! Longhorn after a host loss: each volume's healthy replicas left on Ready nodes that are not
//! lost. A volume that loses its last healthy replica loses its data; one that keeps some runs
//! degraded until Longhorn rebuilds the missing replicas elsewhere.
//!
//! Which replicas are copies, from longhorn-manager (`k8s/pkg/apis/longhorn/v1beta2/replica.go`
//! and `isHealthyAndActiveReplica` in `controller/volume_controller.go`):
//! - `spec.failedAt` set: no copy. Longhorn keeps a failed replica's `nodeID`, and the replica
//!   "must be rebuilt from a non-failed replica", so counting it would call a volume whose only
//!   healthy replica goes with the host degraded instead of lost.
//! - `spec.healthyAt` empty: no copy either. It is set when the replica first becomes
//!   read/write after creation or a rebuild and cleared before a rebuild, so an empty one is a
//!   replica still being built from the others. Longhorn always writes the field; an object
//!   without it (a hand-written snapshot) is read as healthy.
//! - `status` (`currentState`) is not read: the volume controller judges health by the two
//!   spec timestamps, and a replica of a detached volume is `stopped` while holding its data.
//! - `spec.active` false (a replica being replaced during migration) is not read either.

use std::collections::HashMap;

use super::cluster::{Cluster, labels, name};
pub use super::findings::VolumeLoss;
use super::outcome::{HostLoss, Outcome};

/// A healthy copy of its volume's data: not failed, and healthy since its last build.
fn is_copy(r: &crate::state::LonghornReplica) -> bool {
    r.spec.failed_at.is_empty() && r.spec.healthy_at.as_deref() != Some("")
}

pub fn predict(cluster: &Cluster<'_>, lost: &[usize], loss: &mut HostLoss) {
    let state = cluster.state;
    let (volumes, replicas) = match (
        state.longhorn_volumes.get("Longhorn volumes (longhorn.io)"),
        state
            .longhorn_replicas
            .get("Longhorn replicas (longhorn.io)"),
    ) {
        (Ok(v), Ok(r)) => (v, r),
        (Err(e), _) | (_, Err(e)) => {
            if e.verdict == crate::verdict::Verdict::Error {
                loss.reason(Outcome::Unknown, e.summary);
            }
            return;
        }
    };
    let by_volume = replica_nodes(replicas);
    let mut rebuilds = Rebuilds {
        takers: Takers::read(cluster, lost),
        degraded: Vec::new(),
        stuck: Vec::new(),
        to_copy: 0,
        size_unknown: Vec::new(),
    };
    for v in volumes {
        let nodes = by_volume
            .get(name(&v.metadata))
            .map(Vec::as_slice)
            .unwrap_or_default();
        rebuilds.volume(cluster, lost, v, nodes, loss);
    }
    rebuilds.say(cluster, loss);
}

/// The nodes of each volume's replicas that hold a copy of its data.
fn replica_nodes(
    replicas: &[std::sync::Arc<crate::state::LonghornReplica>],
) -> HashMap<&str, Vec<&str>> {
    let mut by_volume: HashMap<&str, Vec<&str>> = HashMap::new();
    for r in replicas.iter().filter(|r| is_copy(r)) {
        let volume = if r.spec.volume_name.is_empty() {
            labels(&r.metadata)
                .get("longhornvolume")
                .map(String::as_str)
                .unwrap_or_default()
        } else {
            r.spec.volume_name.as_str()
        };
        by_volume
            .entry(volume)
            .or_default()
            .push(r.spec.node_id.as_str());
    }
    by_volume
}

/// The volumes that lose a replica with the host, by whether Longhorn can rebuild it.
struct Rebuilds<'v> {
    takers: Takers,
    /// `name (left of wanted left)` of the volumes rebuilt elsewhere, and of those that stay
    /// degraded until the host returns.
    degraded: Vec<String>,
    stuck: Vec<String>,
    /// Bytes to copy for the rebuilds, and the volumes whose size is not known.
    to_copy: i64,
    size_unknown: Vec<&'v str>,
}

impl<'v> Rebuilds<'v> {
    /// One volume: lost with its last replica, else degraded until rebuilt or the host
    /// returns.
    fn volume(
        &mut self,
        cluster: &Cluster<'_>,
        lost: &[usize],
        v: &'v crate::state::LonghornVolume,
        nodes: &[&str],
        loss: &mut HostLoss,
    ) {
        let volume = name(&v.metadata);
        let mut left = 0;
        let mut lost_on = Vec::new();
        for node in nodes {
            match cluster.node_index.get(node) {
                Some(n) if lost.contains(n) => lost_on.push(node.to_string()),
                Some(&n) if cluster.nodes[n].ready => left += 1,
                Some(_) => {}
                None if node.is_empty() => {}
                None => loss.reason(
                    Outcome::Unknown,
                    format!("a replica of Longhorn volume {volume} is on {node}, which is not a node of the cluster"),
                ),
            }
        }
        if lost_on.is_empty() {
            return;
        }
        if left == 0 {
            loss.reason(
                Outcome::Lost,
                format!(
                    "Longhorn volume {volume} loses its last replica (on {})",
                    lost_on.join(", ")
                ),
            );
        }
        let mut rebuild_bytes = None;
        if left > 0 {
            let line = format!(
                "{volume} ({left} of {} left)",
                v.spec.number_of_replicas.max(nodes.len() as i64)
            );
            match self.takers.may_rebuild(v, nodes) {
                Some(false) => self.stuck.push(line),
                Some(true) | None => {
                    self.degraded.push(line);
                    match v.spec.size.trim().parse::<i64>() {
                        Ok(size) if size >= 0 => {
                            let bytes = size.saturating_mul(lost_on.len() as i64);
                            self.to_copy = self.to_copy.saturating_add(bytes);
                            rebuild_bytes = Some(bytes);
                        }
                        _ => self.size_unknown.push(volume),
                    }
                }
            }
        }
        loss.volumes.push(VolumeLoss {
            volume: volume.to_string(),
            replicas: nodes.len(),
            wanted: v.spec.number_of_replicas,
            left,
            lost_on,
            rebuild_bytes,
        });
    }

    /// The degraded volumes, rebuilt elsewhere or not, in one reason each.
    fn say(&self, cluster: &Cluster<'_>, loss: &mut HostLoss) {
        let (degraded, stuck) = (&self.degraded, &self.stuck);
        if !degraded.is_empty() {
            loss.reason(
                Outcome::Degraded,
                format!(
                    "{} Longhorn volume{} run degraded until Longhorn rebuilds the lost replicas: {}; {}{}",
                    degraded.len(),
                    if degraded.len() == 1 { "" } else { "s" },
                    degraded.join(", "),
                    copy_words(self.to_copy, &self.size_unknown, cluster.env.capacity.rebuild_margin),
                    self.takers
                        .unknown
                        .as_ref()
                        .map(|why| format!(
                            " (whether a surviving node may take them is not known: {why})"
                        ))
                        .unwrap_or_default()
                ),
            );
        }
        if !stuck.is_empty() {
            loss.reason(
                Outcome::Degraded,
                format!(
                    "{} Longhorn volume{} run degraded until the host returns: every surviving node Longhorn may schedule on already holds a replica, and replica anti-affinity is hard (replica-soft-anti-affinity false), so the lost replicas cannot be rebuilt: {}",
                    stuck.len(),
                    if stuck.len() == 1 { "" } else { "s" },
                    stuck.join(", ")
                ),
            );
        }
    }
}

/// What the rebuilds copy, in words: the bytes, the volumes whose size is unknown, and the
/// share of each node's CPU and memory `capacity.rebuild_margin` keeps for the traffic.
fn copy_words(bytes: i64, size_unknown: &[&str], margin: f64) -> String {
    let gib = bytes as f64 / f64::from(1u32 << 30);
    let mut out = format!("about {gib:.1} GiB to copy (each volume's size once per lost replica)");
    if !size_unknown.is_empty() {
        out.push_str(&format!(
            ", more for {} whose size is not known",
            size_unknown.join(", ")
        ));
    }
    if margin > 0.0 {
        out.push_str(&format!(
            ", carried by the {:.0} % of each receiving node capacity.rebuild_margin keeps",
            margin * 100.0
        ));
    } else {
        out.push_str(", with no capacity.rebuild_margin kept for the traffic");
    }
    out
}

/// The surviving nodes Longhorn may place a rebuilt replica on, and the global
/// `replica-soft-anti-affinity` (Longhorn's default false: two replicas of a volume never
/// share a node; `scheduler/replica_scheduler.go`, `types/setting.go`).
struct Takers {
    nodes: Vec<String>,
    soft: bool,
    /// Why the takers are not known (the Longhorn nodes or settings could not be read).
    unknown: Option<String>,
}

impl Takers {
    fn read(cluster: &Cluster<'_>, lost: &[usize]) -> Takers {
        let state = cluster.state;
        let nodes = match state.longhorn_nodes.get("Longhorn nodes (longhorn.io)") {
            Ok(n) => n,
            Err(e) => {
                return Takers {
                    nodes: Vec::new(),
                    soft: false,
                    unknown: Some(e.summary),
                };
            }
        };
        let soft = match state
            .longhorn_settings
            .get("Longhorn settings (longhorn.io)")
        {
            Ok(settings) => settings
                .iter()
                .find(|s| name(&s.metadata) == "replica-soft-anti-affinity")
                .is_some_and(|s| s.value.trim().eq_ignore_ascii_case("true")),
            Err(e) => {
                return Takers {
                    nodes: Vec::new(),
                    soft: false,
                    unknown: Some(e.summary),
                };
            }
        };
        let nodes = nodes
            .iter()
            .filter(|n| n.spec.allow_scheduling && !n.spec.eviction_requested)
            .map(|n| name(&n.metadata))
            .filter(|n| {
                cluster
                    .node_index
                    .get(*n)
                    .is_some_and(|i| !lost.contains(i) && cluster.nodes[*i].ready)
            })
            .map(str::to_string)
            .collect();
        Takers {
            nodes,
            soft,
            unknown: None,
        }
    }

    /// Whether a surviving node may take a rebuilt replica of `volume`, whose healthy
    /// copies are on `holders`; `None` when that is not known.
    fn may_rebuild(&self, volume: &crate::state::LonghornVolume, holders: &[&str]) -> Option<bool> {
        if self.unknown.is_some() {
            return None;
        }
        let soft = match volume.spec.replica_soft_anti_affinity.as_str() {
            "enabled" => true,
            "disabled" => false,
            _ => self.soft,
        };
        Some(
            soft && !self.nodes.is_empty()
                || self.nodes.iter().any(|n| !holders.contains(&n.as_str())),
        )
    }
}
