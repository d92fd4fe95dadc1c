//! What the workload manifests of a repository request, added up the way the scheduler adds
//! them: per pod the larger of the sum of its containers and its largest init container, a
//! container's limit standing in for a request it leaves out, times the pods the workload
//! keeps (`spec.replicas`; for a DaemonSet, one per declared node its `nodeSelector` admits).
//!
//! A container that declares neither is counted as requesting nothing, as the scheduler
//! counts it, and named; unless a LimitRange of the repository gives its namespace default
//! requests, which gates does not evaluate: then the workload is unknown, never a guess.

use std::collections::BTreeMap;

use crate::declared::site::Site;
use crate::declared::yaml::Node;
use crate::quantity;
use crate::selector::Selector;

/// CPU in millicores and memory in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Amount {
    pub cpu: i128,
    pub memory: i128,
}

impl Amount {
    pub fn add(&mut self, other: Amount) {
        self.cpu = self.cpu.saturating_add(other.cpu);
        self.memory = self.memory.saturating_add(other.memory);
    }

    pub fn times(self, copies: i128) -> Amount {
        Amount {
            cpu: self.cpu.saturating_mul(copies),
            memory: self.memory.saturating_mul(copies),
        }
    }

    fn max(self, other: Amount) -> Amount {
        Amount {
            cpu: self.cpu.max(other.cpu),
            memory: self.memory.max(other.memory),
        }
    }
}

/// What the repository requests, and what it could not count.
#[derive(Debug, Default)]
pub struct Tally {
    pub total: Amount,
    /// One line per workload counted.
    pub counted: Vec<String>,
    /// Containers that request nothing: counted as 0, as the scheduler counts them.
    pub zero: Vec<String>,
    /// Workloads whose requests are not known: not counted, and why.
    pub unknown: Vec<String>,
    /// Workloads left out on purpose (they run to completion), named.
    pub transient: Vec<String>,
}

/// A malformed value a trial reads: its file, line and key.
pub type Malformed = String;

/// Parse a request or limit, numbers (`cpu: 1`) and strings alike.
pub fn parse_quantity(node: &Node, key: &str, resource: &str) -> Result<i128, Malformed> {
    let text = node
        .as_str()
        .ok_or_else(|| format!("{}: {key}: {} is not a quantity", node.site, node.show()))?;
    let parsed = match resource {
        "cpu" => quantity::cpu_millicores(text),
        _ => quantity::memory_bytes(text),
    };
    parsed.map_err(|err| format!("{}: {key}: {err}", node.site))
}

/// The requests of one container, with a line for each resource that is not requested.
fn container_requests(
    container: &Node,
    what: &str,
    zero: &mut Vec<String>,
) -> Result<Amount, Malformed> {
    let mut amount = Amount::default();
    for resource in ["cpu", "memory"] {
        let value = match (
            container.get(&["resources", "requests", resource]),
            container.get(&["resources", "limits", resource]),
        ) {
            (Some(request), _) => {
                parse_quantity(request, &format!("resources.requests.{resource}"), resource)?
            }
            // The API server defaults a missing request to the limit.
            (None, Some(limit)) => {
                parse_quantity(limit, &format!("resources.limits.{resource}"), resource)?
            }
            (None, None) => {
                zero.push(format!(
                    "{}: {what} requests no {resource}: counted as 0, as the scheduler counts it",
                    container.site
                ));
                0
            }
        };
        match resource {
            "cpu" => amount.cpu = value,
            _ => amount.memory = value,
        }
    }
    Ok(amount)
}

/// What one pod of a template requests.
fn pod_requests(spec: &Node, workload: &str, zero: &mut Vec<String>) -> Result<Amount, Malformed> {
    let mut sum = Amount::default();
    for c in spec
        .get(&["containers"])
        .and_then(Node::as_seq)
        .unwrap_or_default()
    {
        let what = format!(
            "{workload} container {}",
            c.get_str(&["name"]).unwrap_or("?")
        );
        sum.add(container_requests(c, &what, zero)?);
    }
    let mut init = Amount::default();
    for c in spec
        .get(&["initContainers"])
        .and_then(Node::as_seq)
        .unwrap_or_default()
    {
        let what = format!(
            "{workload} init container {}",
            c.get_str(&["name"]).unwrap_or("?")
        );
        init = init.max(container_requests(c, &what, zero)?);
    }
    Ok(sum.max(init))
}

/// The labels each declared node will carry.
pub type NodeLabels = BTreeMap<String, String>;

