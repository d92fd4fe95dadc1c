//! Pods as the API shows them: owned by their ReplicaSet, DaemonSet or StatefulSet, with the
//! tolerations admission adds, their container's state and conditions; the pod spec their
//! workload's template holds; and their PodMetrics.

use super::super::node_facts::node_down_tolerations;
use super::super::*;
use super::common::{owner, pod_ip, q, to_value};
use crate::ids;
use crate::quantity;
use crate::resources::Res;
use crate::scenario::WorkloadKind;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use serde_json::json;

impl World {
    /// A pod object: metadata from its owner, the template's spec on its node with the added
    /// tolerations, and its phase, conditions and container status.
    pub(super) fn render_pod(&self, env: usize, p: &Pod) -> Value {
        let e = &self.envs[env];
        let w = &e.workloads[p.workload];
        let (labels, owner_ref, extra) = self.pod_owner(env, w, p);
        let node_name = p.node.map(|n| self.nodes[n].name.clone());
        let phase = if p.node.is_none() {
            "Pending"
        } else if p.started_at.is_some() || p.running {
            "Running"
        } else {
            "Pending"
        };
        let container_status = self.container_status(w, p);
        let conditions = self.pod_conditions(env, p);
        let obj = core::Pod {
            metadata: ObjectMeta {
                name: Some(p.name.clone()),
                namespace: Some(p.namespace.clone()),
                uid: Some(p.uid.clone()),
                labels: Some(labels),
                creation_timestamp: Some(self.time(p.created)),
                deletion_timestamp: p.deleting.map(|d| self.time(d + Duration::from_secs(30))),
                deletion_grace_period_seconds: p.deleting.map(|_| 30),
                owner_references: Some(vec![owner_ref]),
                generate_name: if extra.is_none() {
                    p.name.rsplit_once('-').map(|(a, _)| format!("{a}-"))
                } else {
                    None
                },
                ..Default::default()
            },
            spec: Some(core::PodSpec {
                node_name: node_name.clone(),
                hostname: extra,
                tolerations: Some(self.pod_tolerations(w)),
                ..self.pod_spec(w)
            }),
            status: Some(core::PodStatus {
                phase: Some(phase.into()),
                conditions: Some(conditions),
                host_ip: p
                    .node
                    .filter(|&n| self.nodes[n].addressed)
                    .map(|n| self.plan.node_ip(n).to_string()),
                pod_ip: pod_ip(p),
                pod_ips: pod_ip(p).map(|ip| vec![core::PodIP { ip }]),
                qos_class: Some("Burstable".into()),
                start_time: p.node.map(|_| self.time(p.created)),
                init_container_statuses: p
                    .node
                    .and(w.sidecar)
                    .map(|_| vec![self.sidecar_status(w, p, &container_status)]),
                container_statuses: p.node.map(|_| vec![container_status]),
                ..Default::default()
            }),
        };
        to_value(&obj)
    }

    /// The pod's labels and owner as its controller sets them: the template hash for a
    /// ReplicaSet's, the revision and generation for a DaemonSet's, revision, name and
    /// ordinal for a StatefulSet's; a StatefulSet's pod also gets its name as hostname.
    fn pod_owner(
        &self,
        env: usize,
        w: &Workload,
        p: &Pod,
    ) -> (BTreeMap<String, String>, OwnerReference, Option<String>) {
        let e = &self.envs[env];
        let mut labels = self.pod_labels(w);
        let (owner_ref, extra) = match w.spec.kind {
            WorkloadKind::Deployment => {
                labels.insert("pod-template-hash".into(), w.template_hash.clone());
                let rs = format!("{}-{}", w.spec.name, w.template_hash);
                (
                    owner(
                        "apps/v1",
                        "ReplicaSet",
                        &rs,
                        &ids::uuid(&[&e.spec.name, "replicaset", &w.spec.namespace, &rs]),
                    ),
                    None,
                )
            }
            WorkloadKind::DaemonSet => {
                labels.insert("controller-revision-hash".into(), w.template_hash.clone());
                labels.insert("pod-template-generation".into(), "1".into());
                (owner("apps/v1", "DaemonSet", &w.spec.name, &w.uid), None)
            }
            WorkloadKind::StatefulSet => {
                labels.insert(
                    "controller-revision-hash".into(),
                    format!("{}-{}", w.spec.name, w.template_hash),
                );
                labels.insert("statefulset.kubernetes.io/pod-name".into(), p.name.clone());
                if let Some(o) = p.ordinal {
                    labels.insert("apps.kubernetes.io/pod-index".into(), o.to_string());
                }
                (
                    owner("apps/v1", "StatefulSet", &w.spec.name, &w.uid),
                    Some(p.name.clone()),
                )
            }
        };
        (labels, owner_ref, extra)
    }

