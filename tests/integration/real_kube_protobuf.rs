//! Pods, nodes and leases listed in protobuf from a real kube-apiserver decode to exactly what
//! the same objects decode to in JSON: the API server is the oracle of every tag and of every
//! field Go writes empty in protobuf but leaves out of JSON. The pods carry every field gates
//! holds, set the ways admission and the API set them (a priority class, a runtime class's
//! overhead, a deletion held by a finalizer, a host-network port); a node and a lease carry
//! every field k8s-openapi has of them (nodes and leases are held whole), managed fields
//! included. Lists are read in pages of two so the protobuf `continue` token is followed too.

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use crate::control_plane::{self, Identity, load};
use gates::collect::kinds::Kind;
use gates::collect::kube::{Encoding, list_typed_in};
use gates::collect::protobuf;
use gates::collect::registry::Objects;

const PLANE_SUBNET: u8 = 194;
const NS: &str = "pb";

fn pod(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    })
}

/// Every field gates holds of a pod, most of them set.
fn rich(owner_uid: &str) -> Value {
    let selector = json!({"matchLabels": {"app": "web"}});
    let term = json!({
        "labelSelector": selector,
        "topologyKey": "zone",
        "namespaces": [NS],
        "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["x"]}]},
    });
    let mut p = pod(
        "rich",
        json!({
            "nodeName": "pb-node",
            "schedulerName": "nobody",
            "runtimeClassName": "gates-rc",
            "priorityClassName": "gates-high",
            "nodeSelector": {"disk": "ssd"},
            "containers": [{
                "name": "app", "image": "web:1",
                "ports": [
                    {"containerPort": 80, "hostPort": 8080, "hostIP": "127.0.0.1", "protocol": "UDP"},
                    {"containerPort": 81},
                ],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}},
            }],
            "initContainers": [
                {"name": "setup", "image": "busybox"},
                {"name": "proxy", "image": "proxy:1", "restartPolicy": "Always",
                 "resources": {"requests": {"cpu": "50m"}}},
            ],
            "tolerations": [
                {"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute", "tolerationSeconds": 30},
                {"operator": "Exists"},
            ],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                        "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}],
                        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["pb-node"]}],
                    }]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 5, "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}},
                    ],
                },
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [term],
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": term}],
                },
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [{
                        "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
                        "topologyKey": "kubernetes.io/hostname",
                        "matchLabelKeys": ["pod-template-hash"],
                    }],
                },
            },
            "topologySpreadConstraints": [{
                "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": selector, "minDomains": 2,
                "nodeAffinityPolicy": "Honor", "nodeTaintsPolicy": "Ignore",
                "matchLabelKeys": ["pod-template-hash"],
            }],
        }),
    );
    p["metadata"]["labels"] = json!({"app": "web", "pod-template-hash": "abc"});
    p["metadata"]["annotations"] = json!({"not": "held"});
    p["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid,
        "controller": true, "blockOwnerDeletion": false,
    }]);
    p
}

/// A node with every field k8s-openapi has set (its status written through `status`).
fn rich_node() -> (Value, Value) {
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": "pb-rich-node",
            "labels": {"zone": "b"},
            "annotations": {"note": "kept whole"},
            "finalizers": ["gates.test/hold"],
        },
        "spec": {
            "podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24", "fd00::/64"],
            "providerID": "proxmox://pve1/101", "unschedulable": true,
            "taints": [
                {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
                {"key": "gone", "effect": "NoExecute", "timeAdded": "2026-12-01T10:00:00Z"},
            ],
        },
    });
    let status = json!({
        "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        "allocatable": {"cpu": "7500m", "memory": "31Gi", "pods": "110"},
        "phase": "Running",
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready",
             "lastHeartbeatTime": "2026-12-06T10:00:00Z", "lastTransitionTime": "2026-12-01T10:00:00Z"},
            {"type": "MemoryPressure", "status": "False"},
        ],
        "addresses": [{"type": "InternalIP", "address": "10.0.0.11"}, {"type": "Hostname", "address": "pb-rich-node"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": "m", "systemUUID": "s", "bootID": "b", "kernelVersion": "6.12",
            "osImage": "Talos (v1.11)", "containerRuntimeVersion": "containerd://2.1",
            "kubeletVersion": "v1.36.3", "kubeProxyVersion": "", "operatingSystem": "linux",
            "architecture": "amd64", "swap": {"capacity": 0},
        },
        "images": [{"names": ["registry/app@sha256:1", "registry/app:v1"], "sizeBytes": 12345}, {"names": ["x"]}],
        "volumesInUse": ["kubernetes.io/csi/driver.longhorn.io^pvc-1"],
        "volumesAttached": [{"name": "kubernetes.io/csi/driver.longhorn.io^pvc-1", "devicePath": ""}],
        "runtimeHandlers": [
            {"name": "", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": false}},
            {"name": "runc"},
        ],
        "features": {"supplementalGroupsPolicy": true},
    });
    (node, status)
}

