//! Workloads as the apps controllers report them (Deployments with their ReplicaSet,
//! DaemonSets, StatefulSets) and PodDisruptionBudgets as the disruption controller does.

use super::super::*;
use super::common::{owner, to_value};
use crate::resources::Res;
use crate::scenario::WorkloadKind;
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, ObjectMeta};

/// What every kind of workload object shares: its metadata, selector and pod template, and
/// how many of its pods are active (not terminating) and ready.
struct WorkloadObject {
    meta: ObjectMeta,
    selector: LabelSelector,
    template: core::PodTemplateSpec,
    active: i32,
    ready: i32,
}

impl World {
    /// Every workload of the environment, in scenario order, as the object of its kind.
    pub(super) fn render_workloads(&self, env: usize, puts: &mut Vec<(Res, Value)>) {
        let e = &self.envs[env];
        let counts = self.workload_pod_counts(env);
        for (wi, w) in e.workloads.iter().enumerate() {
            let (active, ready, _) = counts[wi];
            let o = self.workload_object(env, w, active, ready);
            match w.spec.kind {
                WorkloadKind::Deployment => self.render_deployment(env, w, o, puts),
                WorkloadKind::DaemonSet => self.render_daemon_set(env, wi, o, puts),
                WorkloadKind::StatefulSet => render_stateful_set(w, o, puts),
            }
        }
    }

    /// Pods per workload: (total non-terminating, ready, all pods).
    fn workload_pod_counts(&self, env: usize) -> Vec<(i32, i32, i32)> {
        let e = &self.envs[env];
        let mut counts = vec![(0i32, 0i32, 0i32); e.workloads.len()];
        for p in e.pods.values() {
            let c = &mut counts[p.workload];
            c.2 += 1;
            if p.deleting.is_none() {
                c.0 += 1;
                if p.api_ready {
                    c.1 += 1;
                }
            }
        }
        counts
    }