    /// The node-down tolerations the DaemonSet controller or the DefaultTolerationSeconds
    /// admission plugin adds, then the template's own.
    fn pod_tolerations(&self, w: &Workload) -> Vec<core::Toleration> {
        // The DefaultTolerationSeconds admission plugin adds these only to a pod that does not
        // already tolerate the taints; a toleration with neither key nor effect does.
        let mut tolerations = if w.spec.tolerate_all {
            Vec::new()
        } else {
            // A DaemonSet's pods tolerate them for ever (the DaemonSet controller adds them).
            node_down_tolerations(
                (w.spec.kind != WorkloadKind::DaemonSet)
                    .then_some(self.timings.toleration.as_secs() as i64),
            )
        };
        // Added to pods, not templates: by the DaemonSet controller or, for the others, the
        // DefaultTolerationSeconds admission plugin.
        tolerations.extend(template_tolerations(w));
        tolerations
    }

    /// The container's status: running since it started, else waiting in ContainerCreating.
    fn container_status(&self, w: &Workload, p: &Pod) -> core::ContainerStatus {
        let image = w
            .spec
            .image
            .clone()
            .unwrap_or_else(|| format!("registry.lab.internal/{}:v1", w.spec.name));
        core::ContainerStatus {
            name: w.spec.name.clone(),
            image: image.clone(),
            image_id: format!("{image}@sha256:{}", ids::suffix(&[&image], 24)),
            container_id: p
                .started_at
                .map(|_| format!("containerd://{}", ids::suffix(&[&p.uid, "container"], 32))),
            ready: p.api_ready,
            started: Some(p.running),
            restart_count: p.restarts,
            state: Some(if p.started_at.is_some() {
                core::ContainerState {
                    running: Some(core::ContainerStateRunning {
                        started_at: p.started_at.map(|s| self.time(s)),
                    }),
                    ..Default::default()
                }
            } else {
                core::ContainerState {
                    waiting: Some(core::ContainerStateWaiting {
                        reason: Some("ContainerCreating".into()),
                        message: None,
                    }),
                    ..Default::default()
                }
            }),
            ..Default::default()
        }
    }

    /// A sidecar's status, in `initContainerStatuses` as the kubelet reports an init
    /// container: it starts before the app container and runs beside it, so it is in the
    /// app container's state.
    fn sidecar_status(
        &self,
        w: &Workload,
        p: &Pod,
        app: &core::ContainerStatus,
    ) -> core::ContainerStatus {
        core::ContainerStatus {
            name: sidecar_name(w),
            container_id: p
                .started_at
                .map(|_| format!("containerd://{}", ids::suffix(&[&p.uid, "sidecar"], 32))),
            ..app.clone()
        }
    }

    /// PodScheduled (False with the scheduler's message while pending), and once on a node
    /// Initialized, ContainersReady and Ready.
    fn pod_conditions(&self, env: usize, p: &Pod) -> Vec<core::PodCondition> {
        let e = &self.envs[env];
        let ready_status = if p.api_ready { "True" } else { "False" };
        let mut conditions = vec![core::PodCondition {
            type_: "PodScheduled".into(),
            status: if p.node.is_some() { "True" } else { "False" }.into(),
            reason: if p.node.is_some() {
                None
            } else {
                Some("Unschedulable".into())
            },
            message: if p.node.is_some() {
                None
            } else {
                Some(format!(
                    "0/{} nodes are available: insufficient resources or node affinity/taints.",
                    e.nodes.len()
                ))
            },
            last_transition_time: Some(self.time(p.created)),
            ..Default::default()
        }];
        if p.node.is_some() {
            conditions.push(core::PodCondition {
                type_: "Initialized".into(),
                status: "True".into(),
                last_transition_time: Some(self.time(p.created)),
                ..Default::default()
            });
            conditions.push(core::PodCondition {
                type_: "ContainersReady".into(),
                status: ready_status.into(),
                last_transition_time: Some(self.time(p.ready_changed)),
                ..Default::default()
            });
            conditions.push(core::PodCondition {
                type_: "Ready".into(),
                status: ready_status.into(),
                last_transition_time: Some(self.time(p.ready_changed)),
                ..Default::default()
            });
        }
        conditions
    }