fn leases() -> Vec<Value> {
    vec![
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": "pb-rich", "namespace": NS},
               "spec": {"holderIdentity": "pb-rich-node", "leaseDurationSeconds": 15,
                        "acquireTime": "2026-12-06T10:00:00.123456Z",
                        "renewTime": "2026-12-06T10:00:05.000001Z",
                        "leaseTransitions": 0, "preferredHolder": "someone"}}),
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": "pb-empty", "namespace": NS}}),
    ]
}

/// Objects of one kind, by name, in one encoding.
async fn by_name(
    client: &kube::Client,
    kind: Kind,
    encoding: Encoding,
) -> std::collections::BTreeMap<String, Value> {
    let (objects, _) = list_typed_in(client.clone(), kind, 2, encoding)
        .await
        .unwrap_or_else(|err| panic!("{kind:?} listed in {encoding:?}: {err}"));
    let values = match objects {
        Objects::Node(items) => items
            .iter()
            .map(|o| serde_json::to_value(o).unwrap())
            .collect::<Vec<_>>(),
        Objects::Lease(items) => items
            .iter()
            .map(|o| serde_json::to_value(o).unwrap())
            .collect(),
        other => panic!("{kind:?} listed as {other:?}"),
    };
    values
        .into_iter()
        .map(|v| {
            (
                format!(
                    "{}/{}",
                    v["metadata"]["namespace"].as_str().unwrap_or(""),
                    v["metadata"]["name"].as_str().unwrap_or("")
                ),
                v,
            )
        })
        .collect()
}

/// The objects of `kind` both encodings hold at one revision are equal (nodes and leases are
/// renewed under the test: an object that moved between the lists is left out); how many were
/// compared, and the protobuf ones.
async fn agree_at_one_revision(
    client: &kube::Client,
    kind: Kind,
) -> std::collections::BTreeMap<String, Value> {
    let json = by_name(client, kind, Encoding::Json).await;
    let binary = by_name(client, kind, Encoding::Preferred).await;
    let mut compared = std::collections::BTreeMap::new();
    for (name, b) in binary {
        let Some(j) = json.get(&name) else { continue };
        if j["metadata"]["resourceVersion"] != b["metadata"]["resourceVersion"] {
            continue;
        }
        assert_eq!(
            serde_json::to_string_pretty(j).unwrap(),
            serde_json::to_string_pretty(&b).unwrap(),
            "{kind:?} {name}: JSON then protobuf"
        );
        compared.insert(name, b);
    }
    compared
}

