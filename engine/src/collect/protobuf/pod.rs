//! `v1` Pod as protobuf carries it (k8s.io/api `core/v1/generated.proto`), down to what
//! [`gates_core::state::Pod`] holds, and how it becomes that shape.

use std::collections::BTreeMap;

use gates_core::state as held;
use k8s_openapi::api::core::v1 as api;
use prost::Message;

use super::wire::DecodeError;

use super::meta::{self, LabelSelector, ObjectMeta, Quantity, always, list, map, text};

/// `PodList`.
#[derive(Clone, PartialEq, Message)]
pub struct PodList {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<super::wire::ListMeta>,
    #[prost(message, repeated, tag = "2")]
    pub items: Vec<Pod>,
}

/// `Pod`.
#[derive(Clone, PartialEq, Message)]
pub struct Pod {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<PodSpec>,
    #[prost(message, optional, tag = "3")]
    pub status: Option<PodStatus>,
}

/// `PodSpec`: placement, requests and priority.
#[derive(Clone, PartialEq, Message)]
pub struct PodSpec {
    #[prost(message, repeated, tag = "2")]
    pub containers: Vec<Container>,
    #[prost(btree_map = "string, string", tag = "7")]
    pub node_selector: BTreeMap<String, String>,
    #[prost(string, optional, tag = "10")]
    pub node_name: Option<String>,
    #[prost(message, optional, tag = "18")]
    pub affinity: Option<Affinity>,
    #[prost(message, repeated, tag = "20")]
    pub init_containers: Vec<Container>,
    #[prost(message, repeated, tag = "22")]
    pub tolerations: Vec<Toleration>,
    #[prost(int32, optional, tag = "25")]
    pub priority: Option<i32>,
    #[prost(string, optional, tag = "31")]
    pub preemption_policy: Option<String>,
    #[prost(btree_map = "string, message", tag = "32")]
    pub overhead: BTreeMap<String, Quantity>,
    #[prost(message, repeated, tag = "33")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    #[prost(message, optional, tag = "40")]
    pub resources: Option<ResourceRequirements>,
}

/// `Container`: name, ports, requests and (for a sidecar) restart policy.
#[derive(Clone, PartialEq, Message)]
pub struct Container {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(message, repeated, tag = "6")]
    pub ports: Vec<ContainerPort>,
    #[prost(message, optional, tag = "8")]
    pub resources: Option<ResourceRequirements>,
    #[prost(string, optional, tag = "24")]
    pub restart_policy: Option<String>,
}

/// `ContainerPort`.
#[derive(Clone, PartialEq, Message)]
pub struct ContainerPort {
    #[prost(int32, optional, tag = "2")]
    pub host_port: Option<i32>,
    #[prost(string, optional, tag = "4")]
    pub protocol: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub host_ip: Option<String>,
}

/// `ResourceRequirements`.
#[derive(Clone, PartialEq, Message)]
pub struct ResourceRequirements {
    #[prost(btree_map = "string, message", tag = "1")]
    pub limits: BTreeMap<String, Quantity>,
    #[prost(btree_map = "string, message", tag = "2")]
    pub requests: BTreeMap<String, Quantity>,
    #[prost(message, repeated, tag = "3")]
    pub claims: Vec<ResourceClaim>,
}

/// `ResourceClaim`.
#[derive(Clone, PartialEq, Message)]
pub struct ResourceClaim {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub request: Option<String>,
}

/// `Toleration`.
#[derive(Clone, PartialEq, Message)]
pub struct Toleration {
    #[prost(string, optional, tag = "1")]
    pub key: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub operator: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub value: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub effect: Option<String>,
    #[prost(int64, optional, tag = "5")]
    pub toleration_seconds: Option<i64>,
}

/// `Affinity`.
#[derive(Clone, PartialEq, Message)]
pub struct Affinity {
    #[prost(message, optional, tag = "1")]
    pub node_affinity: Option<NodeAffinity>,
    #[prost(message, optional, tag = "2")]
    pub pod_affinity: Option<PodAffinity>,
    #[prost(message, optional, tag = "3")]
    pub pod_anti_affinity: Option<PodAffinity>,
}

/// `NodeAffinity`.
#[derive(Clone, PartialEq, Message)]
pub struct NodeAffinity {
    #[prost(message, optional, tag = "1")]
    pub required: Option<NodeSelector>,
    #[prost(message, repeated, tag = "2")]
    pub preferred: Vec<PreferredSchedulingTerm>,
}

/// `NodeSelector`.
#[derive(Clone, PartialEq, Message)]
pub struct NodeSelector {
    #[prost(message, repeated, tag = "1")]
    pub node_selector_terms: Vec<NodeSelectorTerm>,
}

