//! Capacity after a host loss: for each surviving node that receives moved pods, requests and
//! measured usage against allocatable, and against allocatable less the margin the
//! environment keeps for Longhorn rebuild traffic (`capacity.rebuild_margin`).
//!
//! Requests never exceed allocatable (the scheduler placed the pods), but usage can: a moved
//! pod brings its measured usage (its requests when it has no metrics). Memory over
//! allocatable means evictions and OOM kills, so the loss is not survivable; CPU over
//! allocatable, or either eating into the rebuild margin, degrades it.
//!
//! The ADR asks for the margin *measured*. With `capacity.basis: usage`, a receiving node
//! whose measured usage is unknown (the metrics API is not served, or metrics-server has not
//! reported the node) makes the outcome `unknown`, not a guess from requests: requests can
//! still prove a loss fatal or degraded, never that it is fine. With `capacity.basis:
//! prometheus` a node's usage is its quantile over the window, and a node whose load over the
//! window is unknown (no series, too many gaps) is unknown the same way, with the reason.

use std::collections::HashMap;

use super::cluster::{Cluster, Res};
pub use super::findings::NodeCapacity;
use super::outcome::{HostLoss, Outcome};
use super::schedule::Placement;
use crate::state::Collected;

pub fn predict(cluster: &Cluster<'_>, _lost: &[usize], placement: &Placement, loss: &mut HostLoss) {
    let margin = cluster.env.capacity.rebuild_margin;
    if !(0.0..1.0).contains(&margin) {
        loss.reason(
            Outcome::Unknown,
            format!("capacity.rebuild_margin is {margin}; it must be at least 0 and below 1"),
        );
        return;
    }
    let mut receiving: Vec<usize> = placement.added.keys().copied().collect();
    receiving.sort_unstable();
    if cluster.usage_basis && !receiving.is_empty() {
        unmeasured_load(cluster, &receiving, loss);
    }
    // A moved pod without metrics is assumed to use what it requests: their requests per
    // receiving node, summed in one pass over the placements.
    let mut unmeasured: HashMap<usize, Res> = HashMap::new();
    for &(i, n) in placement
        .placed
        .iter()
        .filter(|&&(i, _)| cluster.pods[i].usage.is_none())
    {
        let sum = unmeasured.entry(n).or_default();
        *sum = sum.plus(cluster.pods[i].requests);
    }
    for n in receiving {
        let node = &cluster.nodes[n];
        let requests = node.requested.plus(placement.added[&n]);
        let usage = node.usage.filter(|_| cluster.usage_basis).map(|u| {
            let measured = placement.added_usage.get(&n).copied().unwrap_or_default();
            u.plus(measured)
                .plus(unmeasured.get(&n).copied().unwrap_or_default())
        });
        let within = judge(cluster, n, requests, usage, margin, loss);
        loss.capacity.push(NodeCapacity {
            node: node.name.to_string(),
            host: node.host.clone().unwrap_or_default(),
            cpu_allocatable: node.allocatable.cpu_m,
            cpu_requests: requests.cpu_m,
            cpu_usage: usage.map(|u| u.cpu_m),
            memory_allocatable: node.allocatable.mem,
            memory_requests: requests.mem,
            memory_usage: usage.map(|u| u.mem),
            within_rebuild_margin: within,
        });
    }
}

/// On a usage basis, the receiving nodes whose load is not known make the prediction
/// unknown: said per node when the window's statistic names why, else once.
fn unmeasured_load(cluster: &Cluster<'_>, receiving: &[usize], loss: &mut HostLoss) {
    if let Some(why) = &cluster.usage_unknown {
        loss.reason(
            Outcome::Unknown,
            format!(
                "the measured load of the {} node(s) that take the moved pods is unknown: {why}",
                receiving.len()
            ),
        );
        return;
    }
    let unmeasured: Vec<&str> = receiving
        .iter()
        .filter(|&&n| cluster.nodes[n].usage.is_none())
        .map(|&n| cluster.nodes[n].name)
        .collect();
    if let (false, Collected::Present(load)) = (unmeasured.is_empty(), &cluster.state.node_load) {
        for node in &unmeasured {
            let why = load
                .of(node)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            loss.reason(
                Outcome::Unknown,
                format!("the load of {node} (taking moved pods) over the window is unknown: {why}"),
            );
        }
    } else if !unmeasured.is_empty() {
        loss.reason(
            Outcome::Unknown,
            format!(
                "the measured load of {} (taking moved pods) is unknown: metrics-server has not reported {}",
                unmeasured.join(", "),
                if unmeasured.len() == 1 { "it" } else { "them" }
            ),
        );
    }
}

/// One receiving node after the move: lost when its memory is over-committed, degraded when
/// its CPU is or when it keeps less than the rebuild margin free. Whether it stays within the
/// margin.
fn judge(
    cluster: &Cluster<'_>,
    n: usize,
    requests: Res,
    usage: Option<Res>,
    margin: f64,
    loss: &mut HostLoss,
) -> bool {
    let used = |req: i64, use_: Option<i64>| use_.map_or(req, |u| u.max(req));
    let cpu_used = used(requests.cpu_m, usage.map(|u| u.cpu_m));
    let mem_used = used(requests.mem, usage.map(|u| u.mem));
    let alloc = cluster.nodes[n].allocatable;
    let limit = |a: i64| (a as f64 * (1.0 - margin)) as i64;
    let within = cpu_used <= limit(alloc.cpu_m) && mem_used <= limit(alloc.mem);
    let pct = |u: i64, a: i64| if a > 0 { u * 100 / a } else { 0 };
    if mem_used > alloc.mem {
        loss.reason(
            Outcome::Lost,
            format!(
                "{} would use {}% of its memory ({} of {}): pods are evicted or OOM-killed",
                cluster.describe(n),
                pct(mem_used, alloc.mem),
                Res {
                    mem: mem_used,
                    ..Res::default()
                }
                .mem_text(),
                alloc.mem_text()
            ),
        );
    } else if cpu_used > alloc.cpu_m {
        loss.reason(
            Outcome::Degraded,
            format!(
                "{} would use {}% of its CPU ({} of {}): everything on it, etcd included, is throttled",
                cluster.describe(n),
                pct(cpu_used, alloc.cpu_m),
                Res { cpu_m: cpu_used, ..Res::default() }.cpu_text(),
                alloc.cpu_text()
            ),
        );
    } else if !within {
        loss.reason(
            Outcome::Degraded,
            format!(
                "{} keeps less than the {}% rebuild margin free (CPU {}%, memory {}% used): Longhorn rebuilds compete with workloads",
                cluster.describe(n),
                (margin * 100.0).round(),
                pct(cpu_used, alloc.cpu_m),
                pct(mem_used, alloc.mem)
            ),
        );
    }
    within
}