async fn sorted(
    client: &kube::Client,
    encoding: Encoding,
) -> (Vec<std::sync::Arc<gates::state::Pod>>, String) {
    let (objects, revision) = list_typed_in(client.clone(), Kind::Pod, 2, encoding)
        .await
        .unwrap_or_else(|err| panic!("pods listed in {encoding:?}: {err}"));
    let Objects::Pod(mut pods) = objects else {
        panic!("pods listed as {objects:?}");
    };
    pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    (pods, revision.expect("a list revision"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_nodes_and_leases_listed_in_protobuf_decode_to_what_they_decode_to_in_json() {
    let Some((_one, plane)) = control_plane::start_one(PLANE_SUBNET).await else {
        return;
    };
    let admin = plane.client(Identity::Admin).await.unwrap();
    for object in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "pb-node", "labels": {"zone": "a"}}}),
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
               "metadata": {"name": "gates-high"}, "value": 1000, "preemptionPolicy": "Never"}),
        json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "gates-rc"},
               "handler": "runc", "overhead": {"podFixed": {"cpu": "250m", "memory": "64Mi"}}}),
    ] {
        load::create(&admin, object).await.unwrap();
    }
    let (node, node_status) = rich_node();
    load::create(&admin, node).await.unwrap();
    let nodes: Api<DynamicObject> = {
        let (resource, _) = load::api_resource(&admin, "v1", "Node").await.unwrap();
        Api::all_with(admin.clone(), &resource)
    };
    nodes
        .patch_status(
            "pb-rich-node",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": node_status })),
        )
        .await
        .unwrap();
    for lease in leases() {
        load::create(&admin, lease).await.unwrap();
    }
    let owner = load::create(
        &admin,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner", "namespace": NS}}),
    )
    .await
    .unwrap();
    let owner_uid = owner.metadata.uid.expect("a uid");
    let plain = json!({"schedulerName": "nobody", "containers": [{"name": "app", "image": "x"}]});
    let mut held = pod("deleting", plain.clone());
    held["metadata"]["finalizers"] = json!(["gates.test/hold"]);
    for object in [
        rich(&owner_uid),
        pod("plain", plain.clone()),
        held,
        pod(
            "pod-level",
            json!({"schedulerName": "nobody", "containers": [{"name": "app", "image": "x"}],
                   "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}}}),
        ),
        pod(
            "host-network",
            json!({"schedulerName": "nobody", "hostNetwork": true,
                   "containers": [{"name": "exporter", "image": "x", "ports": [{"containerPort": 9100}]}]}),
        ),
    ] {
        load::create(&admin, object).await.unwrap();
    }
    let pods: Api<DynamicObject> = {
        let (resource, _) = load::api_resource(&admin, "v1", "Pod").await.unwrap();
        Api::namespaced_with(admin.clone(), NS, &resource)
    };
    pods.delete("deleting", &DeleteParams::default())
        .await
        .unwrap();
    pods.patch_status(
        "rich",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "PodScheduled", "status": "True"},
            ],
            "podIP": "10.0.0.9",
        }})),
    )
    .await
    .unwrap();

    // The two lists agree when they are of one revision (a controller writing between them
    // moves it; then they are read again).
    let reader = plane.client(Identity::Reader).await.unwrap();
    let mut tries = 0;
    let (json, binary) = loop {
        let (json, json_at) = sorted(&reader, Encoding::Json).await;
        let (binary, binary_at) = sorted(&reader, Encoding::Preferred).await;
        if json_at == binary_at || tries == 5 {
            break (json, binary);
        }
        tries += 1;
    };
    assert_eq!(json.len(), 5, "{json:#?}");
    for (j, b) in json.iter().zip(&binary) {
        assert_eq!(j, b, "pod {:?}: JSON then protobuf", j.metadata.name);
    }
    assert_eq!(json, binary);

    // What was compared is not empty: the admission-set and API-set fields are there.
    let named = |name: &str| {
        binary
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("pod {name} listed"))
    };
    let rich = named("rich");
    let spec = rich.spec.as_ref().unwrap();
    assert_eq!(spec.priority, Some(1000));
    assert_eq!(spec.preemption_policy.as_deref(), Some("Never"));
    assert_eq!(
        spec.overhead.as_ref().map(|o| o["cpu"].0.as_str()),
        Some("250m")
    );
    assert!(
        spec.affinity
            .as_ref()
            .is_some_and(|a| a.pod_anti_affinity.is_some())
    );
    assert_eq!(spec.containers[0].ports[0].host_port, Some(8080));
    assert_eq!(
        spec.containers[0].ports[0].host_ip.as_deref(),
        Some("127.0.0.1")
    );
    assert_eq!(spec.containers[0].ports[1].host_port, None);
    assert_eq!(
        rich.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .map(Vec::len),
        Some(2)
    );
    assert!(named("deleting").metadata.deletion_timestamp.is_some());
    assert_eq!(
        named("pod-level")
            .spec
            .as_ref()
            .unwrap()
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .map(|r| r["cpu"].0.as_str()),
        Some("500m")
    );
    assert_eq!(
        named("host-network").spec.as_ref().unwrap().containers[0].ports[0].host_port,
        Some(9100),
        "the API server copies a host-network pod's containerPort into hostPort"
    );

    // Nodes and leases, held whole: the rich ones were compared, with what the API server
    // added (managed fields, times, revisions).
    let nodes = agree_at_one_revision(&reader, Kind::Node).await;
    let node = nodes
        .get("/pb-rich-node")
        .expect("the rich node compared at one revision");
    assert_eq!(node["status"]["nodeInfo"]["swap"]["capacity"], 0);
    assert_eq!(
        node["spec"]["taints"][1]["timeAdded"],
        "2026-12-01T10:00:00Z"
    );
    assert!(
        node["metadata"]["managedFields"][0]["fieldsV1"].is_object(),
        "{node:#}"
    );
    let leases = agree_at_one_revision(&reader, Kind::Lease).await;
    let lease = leases
        .get("pb/pb-rich")
        .expect("the rich lease compared at one revision");
    assert_eq!(lease["spec"]["renewTime"], "2026-12-06T10:00:05.000001Z");
    assert_eq!(lease["spec"]["leaseTransitions"], 0);
    assert!(leases.contains_key("pb/pb-empty"));

    // The API server answered in protobuf (the fallback to JSON was not what was compared),
    // and answers errors in protobuf too, which gates reads as their Status.
    let http = plane.api_client().unwrap();
    let get = |identity: Identity, path: &str| {
        http.get(format!("{}{path}", plane.url()))
            .bearer_auth(plane.token(identity))
            .header("Accept", protobuf::ACCEPT)
            .send()
    };
    let answer = get(Identity::Reader, "/api/v1/pods?limit=2").await.unwrap();
    assert_eq!(
        answer.headers()["content-type"].to_str().unwrap(),
        protobuf::MEDIA_TYPE
    );
    let body = answer.bytes().await.unwrap();
    assert_eq!(&body[..4], b"k8s\0");
    let head = protobuf::head(&body).unwrap();
    assert!(
        head.next().is_some(),
        "a page of two of five has a next token"
    );
    let refused = get(Identity::Narrow, "/api/v1/nodes").await.unwrap();
    assert_eq!(refused.status().as_u16(), 403);
    let status =
        protobuf::wire::status(&refused.bytes().await.unwrap(), 0).expect("a protobuf Status");
    assert_eq!(status.code, 403);
    assert!(status.message.contains("forbidden"), "{status:?}");
}
