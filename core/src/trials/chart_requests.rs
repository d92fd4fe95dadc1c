//! What a HelmRelease requests, for the charts whose workloads gates knows. A chart's own
//! defaults are not in the repository, so a release is counted only when its values set the
//! request and the copies of every workload the chart runs; a workload left to the chart's
//! defaults makes the release unknown, named with the key that would say it.
//!
//! The table says, per chart (Traefik, Longhorn, cert-manager, External Secrets), which
//! workloads it runs, which values keys set their requests and copies, and which key turns
//! an optional one off. Longhorn's manager also creates workloads at run time: an
//! instance manager per node requesting `defaultSettings.guaranteedInstanceManagerCPU`
//! percent of the node's CPU, and CSI sidecars, CSI plugin and engine image pods it creates
//! without requests.

use crate::declared::manifests::HelmRelease;
use crate::declared::yaml::Node;

use crate::selector::Selector;

use super::at;
use super::workload_requests::{Amount, NodeLabels, parse_quantity, show_bytes, show_cpu};

/// How many pods of a workload run.
enum Copies {
    /// One per declared node the values key's node selector admits (all, when unset).
    PerNode(&'static [&'static str]),
    /// Exactly one, whatever the values say.
    One,
    /// The values key that sets the count; unset, the chart's default decides (unknown).
    Values(&'static [&'static str]),
    /// Traefik: `deployment.kind` DaemonSet (one per node) or `deployment.replicas`.
    TraefikKind,
}

/// What one pod of a workload requests.
enum Requests {
    /// The values key of its `resources` (`requests`, else `limits`, below it).
    Values(&'static [&'static str]),
    /// A percentage of the CPU of each node the workload's `PerNode` selector admits, set
    /// by this values key.
    NodeCpuPercent(&'static [&'static str]),
    /// Created without requests; the words say by whom.
    Nothing(&'static str),
}

struct Workload {
    name: &'static str,
    /// The values key that turns the workload off when `false` (on when unset).
    enabled: Option<&'static [&'static str]>,
    copies: Copies,
    requests: Requests,
}

/// A workload that is always there.
const fn always(name: &'static str, copies: Copies, requests: Requests) -> Workload {
    Workload {
        name,
        enabled: None,
        copies,
        requests,
    }
}

/// A workload the values may turn off (on unless the key says `false`).
const fn unless_off(
    name: &'static str,
    enabled: &'static [&'static str],
    copies: Copies,
    requests: Requests,
) -> Workload {
    Workload {
        name,
        enabled: Some(enabled),
        copies,
        requests,
    }
}

const TRAEFIK: &[Workload] = &[always(
    "traefik",
    Copies::TraefikKind,
    Requests::Values(&["resources"]),
)];

const LONGHORN_RUNTIME: &str = "longhorn-manager creates it without requests";

/// Longhorn's manager, and the instance manager it starts beside itself, run where this
/// selects.
const LONGHORN_NODES: &[&str] = &["longhornManager", "nodeSelector"];

/// Where the runtime components run (they request nothing, so it does not matter which).
const LONGHORN_SYSTEM: &[&str] = &["defaultSettings", "systemManagedComponentsNodeSelector"];

const LONGHORN: &[Workload] = &[
    always(
        "longhorn-manager",
        Copies::PerNode(LONGHORN_NODES),
        Requests::Values(&["longhornManager", "resources"]),
    ),
    always(
        "longhorn-driver-deployer",
        Copies::One,
        Requests::Values(&["longhornDriver", "resources"]),
    ),
    always(
        "longhorn-ui",
        Copies::Values(&["longhornUI", "replicas"]),
        Requests::Values(&["longhornUI", "resources"]),
    ),
    always(
        "instance-manager",
        Copies::PerNode(LONGHORN_NODES),
        Requests::NodeCpuPercent(&["defaultSettings", "guaranteedInstanceManagerCPU"]),
    ),
    always(
        "csi-attacher",
        Copies::One,
        Requests::Nothing(LONGHORN_RUNTIME),
    ),
    always(
        "csi-provisioner",
        Copies::One,
        Requests::Nothing(LONGHORN_RUNTIME),
    ),
    always(
        "csi-resizer",
        Copies::One,
        Requests::Nothing(LONGHORN_RUNTIME),
    ),
    always(
        "csi-snapshotter",
        Copies::One,
        Requests::Nothing(LONGHORN_RUNTIME),
    ),
    always(
        "longhorn-csi-plugin",
        Copies::PerNode(LONGHORN_SYSTEM),
        Requests::Nothing(LONGHORN_RUNTIME),
    ),
    always(
        "engine-image",
        Copies::PerNode(LONGHORN_SYSTEM),
        Requests::Nothing(LONGHORN_RUNTIME),
    ),
];

