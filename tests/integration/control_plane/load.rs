//! Loading objects into the real control plane through its API as the admin: the RBAC of the
//! test identities, the project's CRDs, and a lab environment's manifests
//! (`gates_lab::export`), then waiting until the real controllers and kwok agree with what
//! the lab says about every workload.

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, Scope};
use serde_json::Value;

use super::launch::{ControlPlane, Identity, KWOK_MANAGED, Kubelets};
use crate::support::root;

/// The shipped ClusterRole, parsed.
pub fn reader_role() -> Value {
    let path = root().join("deploy/rbac/gates-reader.yaml");
    let text = std::fs::read_to_string(&path).expect("deploy/rbac/gates-reader.yaml is readable");
    gates_core::yaml::from_str(&text).expect("deploy/rbac/gates-reader.yaml is one YAML document")
}

/// The shipped role without `resource` of `group` (for the narrower identity).
pub fn role_without(group: &str, resource: &str, name: &str) -> Value {
    let mut role = reader_role();
    role["metadata"]["name"] = Value::from(name);
    for rule in role["rules"].as_array_mut().unwrap() {
        if rule["apiGroups"][0] == group {
            rule["resources"]
                .as_array_mut()
                .unwrap()
                .retain(|r| r != resource);
        }
    }
    role
}

fn binding(role: &str, user: &str) -> Value {
    serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": user},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    })
}

/// The reader identity gets exactly the shipped role; the narrow one loses (core) `nodes`.
pub async fn apply_rbac(plane: &ControlPlane) -> Result<(), String> {
    let client = plane.client(Identity::Admin).await?;
    for object in [
        reader_role(),
        binding("gates-reader", Identity::Reader.user()),
        role_without("", "nodes", "gates-narrow"),
        binding("gates-narrow", Identity::Narrow.user()),
    ] {
        create(&client, object).await?;
    }
    Ok(())
}

/// Install the project's CRDs and wait until the API serves each.
pub async fn install_crds(plane: &ControlPlane) -> Result<(), String> {
    install(plane, gates_lab::export::crds()?).await
}

