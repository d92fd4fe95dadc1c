//! What the workload manifests of a repository request, added up the way the scheduler adds
//! them: per pod its containers by the rule the live pods are counted by
//! ([`crate::requests::containers`]: app containers and sidecars, or the largest init step),
//! a pod-level `spec.resources` where it decides, a container's limit standing in for a
//! request it leaves out, times the pods the workload keeps (`spec.replicas`; for a DaemonSet, one per declared node its `nodeSelector` admits).
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

crate::sentence_error! {
    /// A malformed value a trial reads: its file, line and key.
    pub struct Malformed;
}

/// Parse a request or limit, numbers (`cpu: 1`) and strings alike.
pub fn parse_quantity(node: &Node, key: &str, resource: &str) -> Result<i128, Malformed> {
    let text = node.as_str().ok_or_else(|| {
        Malformed(format!(
            "{}: {key}: {} is not a quantity",
            node.site,
            node.show()
        ))
    })?;
    let parsed = match resource {
        "cpu" => quantity::cpu_millicores(text),
        _ => quantity::memory_bytes(text),
    };
    parsed.map_err(|err| Malformed(format!("{}: {key}: {err}", node.site)))
}

/// What a container (or a pod's `spec.resources`) declares of each resource: its request,
/// else its limit (the API server defaults a missing request to the limit); `None` where it
/// declares neither.
#[derive(Debug, Clone, Copy, Default)]
struct Declares {
    cpu: Option<i128>,
    memory: Option<i128>,
}

impl Declares {
    fn of(resources: Option<&Node>, key: &str, requests_only: bool) -> Result<Declares, Malformed> {
        let mut declares = Declares::default();
        let Some(resources) = resources else {
            return Ok(declares);
        };
        for resource in ["cpu", "memory"] {
            let request = resources.get(&["requests", resource]);
            let limit = resources
                .get(&["limits", resource])
                .filter(|_| !requests_only);
            let value = match (request, limit) {
                (Some(request), _) => Some(parse_quantity(
                    request,
                    &format!("{key}.requests.{resource}"),
                    resource,
                )?),
                (None, Some(limit)) => Some(parse_quantity(
                    limit,
                    &format!("{key}.limits.{resource}"),
                    resource,
                )?),
                (None, None) => None,
            };
            match resource {
                "cpu" => declares.cpu = value,
                _ => declares.memory = value,
            }
        }
        Ok(declares)
    }

    /// What the scheduler counts: nothing where nothing is declared.
    fn counted(self) -> Amount {
        Amount {
            cpu: self.cpu.unwrap_or(0),
            memory: self.memory.unwrap_or(0),
        }
    }
}

impl crate::requests::Requested for Amount {
    const ZERO: Amount = Amount { cpu: 0, memory: 0 };
    fn plus(mut self, other: Amount) -> Amount {
        self.add(other);
        self
    }
    fn larger(self, other: Amount) -> Amount {
        self.max(other)
    }
}

/// One container of a template, as counted: what it declares, and its name for the notes.
struct Counted<'n> {
    declares: Declares,
    what: String,
    site: &'n Site,
}

fn counted<'n>(
    spec: &'n Node,
    list: &str,
    workload: &str,
) -> Result<Vec<(Counted<'n>, bool)>, Malformed> {
    let mut out = Vec::new();
    for c in spec.get(&[list]).and_then(Node::as_seq).unwrap_or_default() {
        let label = if list == "containers" {
            "container"
        } else {
            "init container"
        };
        let what = format!("{workload} {label} {}", c.get_str(&["name"]).unwrap_or("?"));
        let declares = Declares::of(c.get(&["resources"]), "resources", false)?;
        let sidecar = crate::requests::is_sidecar(c.get_str(&["restartPolicy"]));
        out.push((
            Counted {
                declares,
                what,
                site: &c.site,
            },
            sidecar,
        ));
    }
    Ok(out)
}