    /// The metadata, selector and template a workload's object carries.
    fn workload_object(&self, env: usize, w: &Workload, active: i32, ready: i32) -> WorkloadObject {
        let labels = w.spec.labels.clone();
        let selector = LabelSelector {
            match_labels: Some(w.spec.labels.clone()),
            match_expressions: None,
        };
        let mut meta = self.meta(
            env,
            "workload",
            Some(&w.spec.namespace),
            &w.spec.name,
            labels.clone(),
            Duration::ZERO,
        );
        meta.uid = Some(w.uid.clone());
        meta.generation = Some(1);
        let template = core::PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(self.pod_labels(w)),
                ..Default::default()
            }),
            spec: Some(self.pod_spec(w)),
        };
        WorkloadObject {
            meta,
            selector,
            template,
            active,
            ready,
        }
    }

    /// A Deployment, Available once enough pods are ready, and its one ReplicaSet.
    fn render_deployment(
        &self,
        env: usize,
        w: &Workload,
        o: WorkloadObject,
        puts: &mut Vec<(Res, Value)>,
    ) {
        let WorkloadObject {
            meta,
            selector,
            template,
            active,
            ready,
        } = o;
        let available = ready >= w.spec.replicas;
        let cond = |t: &str, ok: bool, reason: &str| apps::DeploymentCondition {
            type_: t.into(),
            status: if ok { "True" } else { "False" }.into(),
            reason: Some(reason.into()),
            last_transition_time: Some(self.time(Duration::ZERO)),
            last_update_time: Some(self.time(Duration::ZERO)),
            ..Default::default()
        };
        let d = apps::Deployment {
            metadata: meta.clone(),
            spec: Some(apps::DeploymentSpec {
                replicas: Some(w.spec.replicas),
                selector: selector.clone(),
                template: template.clone(),
                ..Default::default()
            }),
            status: Some(apps::DeploymentStatus {
                observed_generation: Some(1),
                replicas: Some(active),
                updated_replicas: Some(active),
                ready_replicas: Some(ready),
                available_replicas: Some(ready),
                unavailable_replicas: if active - ready > 0 {
                    Some(active - ready)
                } else {
                    None
                },
                conditions: Some(vec![
                    cond(
                        "Available",
                        available,
                        if available {
                            "MinimumReplicasAvailable"
                        } else {
                            "MinimumReplicasUnavailable"
                        },
                    ),
                    cond("Progressing", true, "NewReplicaSetAvailable"),
                ]),
                ..Default::default()
            }),
        };
        puts.push((Res::Deployments, to_value(&d)));
        let rs_name = format!("{}-{}", w.spec.name, w.template_hash);
        let mut rs_labels = self.pod_labels(w);
        rs_labels.insert("pod-template-hash".into(), w.template_hash.clone());
        let mut rs_meta = self.meta(
            env,
            "replicaset",
            Some(&w.spec.namespace),
            &rs_name,
            rs_labels,
            Duration::ZERO,
        );
        rs_meta.owner_references = Some(vec![owner("apps/v1", "Deployment", &w.spec.name, &w.uid)]);
        rs_meta.generation = Some(1);
        let rs = apps::ReplicaSet {
            metadata: rs_meta,
            spec: Some(apps::ReplicaSetSpec {
                replicas: Some(w.spec.replicas),
                selector: selector.clone(),
                template: Some(template),
                ..Default::default()
            }),
            status: Some(apps::ReplicaSetStatus {
                replicas: active,
                fully_labeled_replicas: Some(active),
                ready_replicas: Some(ready),
                available_replicas: Some(ready),
                observed_generation: Some(1),
                ..Default::default()
            }),
        };
        puts.push((Res::ReplicaSets, to_value(&rs)));
    }

    /// A DaemonSet, desiring a pod on every node its template is eligible for.
    fn render_daemon_set(
        &self,
        env: usize,
        wi: usize,
        o: WorkloadObject,
        puts: &mut Vec<(Res, Value)>,
    ) {
        let e = &self.envs[env];
        let WorkloadObject {
            meta,
            selector,
            template,
            active,
            ready,
        } = o;
        let desired = e
            .nodes
            .iter()
            .filter(|&&n| self.eligible_for_daemon(env, wi, n))
            .count() as i32;
        let d = apps::DaemonSet {
            metadata: meta,
            spec: Some(apps::DaemonSetSpec {
                selector,
                template,
                ..Default::default()
            }),
            status: Some(apps::DaemonSetStatus {
                current_number_scheduled: active,
                desired_number_scheduled: desired,
                number_misscheduled: 0,
                number_ready: ready,
                number_available: Some(ready),
                number_unavailable: if desired - ready > 0 {
                    Some(desired - ready)
                } else {
                    None
                },
                updated_number_scheduled: Some(active),
                observed_generation: Some(1),
                ..Default::default()
            }),
        };
        puts.push((Res::DaemonSets, to_value(&d)));
    }

    /// The PodDisruptionBudgets that exist now, with their status; a Longhorn one whose
    /// volumes are all detached is deleted.
    pub(super) fn render_pdbs(
        &self,
        env: usize,
        puts: &mut Vec<(Res, Value)>,
        deletes: &mut Vec<(Res, Key)>,
    ) {
        for pdb in &self.envs[env].pdbs {
            if self.pdb_exists(env, pdb) {
                puts.push((Res::PodDisruptionBudgets, self.render_pdb(env, pdb)));
            } else {
                deletes.push((
                    Res::PodDisruptionBudgets,
                    (pdb.namespace.clone(), pdb.name.clone()),
                ));
            }
        }
    }

    /// Whether the DaemonSet controller puts the workload's pod on node `n`: the
    /// control-plane taint tolerated if set, its node selector matched.
    pub(in crate::world) fn eligible_for_daemon(&self, env: usize, wi: usize, n: usize) -> bool {
        let node = &self.nodes[n];
        let w = &self.envs[env].workloads[wi];
        (!node.cp_taint || w.spec.tolerate_control_plane || w.spec.tolerate_all)
            && w.spec
                .node_selector
                .iter()
                .all(|(k, v)| node.labels.get(k) == Some(v))
    }

    /// PDB status as the disruption controller computes it (pkg/controller/disruption).
    fn render_pdb(&self, env: usize, pdb: &Pdb) -> Value {
        let e = &self.envs[env];
        let selector = pdb.selector.as_ref().map(Selector::from_map);
        let matching: Vec<&Pod> = match &selector {
            None => vec![],
            Some(s) => e
                .pods
                .values()
                .filter(|p| {
                    p.namespace == pdb.namespace
                        && s.matches(&self.pod_labels(&e.workloads[p.workload]))
                })
                .collect(),
        };
        let healthy = matching
            .iter()
            .filter(|p| p.api_ready && p.deleting.is_none())
            .count() as i32;
        // The scale of the owning controllers.
        let owners: BTreeSet<usize> = matching.iter().map(|p| p.workload).collect();
        let scale: i32 = owners.iter().map(|&w| e.workloads[w].spec.replicas).sum();
        let (expected, desired) = match (&pdb.min_available, &pdb.max_unavailable) {
            (_, Some(max)) => {
                let max = scaled(max, scale);
                (scale, (scale - max).max(0))
            }
            (Some(IntOrString::Int(min)), None) => (
                matching.iter().filter(|p| p.deleting.is_none()).count() as i32,
                *min,
            ),
            (Some(min @ IntOrString::String(_)), None) => (scale, scaled(min, scale)),
            // policy/v1 defaults neither field: the disruption controller expects no pods and
            // never allows a disruption (`getExpectedPodCount`).
            (None, None) => (0, 0),
        };
        let allowed = if expected <= 0 {
            0
        } else {
            (healthy - desired).max(0)
        };
        let obj = policy::PodDisruptionBudget {
            metadata: ObjectMeta {
                uid: Some(pdb.uid.clone()),
                generation: Some(1),
                ..self.meta(
                    env,
                    "pdb",
                    Some(&pdb.namespace),
                    &pdb.name,
                    BTreeMap::new(),
                    Duration::ZERO,
                )
            },
            spec: Some(policy::PodDisruptionBudgetSpec {
                min_available: pdb.min_available.clone(),
                max_unavailable: pdb.max_unavailable.clone(),
                selector: pdb.selector.as_ref().map(|m| LabelSelector {
                    match_labels: Some(m.clone()),
                    match_expressions: None,
                }),
                ..Default::default()
            }),
            status: Some(policy::PodDisruptionBudgetStatus {
                current_healthy: healthy,
                desired_healthy: desired,
                disruptions_allowed: allowed,
                expected_pods: expected,
                observed_generation: Some(1),
                conditions: Some(vec![Condition {
                    type_: "DisruptionAllowed".into(),
                    status: if allowed > 0 { "True" } else { "False" }.into(),
                    reason: if allowed > 0 {
                        "SufficientPods"
                    } else {
                        "InsufficientPods"
                    }
                    .into(),
                    message: String::new(),
                    last_transition_time: self.time(Duration::ZERO),
                    observed_generation: Some(1),
                }]),
                ..Default::default()
            }),
        };
        to_value(&obj)
    }
}

/// A StatefulSet, its pods named by ordinal under its headless Service.
fn render_stateful_set(w: &Workload, o: WorkloadObject, puts: &mut Vec<(Res, Value)>) {
    let WorkloadObject {
        meta,
        selector,
        template,
        active,
        ready,
    } = o;
    let s = apps::StatefulSet {
        metadata: meta,
        spec: Some(apps::StatefulSetSpec {
            replicas: Some(w.spec.replicas),
            selector,
            template,
            service_name: Some(w.spec.name.clone()),
            ..Default::default()
        }),
        status: Some(apps::StatefulSetStatus {
            replicas: active,
            ready_replicas: Some(ready),
            available_replicas: Some(ready),
            current_replicas: Some(active),
            updated_replicas: Some(active),
            observed_generation: Some(1),
            ..Default::default()
        }),
    };
    puts.push((Res::StatefulSets, to_value(&s)));
}

/// Resolve an int-or-percent against a total, rounding percentages up as the controller does.
fn scaled(v: &IntOrString, total: i32) -> i32 {
    match v {
        IntOrString::Int(i) => *i,
        IntOrString::String(s) => {
            let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
            ((pct * i64::from(total) + 99) / 100) as i32
        }
    }
}
