//! Emptying a real control plane between two lab environments, so that one plane serves every
//! scenario in turn: starting etcd, kube-apiserver and the controllers costs far more than
//! deleting a few hundred objects.
//!
//! Workloads go first with their dependents orphaned (so no controller recreates a pod), then
//! every pod at once (no kubelet waits out a grace period), then everything else the loader
//! creates, then the namespaces. The installed CRDs stay. What the API server keeps for itself
//! (the `kubernetes` Service, its identity Leases, the built-in namespaces) is left alone.

use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PropagationPolicy};
use kube::discovery::Scope;

use super::launch::{ControlPlane, Identity};
use super::load::api_resource;

/// In deletion order: owners before what they own, namespaces last.
const KINDS: &[(&str, &str)] = &[
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "ControllerRevision"),
    ("v1", "Pod"),
    // Before the Leases: kwok renews a node's Lease while the node exists.
    ("v1", "Node"),
    ("policy/v1", "PodDisruptionBudget"),
    ("v1", "Service"),
    ("discovery.k8s.io/v1", "EndpointSlice"),
    ("coordination.k8s.io/v1", "Lease"),
    ("cilium.io/v2alpha1", "CiliumL2AnnouncementPolicy"),
    ("longhorn.io/v1beta2", "Node"),
    ("longhorn.io/v1beta2", "Volume"),
    ("longhorn.io/v1beta2", "Replica"),
    ("longhorn.io/v1beta2", "Setting"),
    ("v1", "Namespace"),
];

/// What the API server made itself and keeps: never deleted.
fn kept(kind: &str, namespace: Option<&str>, name: &str) -> bool {
    match kind {
        "Namespace" => matches!(
            name,
            "default" | "kube-system" | "kube-public" | "kube-node-lease"
        ),
        "Service" => namespace == Some("default") && name == "kubernetes",
        "EndpointSlice" => namespace == Some("default") && name == "kubernetes",
        "Lease" => namespace == Some("kube-system") && name.starts_with("apiserver-"),
        _ => false,
    }
}

/// Delete every object a lab environment brought and wait until the plane is empty of them.
pub async fn clear(plane: &ControlPlane, limit: Duration) -> Result<(), String> {
    let client = plane.client(Identity::Admin).await?;
    plane.node_kubelets.stop_all();
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..DeleteParams::default()
    };
    for (api_version, kind) in KINDS {
        for (api, name) in remaining(&client, api_version, kind).await? {
            match api.delete(&name, &params).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
                Err(err) => return Err(format!("deleting {kind} {name}: {err}")),
            }
        }
    }
    let start = Instant::now();
    loop {
        let mut left = Vec::new();
        for (api_version, kind) in KINDS {
            for (_, name) in remaining(&client, api_version, kind).await? {
                left.push(format!("{kind} {name}"));
            }
        }
        if left.is_empty() {
            return Ok(());
        }
        if start.elapsed() > limit {
            return Err(format!(
                "the real control plane still holds, {limit:?} after deleting them: {}",
                left.join(", ")
            ));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The objects of one kind that are not [`kept`], each with the API to delete it through.
async fn remaining(
    client: &kube::Client,
    api_version: &str,
    kind: &str,
) -> Result<Vec<(Api<DynamicObject>, String)>, String> {
    let (resource, scope) = match api_resource(client, api_version, kind).await {
        Ok(found) => found,
        // A custom resource whose CRD is not installed has nothing to delete.
        Err(_) if api_version.contains(".io/") && !api_version.contains("k8s.io/") => {
            return Ok(Vec::new());
        }
        Err(err) => return Err(err),
    };
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let list = all
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing {kind}: {e}"))?;
    let mut out = Vec::new();
    for object in list.items {
        let name = object.metadata.name.clone().unwrap_or_default();
        let namespace = object.metadata.namespace.clone();
        if kept(kind, namespace.as_deref(), &name) {
            continue;
        }
        let api = match (&scope, &namespace) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
            _ => Api::all_with(client.clone(), &resource),
        };
        out.push((api, name));
    }
    Ok(out)
}
