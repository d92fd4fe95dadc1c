//! The kube-scheduler's filters, as pure functions over one pod and one node: the node being
//! schedulable, taints and tolerations, the node selector and required node affinity,
//! resource requests against what is left, the pod count, required pod anti-affinity (the
//! pod's own and that of the pods already there) and `topologySpreadConstraints` with
//! `whenUnsatisfiable: DoNotSchedule`. Each rejection reads like the scheduler's own event
//! (`Insufficient cpu`, `node(s) had untolerated taint {...}`), so a prediction can be
//! compared with what `kubectl describe pod` says after a real loss.
//!
//! Host ports (the NodePorts filter) are judged by the reference placement only.
//!
//! Preemption is in `schedule` (`Sim::preempt`). Not modelled: required pod *affinity*,
//! volume topology and limits, extended resources, scoring beyond "least allocated".

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{
    NodeSelectorRequirement, NodeSelectorTerm, PodAffinityTerm, Taint, Toleration,
    TopologySpreadConstraint,
};

use super::cluster::{Res, TAINT_UNSCHEDULABLE};
use crate::selector::{Requirement, Selector};
use crate::state::Pod;

/// Why a node cannot take a pod, as the scheduler words it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rejection {
    Unschedulable,
    Taint(String),
    NodeAffinity,
    HostPorts,
    Insufficient(&'static str),
    TooManyPods,
    AntiAffinity,
    ExistingAntiAffinity,
    TopologySpread,
    TopologySpreadMissingLabel,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::Unschedulable => write!(f, "node(s) were unschedulable"),
            Rejection::Taint(t) => write!(f, "node(s) had untolerated taint {{{t}}}"),
            Rejection::NodeAffinity => {
                write!(f, "node(s) didn't match Pod's node affinity/selector")
            }
            Rejection::HostPorts => write!(
                f,
                "node(s) didn't have free ports for the requested pod ports"
            ),
            Rejection::Insufficient(r) => write!(f, "Insufficient {r}"),
            Rejection::TooManyPods => write!(f, "Too many pods"),
            Rejection::AntiAffinity => write!(f, "node(s) didn't match pod anti-affinity rules"),
            Rejection::ExistingAntiAffinity => {
                write!(
                    f,
                    "node(s) didn't satisfy existing pods anti-affinity rules"
                )
            }
            Rejection::TopologySpread => {
                write!(f, "node(s) didn't match pod topology spread constraints")
            }
            Rejection::TopologySpreadMissingLabel => write!(
                f,
                "node(s) didn't match pod topology spread constraints (missing required label)"
            ),
        }
    }
}

// ------------------------------------------------------------------ host ports

/// A port bound on the node: protocol (`TCP` when unset), host address (`0.0.0.0` when unset)
/// and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    pub protocol: String,
    pub ip: String,
    pub port: i32,
}

/// The host ports of a pod as the NodePorts filter reads them (`util.GetHostPorts`): every
/// `hostPort` above 0 of its containers and of the init containers that run for its whole
/// life (`restartPolicy: Always`).
pub fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    sidecars
        .chain(&spec.containers)
        .flat_map(|c| &c.ports)
        .filter_map(|p| {
            let port = p.host_port.filter(|&port| port > 0)?;
            let or = |v: &Option<String>, default: &str| {
                v.as_deref()
                    .filter(|v| !v.is_empty())
                    .unwrap_or(default)
                    .to_string()
            };
            Some(HostPort {
                protocol: or(&p.protocol, "TCP"),
                ip: or(&p.host_ip, "0.0.0.0"),
                port,
            })
        })
        .collect()
}

/// Whether `want` collides with a port bound already (`HostPortInfo.CheckConflict`): the same
/// protocol and port on the same address, or either address `0.0.0.0`.
pub fn ports_conflict(want: &HostPort, bound: &HostPort) -> bool {
    want.protocol == bound.protocol
        && want.port == bound.port
        && (want.ip == bound.ip || want.ip == "0.0.0.0" || bound.ip == "0.0.0.0")
}

// ------------------------------------------------------------------ unschedulable, taints