    /// The pod spec a workload's template holds, which the real controllers create pods
    /// from (the DaemonSet controller also judges which nodes are eligible by it): the
    /// container with its requests, node selector, control-plane toleration, anti-affinity.
    pub(super) fn pod_spec(&self, w: &Workload) -> core::PodSpec {
        let image = w
            .spec
            .image
            .clone()
            .unwrap_or_else(|| format!("registry.lab.internal/{}:v1", w.spec.name));
        let affinity = match w.spec.anti_affinity {
            crate::scenario::AntiAffinity::None => None,
            aa => {
                let term = core::PodAffinityTerm {
                    label_selector: Some(LabelSelector {
                        match_labels: Some(w.spec.labels.clone()),
                        match_expressions: None,
                    }),
                    topology_key: "kubernetes.io/hostname".into(),
                    ..Default::default()
                };
                Some(core::Affinity {
                    pod_anti_affinity: Some(if aa == crate::scenario::AntiAffinity::Required {
                        core::PodAntiAffinity {
                            required_during_scheduling_ignored_during_execution: Some(vec![term]),
                            ..Default::default()
                        }
                    } else {
                        core::PodAntiAffinity {
                            preferred_during_scheduling_ignored_during_execution: Some(vec![
                                core::WeightedPodAffinityTerm {
                                    pod_affinity_term: term,
                                    weight: 100,
                                },
                            ]),
                            ..Default::default()
                        }
                    }),
                    ..Default::default()
                })
            }
        };
        let requests = |cpu_milli: i64, memory_bytes: i64| {
            Some(core::ResourceRequirements {
                requests: Some(BTreeMap::from([
                    ("cpu".to_string(), q(quantity::cpu_string(cpu_milli))),
                    ("memory".to_string(), q(quantity::mem_string(memory_bytes))),
                ])),
                ..Default::default()
            })
        };
        let (side_cpu, side_mem) = w.sidecar.unwrap_or((0, 0));
        core::PodSpec {
            containers: vec![core::Container {
                name: w.spec.name.clone(),
                image: Some(image.clone()),
                resources: requests(w.cpu_milli - side_cpu, w.memory_bytes - side_mem),
                ..Default::default()
            }],
            init_containers: w.sidecar.map(|(cpu, mem)| {
                vec![core::Container {
                    name: sidecar_name(w),
                    image: Some(image),
                    restart_policy: Some("Always".into()),
                    resources: requests(cpu, mem),
                    ..Default::default()
                }]
            }),
            node_selector: if w.spec.node_selector.is_empty() {
                None
            } else {
                Some(w.spec.node_selector.clone())
            },
            tolerations: Some(template_tolerations(w)),
            affinity,
            restart_policy: Some("Always".into()),
            scheduler_name: Some("default-scheduler".into()),
            service_account_name: Some(w.spec.name.clone()),
            termination_grace_period_seconds: Some(30),
            ..Default::default()
        }
    }

    /// Pod metrics of the given pods (all pods when `keys` is None): present while running.
    pub(super) fn render_pod_metrics(
        &self,
        env: usize,
        puts: &mut Vec<(Res, Value)>,
        deletes: &mut Vec<(Res, Key)>,
        keys: Option<&BTreeSet<Key>>,
    ) {
        let e = &self.envs[env];
        if !e.spec.metrics {
            return;
        }
        let all: Vec<&Key>;
        let keys: Vec<&Key> = match keys {
            Some(k) => k.iter().collect(),
            None => {
                all = e.pods.keys().collect();
                all
            }
        };
        for k in keys {
            let Some(p) = e.pods.get(k).filter(|p| p.running) else {
                deletes.push((Res::PodMetrics, k.clone()));
                continue;
            };
            let w = &e.workloads[p.workload];
            let usage = |cpu_milli: i64, memory_bytes: i64| json!({"cpu": quantity::cpu_nano_string(cpu_milli), "memory": format!("{}Ki", memory_bytes / 1024)});
            // The pod's usage, the sidecar's part half its request at most.
            let (side_cpu, side_mem) = w.sidecar.map_or((0, 0), |(cpu, mem)| {
                (
                    (cpu / 2).min(w.usage_cpu_milli),
                    (mem / 2).min(w.usage_memory_bytes),
                )
            });
            let mut containers = vec![
                json!({"name": w.spec.name, "usage": usage(w.usage_cpu_milli - side_cpu, w.usage_memory_bytes - side_mem)}),
            ];
            if w.sidecar.is_some() {
                containers
                    .push(json!({"name": sidecar_name(w), "usage": usage(side_cpu, side_mem)}));
            }
            puts.push((
                Res::PodMetrics,
                json!({
                    "kind": "PodMetrics",
                    "apiVersion": "metrics.k8s.io/v1beta1",
                    "metadata": {"name": p.name, "namespace": p.namespace, "creationTimestamp": self.rfc3339(Duration::ZERO), "labels": self.pod_labels(w)},
                    "timestamp": self.rfc3339(p.started_at.unwrap_or_default()),
                    "window": "18.433s",
                    "containers": containers,
                }),
            ));
        }
    }
}

/// The sidecar container's name: the workload's, then `-sidecar`.
fn sidecar_name(w: &Workload) -> String {
    format!("{}-sidecar", w.spec.name)
}

/// What a workload's template tolerates beyond what every pod gets added.
fn template_tolerations(w: &Workload) -> Vec<core::Toleration> {
    if w.spec.tolerate_all {
        vec![core::Toleration {
            operator: Some("Exists".into()),
            ..Default::default()
        }]
    } else if w.spec.tolerate_control_plane {
        vec![core::Toleration {
            key: Some("node-role.kubernetes.io/control-plane".into()),
            operator: Some("Exists".into()),
            effect: Some("NoSchedule".into()),
            ..Default::default()
        }]
    } else {
        Vec::new()
    }
}
