//! Builders for host-loss tests, on top of the checks' builders: owners, tolerations,
//! affinity and spread on pods, and a requests-basis environment.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PodAffinityTerm, PodAntiAffinity, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};

pub use crate::checks::testing::{
    l2_policy, lease, longhorn_replica, longhorn_volume, node, node_metrics, pdb, pod, state,
    traefik_service,
};
use crate::config::{CapacityBasis, Environment};
use crate::hostloss::{Fault, Input, Prediction, ProtectedRef, predict, predict_fault};
use crate::state::{Pod, State};

/// The checks' default environment, judged by requests (no metrics needed), with no ingress
/// Services to announce.
pub fn env() -> Environment {
    let mut env = ingress_env();
    env.ingress.services.clear();
    env
}

/// Like [`env`], with the default ingress Service (`app.kubernetes.io/name=traefik`).
pub fn ingress_env() -> Environment {
    let mut env = crate::checks::testing::env();
    env.capacity.basis = CapacityBasis::Requests;
    env
}

pub fn run(state: &State) -> Prediction {
    predict(
        Input {
            env: &env(),
            state,
            protected: &[],
            pause: &crate::pause::NEVER,
        },
        None,
    )
}

/// [`run_with`] for `fault`.
pub fn run_fault(env: &Environment, state: &State, fault: Fault) -> Prediction {
    let input = Input {
        env,
        state,
        protected: &[],
        pause: &crate::pause::NEVER,
    };
    predict_fault(input, None, fault)
}

pub fn run_with(env: &Environment, state: &State, protected: &[ProtectedRef]) -> Prediction {
    predict(
        Input {
            env,
            state,
            protected,
            pause: &crate::pause::NEVER,
        },
        None,
    )
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// What can be added to a built pod.
pub trait PodExt {
    /// Owned by a controller of this kind and name.
    fn owned(self, kind: &str, name: &str) -> Pod;
    /// The tolerations admission adds: not-ready and unreachable, NoExecute, for 300 s.
    fn evictable(self) -> Pod;
    fn tolerating(self, key: &str, effect: &str, seconds: Option<i64>) -> Pod;
    fn node_selector(self, pairs: &[(&str, &str)]) -> Pod;
    fn node_affinity_in(self, key: &str, values: &[&str]) -> Pod;
    /// Required anti-affinity to pods with these labels, per `topology_key`.
    fn anti_affinity(self, pairs: &[(&str, &str)], topology_key: &str) -> Pod;
    /// A DoNotSchedule spread constraint over pods with these labels.
    fn spread(self, max_skew: i32, topology_key: &str, pairs: &[(&str, &str)]) -> Pod;
    fn spec_mut(&mut self) -> &mut crate::state::PodSpec;
}

impl PodExt for Pod {
    fn owned(mut self, kind: &str, name: &str) -> Pod {
        self.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            controller: Some(true),
            ..Default::default()
        }]);
        self
    }

    fn evictable(self) -> Pod {
        self.tolerating("node.kubernetes.io/not-ready", "NoExecute", Some(300))
            .tolerating("node.kubernetes.io/unreachable", "NoExecute", Some(300))
    }

    fn tolerating(mut self, key: &str, effect: &str, seconds: Option<i64>) -> Pod {
        self.spec_mut()
            .tolerations
            .get_or_insert_with(Vec::new)
            .push(Toleration {
                key: Some(key.into()),
                operator: Some("Exists".into()),
                effect: (!effect.is_empty()).then(|| effect.to_string()),
                toleration_seconds: seconds,
                value: None,
            });
        self
    }

    fn node_selector(mut self, pairs: &[(&str, &str)]) -> Pod {
        self.spec_mut().node_selector = Some(map(pairs));
        self
    }

    fn node_affinity_in(mut self, key: &str, values: &[&str]) -> Pod {
        let affinity = self
            .spec_mut()
            .affinity
            .get_or_insert_with(Affinity::default);
        affinity.node_affinity = Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: key.into(),
                        operator: "In".into(),
                        values: Some(values.iter().map(|v| v.to_string()).collect()),
                    }]),
                    match_fields: None,
                }],
            }),
            ..Default::default()
        });
        self
    }

    fn anti_affinity(mut self, pairs: &[(&str, &str)], topology_key: &str) -> Pod {
        let affinity = self
            .spec_mut()
            .affinity
            .get_or_insert_with(Affinity::default);
        affinity
            .pod_anti_affinity
            .get_or_insert_with(PodAntiAffinity::default)
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(PodAffinityTerm {
                label_selector: Some(LabelSelector {
                    match_labels: Some(map(pairs)),
                    match_expressions: None,
                }),
                topology_key: topology_key.into(),
                ..Default::default()
            });
        self
    }

    fn spread(mut self, max_skew: i32, topology_key: &str, pairs: &[(&str, &str)]) -> Pod {
        self.spec_mut()
            .topology_spread_constraints
            .get_or_insert_with(Vec::new)
            .push(TopologySpreadConstraint {
                max_skew,
                topology_key: topology_key.into(),
                when_unsatisfiable: "DoNotSchedule".into(),
                label_selector: Some(LabelSelector {
                    match_labels: Some(map(pairs)),
                    match_expressions: None,
                }),
                ..Default::default()
            });
        self
    }

    fn spec_mut(&mut self) -> &mut crate::state::PodSpec {
        self.spec.get_or_insert_with(Default::default)
    }
}

/// A Deployment's pod: labels `app=<app>`, owned by ReplicaSet `<app>-rs`, evictable.
pub fn app_pod(app: &str, index: usize, node: &str, cpu: &str, memory: &str) -> Pod {
    pod("apps", &format!("{app}-{index}"))
        .labels(&[("app", app)])
        .on(node)
        .requests(cpu, memory)
        .build()
        .owned("ReplicaSet", &format!("{app}-rs"))
        .evictable()
}