/// Jetstack's chart: the controller, the webhook and the CA injector (its startupapicheck
/// Job runs to completion and is not counted).
const CERT_MANAGER: &[Workload] = &[
    always(
        "cert-manager",
        Copies::Values(&["replicaCount"]),
        Requests::Values(&["resources"]),
    ),
    always(
        "cert-manager-webhook",
        Copies::Values(&["webhook", "replicaCount"]),
        Requests::Values(&["webhook", "resources"]),
    ),
    unless_off(
        "cert-manager-cainjector",
        &["cainjector", "enabled"],
        Copies::Values(&["cainjector", "replicaCount"]),
        Requests::Values(&["cainjector", "resources"]),
    ),
];

/// The External Secrets Operator's chart: the controller, its webhook and cert controller.
const EXTERNAL_SECRETS: &[Workload] = &[
    always(
        "external-secrets",
        Copies::Values(&["replicaCount"]),
        Requests::Values(&["resources"]),
    ),
    unless_off(
        "external-secrets-webhook",
        &["webhook", "create"],
        Copies::Values(&["webhook", "replicaCount"]),
        Requests::Values(&["webhook", "resources"]),
    ),
    unless_off(
        "external-secrets-cert-controller",
        &["certController", "create"],
        Copies::Values(&["certController", "replicaCount"]),
        Requests::Values(&["certController", "resources"]),
    ),
];

fn workloads(chart: &str) -> Option<&'static [Workload]> {
    match chart {
        "traefik" => Some(TRAEFIK),
        "longhorn" => Some(LONGHORN),
        "cert-manager" => Some(CERT_MANAGER),
        "external-secrets" => Some(EXTERNAL_SECRETS),
        _ => None,
    }
}

/// What a HelmRelease requests when its values say it all.
pub struct ChartRequests {
    pub amount: Amount,
    /// One line per workload, with the lines of the values that set it.
    pub evidence: Vec<String>,
}

/// Why a release is not counted: its requests are not known (the chart's defaults decide),
/// or a value it sets is malformed (an error at its file and line).
#[derive(Debug, Clone, PartialEq)]
pub enum NotCounted {
    Unknown(String),
    Malformed(String),
}

impl From<String> for NotCounted {
    fn from(why: String) -> NotCounted {
        NotCounted::Unknown(why)
    }
}

/// A declared node as the chart table sees it: its CPU (millicores) and its labels.
pub struct NodeSize {
    pub cpu: i128,
    pub labels: NodeLabels,
}

/// The declared nodes a values node selector admits, and the words that say so.
fn admitted<'a>(
    values: &Node,
    path: &[&str],
    nodes: &'a [NodeSize],
) -> Result<(Vec<&'a NodeSize>, String), NotCounted> {
    let Some(selector) = values.get(path) else {
        return Ok((
            nodes.iter().collect(),
            format!("one per declared node, {}", nodes.len()),
        ));
    };
    let key = path.join(".");
    // A map of labels, or Longhorn's setting form `key:value;key:value`.
    let labels = match (selector.string_map(), selector.as_str()) {
        (Some(map), _) => map,
        (None, Some(text)) => text
            .split(';')
            .filter(|pair| !pair.trim().is_empty())
            .map(|pair| {
                pair.split_once(':')
                    .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                    .ok_or_else(|| {
                        NotCounted::Malformed(format!(
                            "{}: {key}: {} is not key:value pairs",
                            selector.site,
                            selector.show()
                        ))
                    })
            })
            .collect::<Result<_, _>>()?,
        (None, None) => {
            return Err(NotCounted::Malformed(format!(
                "{}: {key}: {} is not a map of labels",
                selector.site,
                selector.show()
            )));
        }
    };
    let admits = Selector::from_labels(&labels);
    let on: Vec<&NodeSize> = nodes.iter().filter(|n| admits.matches(&n.labels)).collect();
    let words = format!(
        "one per declared node {} admits, {} of {}",
        at(&selector.site, &key, selector.show()),
        on.len(),
        nodes.len()
    );
    Ok((on, words))
}

