//! Gate 5: every node keeps the ADR's capacity margin free ("at least a third of each node's
//! CPU and memory"), so two nodes can carry the load while one host is down.
//!
//! Per node and resource: used = max(sum of the requests of its non-terminated pods, measured
//! usage from metrics.k8s.io), or with `capacity.basis: prometheus` max(requests, the
//! quantile of its load over a window, `state.node_load`, whose evidence names the window,
//! the statistic and each node's peak and its time), or the requests alone with
//! `capacity.basis: requests`;
//! free = allocatable − used must be at least (`capacity.margin` + `capacity.rebuild_margin`)
//! × allocatable: the margin carries a lost host's workloads, and the ADR's "then add margin
//! for Longhorn rebuild traffic" must still be free once they have moved. A pod's request
//! follows the scheduler: its pod-level request if set, else max(app containers + sidecars,
//! the largest init step), plus the pod overhead. Quantities are summed exactly.

use k8s_openapi::api::core::v1::Node;
use std::sync::Arc;

use crate::requests::pod_request;
use crate::state::Pod;
use serde::Deserialize;

use super::Context;
use super::support::{Hosts, name, ns_name, pod_is_terminated, pod_node};
use crate::config::CapacityBasis;
use crate::load::{Measured, NodeLoad};
use crate::quantity::Quantity;
use crate::state::{Collected, NodeMetrics};
use crate::verdict::Finding;

/// No parameters: margin and basis come from the environment's `capacity` section.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {}

const RESOURCES: [(&str, &str); 2] = [("cpu", "CPU"), ("memory", "memory")];

/// One resource of one node.
struct Cell {
    alloc: Quantity,
    requests: Quantity,
    usage: Option<Quantity>,
}

impl Cell {
    fn used(&self) -> Quantity {
        self.usage.map_or(self.requests, |u| u.max(self.requests))
    }
    fn free(&self) -> Quantity {
        self.alloc - self.used()
    }
    fn free_fraction(&self) -> f64 {
        if self.alloc.nanos() <= 0 {
            0.0
        } else {
            self.free().nanos() as f64 / self.alloc.nanos() as f64
        }
    }
    fn show(&self, q: Quantity, resource: &str) -> String {
        if resource == "cpu" {
            q.display_cpu()
        } else {
            q.display_bytes()
        }
    }
}

impl super::Check for Params {
    fn inputs(&self) -> &'static [crate::state::Input] {
        use crate::state::Input;
        &[
            Input::Nodes,
            Input::Pods,
            Input::NodeMetrics,
            Input::PodMetrics,
            Input::NodeLoad,
            Input::Proxmox,
        ]
    }

    fn evaluate(&self, ctx: Context<'_>) -> Finding {
        evaluate(ctx, self)
    }
}

