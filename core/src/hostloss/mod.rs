//! The host-loss model: for each Proxmox host, what the cluster keeps and what must move if
//! that host goes down, answered from one collected [`State`] without touching anything.
//!
//! The ADR keeps a third of each node free "so two nodes can carry the load while one host is
//! down"; that rule is a proxy. This model asks the real questions for every host H:
//! - etcd keeps quorum with the members that are not on H, and a surviving control plane can
//!   take the API VIP ([`etcd`]);
//! - each announced ingress Service keeps a surviving node its L2 policies select, and whether
//!   the lease holder is on H, so ingress blinks for the lease duration ([`l2`]);
//! - the pods of H's nodes that a controller recreates find room on the survivors, placed as
//!   the scheduler's filters would place them ([`filters`], [`schedule`]);
//! - every protected controller keeps a ready replica at once and gets its replicas back
//!   after rescheduling; PDBs that would then block evictions are named ([`workloads`]);
//! - the survivors' capacity after the move, with and without the Longhorn rebuild margin
//!   ([`capacity`]); no Longhorn volume loses its last replica ([`longhorn`]); and no pod
//!   with a ReadWriteOnce volume is left for someone to delete by hand ([`attach`]).
//!
//! The same questions are asked of a host's **partition** ([`Fault::Partition`]): its VMs
//! keep running with every link pulled. What differs is said in [`partition`]: the pods keep
//! running on the cut-off side beside their replacements, Longhorn releases a cut-off pod's
//! volume as it would a dead one's, and the VIP and the L2 lease move on their lease timings.
//!
//! A host's outcome is `survives` (nothing is interrupted), `degraded` (survivable, with the
//! expected outages named: VIP failover, ingress blink, a degraded volume), `lost` (not
//! survivable, with the reasons) or `unknown` (something it needs could not be read).
//!
//! Pure: it reads `crate::state`, `crate::config`, `crate::selector`, `crate::quantity` and
//! `crate::verdict` only, so it can live in the pure core.

pub mod attach;
pub mod capacity;
pub mod cluster;
pub mod domains;
pub mod etcd;
pub mod filters;
pub mod findings;
pub mod l2;
pub mod lineage;
pub mod longhorn;
pub mod outcome;
pub mod partition;
pub mod render;
mod runs;
pub mod schedule;
pub mod templates;
pub mod workloads;
pub mod zones;

#[cfg(test)]
mod fast_matches_reference;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_partition;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use outcome::{Fault, HostLoss, Outcome, Prediction, Reason};

use crate::config::Environment;
use crate::state::State;

/// A controller the environment protects by name (gate 2's `replicated-controller` checks):
/// its pods are found by labels, in one namespace when it names one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtectedRef {
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    pub selector: BTreeMap<String, String>,
}

/// What the model reads: the environment, one collected state, and the controllers the
/// gates protect by name. Controllers that a PodDisruptionBudget covers are protected too.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    pub env: &'a Environment,
    pub state: &'a State,
    pub protected: &'a [ProtectedRef],
    /// Where the prediction may be held (`gates watch` holds it while it evaluates a
    /// change); [`crate::pause::NEVER`] everywhere else.
    pub pause: &'a dyn crate::pause::Pause,
}

/// Predicts the loss of every host (or only `only`, when given).
pub fn predict(input: Input<'_>, only: Option<&str>) -> Prediction {
    predict_fault(input, only, Fault::Power)
}

/// Predicts `fault` for every host (or only `only`, when given).
pub fn predict_fault(input: Input<'_>, only: Option<&str>, fault: Fault) -> Prediction {
    let mut prediction = predict_as(input, only, schedule::Mode::Fast, fault);
    prediction.fault = fault;
    prediction
}

/// [`predict`] with the pods placed as `mode` says: the reference evaluates every filter on
/// every node and exists to hold the fast placement to the same answers.
pub fn predict_with(input: Input<'_>, only: Option<&str>, mode: schedule::Mode) -> Prediction {
    predict_as(input, only, mode, Fault::Power)
}