/// `spec.unschedulable` (a cordoned node), unless the pod tolerates the unschedulable taint.
pub fn node_unschedulable(unschedulable: bool, tolerations: &[Toleration]) -> Option<Rejection> {
    if !unschedulable {
        return None;
    }
    let taint = Taint {
        key: TAINT_UNSCHEDULABLE.to_string(),
        effect: "NoSchedule".to_string(),
        ..Default::default()
    };
    (!tolerations.iter().any(|t| tolerates(t, &taint))).then_some(Rejection::Unschedulable)
}

/// Whether one toleration tolerates one taint (Kubernetes `ToleratesTaint`): an empty effect
/// matches every effect; an empty key with `Exists` matches every key; `Exists` ignores the
/// value; `Equal` (the default operator) compares it.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or("");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or("");
    let operator = toleration.operator.as_deref().unwrap_or("Equal");
    if key.is_empty() {
        return operator == "Exists";
    }
    if key != taint.key {
        return false;
    }
    match operator {
        "Exists" => true,
        "Equal" | "" => {
            toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

/// The first `NoSchedule` or `NoExecute` taint the pod does not tolerate.
pub fn untolerated_taint(taints: &[Taint], tolerations: &[Toleration]) -> Option<Rejection> {
    taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
        .map(|t| Rejection::Taint(format!("{}: {}", t.key, t.value.as_deref().unwrap_or(""))))
}

/// How long a pod stays bound to a node that became unreachable: `Some(0)` evicted at once,
/// `Some(s)` after `s` seconds, `None` never (it tolerates the taint forever).
///
/// As the taint-eviction controller's `getMinTolerationTime` (kubernetes
/// `pkg/controller/tainteviction`): of the tolerations that match the taint, the *minimum*
/// `tolerationSeconds` counts (one at or below 0 evicts at once); only when none of them has
/// seconds does the pod stay forever. No matching toleration evicts at once.
pub fn eviction_delay(tolerations: &[Toleration], taint_key: &str) -> Option<i64> {
    let taint = Taint {
        key: taint_key.to_string(),
        effect: "NoExecute".to_string(),
        ..Default::default()
    };
    let mut matching = tolerations
        .iter()
        .filter(|t| tolerates(t, &taint))
        .peekable();
    if matching.peek().is_none() {
        return Some(0);
    }
    matching
        .filter_map(|t| t.toleration_seconds)
        .min()
        .map(|s| s.max(0))
}

// ------------------------------------------------------------------ node selector, affinity

/// `nodeSelector` and `requiredDuringSchedulingIgnoredDuringExecution` node affinity.
pub fn node_affinity(
    pod: &Pod,
    node_name: &str,
    labels: &BTreeMap<String, String>,
) -> Option<Rejection> {
    let spec = pod.spec.as_ref()?;
    let selector_ok = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let terms = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.as_slice());
    let affinity_ok = match terms {
        None => true,
        Some(terms) => terms.iter().any(|t| term_matches(t, node_name, labels)),
    };
    (!(selector_ok && affinity_ok)).then_some(Rejection::NodeAffinity)
}

/// One node selector term: its expressions and fields all hold; an empty term matches
/// nothing.
fn term_matches(
    term: &NodeSelectorTerm,
    node_name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields
            .iter()
            .all(|r| r.key == "metadata.name" && requirement_matches(r, Some(node_name)))
}

fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or(&[]);
    let int = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => !value.is_some_and(|v| values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), Some(bound)) =
                (value.and_then(int), values.first().and_then(|s| int(s)))
            else {
                return false;
            };
            if r.operator == "Gt" {
                have > bound
            } else {
                have < bound
            }
        }
        _ => false,
    }
}

// ------------------------------------------------------------------ resources

/// Requests against allocatable minus what is already requested; a zero request always fits
/// its resource, and every pod takes one of the node's pod slots.
pub fn resources_fit(request: Res, allocatable: Res, requested: Res) -> Vec<Rejection> {
    let mut out = Vec::new();
    if request.cpu_m > 0 && request.cpu_m > allocatable.cpu_m - requested.cpu_m {
        out.push(Rejection::Insufficient("cpu"));
    }
    if request.mem > 0 && request.mem > allocatable.mem - requested.mem {
        out.push(Rejection::Insufficient("memory"));
    }
    if requested.pods + 1 > allocatable.pods {
        out.push(Rejection::TooManyPods);
    }
    out
}