/// Install `crds` and wait until the API serves each.
pub async fn install(plane: &ControlPlane, crds: Vec<Value>) -> Result<(), String> {
    let client = plane.client(Identity::Admin).await?;
    let mut names = Vec::new();
    for crd in crds {
        names.push(crd["metadata"]["name"].as_str().unwrap_or("").to_string());
        create(&client, crd).await?;
    }
    let resource = api_resource(
        &client,
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
    )
    .await?
    .0;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let deadline = Instant::now() + Duration::from_secs(30);
    for name in names {
        loop {
            let crd = api
                .get(&name)
                .await
                .map_err(|e| format!("CRD {name}: {e}"))?;
            let established = crd.data["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Established" && c["status"] == "True")
                });
            if established {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("CRD {name} was not established within 30 s"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // Discovery caches of the clients below must see the new groups.
    tokio::time::sleep(Duration::from_millis(500)).await;
    Ok(())
}

/// Create a lab environment's objects as the lab renders them: nodes managed by kwok (it
/// keeps them Ready; one kwok per node with [`Kubelets::PerNode`]), pods bound to their nodes (kwok runs them), status written where no
/// real controller or kubelet writes it.
pub async fn load_manifests(plane: &ControlPlane, objects: Vec<Value>) -> Result<usize, String> {
    let client = plane.client(Identity::Admin).await?;
    let mut created = 0;
    for mut object in objects {
        let kind = object["kind"].as_str().unwrap_or("").to_string();
        if (kind == "Namespace" && builtin_namespace(&object)) || made_by_the_cluster(&object) {
            continue;
        }
        let core_node = kind == "Node" && object["apiVersion"] == "v1";
        if core_node && plane.kubelets == Kubelets::Shared {
            object["metadata"]["annotations"][KWOK_MANAGED.0] = Value::from(KWOK_MANAGED.1);
        }
        let node_name = object["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let status = object.get("status").cloned();
        let writes_status = matches!(
            kind.as_str(),
            "Service" | "CiliumL2AnnouncementPolicy" | "Volume" | "Replica" | "Setting"
        ) || (kind == "Node" && object["apiVersion"] == "longhorn.io/v1beta2");
        let stateful_set = kind == "StatefulSet";
        let strategy = object["spec"]["updateStrategy"].clone();
        if stateful_set {
            object["spec"]["updateStrategy"] = serde_json::json!({"type": "OnDelete"});
        }
        let made = create(&client, object).await?;
        if stateful_set {
            adopt_as_current(&client, &made, strategy).await?;
        }
        created += 1;
        if core_node && plane.kubelets == Kubelets::PerNode {
            plane.node_kubelets.start(&node_name)?;
        }
        if let (true, Some(status)) = (writes_status, status) {
            write_status(&client, made, status).await?;
        }
    }
    Ok(created)
}

/// Make the lab's pods of a StatefulSet (created just before it, with the lab's revision
/// label) count as its current revision, so the real controller keeps them where the lab
/// put them instead of rolling them onto nodes of the scheduler's choosing: the set is
/// created `OnDelete`, its pods get the revision the controller computed, and then the set
/// gets back the lab's update strategy.
async fn adopt_as_current(
    client: &kube::Client,
    made: &DynamicObject,
    strategy: Value,
) -> Result<(), String> {
    let name = made.metadata.name.clone().unwrap_or_default();
    let namespace = made.metadata.namespace.clone().unwrap_or_default();
    let (resource, _) = api_resource(client, "apps/v1", "StatefulSet").await?;
    let sets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &resource);
    let deadline = Instant::now() + Duration::from_secs(30);
    let revision = loop {
        let set = sets
            .get(&name)
            .await
            .map_err(|e| format!("StatefulSet {namespace}/{name}: {e}"))?;
        if let Some(r) = set.data["status"]["updateRevision"].as_str() {
            break r.to_string();
        }
        if Instant::now() > deadline {
            return Err(format!(
                "StatefulSet {namespace}/{name} has no updateRevision after 30 s"
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let selector = made.data["spec"]["selector"]["matchLabels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), &namespace);
    let list = pods
        .list(&kube::api::ListParams::default().labels(&selector))
        .await
        .map_err(|e| format!("pods of StatefulSet {namespace}/{name}: {e}"))?;
    let label = serde_json::json!({"metadata": {"labels": {"controller-revision-hash": revision}}});
    for pod in list.items {
        let pod_name = pod.metadata.name.unwrap_or_default();
        pods.patch(&pod_name, &PatchParams::default(), &Patch::Merge(&label))
            .await
            .map_err(|e| format!("labelling pod {namespace}/{pod_name}: {e}"))?;
    }
    let strategy = if strategy.is_null() {
        serde_json::json!({"type": "RollingUpdate"})
    } else {
        strategy
    };
    let back = serde_json::json!({"spec": {"updateStrategy": strategy}});
    sets.patch(&name, &PatchParams::default(), &Patch::Merge(&back))
        .await
        .map(|_| ())
        .map_err(|e| format!("update strategy of StatefulSet {namespace}/{name}: {e}"))
}

/// What a real cluster makes itself, so creating it would collide: the API server's
/// `kubernetes` Service, and each kubelet's heartbeat Lease (kwok makes them here).
fn made_by_the_cluster(object: &Value) -> bool {
    let namespace = object["metadata"]["namespace"].as_str();
    let name = object["metadata"]["name"].as_str();
    match object["kind"].as_str() {
        Some("Service") => namespace == Some("default") && name == Some("kubernetes"),
        Some("Lease") => namespace == Some("kube-node-lease"),
        _ => false,
    }
}

fn builtin_namespace(object: &Value) -> bool {
    matches!(
        object["metadata"]["name"].as_str(),
        Some("default" | "kube-system" | "kube-public" | "kube-node-lease")
    )
}

/// Create one object; an object that already exists is an error naming it.
pub async fn create(client: &kube::Client, object: Value) -> Result<DynamicObject, String> {
    let api_version = object["apiVersion"].as_str().unwrap_or("").to_string();
    let kind = object["kind"].as_str().unwrap_or("").to_string();
    let name = gates::collect::registry::object_name(&object);
    let (resource, scope) = api_resource(client, &api_version, &kind).await?;
    let namespace = object["metadata"]["namespace"].as_str().map(str::to_string);
    let api: Api<DynamicObject> = match (&scope, &namespace) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
        _ => Api::all_with(client.clone(), &resource),
    };
    let typed: DynamicObject =
        serde_json::from_value(object).map_err(|e| format!("{kind} {name}: {e}"))?;
    // Right after a namespace is created, its lifecycle controller may not have seen it yet.
    let mut tries = 0;
    loop {
        match api.create(&PostParams::default(), &typed).await {
            Ok(made) => return Ok(made),
            Err(kube::Error::Api(status)) if status.code == 404 && tries < 20 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(err) => return Err(format!("creating {kind} {name}: {err}")),
        }
    }
}

async fn write_status(
    client: &kube::Client,
    mut made: DynamicObject,
    status: Value,
) -> Result<(), String> {
    let types = made.types.clone().unwrap_or_default();
    let (resource, scope) = api_resource(client, &types.api_version, &types.kind).await?;
    let name = made.metadata.name.clone().unwrap_or_default();
    let api: Api<DynamicObject> = match (&scope, &made.metadata.namespace) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
        _ => Api::all_with(client.clone(), &resource),
    };
    made.data["status"] = status;
    api.replace_status(&name, &PostParams::default(), &made)
        .await
        .map(|_| ())
        .map_err(|e| format!("status of {} {name}: {e}", types.kind))
}

pub async fn api_resource(
    client: &kube::Client,
    api_version: &str,
    kind: &str,
) -> Result<(ApiResource, Scope), String> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("discovery of {api_version} {kind}: {e}"))?;
    Ok((resource, caps.scope))
}

/// What the lab says about one workload, and what must hold in the real cluster before its
/// verdicts can be compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    pub kind: String,
    pub name: String,
    pub ready: i64,
}

/// The ready counts the lab reports for each workload, from its exported status.
pub fn expected_ready(objects: &[Value]) -> Vec<Settled> {
    objects
        .iter()
        .filter_map(|o| {
            let kind = o["kind"].as_str()?;
            let ready = match kind {
                "Deployment" | "StatefulSet" => o["status"]["readyReplicas"].as_i64().unwrap_or(0),
                "DaemonSet" => o["status"]["numberReady"].as_i64().unwrap_or(0),
                _ => return None,
            };
            Some(Settled {
                kind: kind.to_string(),
                name: gates::collect::registry::object_name(o),
                ready,
            })
        })
        .collect()
}

/// Wait until every workload has as many ready pods as the lab says, every rollout the
/// controllers started on adopting the lab's pods is finished, and the disruption controller
/// has seen every PDB. On timeout, the workloads that differ are named.
pub async fn wait_settled(
    plane: &ControlPlane,
    expected: &[Settled],
    limit: Duration,
) -> Result<(), String> {
    let start = Instant::now();
    loop {
        let differences = unsettled_workloads(plane, expected).await?;
        if differences.is_empty() {
            return Ok(());
        }
        if start.elapsed() > limit {
            return Err(format!(
                "the real controllers did not reach the lab's state within {limit:?}:\n  {}",
                differences.join("\n  ")
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The workloads and PDBs of the real plane that differ from what the lab says now (empty
/// when they agree), each named with how.
pub async fn unsettled_workloads(
    plane: &ControlPlane,
    expected: &[Settled],
) -> Result<Vec<String>, String> {
    let client = plane.client(Identity::Admin).await?;
    let mut differences = Vec::new();
    for (api_version, kind) in [
        ("apps/v1", "Deployment"),
        ("apps/v1", "DaemonSet"),
        ("apps/v1", "StatefulSet"),
        ("policy/v1", "PodDisruptionBudget"),
    ] {
        let (resource, _) = api_resource(&client, api_version, kind).await?;
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let list = api
            .list(&Default::default())
            .await
            .map_err(|e| format!("listing {kind}: {e}"))?;
        for object in list.items {
            let value = serde_json::to_value(&object).map_err(|e| e.to_string())?;
            let name = gates::collect::registry::object_name(&value);
            if let Some(why) = unsettled(kind, &value, expected, &name) {
                differences.push(format!("{kind} {name}: {why}"));
            }
        }
    }
    Ok(differences)
}

fn unsettled(kind: &str, o: &Value, expected: &[Settled], name: &str) -> Option<String> {
    let status = &o["status"];
    let int = |v: &Value| v.as_i64().unwrap_or(0);
    if int(&status["observedGeneration"]) < int(&o["metadata"]["generation"]) {
        return Some("generation not yet observed".into());
    }
    let want = expected
        .iter()
        .find(|s| s.kind == kind && s.name == name)
        .map(|s| s.ready);
    match kind {
        "Deployment" => {
            let replicas = int(&o["spec"]["replicas"]);
            if int(&status["updatedReplicas"]) != replicas || int(&status["replicas"]) != replicas {
                return Some(format!("rollout in progress ({status})"));
            }
            let ready = int(&status["readyReplicas"]);
            (Some(ready) != want).then(|| format!("{ready} ready, the lab has {want:?}"))
        }
        "StatefulSet" => {
            if status["currentRevision"] != status["updateRevision"] {
                return Some(format!("rollout in progress ({status})"));
            }
            let ready = int(&status["readyReplicas"]);
            (Some(ready) != want).then(|| format!("{ready} ready, the lab has {want:?}"))
        }
        "DaemonSet" => {
            let desired = int(&status["desiredNumberScheduled"]);
            if int(&status["updatedNumberScheduled"]) != desired {
                return Some(format!("rollout in progress ({status})"));
            }
            let ready = int(&status["numberReady"]);
            (Some(ready) != want).then(|| format!("{ready} ready, the lab has {want:?}"))
        }
        _ => None,
    }
}