/// The requests of a release on the declared nodes.
pub fn chart_requests(hr: &HelmRelease, nodes: &[NodeSize]) -> Result<ChartRequests, NotCounted> {
    let values = hr
        .values
        .as_ref()
        .map_err(|err| NotCounted::Malformed(format!("its values cannot be known: {err}")))?;
    let chart = hr.chart.as_deref().unwrap_or_default();
    let table = workloads(chart).ok_or_else(|| {
        NotCounted::Unknown(
            "gates does not know the chart's workloads, and their default requests are not in the repository"
                .to_string(),
        )
    })?;
    let mut out = ChartRequests {
        amount: Amount::default(),
        evidence: Vec::new(),
    };
    for w in table {
        if let Some(path) = w.enabled
            && let Some(flag) = values.get(path)
        {
            match flag.as_bool() {
                Some(true) => {}
                Some(false) => {
                    out.evidence.push(format!(
                        "{}: not deployed: {}",
                        w.name,
                        at(&flag.site, &path.join("."), flag.show())
                    ));
                    continue;
                }
                None => {
                    return Err(NotCounted::Malformed(format!(
                        "{}: {}: {} is not true or false",
                        flag.site,
                        path.join("."),
                        flag.show()
                    )));
                }
            }
        }
        let mut on: Vec<&NodeSize> = nodes.iter().collect();
        let (copies, from) = match w.copies {
            Copies::PerNode(selector) => {
                let (admitted, words) = admitted(values, selector, nodes)?;
                on = admitted;
                (on.len() as i128, words)
            }
            Copies::One => (1, "1".to_string()),
            Copies::Values(path) => count(values, path)?,
            Copies::TraefikKind => match values.get_str(&["deployment", "kind"]) {
                Some("DaemonSet") => {
                    let (admitted, words) = admitted(values, &["nodeSelector"], nodes)?;
                    on = admitted;
                    (on.len() as i128, format!("DaemonSet, {words}"))
                }
                _ => count(values, &["deployment", "replicas"])?,
            },
        };
        match w.requests {
            Requests::Nothing(why) => {
                out.evidence
                    .push(format!("{}: requests nothing: {why}", w.name));
            }
            Requests::Values(path) => {
                let (pod, lines) = resources(values, path)?;
                out.amount.add(pod.times(copies));
                out.evidence.push(format!(
                    "{}: {} CPU, {} memory per pod × {from}: {}",
                    w.name,
                    show_cpu(pod.cpu),
                    show_bytes(pod.memory),
                    lines.join(", ")
                ));
            }
            Requests::NodeCpuPercent(path) => {
                let (percent, line) = percent(values, path)?;
                let cpu: i128 = on.iter().map(|n| n.cpu * percent / 100).sum();
                out.amount.add(Amount { cpu, memory: 0 });
                out.evidence.push(format!(
                    "{}: {percent}% of the CPU of each node, {from}: {} in all (of the VM's cores; the kubelet's share of allocatable is smaller): {line}",
                    w.name,
                    show_cpu(cpu)
                ));
            }
        }
    }
    Ok(out)
}

fn count(values: &Node, path: &[&str]) -> Result<(i128, String), NotCounted> {
    let key = path.join(".");
    let node = values
        .get(path)
        .ok_or_else(|| format!("{key} is not set (the chart's default decides)"))?;
    match node.as_i64() {
        Some(n) if n >= 0 => Ok((n.into(), format!("{}: {key}: {n}", node.site))),
        _ => Err(NotCounted::Malformed(format!(
            "{}: {key}: {} is not a count",
            node.site,
            node.show()
        ))),
    }
}

/// The requests under a values `resources` key: `requests`, else `limits` (the API server
/// defaults one to the other). Both unset: the chart's default decides.
fn resources(values: &Node, path: &[&str]) -> Result<(Amount, Vec<String>), NotCounted> {
    let key = path.join(".");
    let mut amount = Amount::default();
    let mut lines = Vec::new();
    for resource in ["cpu", "memory"] {
        let (node, which) = match (
            values.get(&[path, &["requests", resource]].concat()),
            values.get(&[path, &["limits", resource]].concat()),
        ) {
            (Some(n), _) => (n, "requests"),
            (None, Some(n)) => (n, "limits"),
            (None, None) => {
                return Err(NotCounted::Unknown(format!(
                    "{key}.requests.{resource} is not set (the chart's default decides)"
                )));
            }
        };
        let full = format!("{key}.{which}.{resource}");
        let value =
            parse_quantity(node, &full, resource).map_err(|m| NotCounted::Malformed(m.0))?;
        lines.push(format!("{}: {full}: {}", node.site, node.show()));
        match resource {
            "cpu" => amount.cpu = value,
            _ => amount.memory = value,
        }
    }
    Ok((amount, lines))
}

/// A percentage setting: a number, or Longhorn's per-data-engine form `{"v1":"12","v2":"12"}`
/// of which the v1 engine's share counts (the v2 engine's instance managers run only when
/// `defaultSettings.v2DataEngine` is true, which is then unknown).
fn percent(values: &Node, path: &[&str]) -> Result<(i128, String), NotCounted> {
    let key = path.join(".");
    let node = values
        .get(path)
        .ok_or_else(|| format!("{key} is not set (the chart's default decides)"))?;
    if values
        .get(&["defaultSettings", "v2DataEngine"])
        .and_then(Node::as_bool)
        == Some(true)
    {
        return Err(NotCounted::Unknown(format!(
            "defaultSettings.v2DataEngine is true, and gates does not count the v2 engine's instance managers ({key} at {})",
            node.site
        )));
    }
    let text = node.as_str().unwrap_or_default().trim();
    let number = if text.starts_with('{') {
        serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|v| match v.get("v1") {
                Some(serde_json::Value::String(s)) => s.parse::<i128>().ok(),
                Some(serde_json::Value::Number(n)) => n.as_i64().map(i128::from),
                _ => None,
            })
    } else {
        text.parse::<i128>().ok()
    };
    match number {
        Some(p) if (0..=100).contains(&p) => {
            Ok((p, format!("{}: {key}: {}", node.site, node.show())))
        }
        _ => Err(NotCounted::Malformed(format!(
            "{}: {key}: {} is not a percentage (a number from 0 to 100, or {{\"v1\":\"12\"}})",
            node.site,
            node.show()
        ))),
    }
}