// ------------------------------------------------------------------ pod anti-affinity

/// A compiled pod (anti-)affinity term: which pods it counts (by labels, in which
/// namespaces) and the node label that defines a domain.
#[derive(Debug, Clone)]
pub struct PodTerm {
    pub selector: PodSelector,
    /// `None`: every namespace (an empty or label-based `namespaceSelector`; namespaces'
    /// labels are not collected, so a label-based one is taken as every namespace, the
    /// stricter reading for anti-affinity).
    pub namespaces: Option<Vec<String>>,
    pub topology_key: String,
}

impl PodTerm {
    /// Compiles a term of a pod in `namespace`; `None` when its selector is invalid (the API
    /// server would have refused the pod).
    pub fn compile(
        term: &PodAffinityTerm,
        namespace: &str,
        pod_labels: &BTreeMap<String, String>,
    ) -> Option<PodTerm> {
        let selector = match &term.label_selector {
            None => Selector::nothing(),
            Some(s) => Selector::from_label_selector(s).ok()?,
        };
        let selector = PodSelector::new(selector, term.match_label_keys.as_ref(), pod_labels);
        let listed = term.namespaces.clone().unwrap_or_default();
        let namespaces = match &term.namespace_selector {
            Some(_) => None,
            None if listed.is_empty() => Some(vec![namespace.to_string()]),
            None => Some(listed),
        };
        Some(PodTerm {
            selector,
            namespaces,
            topology_key: term.topology_key.clone(),
        })
    }

    /// Whether a pod in `namespace` with `labels` is one this term counts.
    pub fn counts(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|ns| ns.iter().any(|n| n == namespace))
            && self.selector.matches(labels)
    }
}

/// A label selector plus the requirements `matchLabelKeys` adds from the pod's own labels.
#[derive(Debug, Clone)]
pub struct PodSelector {
    pub selector: Selector,
    pub extra: Vec<Requirement>,
}

impl PodSelector {
    fn new(
        selector: Selector,
        keys: Option<&Vec<String>>,
        labels: &BTreeMap<String, String>,
    ) -> Self {
        let extra = keys
            .into_iter()
            .flatten()
            .filter_map(|k| {
                labels.get(k).map(|v| Requirement::Equals {
                    key: k.clone(),
                    value: v.clone(),
                })
            })
            .collect();
        PodSelector { selector, extra }
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selector.matches(labels) && self.extra.iter().all(|r| r.matches(labels))
    }
}

