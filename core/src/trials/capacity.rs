//! Gate 5's capacity on the repository: the requests of everything the repository deploys,
//! against the declared VM sizes with the margin free (a third, by default), so that the
//! nodes left after a host loss can take the pods of the lost one.
//!
//! What is counted is a lower bound: too much already is a `fail`. Enough is a `pass` only
//! when every workload was counted; one whose requests the repository does not say (a chart
//! gates does not know, a values key left to the chart's default) is named, and the trial is
//! a `skip`. A container that requests nothing is counted as 0, as the scheduler counts it,
//! and named.

use crate::declared::environments::DeclaredNode;
use crate::declared::manifests::HelmRelease;
use crate::declared::talos::Patches;
use crate::declared::yaml::Node;
use crate::verdict::Finding;

use super::chart_requests::{NodeSize, NotCounted, chart_requests};
use super::l2::node_labels;
use super::workload_requests::{Amount, Tally, show_bytes, show_cpu, tally_manifests};
use super::{RepoContext, declared_nodes, manifests, reads, talos_patches};

pub fn capacity_headroom(ctx: &RepoContext<'_>) -> Finding {
    let nodes = match declared_nodes(ctx.env) {
        Ok(nodes) => nodes,
        Err(finding) => return finding,
    };
    let m = match manifests(ctx.env, reads::WORKLOADS) {
        Ok(m) => m,
        Err(finding) => return finding,
    };
    let patches = match talos_patches(ctx.env) {
        Ok(p) => p,
        Err(finding) => return finding,
    };
    let (size, sizes) = match declared_sizes(&nodes, patches) {
        Ok(sized) => sized,
        Err(finding) => return finding,
    };
    let labels: Vec<_> = sizes.iter().map(|n| n.labels.clone()).collect();
    let mut tally = match tally_manifests(&m.objects, &labels) {
        Ok(tally) => tally,
        Err(malformed) => return Finding::error(malformed.0),
    };
    let manifests_counted = tally.counted.len();
    let charted = match count_charts(&m.helm_releases, &sizes, &mut tally) {
        Ok(charted) => charted,
        Err(finding) => return finding,
    };
    let margin = ctx.settings.capacity.margin;
    let free = 1.0 - margin;
    let fits = |req: i128, cap: i128| (req as f64) <= free * cap as f64;
    let total = tally.total;
    let mut evidence = vec![
        format!(
            "declared: {} nodes, {} CPU and {} memory (VM sizes, before the kubelet's reservations)",
            nodes.len(),
            show_cpu(size.cpu),
            show_bytes(size.memory)
        ),
        format!(
            "requested by {} workload manifests and {charted} HelmRelease(s): {} CPU and {} memory; with {:.0}% kept free, {} CPU and {} memory may be requested",
            manifests_counted,
            show_cpu(total.cpu),
            show_bytes(total.memory),
            margin * 100.0,
            show_cpu((free * size.cpu as f64) as i128),
            show_bytes((free * size.memory as f64) as i128)
        ),
    ];
    let unknown = tally.unknown.len();
    evidence.extend(tally.unknown);
    evidence.extend(tally.counted);
    evidence.extend(tally.zero);
    evidence.extend(tally.transient);
    match (fits(total.cpu, size.cpu) && fits(total.memory, size.memory), unknown) {
        (false, _) => Finding::fail(
            "the declared requests do not leave the margin free on the declared nodes",
        )
        .with_evidence(evidence),
        (true, 0) => {
            Finding::pass("the declared requests fit the declared nodes with the margin free")
                .with_evidence(evidence)
        }
        (true, n) => Finding::skip(format!(
            "the requests counted fit with the margin free, but {n} workload(s) request what the repository does not say (unknown, not counted); the live capacity trial measures them"
        ))
        .with_evidence(evidence),
    }
}

/// The declared nodes' VM sizes, each and in all; an error finding for a VM that declares
/// no cores or memory.
fn declared_sizes(
    nodes: &[DeclaredNode<'_>],
    patches: Option<&Patches>,
) -> Result<(Amount, Vec<NodeSize>), Finding> {
    let mut size = Amount::default();
    let mut sizes = Vec::new();
    for node in nodes {
        let (Some(cores), Some(mem)) = (
            node.vm.cores.as_ref().and_then(Node::as_i64),
            node.vm.memory_mib.as_ref().and_then(Node::as_i64),
        ) else {
            return Err(Finding::error(format!(
                "{}: VM {} declares no cores or memory",
                node.vm.name.site,
                node.name()
            )));
        };
        sizes.push(NodeSize {
            cpu: i128::from(cores) * 1000,
            labels: node_labels(node, patches).labels,
        });
        size.add(Amount {
            cpu: i128::from(cores) * 1000,
            memory: i128::from(mem) * 1024 * 1024,
        });
    }
    Ok((size, sizes))
}

/// The HelmReleases' requests added to `tally`, each chart's or said unknown; how many
/// charts were counted, or an error finding for a release whose values are malformed.
fn count_charts(
    releases: &[HelmRelease],
    sizes: &[NodeSize],
    tally: &mut Tally,
) -> Result<usize, Finding> {
    let mut charted = 0;
    for hr in releases {
        let release = format!(
            "{}: HelmRelease {}/{} ({})",
            hr.site,
            hr.namespace,
            hr.name,
            hr.chart.as_deref().unwrap_or("chart not named")
        );
        match chart_requests(hr, sizes) {
            Ok(requests) => {
                charted += 1;
                tally.total.add(requests.amount);
                tally.counted.extend(
                    requests
                        .evidence
                        .into_iter()
                        .map(|line| format!("{release}: {line}")),
                );
            }
            Err(NotCounted::Unknown(why)) => tally
                .unknown
                .push(format!("{release}: requests unknown, not counted: {why}")),
            Err(NotCounted::Malformed(why)) => {
                return Err(Finding::error(format!("{release}: {why}")));
            }
        }
    }
    Ok(charted)
}