pub fn evaluate(ctx: Context<'_>, _params: &Params) -> Finding {
    let (base, rebuild) = match margins(ctx) {
        Ok(margins) => margins,
        Err(finding) => return finding,
    };
    let margin = base + rebuild;
    let (nodes, pods) = match (ctx.state.nodes.get("nodes"), ctx.state.pods.get("pods")) {
        (Ok(n), Ok(p)) => (n, p),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let basis = ctx.env.capacity.basis;
    let (metrics, load) = match measured(ctx) {
        Ok(measured) => measured,
        Err(finding) => return finding,
    };
    let hosts = Hosts::new(ctx, nodes);
    let margin_text = if rebuild > 0.0 {
        format!(
            "{} ({} + {} rebuild margin)",
            percent_text(margin),
            percent_text(base),
            percent_text(rebuild)
        )
    } else {
        percent_text(margin)
    };

    let Table {
        rows,
        short,
        short_lines,
        unknown,
    } = table(nodes, pods, metrics, load, &hosts, margin, &margin_text);
    let mut table = format_table(&rows);
    match load {
        None if basis == CapacityBasis::Requests => {
            table.push("used = requests (capacity.basis: requests)".to_string())
        }
        None => table.push("used = max(requests, measured usage)".to_string()),
        Some(load) => table.extend(load_evidence(load, nodes)),
    }

    // The verdict is per node; a host a failed read hides is only a column, but it is said.
    let host_warning: Vec<String> = hosts
        .unread(nodes.iter().map(|n| name(&n.metadata)))
        .into_iter()
        .collect();
    if !short.is_empty() {
        return Finding::fail(format!(
            "{} of {} nodes keep less than {margin_text} of CPU or memory free: {}",
            short.len(),
            nodes.len(),
            short.join(", ")
        ))
        .with_evidence(short_lines.into_iter().chain(unknown).chain(table))
        .with_warnings(host_warning);
    }
    if let Some(first) = unknown.first() {
        return Finding::error(format!("cannot measure headroom of {first}"))
            .with_evidence(unknown.iter().skip(1).cloned().chain(table))
            .with_warnings(host_warning);
    }
    if nodes.is_empty() {
        return Finding::error("no nodes to measure");
    }
    Finding::pass(format!(
        "every node keeps at least {margin_text} of its CPU and memory free"
    ))
    .with_evidence(table)
    .with_warnings(host_warning)
}

/// The environment's margins (base and rebuild), each at least 0 and their sum below 1.
fn margins(ctx: Context<'_>) -> Result<(f64, f64), Finding> {
    let (base, rebuild) = (ctx.env.capacity.margin, ctx.env.capacity.rebuild_margin);
    if !(0.0..1.0).contains(&base) {
        return Err(Finding::error(format!(
            "capacity.margin is {base}; it must be at least 0 and below 1"
        )));
    }
    if !(0.0..1.0).contains(&rebuild) || base + rebuild >= 1.0 {
        return Err(Finding::error(format!(
            "capacity.rebuild_margin is {rebuild} with capacity.margin {base}; each must be at least 0 and their sum below 1"
        )));
    }
    Ok((base, rebuild))
}

/// The node metrics a basis measures by, and the load over a window they stand for.
type Measuring<'s> = (Option<&'s [Arc<NodeMetrics>]>, Option<&'s NodeLoad>);

/// What the basis measures by: nothing (requests), metrics-server's sample (usage), or the
/// load over a window with its statistic as node metrics (prometheus). An error finding
/// when the basis needs a measurement that could not be read.
fn measured<'s>(ctx: Context<'s>) -> Result<Measuring<'s>, Finding> {
    match ctx.env.capacity.basis {
        CapacityBasis::Requests => Ok((None, None)),
        CapacityBasis::Usage => match ctx
            .state
            .node_metrics
            .get("node metrics (metrics.k8s.io/v1beta1)")
        {
            Ok(m) => Ok((Some(m), None)),
            Err(e) => Err(Finding::error(format!(
                "{}. Install metrics-server (on Talos with kubelet rotate-server-certificates and kubelet-serving-cert-approver), or set `capacity: {{basis: requests}}` in environment {} to judge by requests alone",
                e.summary, ctx.env.name
            ))),
        },
        CapacityBasis::Prometheus => match (&ctx.state.node_load, &ctx.state.node_metrics) {
            (Collected::Present(l), Collected::Present(m)) => Ok((Some(m), Some(l))),
            (Collected::Absent(why) | Collected::NotApplicable(why), _)
            | (_, Collected::Absent(why) | Collected::NotApplicable(why)) => Err(Finding::error(
                format!("the load over the window (capacity.basis: prometheus) is unknown: {why}"),
            )),
        },
    }
}

/// The per-node table, the nodes short of the margin with a line each, and the nodes whose
/// cells cannot be computed.
struct Table<'n> {
    rows: Vec<[String; 8]>,
    short: Vec<&'n str>,
    short_lines: Vec<String>,
    unknown: Vec<String>,
}

