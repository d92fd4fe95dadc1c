//! What longhorn-manager creates in `longhorn-system` besides its own custom resources, as its
//! controllers do (longhorn/longhorn-manager): the PodDisruptionBudgets of `csi-attacher` and
//! `csi-provisioner`, named after the Deployment, `minAvailable: 1` over its selector, only while
//! some volume is not detached (`controller/kubernetes_pdb_controller.go`; a PDB of that name
//! that already exists is left alone).

use super::*;
use crate::ids;
use crate::resources::Res;
use crate::scenario::WorkloadKind;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};

pub(super) const NAMESPACE: &str = "longhorn-system";

/// The CSI Deployments longhorn-manager protects with a PDB of its own.
const CSI_WITH_PDB: [&str; 2] = ["csi-attacher", "csi-provisioner"];

/// The PDBs longhorn-manager makes for the environment's CSI Deployments: none for one whose
/// name a PDB of the scenario already has (the controller finds it and does nothing).
pub(super) fn csi_pdbs(es: &EnvSpec, existing: &[Pdb]) -> Vec<Pdb> {
    es.workloads
        .iter()
        .filter(|w| {
            w.kind == WorkloadKind::Deployment
                && w.namespace == NAMESPACE
                && CSI_WITH_PDB.contains(&w.name.as_str())
        })
        .filter(|w| {
            !existing
                .iter()
                .any(|p| p.namespace == w.namespace && p.name == w.name)
        })
        .map(|w| Pdb {
            namespace: NAMESPACE.into(),
            name: w.name.clone(),
            uid: ids::uuid(&[&es.name, "pdb", NAMESPACE, &w.name]),
            selector: Some(w.labels.clone()),
            min_available: Some(IntOrString::Int(1)),
            max_unavailable: None,
            made_by: PdbMaker::LonghornWhileInUse,
        })
        .collect()
}

impl World {
    /// Whether a PDB exists now: longhorn-manager deletes its CSI PDBs once every volume is
    /// detached and makes them again when one is attached.
    pub(super) fn pdb_exists(&self, env: usize, pdb: &Pdb) -> bool {
        match pdb.made_by {
            PdbMaker::Scenario => true,
            PdbMaker::LonghornWhileInUse => self.envs[env]
                .volumes
                .iter()
                .any(|v| v.attached_to.is_some()),
        }
    }
}

/// Instance managers: on every node longhorn-manager runs on, one pod named after its
/// `InstanceManager` (`instance-manager-` and a 32-hex checksum, `types.GetInstanceManagerName`),
/// owned by it (`controller: true`), bound with `spec.nodeName` (never scheduled elsewhere),
/// requesting the `guaranteed-instance-manager-cpu` share of the node's allocatable CPU
/// (`GetInstanceManagerCPURequirement`), tolerating only what the admission plugin adds; and a
/// PDB of the same name, `minAvailable: 1` over the pod's labels
/// (`generateInstanceManagerPDBManifest`), which therefore never allows a disruption.
pub(super) fn instance_manager_name(node: &str) -> String {
    format!(
        "instance-manager-{:016x}{:016x}",
        ids::hash64(&[node, "instance-manager"]),
        ids::hash64(&[node, "instance-manager", "2"])
    )
}