/// The required anti-affinity terms of a pod.
pub fn anti_affinity_terms(
    pod: &Pod,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> Vec<PodTerm> {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .into_iter()
        .flatten()
        .filter_map(|t| PodTerm::compile(t, namespace, labels))
        .collect()
}

// ------------------------------------------------------------------ topology spread

/// A `DoNotSchedule` spread constraint of a pod, compiled.
#[derive(Debug, Clone)]
pub struct Spread {
    pub max_skew: i64,
    pub topology_key: String,
    pub selector: PodSelector,
    pub min_domains: Option<i64>,
    /// `nodeAffinityPolicy: Honor` (the default): only nodes the pod's node affinity and
    /// selector accept count as domains.
    pub honor_affinity: bool,
    /// `nodeTaintsPolicy: Honor`: only nodes whose taints the pod tolerates count (default
    /// Ignore, so a lost node's domain still counts, empty).
    pub honor_taints: bool,
}

pub fn spread_constraints(pod: &Pod, labels: &BTreeMap<String, String>) -> Vec<Spread> {
    let constraints: &[TopologySpreadConstraint] = pod
        .spec
        .as_ref()
        .and_then(|s| s.topology_spread_constraints.as_deref())
        .unwrap_or(&[]);
    constraints
        .iter()
        .filter(|c| c.when_unsatisfiable == "DoNotSchedule")
        .filter_map(|c| {
            let selector = match &c.label_selector {
                None => Selector::nothing(),
                Some(s) => Selector::from_label_selector(s).ok()?,
            };
            let selector = PodSelector::new(selector, c.match_label_keys.as_ref(), labels);
            Some(Spread {
                max_skew: i64::from(c.max_skew.max(1)),
                topology_key: c.topology_key.clone(),
                selector,
                min_domains: c.min_domains.map(i64::from),
                honor_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
                honor_taints: c.node_taints_policy.as_deref() == Some("Honor"),
            })
        })
        .collect()
}

/// The skew rule: placing here (where `here` matching pods already run) may not put this
/// domain more than `max_skew` above the least-loaded eligible domain. With fewer domains
/// than `minDomains`, the least-loaded count is taken as zero.
pub fn spread_allows(
    spread: &Spread,
    here: i64,
    self_matches: bool,
    min: i64,
    domains: usize,
) -> bool {
    let min = match spread.min_domains {
        Some(m) if (domains as i64) < m => 0,
        _ => min,
    };
    here + i64::from(self_matches) - min <= spread.max_skew
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Toleration;

    fn toleration(key: &str, operator: &str, value: &str, effect: &str) -> Toleration {
        Toleration {
            key: (!key.is_empty()).then(|| key.to_string()),
            operator: (!operator.is_empty()).then(|| operator.to_string()),
            value: (!value.is_empty()).then(|| value.to_string()),
            effect: (!effect.is_empty()).then(|| effect.to_string()),
            toleration_seconds: None,
        }
    }

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.to_string()),
            effect: effect.into(),
            time_added: None,
        }
    }

    #[test]
    fn a_toleration_matches_taints_as_kubernetes_does() {
        let t = taint("dedicated", "db", "NoSchedule");
        assert!(tolerates(
            &toleration("dedicated", "Equal", "db", "NoSchedule"),
            &t
        ));
        assert!(
            tolerates(&toleration("dedicated", "", "db", ""), &t),
            "Equal is the default, empty effect matches all"
        );
        assert!(tolerates(
            &toleration("dedicated", "Exists", "", "NoSchedule"),
            &t
        ));
        assert!(
            tolerates(&toleration("", "Exists", "", ""), &t),
            "empty key with Exists tolerates everything"
        );
        assert!(!tolerates(
            &toleration("dedicated", "Equal", "web", "NoSchedule"),
            &t
        ));
        assert!(!tolerates(
            &toleration("dedicated", "Exists", "", "NoExecute"),
            &t
        ));
        assert!(
            !tolerates(&toleration("", "Equal", "", ""), &t),
            "empty key needs Exists"
        );
    }

    #[test]
    fn prefer_no_schedule_taints_never_reject_and_the_first_untolerated_one_is_named() {
        let taints = [
            taint("soft", "", "PreferNoSchedule"),
            taint("node.kubernetes.io/unreachable", "", "NoSchedule"),
        ];
        assert_eq!(
            untolerated_taint(&taints, &[]),
            Some(Rejection::Taint("node.kubernetes.io/unreachable: ".into()))
        );
        assert_eq!(
            untolerated_taint(
                &taints,
                &[toleration(
                    "node.kubernetes.io/unreachable",
                    "Exists",
                    "",
                    ""
                )]
            ),
            None
        );
    }

    #[test]
    fn eviction_waits_for_the_minimum_seconds_of_the_matching_tolerations() {
        let with = |seconds: Option<i64>, key: &str| {
            let mut t = toleration(key, "Exists", "", "NoExecute");
            t.toleration_seconds = seconds;
            t
        };
        let key = "node.kubernetes.io/unreachable";
        // The first match says 300 s, a later one 30 s: the taint manager takes 30 s.
        assert_eq!(
            eviction_delay(&[with(Some(300), key), with(Some(30), key)], key),
            Some(30)
        );
        // A match without seconds does not outlast one with seconds.
        assert_eq!(
            eviction_delay(&[with(None, key), with(Some(60), key)], key),
            Some(60)
        );
        // Seconds at or below zero evict at once; a toleration of another taint does not count.
        assert_eq!(eviction_delay(&[with(Some(-5), key)], key), Some(0));
        assert_eq!(
            eviction_delay(&[with(Some(10), "other"), with(Some(120), key)], key),
            Some(120)
        );
    }

    #[test]
    fn eviction_waits_for_the_toleration_seconds_and_never_comes_for_a_forever_toleration() {
        let mut with_seconds =
            toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute");
        with_seconds.toleration_seconds = Some(300);
        assert_eq!(
            eviction_delay(&[with_seconds], "node.kubernetes.io/unreachable"),
            Some(300)
        );
        assert_eq!(
            eviction_delay(&[], "node.kubernetes.io/unreachable"),
            Some(0)
        );
        let forever = toleration("", "Exists", "", "");
        assert_eq!(
            eviction_delay(&[forever], "node.kubernetes.io/unreachable"),
            None
        );
    }

    #[test]
    fn a_cordoned_node_rejects_unless_the_pod_tolerates_the_unschedulable_taint() {
        assert_eq!(
            node_unschedulable(true, &[]),
            Some(Rejection::Unschedulable)
        );
        assert_eq!(
            node_unschedulable(
                true,
                &[toleration(TAINT_UNSCHEDULABLE, "Exists", "", "NoSchedule")]
            ),
            None
        );
        assert_eq!(node_unschedulable(false, &[]), None);
    }

    #[test]
    fn resources_are_requests_against_allocatable_minus_requested_and_the_pod_count() {
        let alloc = Res {
            cpu_m: 2000,
            mem: 4 << 30,
            pods: 3,
        };
        let requested = Res {
            cpu_m: 1500,
            mem: 1 << 30,
            pods: 2,
        };
        let small = Res {
            cpu_m: 500,
            mem: 1 << 30,
            pods: 1,
        };
        assert!(resources_fit(small, alloc, requested).is_empty());
        let big = Res {
            cpu_m: 501,
            mem: (3 << 30) + 1,
            pods: 1,
        };
        assert_eq!(
            resources_fit(big, alloc, requested),
            [
                Rejection::Insufficient("cpu"),
                Rejection::Insufficient("memory")
            ]
        );
        let full = Res {
            pods: 3,
            ..requested
        };
        assert_eq!(
            resources_fit(Res::default(), alloc, full),
            [Rejection::TooManyPods]
        );
        let over = Res {
            cpu_m: 2500,
            ..requested
        };
        assert!(
            resources_fit(
                Res {
                    pods: 1,
                    ..Res::default()
                },
                alloc,
                over
            )
            .is_empty(),
            "a pod without requests fits even an overcommitted node"
        );
    }

    #[test]
    fn node_selector_terms_are_ored_and_their_expressions_anded() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "spec": {"containers": [], "nodeSelector": {"disk": "ssd"},
              "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                  {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                        {"key": "cores", "operator": "Gt", "values": ["4"]}]},
                  {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]}
                ]}}}}
        }))
        .unwrap();
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            node_affinity(
                &pod,
                "n1",
                &labels(&[("disk", "ssd"), ("zone", "a"), ("cores", "8")])
            ),
            None
        );
        assert_eq!(
            node_affinity(
                &pod,
                "n1",
                &labels(&[("disk", "ssd"), ("zone", "a"), ("cores", "4")])
            ),
            Some(Rejection::NodeAffinity),
            "Gt is strict"
        );
        assert_eq!(
            node_affinity(&pod, "n9", &labels(&[("disk", "ssd")])),
            None,
            "second term by name"
        );
        assert_eq!(
            node_affinity(&pod, "n9", &labels(&[("disk", "hdd")])),
            Some(Rejection::NodeAffinity),
            "nodeSelector still applies"
        );
    }

    #[test]
    fn the_skew_rule_counts_the_pod_itself_and_min_domains() {
        let spread = Spread {
            max_skew: 1,
            topology_key: "zone".into(),
            selector: PodSelector {
                selector: Selector::everything(),
                extra: Vec::new(),
            },
            min_domains: None,
            honor_affinity: true,
            honor_taints: false,
        };
        assert!(spread_allows(&spread, 1, true, 1, 3));
        assert!(
            !spread_allows(&spread, 1, true, 0, 3),
            "an empty domain pins the minimum at 0"
        );
        let with_min = Spread {
            min_domains: Some(4),
            ..spread
        };
        assert!(
            !spread_allows(&with_min, 1, true, 1, 3),
            "fewer domains than minDomains: min is 0"
        );
    }
}