/// How many pods a workload keeps, and the words that say where that came from. A
/// DaemonSet runs on the declared nodes its `nodeSelector` admits (taints and node affinity
/// are not read: every admitted node is counted).
fn copies(object: &Node, kind: &str, nodes: &[NodeLabels]) -> Result<(i128, String), Malformed> {
    match kind {
        "DaemonSet" => match object.get(&["spec", "template", "spec", "nodeSelector"]) {
            None => Ok((
                nodes.len() as i128,
                format!("one per declared node, {}", nodes.len()),
            )),
            Some(selector) => {
                let Some(labels) = selector.string_map() else {
                    return Err(format!(
                        "{}: spec.template.spec.nodeSelector: {} is not a map of labels",
                        selector.site,
                        selector.show()
                    ));
                };
                let admits = Selector::from_labels(&labels);
                let n = nodes.iter().filter(|l| admits.matches(l)).count();
                Ok((
                    n as i128,
                    format!(
                        "one per declared node its nodeSelector admits, {n} of {} ({})",
                        nodes.len(),
                        at(&selector.site, "nodeSelector", selector.show())
                    ),
                ))
            }
        },
        "Pod" => Ok((1, "1 pod".to_string())),
        _ => match object.get(&["spec", "replicas"]) {
            None => Ok((1, "replicas not set, 1 (the API's default)".to_string())),
            Some(r) => match r.as_i64() {
                Some(n) if n >= 0 => Ok((n.into(), at(&r.site, "spec.replicas", n))),
                _ => Err(format!(
                    "{}: spec.replicas: {} is not a count",
                    r.site,
                    r.show()
                )),
            },
        },
    }
}

fn at(site: &Site, key: &str, value: impl std::fmt::Display) -> String {
    format!("{site}: {key}: {value}")
}

/// Add up the requests of every workload manifest in `objects`.
pub fn tally_manifests(objects: &[Node], nodes: &[NodeLabels]) -> Result<Tally, Malformed> {
    let mut tally = Tally::default();
    let defaulted: Vec<(&str, &Site)> = objects
        .iter()
        .filter(|o| o.get_str(&["kind"]) == Some("LimitRange"))
        .map(|o| (o.get_str(&["metadata", "namespace"]).unwrap_or(""), &o.site))
        .collect();
    for object in objects {
        let kind = object.get_str(&["kind"]).unwrap_or_default();
        let template = match kind {
            "Deployment" | "StatefulSet" | "ReplicaSet" | "DaemonSet" => {
                object.get(&["spec", "template", "spec"])
            }
            "Pod" => object.get(&["spec"]),
            "Job" | "CronJob" => {
                tally.transient.push(format!(
                    "{}: {kind} {}: runs to completion, not counted",
                    object.site,
                    name(object)
                ));
                continue;
            }
            _ => continue,
        };
        let workload = format!("{kind} {}", name(object));
        let Some(spec) = template else {
            return Err(format!("{}: {workload} has no pod template", object.site));
        };
        let namespace = object.get_str(&["metadata", "namespace"]).unwrap_or("");
        let mut zero = Vec::new();
        let pod = pod_requests(spec, &workload, &mut zero)?;
        if !zero.is_empty()
            && let Some((_, site)) = defaulted.iter().find(|(ns, _)| *ns == namespace)
        {
            tally.unknown.push(format!(
                "{}: {workload}: requests unknown, not counted: a container requests nothing and the LimitRange at {site} may give it default requests, which gates does not evaluate",
                object.site
            ));
            continue;
        }
        let (n, from) = copies(object, kind, nodes)?;
        tally.total.add(pod.times(n));
        tally.counted.push(format!(
            "{}: {workload}: {} CPU, {} memory per pod × {from}",
            object.site,
            show_cpu(pod.cpu),
            show_bytes(pod.memory)
        ));
        tally.zero.extend(zero);
    }
    Ok(tally)
}

fn name(object: &Node) -> String {
    match (
        object.get_str(&["metadata", "namespace"]),
        object.get_str(&["metadata", "name"]),
    ) {
        (Some(ns), Some(n)) => format!("{ns}/{n}"),
        (None, Some(n)) => n.to_string(),
        (_, None) => "(unnamed)".to_string(),
    }
}

pub fn show_cpu(millicores: i128) -> String {
    quantity::Quantity::from_nanos(millicores.saturating_mul(1_000_000)).display_cpu()
}

pub fn show_bytes(bytes: i128) -> String {
    quantity::Quantity::from_nanos(bytes.saturating_mul(1_000_000_000)).display_bytes()
}