/// The labels of an instance-manager pod (`types.GetInstanceManagerLabels`).
fn instance_manager_labels(node: &str) -> BTreeMap<String, String> {
    [
        ("longhorn.io/component", "instance-manager"),
        ("longhorn.io/data-engine", "v1"),
        ("longhorn.io/instance-manager-image", IM_IMAGE_CHECKSUM),
        ("longhorn.io/instance-manager-type", "aio"),
        ("longhorn.io/managed-by", "longhorn-manager"),
        ("longhorn.io/node", node),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

const IM_IMAGE: &str = "longhornio/longhorn-instance-manager:v1.10.1";
const IM_IMAGE_CHECKSUM: &str = "imi-8d2e5f61";

/// The default of `guaranteed-instance-manager-cpu` (`types/setting.go`), in percent.
pub(super) const GUARANTEED_IM_CPU_DEFAULT: &str = "{\"v1\":\"12\",\"v2\":\"12\"}";

/// The v1 data engine's share of `guaranteed-instance-manager-cpu`: a number, or the `v1`
/// entry of the per-engine JSON object Longhorn 1.8 and later store.
pub(super) fn guaranteed_cpu_percent(value: &str) -> Option<f64> {
    let value = value.trim();
    if let Ok(v) = value.parse::<f64>() {
        return (0.0..=100.0).contains(&v).then_some(v);
    }
    let object: serde_json::Map<String, Value> = serde_json::from_str(value).ok()?;
    let v1 = object.get("v1")?;
    let v: f64 = match v1 {
        Value::String(s) => s.trim().parse().ok()?,
        Value::Number(n) => n.as_f64()?,
        _ => return None,
    };
    (0.0..=100.0).contains(&v).then_some(v)
}

/// An instance manager's pod address: `.1` of its node's podCIDR (`render::common::pod_cidr`).
fn instance_manager_ip(n: usize) -> String {
    format!("10.244.{}.1", n % 256)
}

impl World {
    /// Whether node `n` runs an instance manager: longhorn-manager's DaemonSet runs there (or,
    /// in a scenario that does not list it, the node has a Longhorn disk).
    pub(super) fn runs_instance_manager(&self, env: usize, n: usize) -> bool {
        let e = &self.envs[env];
        if e.spec.longhorn.is_none() {
            return false;
        }
        match e.workloads.iter().position(|w| {
            w.spec.kind == WorkloadKind::DaemonSet
                && w.spec.namespace == NAMESPACE
                && w.spec.name == "longhorn-manager"
        }) {
            Some(wi) => self.eligible_for_daemon(env, wi, n),
            None => e.disk_nodes.contains(&n),
        }
    }

    /// The CPU (millicores) node `n`'s instance manager requests.
    pub(super) fn instance_manager_cpu_milli(&self, env: usize, n: usize) -> i64 {
        if !self.runs_instance_manager(env, n) {
            return 0;
        }
        let allocatable = self.nodes[n].cpu_milli - super::node_facts::RESERVED_CPU_MILLI;
        (allocatable as f64 * self.envs[env].instance_manager_cpu_percent / 100.0).round() as i64
    }

    /// Each instance manager's pod and PDB as the API serves them now.
    pub(super) fn render_instance_managers(&self, env: usize, puts: &mut Vec<(Res, Value)>) {
        let e = &self.envs[env];
        for &n in &e.nodes {
            if !self.runs_instance_manager(env, n) {
                continue;
            }
            let pod = self.instance_manager_pod(env, n);
            puts.push((Res::Pods, serde_json::to_value(&pod).unwrap_or(Value::Null)));
            let pdb = self.instance_manager_pdb(env, n);
            puts.push((
                Res::PodDisruptionBudgets,
                serde_json::to_value(&pdb).unwrap_or(Value::Null),
            ));
        }
    }

    /// An instance manager's pod: on its node, owned by its InstanceManager, a new one each
    /// time the node comes back, Terminating once evicted, Ready with the node.
    fn instance_manager_pod(&self, env: usize, n: usize) -> core::Pod {
        let e = &self.envs[env];
        let node = &self.nodes[n];
        let name = instance_manager_name(&node.name);
        let labels = instance_manager_labels(&node.name);
        let created = node.booted_at;
        let evicted = node.instance_manager_evicted;
        let ready = node.ready && evicted.is_none();
        let status = if ready { "True" } else { "False" };
        let condition = |type_: &str, s: &str, at: Duration| core::PodCondition {
            type_: type_.into(),
            status: s.into(),
            last_transition_time: Some(self.time(at)),
            ..Default::default()
        };
        core::Pod {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(NAMESPACE.into()),
                // A new pod each time the node comes back.
                uid: Some(ids::uuid(&[
                    &e.spec.name,
                    "instance-manager-pod",
                    &node.name,
                    &node.epoch.to_string(),
                ])),
                labels: Some(labels.clone()),
                creation_timestamp: Some(self.time(created)),
                deletion_timestamp: evicted.map(|d| self.time(d + Duration::from_secs(30))),
                deletion_grace_period_seconds: evicted.map(|_| 30),
                owner_references: Some(vec![OwnerReference {
                    api_version: "longhorn.io/v1beta2".into(),
                    kind: "InstanceManager".into(),
                    name: name.clone(),
                    uid: ids::uuid(&[&e.spec.name, "instancemanager", &node.name]),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]),
                ..Default::default()
            },
            spec: Some(core::PodSpec {
                node_name: Some(node.name.clone()),
                containers: vec![core::Container {
                    name: "instance-manager".into(),
                    image: Some(IM_IMAGE.into()),
                    resources: Some(core::ResourceRequirements {
                        requests: Some(BTreeMap::from([(
                            "cpu".to_string(),
                            Quantity(format!("{}m", self.instance_manager_cpu_milli(env, n))),
                        )])),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                service_account_name: Some("longhorn-service-account".into()),
                tolerations: Some(super::node_facts::node_down_tolerations(Some(
                    self.timings.toleration.as_secs() as i64,
                ))),
                ..Default::default()
            }),
            status: Some(core::PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![
                    condition("PodScheduled", "True", created),
                    condition("Initialized", "True", created),
                    condition("ContainersReady", status, node.ready_changed),
                    condition("Ready", status, node.ready_changed),
                ]),
                container_statuses: Some(vec![core::ContainerStatus {
                    name: "instance-manager".into(),
                    image: IM_IMAGE.into(),
                    image_id: String::new(),
                    ready,
                    started: Some(ready),
                    state: Some(core::ContainerState {
                        running: Some(core::ContainerStateRunning {
                            started_at: Some(self.time(created)),
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                // Inside the node's podCIDR, at an address no workload pod gets (they take
                // .2 to .254).
                pod_ip: Some(instance_manager_ip(n)),
                pod_ips: Some(vec![core::PodIP {
                    ip: instance_manager_ip(n),
                }]),
                host_ip: node.addressed.then(|| self.plan.node_ip(n).to_string()),
                qos_class: Some("Burstable".into()),
                start_time: Some(self.time(created)),
                ..Default::default()
            }),
        }
    }

    /// The PodDisruptionBudget longhorn-manager keeps over an instance manager: `minAvailable:
    /// 1`, so draining its node is blocked while it runs.
    fn instance_manager_pdb(&self, env: usize, n: usize) -> policy::PodDisruptionBudget {
        let e = &self.envs[env];
        let node = &self.nodes[n];
        let name = instance_manager_name(&node.name);
        let labels = instance_manager_labels(&node.name);
        let evicted = node.instance_manager_evicted;
        let ready = node.ready && evicted.is_none();
        let healthy = i32::from(ready);
        policy::PodDisruptionBudget {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(NAMESPACE.into()),
                uid: Some(ids::uuid(&[&e.spec.name, "pdb", NAMESPACE, &name])),
                generation: Some(1),
                creation_timestamp: Some(self.time(Duration::ZERO)),
                ..Default::default()
            },
            spec: Some(policy::PodDisruptionBudgetSpec {
                min_available: Some(IntOrString::Int(1)),
                selector: Some(LabelSelector {
                    match_labels: Some(labels),
                    match_expressions: None,
                }),
                ..Default::default()
            }),
            status: Some(policy::PodDisruptionBudgetStatus {
                current_healthy: healthy,
                desired_healthy: 1,
                disruptions_allowed: 0,
                expected_pods: i32::from(evicted.is_none()),
                observed_generation: Some(1),
                ..Default::default()
            }),
        }
    }
}