/// `NodeSelectorTerm`.
#[derive(Clone, PartialEq, Message)]
pub struct NodeSelectorTerm {
    #[prost(message, repeated, tag = "1")]
    pub match_expressions: Vec<NodeSelectorRequirement>,
    #[prost(message, repeated, tag = "2")]
    pub match_fields: Vec<NodeSelectorRequirement>,
}

/// `NodeSelectorRequirement`.
#[derive(Clone, PartialEq, Message)]
pub struct NodeSelectorRequirement {
    #[prost(string, optional, tag = "1")]
    pub key: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub operator: Option<String>,
    #[prost(string, repeated, tag = "3")]
    pub values: Vec<String>,
}

/// `PreferredSchedulingTerm`.
#[derive(Clone, PartialEq, Message)]
pub struct PreferredSchedulingTerm {
    #[prost(int32, optional, tag = "1")]
    pub weight: Option<i32>,
    #[prost(message, optional, tag = "2")]
    pub preference: Option<NodeSelectorTerm>,
}

/// `PodAffinity` and `PodAntiAffinity`, which have the same fields and tags.
#[derive(Clone, PartialEq, Message)]
pub struct PodAffinity {
    #[prost(message, repeated, tag = "1")]
    pub required: Vec<PodAffinityTerm>,
    #[prost(message, repeated, tag = "2")]
    pub preferred: Vec<WeightedPodAffinityTerm>,
}

/// `PodAffinityTerm`.
#[derive(Clone, PartialEq, Message)]
pub struct PodAffinityTerm {
    #[prost(message, optional, tag = "1")]
    pub label_selector: Option<LabelSelector>,
    #[prost(string, repeated, tag = "2")]
    pub namespaces: Vec<String>,
    #[prost(string, optional, tag = "3")]
    pub topology_key: Option<String>,
    #[prost(message, optional, tag = "4")]
    pub namespace_selector: Option<LabelSelector>,
    #[prost(string, repeated, tag = "5")]
    pub match_label_keys: Vec<String>,
    #[prost(string, repeated, tag = "6")]
    pub mismatch_label_keys: Vec<String>,
}

/// `WeightedPodAffinityTerm`.
#[derive(Clone, PartialEq, Message)]
pub struct WeightedPodAffinityTerm {
    #[prost(int32, optional, tag = "1")]
    pub weight: Option<i32>,
    #[prost(message, optional, tag = "2")]
    pub pod_affinity_term: Option<PodAffinityTerm>,
}

/// `TopologySpreadConstraint`.
#[derive(Clone, PartialEq, Message)]
pub struct TopologySpreadConstraint {
    #[prost(int32, optional, tag = "1")]
    pub max_skew: Option<i32>,
    #[prost(string, optional, tag = "2")]
    pub topology_key: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub when_unsatisfiable: Option<String>,
    #[prost(message, optional, tag = "4")]
    pub label_selector: Option<LabelSelector>,
    #[prost(int32, optional, tag = "5")]
    pub min_domains: Option<i32>,
    #[prost(string, optional, tag = "6")]
    pub node_affinity_policy: Option<String>,
    #[prost(string, optional, tag = "7")]
    pub node_taints_policy: Option<String>,
    #[prost(string, repeated, tag = "8")]
    pub match_label_keys: Vec<String>,
}

/// `PodStatus`: the phase and conditions.
#[derive(Clone, PartialEq, Message)]
pub struct PodStatus {
    #[prost(string, optional, tag = "1")]
    pub phase: Option<String>,
    #[prost(message, repeated, tag = "2")]
    pub conditions: Vec<PodCondition>,
}

/// `PodCondition`.
#[derive(Clone, PartialEq, Message)]
pub struct PodCondition {
    #[prost(string, optional, tag = "1")]
    pub type_: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub status: Option<String>,
}

impl TryFrom<Pod> for held::Pod {
    type Error = DecodeError;

    fn try_from(p: Pod) -> Result<Self, DecodeError> {
        Ok(held::Pod {
            metadata: p
                .metadata
                .map(TryInto::try_into)
                .transpose()?
                .unwrap_or_default(),
            spec: p.spec.map(Into::into),
            status: p.status.map(|s| held::PodStatus {
                phase: text(s.phase),
                conditions: list(s.conditions, |c| held::PodCondition {
                    type_: always(c.type_),
                    status: always(c.status),
                }),
            }),
        })
    }
}

