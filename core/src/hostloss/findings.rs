//! What each part of the model finds for one host (etcd, L2, workloads, pods, capacity,
//! Longhorn), as [`super::HostLoss`] holds and the reports show it. Data only, apart from
//! the parts that compute it, so the outcome that collects them and the parts that fill them
//! do not import each other.

use serde::Serialize;

use super::lineage::Lineage;

#[derive(Debug, Clone, Serialize)]
pub struct NodeCapacity {
    pub node: String,
    pub host: String,
    /// Millicores.
    pub cpu_allocatable: i64,
    pub cpu_requests: i64,
    pub cpu_usage: Option<i64>,
    /// Bytes.
    pub memory_allocatable: i64,
    pub memory_requests: i64,
    pub memory_usage: Option<i64>,
    /// Whether the used share (max of requests and usage) stays within allocatable less the
    /// rebuild margin.
    pub within_rebuild_margin: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct EtcdLoss {
    /// Voting members.
    pub members: usize,
    /// Voting members left, Ready and not on the host.
    pub left: usize,
    /// Members a quorum needs.
    pub quorum: usize,
    pub kept: bool,
    /// Where the member list came from.
    pub source: String,
    /// The members that go with the host.
    pub lost: Vec<String>,
    /// The Ready control planes left, which can take the API VIP.
    pub vip_candidates: Vec<String>,
    /// The node holding the VIP now, when known.
    pub vip_holder: Option<String>,
    pub vip_moves: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct L2Loss {
    /// `namespace/name`.
    pub service: String,
    /// Surviving Ready nodes the policies select.
    pub announcers_left: Vec<String>,
    /// The node holding the lease now, when there is one.
    pub holder: Option<String>,
    pub holder_lost: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct VolumeLoss {
    pub volume: String,
    /// Healthy replicas (not failed, healthy since their last build) before the loss.
    pub replicas: usize,
    pub wanted: i64,
    /// Replicas left on Ready nodes that are not lost.
    pub left: usize,
    /// Nodes of the replicas that go with the host.
    pub lost_on: Vec<String>,
    /// Bytes Longhorn copies to rebuild the lost replicas (the volume's size, once per lost
    /// replica) where a surviving node may take them; `None` when none may, or the size is
    /// not known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rebuild_bytes: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ControllerLoss {
    pub name: String,
    pub pods: usize,
    /// Ready replicas on nodes that are not lost, at once.
    pub ready_left: usize,
    /// Replicas once the moved pods are placed (StatefulSet pods waiting for deletion do not
    /// count).
    pub after_rescheduling: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct PdbLoss {
    pub pdb: String,
    pub expected: usize,
    pub desired_healthy: usize,
    pub healthy_left: usize,
    pub healthy_after_rescheduling: usize,
}

/// What happens to one pod of a lost node.
#[derive(Debug, Clone, Serialize)]
pub struct PodMove {
    /// Index into the cluster's pods.
    #[serde(skip)]
    pub index: usize,
    /// `namespace/name`.
    pub pod: String,
    /// `Deployment kube-system/coredns`, `StatefulSet whoami/whoami-db`, ...
    pub controller: String,
    pub from: String,
    /// What its replacement shares with it (owner, template hash, ordinal), so a chaos run
    /// finds the replacement by owner rather than by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lineage: Option<Lineage>,
    #[serde(flatten)]
    pub outcome: MoveOutcome,
}

/// How a pod the node-lifecycle controller's zone rule keeps says why it stays.
pub const NEVER_EVICTED: &str = "is never evicted while the host is down: ";

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum MoveOutcome {
    /// Recreated and placed on `node`. `after_seconds`: when its old pod is evicted (its
    /// toleration of the unreachable taint). `waits_for_deletion`: a StatefulSet pod, placed
    /// only once the old pod object is gone.
    Placed {
        node: String,
        host: String,
        after_seconds: i64,
        waits_for_deletion: bool,
    },
    /// Recreated, but no surviving node passes the filters.
    Unschedulable { why: String },
    /// Tolerates the unreachable taint forever: stays bound to the lost node, not recreated.
    Stays { why: String },
    /// Nothing recreates it.
    NotRecreated { why: String },
}

impl PodMove {
    pub fn placed_on(&self) -> Option<&str> {
        match &self.outcome {
            MoveOutcome::Placed { node, .. } => Some(node),
            MoveOutcome::Unschedulable { .. }
            | MoveOutcome::Stays { .. }
            | MoveOutcome::NotRecreated { .. } => None,
        }
    }

    /// One line: `kube-system/coredns-abc (Deployment kube-system/coredns) from cp-1 -> cp-2 (pve2) after 300s`.
    pub fn describe(&self) -> String {
        let head = format!("{} ({}) from {}", self.pod, self.controller, self.from);
        match &self.outcome {
            MoveOutcome::Placed {
                node,
                host,
                after_seconds,
                waits_for_deletion,
            } => {
                let wait = if *waits_for_deletion {
                    " once the old pod is deleted (StatefulSet)".to_string()
                } else {
                    format!(" after {after_seconds}s")
                };
                format!("{head} -> {node} ({host}){wait}")
            }
            MoveOutcome::Unschedulable { why } => format!("{head}: cannot be placed: {why}"),
            MoveOutcome::Stays { why } | MoveOutcome::NotRecreated { why } => {
                format!("{head}: {why}")
            }
        }
    }
}
