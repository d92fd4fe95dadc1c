//! A host's partition: its VMs keep running with every network link pulled. The model asks
//! the questions of a power loss and says here what the partition changes.
//!
//! Kubernetes cannot tell the two apart: the cut-off kubelet stops reporting, the Node turns
//! `Ready: Unknown` after the node-monitor grace period and gets the
//! `node.kubernetes.io/unreachable` taints, and its pods are evicted after their toleration, so
//! they are placed as after power loss. But an evicted pod stays `Terminating` and its
//! containers keep running on the cut-off node until the links come back and the kubelet there
//! finishes the deletion (Kubernetes, "Force Delete StatefulSet Pods"):
//! - a Deployment's replacement runs beside the old copy until then;
//! - a StatefulSet's pod is not made again until then, as after power loss; force-deleting
//!   the old pod (or tainting its node out-of-service, meant for a node that is shut down)
//!   would run two pods of one identity, so the fix is the network, not a force delete;
//! - Longhorn judges a node down by its Longhorn node's `Ready` condition, which longhorn-manager
//!   sets `False` (`KubernetesNodeNotReady`) once the Kubernetes Node is not Ready: it takes a
//!   cut-off node for down and, where `node-down-pod-deletion-policy` names the pod's owner,
//!   force-deletes the pod while it still runs there. A Deployment then runs two copies; for a
//!   StatefulSet that is two pods of one identity, and whether the application survives that
//!   cannot be told from what gates reads, so the outcome is unknown naming the pod.
//!
//! etcd's quorum is judged as for power loss, and the VIP and the L2 lease move on their lease
//! timings ([`super::etcd`], [`super::l2`]).

use std::collections::BTreeSet;

use super::attach::{self, Hold, SETTING};
use super::cluster::Cluster;
use super::outcome::{HostLoss, Outcome};
use super::schedule::{MoveOutcome, Placement};

/// What the partition of the `lost` nodes changes for their pods and volumes.
pub fn predict(cluster: &Cluster<'_>, lost: &[usize], placement: &Placement, loss: &mut HostLoss) {
    let holds = attach::holds(cluster, lost, loss);
    volumes(&holds, loss);
    let held: BTreeSet<&str> = holds.iter().map(|h| h.pod.as_str()).collect();
    running_copies(cluster, lost, placement, &held, loss);
}

/// The ReadWriteOnce Longhorn volumes of cut-off pods: held until the links come back, or
/// released by Longhorn's force delete while the old pod still runs.
fn volumes(holds: &[Hold], loss: &mut HostLoss) {
    let stuck: Vec<&Hold> = holds.iter().filter(|h| !h.released).collect();
    let deployments: Vec<&Hold> = holds.iter().filter(|h| h.released && !h.stateful).collect();
    let stateful: Vec<&Hold> = holds.iter().filter(|h| h.released && h.stateful).collect();
    if let Some(first) = stuck.first() {
        loss.reason(
            Outcome::Lost,
            format!(
                "{}: with Longhorn's {SETTING} `{}` the pod stays Terminating on the cut-off node, still running there with the volume attached, so its replacement cannot start until the links come back and the kubelet finishes the deletion; restore the network, or power the node off before force-deleting the pod (a force delete while it runs starts a second copy)",
                attach::lines(&stuck),
                first.policy
            ),
        );
    }
    if !deployments.is_empty() {
        loss.reason(
            Outcome::Degraded,
            format!(
                "{}: Longhorn takes the cut-off node for down (its Kubernetes Node is not Ready), force-deletes the pod once it is evicted and releases the volume, so the replacement starts after the eviction and the detach while the old pod still runs on the cut-off node: two copies until the links come back",
                attach::lines(&deployments)
            ),
        );
    }
    if let Some(first) = stateful.first() {
        loss.reason(
            Outcome::Unknown,
            format!(
                "{}: Longhorn's {SETTING} `{}` force-deletes the pod once it is evicted, taking the cut-off node for down (its Kubernetes Node is not Ready), so the StatefulSet makes a pod of the same identity while the old one still runs on the cut-off node; whether two pods of one identity harm this application cannot be told from what gates reads; set {SETTING} to delete-deployment-pod to keep StatefulSet pods waiting for their node",
                attach::lines(&stateful),
                first.policy
            ),
        );
    }
}

/// The pods of the cut-off nodes that keep running there once evicted: a Deployment's beside
/// its replacement, a StatefulSet's in place of one. `held` pods are said with their volume.
fn running_copies(
    cluster: &Cluster<'_>,
    lost: &[usize],
    placement: &Placement,
    held: &BTreeSet<&str>,
    loss: &mut HostLoss,
) {
    let mut twice = Vec::new();
    let mut waiting = Vec::new();
    for m in &placement.moves {
        let cut_off = cluster.pods[m.index]
            .node
            .is_some_and(|n| lost.contains(&n));
        if !cut_off || held.contains(m.pod.as_str()) {
            continue;
        }
        if let MoveOutcome::Placed {
            waits_for_deletion, ..
        } = m.outcome
        {
            match waits_for_deletion {
                true => waiting.push(m.pod.as_str()),
                false => twice.push(m.pod.as_str()),
            }
        }
    }
    if !twice.is_empty() {
        loss.reason(
            Outcome::Survives,
            format!(
                "still running on the cut-off nodes beside their replacements, two copies each until the links come back and the kubelet stops the old ones: {}",
                twice.join(", ")
            ),
        );
    }
    if !waiting.is_empty() {
        loss.reason(
            Outcome::Survives,
            format!(
                "still running on the cut-off nodes, StatefulSet pods not made again until the links come back and the kubelet finishes their deletion, as after power loss (force-deleting one or tainting its node out-of-service while it is cut off runs two pods of one identity): {}",
                waiting.join(", ")
            ),
        );
    }
}