fn table<'n>(
    nodes: &'n [Arc<Node>],
    pods: &[Arc<Pod>],
    metrics: Option<&[Arc<NodeMetrics>]>,
    load: Option<&NodeLoad>,
    hosts: &Hosts,
    margin: f64,
    margin_text: &str,
) -> Table<'n> {
    let mut rows = vec![[
        "node".to_string(),
        "host".into(),
        "cpu alloc".into(),
        "used".into(),
        "free".into(),
        "memory alloc".into(),
        "used".into(),
        "free".into(),
    ]];
    let mut short = Vec::new();
    let mut short_lines = Vec::new();
    let mut unknown = Vec::new();
    // Index pods and metrics by node once: a cluster has thousands of each.
    let pods_by_node = running_by_node(pods);
    let metrics_by_node: Option<std::collections::HashMap<&str, &NodeMetrics>> =
        metrics.map(|all| all.iter().map(|m| (name(&m.metadata), &**m)).collect());
    for node in nodes {
        let node_name = name(&node.metadata);
        let host = hosts.of(node_name).unwrap_or("?").to_string();
        let on_node = pods_by_node.get(node_name).map_or(&[][..], Vec::as_slice);
        let usage = metrics_by_node.as_ref().map(|by| {
            by.get(node_name).copied().ok_or_else(|| match load {
                Some(load) => load
                    .of(node_name)
                    .err()
                    .map_or(Unmeasured::NotDerived, Unmeasured::Load),
                None => Unmeasured::NotReported,
            })
        });
        match node_cells(node, on_node, usage) {
            Err(why) => {
                unknown.push(format!("{}: {why}", hosts.describe(node_name)));
                rows.push([
                    node_name.to_string(),
                    host,
                    "?".into(),
                    "?".into(),
                    "?".into(),
                    "?".into(),
                    "?".into(),
                    "?".into(),
                ]);
            }
            Ok(cells) => {
                let mut row = vec![node_name.to_string(), host];
                let mut node_short = false;
                for ((resource, label), cell) in RESOURCES.iter().zip(&cells) {
                    let fraction = cell.free_fraction();
                    let ok = cell.free().nanos() as f64 >= margin * cell.alloc.nanos() as f64;
                    row.push(cell.show(cell.alloc, resource));
                    row.push(cell.show(cell.used(), resource));
                    row.push(format!(
                        "{}%{}",
                        (fraction * 100.0).floor() as i64,
                        if ok { "" } else { " !" }
                    ));
                    if !ok {
                        node_short = true;
                        let usage = cell.usage.map_or(String::new(), |u| {
                            format!(", usage {}", cell.show(u, resource))
                        });
                        short_lines.push(format!(
                            "{}: {label} free {} of {} ({}%), below the {margin_text} margin (requests {}{usage})",
                            hosts.describe(node_name),
                            cell.show(cell.free(), resource),
                            cell.show(cell.alloc, resource),
                            (fraction * 100.0).floor() as i64,
                            cell.show(cell.requests, resource),
                        ));
                    }
                }
                if node_short {
                    short.push(node_name);
                }
                rows.push(row.try_into().unwrap_or_default());
            }
        }
    }
    Table {
        rows,
        short,
        short_lines,
        unknown,
    }
}

/// The pods that are not terminated, by the node they are bound to.
fn running_by_node(pods: &[Arc<Pod>]) -> std::collections::HashMap<&str, Vec<&Pod>> {
    let mut by_node: std::collections::HashMap<&str, Vec<&Pod>> = std::collections::HashMap::new();
    for pod in pods.iter().filter(|p| !pod_is_terminated(p)) {
        if let Some(node) = pod_node(pod) {
            by_node.entry(node).or_default().push(pod);
        }
    }
    by_node
}

