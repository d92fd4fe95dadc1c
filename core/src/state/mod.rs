//! Everything collected about one environment at one moment, as typed data.
//!
//! Collectors (live kube-rs, snapshot files) fill a [`State`]; checks only read it. A
//! resource the cluster does not serve (a CRD that is not installed, the metrics API without
//! metrics-server) is recorded as [`Collected::Absent`] with the reason, so a check that
//! needs it can give an `error` verdict that says why.

mod chaos_evidence;
mod crds;
mod infra;
mod input;
mod meta;
mod pod;
pub mod provenance;

pub use chaos_evidence::ChaosEvidence;
pub use input::Input;

pub use crds::{
    ContainerMetrics, L2AnnouncementPolicy, L2AnnouncementPolicySpec, LonghornCondition,
    LonghornConditionState, LonghornDisk, LonghornDiskStatus, LonghornKubernetesStatus,
    LonghornNode, LonghornNodeSpec, LonghornNodeStatus, LonghornReplica, LonghornReplicaSpec,
    LonghornSetting, LonghornVolume, LonghornVolumeSpec, LonghornVolumeStatus,
    LonghornWorkloadStatus, NodeMetrics, PodMetrics, ResourceUsage, longhorn_condition,
};

pub use pod::{Container, ContainerPort, Pod, PodCondition, PodSpec, PodStatus};

pub use infra::{
    ApiState, EtcdMemberView, EtcdView, Placement, ProxmoxHost, ProxmoxState, ProxmoxStorage,
    ProxmoxVm, TalosEndpoint, TalosState, Unanswered, VmDisk,
};

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde::Serialize;
use std::sync::Arc;

use crate::verdict::Finding;

/// One collected resource list, or why it could not be collected.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Collected<T> {
    Present(T),
    /// Should be there but is not (not served, forbidden, unreachable): checks give `error`.
    Absent(String),
    /// Not part of this run (no such section in the environment, or an offline snapshot
    /// run): checks that need it are skipped with the reason.
    NotApplicable(String),
}

impl<T: Default> Default for Collected<T> {
    fn default() -> Self {
        Collected::Absent("not collected".to_string())
    }
}

impl<T> Collected<T> {
    /// The data, or an `error` finding that names what is missing and why.
    pub fn get(&self, what: &str) -> Result<&T, Finding> {
        match self {
            Collected::Present(value) => Ok(value),
            Collected::Absent(reason) => {
                Err(Finding::error(format!("{what} unavailable: {reason}")))
            }
            Collected::NotApplicable(reason) => Err(Finding::skip(reason.clone())),
        }
    }

    pub fn present(&self) -> Option<&T> {
        match self {
            Collected::Present(value) => Some(value),
            Collected::Absent(_) | Collected::NotApplicable(_) => None,
        }
    }
}

/// Where a state came from, for reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Source {
    Live { context: String },
    Snapshot { files: Vec<String> },
}

/// The typed picture of one environment.
#[derive(Debug, Clone, Serialize)]
pub struct State {
    pub source: Source,
    pub collected_at: DateTime<Utc>,
    /// Each object behind an `Arc`: `gates watch` keeps the objects it watches and the state
    /// it evaluates sharing each one (a second copy of 100,000 pods was a third of its
    /// memory), a watched change replaces one object, and a copy of the state (the host-loss
    /// prediction's, taken while changes go on) copies none.
    pub nodes: Collected<Vec<Arc<Node>>>,
    pub pods: Collected<Vec<Arc<Pod>>>,
    pub deployments: Collected<Vec<Arc<Deployment>>>,
    pub daemonsets: Collected<Vec<Arc<DaemonSet>>>,
    pub statefulsets: Collected<Vec<Arc<StatefulSet>>>,
    pub pdbs: Collected<Vec<Arc<PodDisruptionBudget>>>,
    pub services: Collected<Vec<Arc<Service>>>,
    pub leases: Collected<Vec<Arc<Lease>>>,
    pub l2_policies: Collected<Vec<Arc<L2AnnouncementPolicy>>>,
    pub longhorn_nodes: Collected<Vec<Arc<LonghornNode>>>,
    pub longhorn_volumes: Collected<Vec<Arc<LonghornVolume>>>,
    pub longhorn_replicas: Collected<Vec<Arc<LonghornReplica>>>,
    pub longhorn_settings: Collected<Vec<Arc<LonghornSetting>>>,
    pub node_metrics: Collected<Vec<Arc<NodeMetrics>>>,
    pub pod_metrics: Collected<Vec<Arc<PodMetrics>>>,
    /// Each node's load over a window from Prometheus (`capacity.basis: prometheus`); with
    /// that basis `node_metrics` holds the statistic of each node whose load is known.
    pub node_load: Collected<crate::load::NodeLoad>,
    /// Absent when the environment has no `talos` section.
    pub talos: Collected<TalosState>,
    /// Absent when the environment has no `proxmox` section.
    pub proxmox: Collected<ProxmoxState>,
    /// Absent when the environment has no `api` section.
    pub api: Collected<ApiState>,
    /// The newest chaos report of the environment (gate 4), when one was found.
    pub chaos_report: Collected<ChaosEvidence>,
    /// Who the cluster is (kube-system UID, API CA digest), as far as it could be read.
    pub cluster_identity: provenance::ClusterIdentity,
    /// What a snapshot recorded of its own origin; `None` for live runs and kubectl output.
    pub recorded: Option<provenance::Provenance>,
    /// Sources the run could not use at all (no readable kubeconfig, an API that does not
    /// answer, credentials refused): said once, first, with the fix, while each trial that
    /// needs one names it briefly.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources_down: Vec<SourceDown>,
}

/// A whole source the run could not use, and why in full.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceDown {
    /// What it is (`the Kubernetes API`).
    pub source: String,
    /// The whole reason, with the fix where the user can act.
    pub reason: String,
}

impl State {
    /// A state in which nothing has been collected yet; collectors fill it in.
    pub fn empty(source: Source, collected_at: DateTime<Utc>) -> Self {
        State {
            source,
            collected_at,
            nodes: Collected::default(),
            pods: Collected::default(),
            deployments: Collected::default(),
            daemonsets: Collected::default(),
            statefulsets: Collected::default(),
            pdbs: Collected::default(),
            services: Collected::default(),
            leases: Collected::default(),
            l2_policies: Collected::default(),
            longhorn_nodes: Collected::default(),
            longhorn_volumes: Collected::default(),
            longhorn_replicas: Collected::default(),
            longhorn_settings: Collected::default(),
            node_metrics: Collected::default(),
            pod_metrics: Collected::default(),
            node_load: Collected::NotApplicable(
                "the load over a window was not read from Prometheus (it is read on live runs with capacity.basis: prometheus; snapshots do not record it)".to_string(),
            ),
            talos: Collected::NotApplicable("Talos was not read".to_string()),
            proxmox: Collected::NotApplicable("Proxmox was not read".to_string()),
            api: Collected::NotApplicable("the API endpoint was not read".to_string()),
            chaos_report: Collected::NotApplicable("chaos reports were not read".to_string()),
            cluster_identity: provenance::ClusterIdentity::default(),
            recorded: None,
            sources_down: Vec::new(),
        }
    }
}