fn predict_as(
    input: Input<'_>,
    only: Option<&str>,
    mode: schedule::Mode,
    fault: Fault,
) -> Prediction {
    let cluster = match cluster::Cluster::build(input) {
        Ok(cluster) => cluster,
        Err(why) => return Prediction::cannot_tell(why.to_string()),
    };
    let shared = schedule::Shared::new(&cluster);
    let workloads = workloads::index(&cluster, input.protected);
    let mut unknown_host = None;
    let chosen: Vec<&str> = cluster
        .hosts()
        .iter()
        .map(String::as_str)
        .filter(|host| only.is_none_or(|h| h == *host))
        .collect();
    let hosts = each_host(&chosen, |host| {
        cluster.pause.point();
        let lost = cluster.nodes_on(host);
        predict_lost(&cluster, &shared, &workloads, host, lost, (mode, fault))
    });
    if let Some(wanted) = only
        && hosts.is_empty()
    {
        unknown_host = Some(format!(
            "host {wanted} runs no node of environment {} (hosts: {})",
            input.env.name,
            cluster.hosts().join(", ")
        ));
    }
    let mut prediction = Prediction::new(hosts, cluster.notes.clone(), unknown_host);
    if cluster.hosts().is_empty() {
        prediction.not_survivable = cluster.unplaced.clone();
        if cluster.unplaced.is_empty() {
            // No node on a known host because reads failed: nothing can be told.
            prediction
                .cannot_tell
                .extend(cluster.unknown.iter().cloned());
        }
    }
    prediction
}

/// `predict` for every host in `hosts`, on every core the process may use: one host's loss
/// reads the shared model and nothing of another's, so they run side by side. The results
/// keep the order of `hosts`.
fn each_host<T: Send>(hosts: &[&str], predict: impl Fn(&str) -> T + Sync) -> Vec<T> {
    crate::side_by_side::map(hosts, |host| predict(host))
}

/// Predicts the loss of a group of nodes at once, named `name`: a failure domain's (every
/// node on the hosts behind one switch or power feed, every VM on one shared datastore),
/// judged as a host's loss is judged.
pub fn predict_nodes(input: Input<'_>, name: &str, nodes: &[String]) -> Prediction {
    let cluster = match cluster::Cluster::build(input) {
        Ok(cluster) => cluster,
        Err(why) => return Prediction::cannot_tell(why.to_string()),
    };
    let shared = schedule::Shared::new(&cluster);
    let workloads = workloads::index(&cluster, input.protected);
    let lost: Vec<usize> = (0..cluster.nodes.len())
        .filter(|&i| nodes.iter().any(|n| n == cluster.nodes[i].name))
        .collect();
    let how = (schedule::Mode::Fast, Fault::Power);
    let loss = predict_lost(&cluster, &shared, &workloads, name, lost, how);
    Prediction::new(vec![loss], cluster.notes.clone(), None)
}

fn predict_lost(
    cluster: &cluster::Cluster<'_>,
    shared: &schedule::Shared,
    workloads: &workloads::Workloads,
    host: &str,
    lost: Vec<usize>,
    (mode, fault): (schedule::Mode, Fault),
) -> HostLoss {
    let mut loss = HostLoss::new(host, cluster, &lost);
    for why in &cluster.unknown {
        loss.reason(Outcome::Unknown, why.clone());
    }
    for why in &cluster.unplaced {
        loss.reason(Outcome::Lost, why.clone());
    }
    etcd::predict(cluster, &lost, fault, &mut loss);
    l2::predict(cluster, &lost, fault, &mut loss);
    let placement = schedule::reschedule(cluster, shared, &lost, mode);
    for preemption in &placement.preemptions {
        loss.reason(Outcome::Degraded, preemption.describe());
    }
    workloads::predict(cluster, workloads, &lost, &placement, &mut loss);
    capacity::predict(cluster, &lost, &placement, &mut loss);
    longhorn::predict(cluster, &lost, &mut loss);
    match fault {
        Fault::Power => attach::predict(cluster, &lost, &mut loss),
        Fault::Partition => partition::predict(cluster, &lost, &placement, &mut loss),
    }
    loss.pods = placement.moves;
    loss.settle();
    loss
}