/// Why a node's usage is unknown.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum Unmeasured {
    #[error("{0}")]
    Load(crate::load::LoadUnknown),
    #[error("Prometheus measured it, but no usage was derived (internal)")]
    NotDerived,
    #[error("no node metrics (metrics-server has not reported this node)")]
    NotReported,
}

/// Why one node's cells cannot be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum Uncounted {
    #[error("{0}")]
    Usage(Unmeasured),
    #[error("status.allocatable has no {0}")]
    NoAllocatable(&'static str),
    #[error("allocatable {resource}: {source}")]
    Allocatable {
        resource: &'static str,
        source: crate::quantity::QuantityError,
    },
    #[error("pod {pod}: {source}")]
    Request {
        pod: String,
        source: crate::requests::RequestError,
    },
    #[error("node metrics have no {0} usage")]
    NoUsage(&'static str),
    #[error("node metrics {resource}: {source}")]
    Metrics {
        resource: &'static str,
        source: crate::quantity::QuantityError,
    },
}

/// The CPU and memory cells of one node. `pods` are the node's non-terminated pods;
/// `metrics` is `None` on a requests basis, `Some(Err(why))` when the usage of this node is
/// unknown.
fn node_cells(
    node: &Node,
    pods: &[&Pod],
    metrics: Option<Result<&NodeMetrics, Unmeasured>>,
) -> Result<[Cell; 2], Uncounted> {
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let usage = match metrics {
        None => None,
        Some(found) => Some(found.map_err(Uncounted::Usage)?),
    };
    let cell = |resource: &'static str| -> Result<Cell, Uncounted> {
        let alloc = allocatable
            .and_then(|a| a.get(resource))
            .ok_or(Uncounted::NoAllocatable(resource))?;
        let alloc = Quantity::parse(&alloc.0)
            .map_err(|source| Uncounted::Allocatable { resource, source })?;
        let mut requests = Quantity::ZERO;
        for pod in pods {
            requests = requests
                + pod_request(pod, resource).map_err(|source| Uncounted::Request {
                    pod: ns_name(&pod.metadata),
                    source,
                })?;
        }
        let usage = match usage {
            None => None,
            Some(m) => {
                let raw = if resource == "cpu" {
                    &m.usage.cpu
                } else {
                    &m.usage.memory
                };
                let raw = raw.as_deref().ok_or(Uncounted::NoUsage(resource))?;
                Some(
                    Quantity::parse(raw)
                        .map_err(|source| Uncounted::Metrics { resource, source })?,
                )
            }
        };
        Ok(Cell {
            alloc,
            requests,
            usage,
        })
    };
    Ok([cell(RESOURCES[0].0)?, cell(RESOURCES[1].0)?])
}

/// What was measured over which window: the statistic, the window and its step, and per node
/// the statistic and the peak of CPU and memory with when it happened.
fn load_evidence(load: &NodeLoad, nodes: &[Arc<Node>]) -> Vec<String> {
    let w = &load.window;
    let mut lines = vec![format!(
        "used = max(requests, {} of the load over the window): {} from {} to {}, one value every {}s, at most {}% of steps missing (capacity.basis: prometheus)",
        load.statistic,
        load.url,
        crate::load::time(w.start_ms).format("%Y-%m-%d %H:%M"),
        crate::load::time(w.end_ms).format("%Y-%m-%d %H:%M UTC"),
        w.step_ms / 1000,
        load.max_gap_share * 100.0,
    )];
    let show = |m: &Measured, cpu: bool| {
        // Cores and bytes alike are units of a quantity.
        let q = |v: f64| {
            let q = Quantity::from_nanos((v * 1e9) as i128);
            if cpu {
                format!("{} cores", q.display_cpu())
            } else {
                q.display_bytes()
            }
        };
        format!(
            "{} {} (peak {} at {}; {} of {} steps)",
            load.statistic,
            q(m.value),
            q(m.peak),
            m.peak_at.format("%Y-%m-%d %H:%M UTC"),
            m.samples,
            m.steps
        )
    };
    for node in nodes {
        let node_name = name(&node.metadata);
        lines.push(match load.of(node_name) {
            Ok((cpu, memory)) => format!(
                "{node_name}: cpu {}, memory {}",
                show(cpu, true),
                show(memory, false)
            ),
            Err(why) => format!("{node_name}: load unknown: {why}"),
        });
    }
    lines
}