/// What one pod of a template requests, as the scheduler counts it
/// ([`crate::requests::containers`], the live pods' rule), with pod-level resources as the
/// API server defaults them: a pod-level request decides its resource; a pod-level limit
/// does where no container declares that resource.
fn pod_requests(spec: &Node, workload: &str, zero: &mut Vec<String>) -> Result<Amount, Malformed> {
    let app = counted(spec, "containers", workload)?;
    let init = counted(spec, "initContainers", workload)?;
    let sum = crate::requests::containers(
        app.iter().map(|(c, _)| c.declares.counted()),
        init.iter()
            .map(|(c, sidecar)| (c.declares.counted(), *sidecar)),
    );
    let pod_requests = Declares::of(spec.get(&["resources"]), "spec.resources", true)?;
    // Its request, else its limit: where the request is missing, the limit.
    let pod_limits = Declares::of(spec.get(&["resources"]), "spec.resources", false)?;
    let all = || app.iter().chain(&init).map(|(c, _)| c);
    let mut amount = sum;
    for (resource, pod_request, pod_limit, declared) in [
        (
            "cpu",
            pod_requests.cpu,
            pod_limits.cpu,
            all().any(|c| c.declares.cpu.is_some()),
        ),
        (
            "memory",
            pod_requests.memory,
            pod_limits.memory,
            all().any(|c| c.declares.memory.is_some()),
        ),
    ] {
        let pod_level = pod_request.or(pod_limit.filter(|_| !declared));
        let slot = match resource {
            "cpu" => &mut amount.cpu,
            _ => &mut amount.memory,
        };
        match pod_level {
            Some(value) => *slot = value,
            None => zero.extend(
                all()
                    .filter(|c| match resource {
                        "cpu" => c.declares.cpu.is_none(),
                        _ => c.declares.memory.is_none(),
                    })
                    .map(|c| {
                        format!(
                            "{}: {} requests no {resource}: counted as 0, as the scheduler counts it",
                            c.site, c.what
                        )
                    }),
            ),
        }
    }
    Ok(amount)
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
                    return Err(Malformed(format!(
                        "{}: spec.template.spec.nodeSelector: {} is not a map of labels",
                        selector.site,
                        selector.show()
                    )));
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
                _ => Err(Malformed(format!(
                    "{}: spec.replicas: {} is not a count",
                    r.site,
                    r.show()
                ))),
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
            return Err(Malformed(format!(
                "{}: {workload} has no pod template",
                object.site
            )));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requests::pod_request;
    use crate::state::Pod;

    /// A Pod manifest of `spec` (YAML indented under `spec:`), as a repository and as the
    /// live state hold it.
    fn pod(spec: &str) -> (Node, Pod) {
        let text = format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: apps\nspec:\n{spec}"
        );
        let node = crate::declared::yaml::parse("pod.yaml", &text)
            .expect("parses")
            .remove(0);
        let live: Pod = crate::yaml::from_str(&text).expect("a pod");
        (node, live)
    }

    fn declared(node: &Node) -> (Amount, Vec<String>) {
        let tally = tally_manifests(std::slice::from_ref(node), &[]).expect("counted");
        (tally.total, tally.zero)
    }

    fn live(pod: &Pod) -> Amount {
        let of = |r| pod_request(pod, r).expect("a request").nanos();
        Amount {
            cpu: of("cpu") / 1_000_000,
            memory: of("memory") / 1_000_000_000,
        }
    }

    const MI: i128 = 1 << 20;

    /// `spec`'s pod counted as `want`, by the repository's count and by the live pods' rule.
    fn counted_alike(spec: &str, want: Amount) {
        let (node, pod) = pod(spec);
        assert_eq!(declared(&node).0, want);
        assert_eq!(live(&pod), want, "the live pods' rule agrees");
    }

    #[test]
    fn a_sidecar_counts_beside_the_app_containers_and_the_init_steps_after_it() {
        // CPU: the migration beside the sidecar (550m) outweighs app and sidecar (150m);
        // memory: app and sidecar (96Mi) outweigh the migration beside the sidecar (48Mi).
        counted_alike(
            concat!(
                "  initContainers:\n",
                "  - {name: mesh, restartPolicy: Always, resources: {requests: {cpu: 50m, memory: 32Mi}}}\n",
                "  - {name: migrate, resources: {requests: {cpu: 500m, memory: 16Mi}}}\n",
                "  containers:\n",
                "  - {name: app, resources: {requests: {cpu: 100m, memory: 64Mi}}}\n",
            ),
            Amount {
                cpu: 550,
                memory: 96 * MI,
            },
        );
    }

    #[test]
    fn a_sidecar_started_after_an_init_step_does_not_run_beside_it() {
        counted_alike(
            concat!(
                "  initContainers:\n",
                "  - {name: migrate, resources: {requests: {cpu: 300m, memory: 200Mi}}}\n",
                "  - {name: mesh, restartPolicy: Always, resources: {requests: {cpu: 50m, memory: 32Mi}}}\n",
                "  containers:\n",
                "  - {name: app, resources: {requests: {cpu: 100m, memory: 64Mi}}}\n",
            ),
            Amount {
                cpu: 300,
                memory: 200 * MI,
            },
        );
    }

    #[test]
    fn a_pod_level_request_decides_its_resource_and_the_containers_the_other() {
        counted_alike(
            concat!(
                "  resources: {requests: {cpu: '2'}}\n",
                "  containers:\n",
                "  - {name: app, resources: {requests: {cpu: 100m, memory: 64Mi}}}\n",
            ),
            Amount {
                cpu: 2000,
                memory: 64 * MI,
            },
        );
    }

    #[test]
    fn a_pod_level_limit_is_the_request_only_where_no_container_declares_the_resource() {
        // The API server defaults the pod-level request of memory to its limit, as no
        // container declares memory; CPU is declared by a container, so the containers'
        // sum is the pod's, not the limit.
        let (node, _) = pod(concat!(
            "  resources: {limits: {cpu: '4', memory: 1Gi}}\n",
            "  containers:\n",
            "  - {name: app, resources: {requests: {cpu: 100m}}}\n",
            "  - {name: log, resources: {}}\n",
        ));
        let (amount, zero) = declared(&node);
        assert_eq!(
            amount,
            Amount {
                cpu: 100,
                memory: 1024 * MI
            }
        );
        // Only the CPU the log container leaves out is counted as nothing.
        assert_eq!(zero.len(), 1, "{zero:?}");
        assert!(
            zero[0].contains("container log requests no cpu"),
            "{zero:?}"
        );
    }

    #[test]
    fn a_malformed_pod_level_request_names_its_line_and_key() {
        let (node, _) = pod(concat!(
            "  resources:\n",
            "    requests: {memory: lots}\n",
            "  containers:\n",
            "  - {name: app}\n",
        ));
        let err = tally_manifests(&[node], &[])
            .expect_err("refused")
            .to_string();
        assert!(
            err.starts_with("pod.yaml:8: spec.resources.requests.memory:"),
            "{err}"
        );
    }
}