impl From<PodSpec> for held::PodSpec {
    fn from(s: PodSpec) -> Self {
        held::PodSpec {
            node_name: text(s.node_name),
            containers: s.containers.into_iter().map(Into::into).collect(),
            init_containers: list(s.init_containers, Into::into),
            resources: s.resources.map(Into::into),
            overhead: meta::quantities(s.overhead),
            tolerations: list(s.tolerations, |t| api::Toleration {
                key: text(t.key),
                operator: text(t.operator),
                value: text(t.value),
                effect: text(t.effect),
                toleration_seconds: t.toleration_seconds,
            }),
            node_selector: map(s.node_selector, |v| v),
            affinity: s.affinity.map(Into::into),
            topology_spread_constraints: list(s.topology_spread_constraints, |t| {
                api::TopologySpreadConstraint {
                    max_skew: t.max_skew.unwrap_or(0),
                    topology_key: always(t.topology_key),
                    when_unsatisfiable: always(t.when_unsatisfiable),
                    label_selector: t.label_selector.map(Into::into),
                    min_domains: t.min_domains,
                    node_affinity_policy: t.node_affinity_policy,
                    node_taints_policy: t.node_taints_policy,
                    match_label_keys: list(t.match_label_keys, |k| k),
                }
            }),
            priority: s.priority,
            preemption_policy: s.preemption_policy,
        }
    }
}

impl From<Container> for held::Container {
    fn from(c: Container) -> Self {
        held::Container {
            name: always(c.name),
            resources: c.resources.map(Into::into),
            restart_policy: c.restart_policy,
            ports: c
                .ports
                .into_iter()
                .map(|p| held::ContainerPort {
                    host_port: p.host_port.filter(|&port| port != 0),
                    host_ip: text(p.host_ip),
                    protocol: text(p.protocol),
                })
                .collect(),
        }
    }
}

impl From<ResourceRequirements> for api::ResourceRequirements {
    fn from(r: ResourceRequirements) -> Self {
        api::ResourceRequirements {
            limits: meta::quantities(r.limits),
            requests: meta::quantities(r.requests),
            claims: list(r.claims, |c| api::ResourceClaim {
                name: always(c.name),
                request: text(c.request),
            }),
        }
    }
}

impl From<Affinity> for api::Affinity {
    fn from(a: Affinity) -> Self {
        api::Affinity {
            node_affinity: a.node_affinity.map(|n| api::NodeAffinity {
                required_during_scheduling_ignored_during_execution: n.required.map(|r| {
                    api::NodeSelector {
                        node_selector_terms: r
                            .node_selector_terms
                            .into_iter()
                            .map(node_selector_term)
                            .collect(),
                    }
                }),
                preferred_during_scheduling_ignored_during_execution: list(n.preferred, |p| {
                    api::PreferredSchedulingTerm {
                        weight: p.weight.unwrap_or(0),
                        preference: node_selector_term(p.preference.unwrap_or_default()),
                    }
                }),
            }),
            pod_affinity: a.pod_affinity.map(|p| pod_affinity!(api::PodAffinity, p)),
            pod_anti_affinity: a
                .pod_anti_affinity
                .map(|p| pod_affinity!(api::PodAntiAffinity, p)),
        }
    }
}

/// `PodAffinity` and `PodAntiAffinity` from the one message both decode into: two
/// k8s-openapi types with the same two fields.
macro_rules! pod_affinity {
    ($api:path, $p:expr) => {{
        let p: PodAffinity = $p;
        $api {
            required_during_scheduling_ignored_during_execution: list(
                p.required,
                pod_affinity_term,
            ),
            preferred_during_scheduling_ignored_during_execution: list(p.preferred, weighted_term),
        }
    }};
}
use pod_affinity;

fn node_selector_term(t: NodeSelectorTerm) -> api::NodeSelectorTerm {
    let requirement = |r: NodeSelectorRequirement| api::NodeSelectorRequirement {
        key: always(r.key),
        operator: always(r.operator),
        values: list(r.values, |v| v),
    };
    api::NodeSelectorTerm {
        match_expressions: list(t.match_expressions, requirement),
        match_fields: list(t.match_fields, requirement),
    }
}

fn pod_affinity_term(t: PodAffinityTerm) -> api::PodAffinityTerm {
    api::PodAffinityTerm {
        label_selector: t.label_selector.map(Into::into),
        namespaces: list(t.namespaces, |n| n),
        topology_key: always(t.topology_key),
        namespace_selector: t.namespace_selector.map(Into::into),
        match_label_keys: list(t.match_label_keys, |k| k),
        mismatch_label_keys: list(t.mismatch_label_keys, |k| k),
    }
}

fn weighted_term(t: WeightedPodAffinityTerm) -> api::WeightedPodAffinityTerm {
    api::WeightedPodAffinityTerm {
        weight: t.weight.unwrap_or(0),
        pod_affinity_term: pod_affinity_term(t.pod_affinity_term.unwrap_or_default()),
    }
}
