//! Typed shapes for the custom resources and metrics that k8s-openapi does not cover:
//! Cilium's L2 announcement policy, Longhorn's nodes, volumes, replicas and settings, and the
//! metrics.k8s.io objects. Only the fields the checks read are typed; unknown fields are
//! ignored because these come from clusters, not from our configuration.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::{Deserialize, Serialize};

use crate::load::NodeLoad;

/// `ciliuml2announcementpolicies.cilium.io/v2alpha1`, cluster-scoped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct L2AnnouncementPolicy {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: L2AnnouncementPolicySpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct L2AnnouncementPolicySpec {
    /// Nil selects every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<LabelSelector>,
    /// Nil selects every service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_selector: Option<LabelSelector>,
    #[serde(default, rename = "loadBalancerIPs")]
    pub load_balancer_ips: bool,
    #[serde(default, rename = "externalIPs")]
    pub external_ips: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interfaces: Option<Vec<String>>,
}

/// `nodes.longhorn.io/v1beta2` in `longhorn-system`; its name is the Kubernetes node name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LonghornNode {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: LonghornNodeSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<LonghornNodeStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LonghornNodeSpec {
    #[serde(default = "default_true")]
    pub allow_scheduling: bool,
    /// Longhorn moves replicas off a node whose eviction is requested and places none there.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub eviction_requested: bool,
    #[serde(default)]
    pub disks: BTreeMap<String, LonghornDisk>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LonghornDisk {
    #[serde(default)]
    pub path: String,
    #[serde(default = "default_true")]
    pub allow_scheduling: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub eviction_requested: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LonghornNodeStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// `longhorn.io/v1beta2` writes conditions as a list (`Ready`, `Schedulable`, ...).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub conditions: Vec<LonghornCondition>,
    /// Per disk name, what longhorn-manager observed (its own `Schedulable` condition is false
    /// under DiskPressure, whatever `allowScheduling` says). Longhorn types the map's values as
    /// pointers (`map[string]*DiskStatus`), so a value may be `null`: read as no status.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub disk_status: BTreeMap<String, Option<LonghornDiskStatus>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LonghornDiskStatus {
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub conditions: Vec<LonghornCondition>,
}

/// One condition of a Longhorn node or disk (`k8s/pkg/apis/longhorn/v1beta2/misc.go`
/// `Condition`: `type`, `status` `True`/`False`/`Unknown`, `reason`, `message`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LonghornCondition {
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// What a Longhorn condition says, as the replica scheduler reads it: longhorn-manager's
/// `types.GetCondition` fills a condition not in the list as `Unknown`, and the scheduler
/// (`scheduler/replica_scheduler.go`) places a replica only where the status is `True`.
/// gates calls `False` a refusal and anything else (absent, `Unknown`, another word) unknown:
/// never a pass.
#[derive(Debug, Clone, Copy)]
pub enum LonghornConditionState<'a> {
    True,
    False(&'a LonghornCondition),
    /// Not reported (`None`) or reported with a status neither `True` nor `False`.
    Unknown(Option<&'a LonghornCondition>),
}

/// The condition `kind` in `conditions` (the first of that type, as `types.GetCondition`).
pub fn longhorn_condition<'a>(
    conditions: &'a [LonghornCondition],
    kind: &str,
) -> LonghornConditionState<'a> {
    match conditions.iter().find(|c| c.type_ == kind) {
        Some(c) if c.status.eq_ignore_ascii_case("true") => LonghornConditionState::True,
        Some(c) if c.status.eq_ignore_ascii_case("false") => LonghornConditionState::False(c),
        other => LonghornConditionState::Unknown(other),
    }
}

fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// `volumes.longhorn.io/v1beta2`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LonghornVolume {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: LonghornVolumeSpec,
    #[serde(default)]
    pub status: LonghornVolumeStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LonghornVolumeSpec {
    #[serde(default)]
    pub number_of_replicas: i64,
    /// The volume's size in bytes, a decimal string (`Size int64 json:"size,string"`); each
    /// replica rebuilt after a loss copies this much.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub size: String,
    /// `rwo`, `rwop` or `rwx`; the volume webhook writes `rwo` where a volume names none
    /// (`webhook/resources/volume/mutator.go`), so empty reads as `rwo`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub access_mode: String,
    /// `ignored` (the global `replica-soft-anti-affinity` setting decides), `enabled` or
    /// `disabled`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub replica_soft_anti_affinity: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LonghornVolumeStatus {
    /// `attached`, `detached`, ...
    #[serde(default)]
    pub state: String,
    /// `healthy`, `degraded`, `faulted`, `unknown` (detached volumes report `unknown`).
    #[serde(default)]
    pub robustness: String,
    #[serde(default, rename = "currentNodeID")]
    pub current_node_id: String,
    /// Longhorn's record of the PersistentVolumeClaim and the pods that use the volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_status: Option<LonghornKubernetesStatus>,
}

/// `VolumeStatus.kubernetesStatus` (`k8s/pkg/apis/longhorn/v1beta2/volume.go`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LonghornKubernetesStatus {
    /// The namespace of the claim and of its pods.
    #[serde(default)]
    pub namespace: String,
    #[serde(default, rename = "pvcName")]
    pub pvc_name: String,
    /// Nullable in the CRD.
    #[serde(default)]
    pub workloads_status: Option<Vec<LonghornWorkloadStatus>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LonghornWorkloadStatus {
    #[serde(default)]
    pub pod_name: String,
    #[serde(default)]
    pub workload_name: String,
    #[serde(default)]
    pub workload_type: String,
}

/// `replicas.longhorn.io/v1beta2`; labelled `longhornvolume=<volume>`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LonghornReplica {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: LonghornReplicaSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LonghornReplicaSpec {
    #[serde(default, rename = "nodeID")]
    pub node_id: String,
    #[serde(default)]
    pub volume_name: String,
    /// Set when the replica failed (longhorn-manager keeps its `nodeID`): it is no healthy
    /// copy of the data, wherever it sits.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub failed_at: String,
    /// Set the first time the replica becomes read/write after creation or a rebuild, cleared
    /// before a rebuild (`ReplicaSpec.healthyAt`). Longhorn always writes the field (no
    /// `omitempty`), so `Some("")` is a replica being built that holds no complete copy yet;
    /// `None` is an object that does not carry the field at all (hand-written snapshots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_at: Option<String>,
}

/// `settings.longhorn.io/v1beta2`: a string value at the top level (not under spec).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LonghornSetting {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub value: String,
}

/// `metrics.k8s.io/v1beta1` NodeMetrics (resource `nodes`). Memory is the working set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeMetrics {
    #[serde(default, deserialize_with = "super::meta::identity")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub timestamp: Option<String>,
    #[serde(default)]
    pub window: Option<String>,
    #[serde(default)]
    pub usage: ResourceUsage,
}

impl NodeMetrics {
    /// The statistic of every node whose load is known, as node metrics (CPU in nanocores, memory
    /// in bytes), so the capacity judgements read it as they read metrics-server's sample.
    pub fn of_load(load: &NodeLoad) -> Vec<NodeMetrics> {
        load.nodes
            .keys()
            .filter_map(|node| {
                let (cpu, memory) = load.of(node).ok()?;
                let mut metrics = NodeMetrics::default();
                metrics.metadata.name = Some(node.clone());
                metrics.window = Some(format!(
                    "{}s",
                    (load.window.end_ms - load.window.start_ms) / 1000
                ));
                metrics.timestamp = Some(crate::load::time(load.window.end_ms).to_rfc3339());
                metrics.usage.cpu = Some(format!("{}n", (cpu.value.max(0.0) * 1e9).ceil() as i128));
                metrics.usage.memory = Some(format!("{}", memory.value.max(0.0).ceil() as i128));
                Some(metrics)
            })
            .collect()
    }
}

/// `metrics.k8s.io/v1beta1` PodMetrics (resource `pods`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodMetrics {
    #[serde(default, deserialize_with = "super::meta::identity")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub timestamp: Option<String>,
    #[serde(default)]
    pub window: Option<String>,
    #[serde(default)]
    pub containers: Vec<ContainerMetrics>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContainerMetrics {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub usage: ResourceUsage,
}

/// CPU and memory as Kubernetes quantity strings (`7338891n`, `14520Ki`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceUsage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
}

fn default_true() -> bool {
    true
}