/// `33%` for 1/3, `33.3%` for 0.333.
fn percent_text(fraction: f64) -> String {
    let text = format!("{:.1}", fraction * 100.0);
    format!("{}%", text.strip_suffix(".0").unwrap_or(&text))
}

fn format_table(rows: &[[String; 8]]) -> Vec<String> {
    let mut widths = [0usize; 8];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    rows.iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            cells.join("  ").trim_end().to_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::state::{Collected, State};
    use crate::verdict::Verdict;

    /// Three 4-core, 8Gi nodes, each with a 1-core/2Gi pod and 1 core/3Gi usage.
    fn good() -> StateBuilder {
        state()
            .nodes(target_nodes())
            .pods((1..=3).map(|i| {
                pod("apps", &format!("p{i}"))
                    .on(&format!("cp-{i}"))
                    .requests("1", "2Gi")
                    .build()
            }))
            .node_metrics((1..=3).map(|i| node_metrics(&format!("cp-{i}"), "1000000000n", "3Gi")))
    }

    fn check(state: &State) -> Finding {
        run(&env(), state, &Params {}, evaluate)
    }

    fn requests_env() -> crate::config::Environment {
        let mut env = env();
        env.capacity.basis = CapacityBasis::Requests;
        env
    }

    /// A day at five minutes: `quiet` all the time, `peak` for the two hours after 01:00.
    fn day(quiet: f64, peak: f64) -> Vec<(i64, f64)> {
        (0..288)
            .map(|k| {
                let v = if (12..36).contains(&k) { peak } else { quiet };
                (k * 300_000, v)
            })
            .collect()
    }

    fn prometheus_state(
        statistic: crate::config::LoadStatistic,
        series: &[(&str, Vec<(i64, f64)>)],
    ) -> (crate::config::Environment, State) {
        use crate::load::{NodeLoad, NodeMeasure, Window, measure};
        let mut env = env();
        env.capacity.basis = CapacityBasis::Prometheus;
        let window = Window {
            start_ms: 0,
            end_ms: 287 * 300_000,
            step_ms: 300_000,
        };
        let gib = 1024.0 * 1024.0 * 1024.0;
        let load = NodeLoad {
            url: "http://127.0.0.1:9090".into(),
            window,
            statistic,
            max_gap_share: 0.05,
            node_label: "node".into(),
            nodes: series
                .iter()
                .map(|(node, cores)| {
                    let bytes: Vec<(i64, f64)> = cores.iter().map(|&(t, _)| (t, gib)).collect();
                    (
                        node.to_string(),
                        NodeMeasure {
                            cpu: measure(&window, cores, statistic),
                            memory: measure(&window, &bytes, statistic),
                        },
                    )
                })
                .collect(),
        };
        let metrics = crate::state::NodeMetrics::of_load(&load);
        let state = state()
            .nodes(target_nodes())
            .with(|s| {
                s.node_metrics = listed(metrics);
                s.node_load = Collected::Present(load);
            })
            .build();
        (env, state)
    }

    #[test]
    fn on_prometheus_a_nightly_peak_fails_the_node_a_quiet_moment_would_pass() {
        use crate::config::LoadStatistic;
        // 4-core nodes: 0.4 cores is 90 % free, 3.6 cores 10 %.
        let series = [
            ("cp-1", day(0.4, 0.4)),
            ("cp-2", day(0.4, 3.6)),
            ("cp-3", day(0.4, 0.4)),
        ];
        for statistic in [LoadStatistic::Quantile(0.95), LoadStatistic::Max] {
            let (env, state) = prometheus_state(statistic, &series);
            let f = run(&env, &state, &Params {}, evaluate);
            assert_eq!(f.verdict, Verdict::Fail, "{}", text(&f));
            assert!(
                f.summary.contains("1 of 3 nodes keep less than"),
                "{}",
                f.summary
            );
            let all = text(&f);
            assert!(all.contains(&format!("cp-2: cpu {statistic} 3.6 cores (peak 3.6 cores at 1970-01-01 01:00 UTC; 288 of 288 steps)")), "{all}");
            assert!(all.contains("cp-1: cpu"), "{all}");
            assert!(
                all.contains(&format!(
                    "used = max(requests, {statistic} of the load over the window)"
                )),
                "{all}"
            );
        }
        // The median, like one sample at a quiet moment, passes the same node.
        let (env, state) = prometheus_state(LoadStatistic::Quantile(0.5), &series);
        let f = run(&env, &state, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
    }

    #[test]
    fn on_prometheus_a_node_with_too_many_gaps_is_an_error_naming_the_gap_never_a_pass() {
        let mut gappy = day(0.4, 0.4);
        gappy.drain(100..130);
        let (env, state) = prometheus_state(
            crate::config::LoadStatistic::Quantile(0.95),
            &[
                ("cp-1", day(0.4, 0.4)),
                ("cp-2", gappy),
                ("cp-3", day(0.4, 0.4)),
            ],
        );
        let f = run(&env, &state, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
        assert!(f.summary.contains("cp-2"), "{}", f.summary);
        assert!(
            f.summary
                .contains("capacity.prometheus.queries.cpu lacks 30 of 288 steps"),
            "{}",
            f.summary
        );
        assert!(
            f.summary.contains("capacity.prometheus.max_gap_share 0.05"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn on_prometheus_an_unread_load_is_an_error_with_the_collectors_reason() {
        let mut env = env();
        env.capacity.basis = CapacityBasis::Prometheus;
        let state = good()
            .with(|s| s.node_load = Collected::Absent("capacity.prometheus.url refused".into()))
            .build();
        let f = run(&env, &state, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
        assert!(
            f.summary.contains("capacity.prometheus.url refused"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn enough_headroom_passes_with_a_table() {
        let f = check(&good().build());
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert_eq!(
            f.summary,
            "every node keeps at least 33.3% of its CPU and memory free"
        );
        assert!(
            f.evidence[0]
                .starts_with("node  host  cpu alloc  used  free  memory alloc  used  free"),
            "{}",
            f.evidence[0]
        );
        assert_eq!(
            f.evidence[1],
            "cp-1  pve1  4          1     75%   8Gi           3Gi   62%"
        );
        assert_eq!(
            f.evidence.last().unwrap(),
            "used = max(requests, measured usage)"
        );
    }

    #[test]
    fn an_unread_vm_config_leaves_the_per_node_verdict_and_warns_naming_the_vm() {
        // Headroom is each node's own allocatable against its own use: the host is only a
        // column of the table, so an unknown host changes no verdict but is said.
        let s = good()
            .with(|s| {
                s.proxmox = proxmox(
                    &[("cp-1", "pve1"), ("cp-2", "pve2")],
                    &["VM 103 cp-3 on pve3: timed out"],
                )
            })
            .build();
        let f = check(&s);
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert!(
            f.warnings
                .iter()
                .any(|w| w.contains("the host of node cp-3 is unknown")
                    && w.contains("VM 103 cp-3 on pve3")),
            "{:?}",
            f.warnings
        );
    }

    #[test]
    fn measured_usage_above_the_margin_fails_naming_node_and_host() {
        let s = good()
            .with(|s| s.node_metrics = listed(vec![]))
            .node_metrics([
                node_metrics("cp-1", "3", "1Gi"),
                node_metrics("cp-2", "1", "1Gi"),
                node_metrics("cp-3", "1", "1Gi"),
            ])
            .build();
        let f = check(&s);
        assert_eq!(f.verdict, Verdict::Fail, "{}", text(&f));
        assert_eq!(
            f.summary,
            "1 of 3 nodes keep less than 33.3% of CPU or memory free: cp-1"
        );
        assert_eq!(
            f.evidence[0],
            "node cp-1 (host pve1): CPU free 1 of 4 (25%), below the 33.3% margin (requests 1, usage 3)"
        );
        assert!(text(&f).contains("25% !"));
    }

    #[test]
    fn requests_above_the_margin_fail_even_when_usage_is_low() {
        let s = good()
            .pods([pod("apps", "big")
                .on("cp-2")
                .requests("100m", "4Gi")
                .build()])
            .build();
        let f = check(&s);
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(
            f.evidence[0].starts_with("node cp-2 (host pve2): memory free 2Gi of 8Gi (25%)"),
            "{}",
            f.evidence[0]
        );
    }

    #[test]
    fn the_margin_boundary_is_exact_and_comes_from_the_environment() {
        let mut env = env();
        env.capacity.margin = 0.25;
        let s = good()
            .with(|s| s.node_metrics = Collected::Present(vec![]))
            .node_metrics((1..=3).map(|i| node_metrics(&format!("cp-{i}"), "3", "6Gi")))
            .build();
        assert_eq!(run(&env, &s, &Params {}, evaluate).verdict, Verdict::Pass);
        let s = good()
            .with(|s| s.node_metrics = Collected::Present(vec![]))
            .node_metrics((1..=3).map(|i| node_metrics(&format!("cp-{i}"), "3000000001n", "6Gi")))
            .build();
        assert_eq!(run(&env, &s, &Params {}, evaluate).verdict, Verdict::Fail);
        env.capacity.margin = 1.5;
        let f = run(&env, &s, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Error);
        assert!(f.summary.contains("capacity.margin is 1.5"));
    }

    #[test]
    fn the_rebuild_margin_is_kept_free_on_top_of_the_margin() {
        let mut env = env();
        env.capacity.margin = 0.25;
        // 3 of 4 CPUs used: 25 % free passes the margin alone, not with 10 % for rebuilds.
        let s = good()
            .with(|s| s.node_metrics = Collected::Present(vec![]))
            .node_metrics((1..=3).map(|i| node_metrics(&format!("cp-{i}"), "3", "1Gi")))
            .build();
        assert_eq!(run(&env, &s, &Params {}, evaluate).verdict, Verdict::Pass);
        env.capacity.rebuild_margin = 0.1;
        let f = run(&env, &s, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Fail, "{}", text(&f));
        assert_eq!(
            f.evidence[0],
            "node cp-1 (host pve1): CPU free 1 of 4 (25%), below the 35% (25% + 10% rebuild margin) margin (requests 1, usage 3)"
        );
        env.capacity.rebuild_margin = 0.8;
        let f = run(&env, &s, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Error);
        assert!(
            f.summary.contains("capacity.rebuild_margin is 0.8"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn terminated_pods_and_other_nodes_do_not_count() {
        let s = good()
            .pods([
                pod("apps", "done")
                    .on("cp-1")
                    .requests("4", "8Gi")
                    .phase("Succeeded")
                    .build(),
                pod("apps", "pending").requests("4", "8Gi").build(),
            ])
            .build();
        assert_eq!(check(&s).verdict, Verdict::Pass);
    }

    #[test]
    fn pod_requests_follow_the_scheduler() {
        let p = pod("a", "p")
            .requests("100m", "100Mi")
            .container("200m", "100Mi")
            .build();
        assert_eq!(
            pod_request(&p, "cpu").unwrap(),
            Quantity::parse("300m").unwrap()
        );
        // A large init container dominates.
        let p = pod("a", "p")
            .requests("100m", "1Mi")
            .init_container("1", "1Mi", false)
            .build();
        assert_eq!(
            pod_request(&p, "cpu").unwrap(),
            Quantity::parse("1").unwrap()
        );
        // A sidecar adds to the app containers and to later init steps.
        let p = pod("a", "p")
            .requests("100m", "1Mi")
            .init_container("50m", "1Mi", true)
            .init_container("120m", "1Mi", false)
            .overhead("10m", "0")
            .build();
        assert_eq!(
            pod_request(&p, "cpu").unwrap(),
            Quantity::parse("180m").unwrap()
        );
        let bad = pod("a", "p").requests("lots", "1Mi").build();
        assert!(
            pod_request(&bad, "cpu")
                .unwrap_err()
                .to_string()
                .contains("container main: cpu request: invalid quantity \"lots\"")
        );
    }

    #[test]
    fn requests_basis_needs_no_metrics() {
        let s = good()
            .with(|s| s.node_metrics = absent("the server could not find the requested resource"))
            .build();
        let f = run(&requests_env(), &s, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert_eq!(
            f.evidence.last().unwrap(),
            "used = requests (capacity.basis: requests)"
        );
    }

    #[test]
    fn metrics_absent_is_an_error_with_the_fix() {
        let s = good()
            .with(|s| s.node_metrics = absent("the server could not find the requested resource"))
            .build();
        let f = check(&s);
        assert_eq!(f.verdict, Verdict::Error);
        assert!(f.summary.starts_with(
            "node metrics (metrics.k8s.io/v1beta1) unavailable: the server could not find"
        ));
        assert!(f.summary.contains("Install metrics-server"));
        assert!(
            f.summary
                .contains("set `capacity: {basis: requests}` in environment staging")
        );
    }

    #[test]
    fn a_node_without_metrics_or_allocatable_is_an_error_unless_another_fails() {
        let s = good()
            .with(|s| {
                s.node_metrics = listed(vec![
                    node_metrics("cp-1", "1", "1Gi"),
                    node_metrics("cp-2", "1", "1Gi"),
                ])
            })
            .build();
        let f = check(&s);
        assert_eq!(f.verdict, Verdict::Error);
        assert_eq!(
            f.summary,
            "cannot measure headroom of node cp-3 (host pve3): no node metrics (metrics-server has not reported this node)"
        );
        let s = good()
            .with(|s| s.nodes = Collected::Present(vec![]))
            .nodes([
                node("cp-1").host("pve1").no_allocatable().build(),
                node("cp-2").host("pve2").allocatable("1", "1Gi").build(),
            ])
            .build();
        let f = check(&s);
        assert_eq!(f.verdict, Verdict::Fail, "{}", text(&f));
        assert!(text(&f).contains("node cp-1 (host pve1): status.allocatable has no cpu"));
        let s = good()
            .pods([pod("apps", "bad").on("cp-1").requests("1x", "1").build()])
            .build();
        let f = check(&s);
        assert_eq!(f.verdict, Verdict::Error);
        assert!(
            f.summary
                .contains("pod apps/bad: container main: cpu request: invalid quantity \"1x\""),
            "{}",
            f.summary
        );
    }

    #[test]
    fn an_empty_node_list_is_an_error() {
        let f = check(
            &good()
                .with(|s| s.nodes = Collected::Present(vec![]))
                .build(),
        );
        assert_eq!(f.verdict, Verdict::Error);
        assert_eq!(f.summary, "no nodes to measure");
    }

    #[test]
    fn absent_nodes_or_pods_are_errors() {
        assert_eq!(
            check(&good().with(|s| s.nodes = absent("x")).build()).verdict,
            Verdict::Error
        );
        assert_eq!(
            check(&good().with(|s| s.pods = absent("x")).build()).verdict,
            Verdict::Error
        );
    }
}
