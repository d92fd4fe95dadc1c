//! A Pod as gates holds it: only the fields the checks and the host-loss model read.
//!
//! A cluster runs tens of pods per node, so pods are most of what a check holds. k8s-openapi's
//! `Pod` is 2,248 bytes before its first string and every `Container` 2,144 more, because
//! each type carries every field of the API; at 100,000 pods that was over half a gigabyte of
//! empty fields. The shapes here keep the API's names and k8s-openapi's field types for what
//! is read (so the checks read a pod exactly as before) and drop the rest while decoding.
//!
//! Decoding is as lenient as k8s-openapi's: a missing field or a `null` is its default and
//! unknown fields are ignored, so the same texts decode. A key repeated inside one object is
//! refused (k8s-openapi kept the last), which no API server or kubectl writes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, ResourceRequirements, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize};

use super::meta;

/// `v1` Pod: who it is, where it runs, what it asks for and whether it is ready.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pod {
    #[serde(default, deserialize_with = "meta::placement")]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PodStatus>,
}

/// The same API coordinates as k8s-openapi's Pod, so a client lists and watches pods
/// straight into this shape.
impl k8s_openapi::Resource for Pod {
    const API_VERSION: &'static str = "v1";
    const GROUP: &'static str = "";
    const KIND: &'static str = "Pod";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "pods";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for Pod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The parts of `spec` that decide where a pod may run and what it reserves there.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub containers: Vec<Container>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_containers: Option<Vec<Container>>,
    /// Pod-level resources (`PodLevelResources`), which replace the containers' sum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead: Option<BTreeMap<String, Quantity>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// `PreemptLowerPriority` (the default) or `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption_policy: Option<String>,
}

/// A container's name, requests and limits; `restartPolicy: Always` on an init container
/// makes it a sidecar that keeps its requests for the pod's life.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    #[serde(default, deserialize_with = "null_is_default")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
    /// Only the ports bound on the node (`hostPort`) matter here: the scheduler's NodePorts
    /// filter keeps two pods that bind the same one off one node.
    #[serde(
        default,
        deserialize_with = "null_is_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub ports: Vec<ContainerPort>,
}

/// A container port; `hostPort` (the API server copies `containerPort` into it for a pod on
/// the host's network) binds it on the node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_port: Option<i32>,
    /// The API's key is `hostIP`, not the `hostIp` camel case would make of the name.
    #[serde(rename = "hostIP", default, skip_serializing_if = "Option::is_none")]
    pub host_ip: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

/// The phase and conditions of a pod (`Ready` is what the checks look for).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<PodCondition>>,
}

/// One condition: its type and `True`, `False` or `Unknown`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodCondition {
    #[serde(rename = "type", default, deserialize_with = "null_is_default")]
    pub type_: String,
    #[serde(default, deserialize_with = "null_is_default")]
    pub status: String,
}

/// `null` where the API has a list or a string reads as empty, as k8s-openapi reads it.
pub(super) fn null_is_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).expect("a pod")
    }

    #[test]
    fn a_pod_keeps_what_the_checks_read_and_drops_the_rest() {
        let pod = decode(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web-1", "namespace": "apps", "uid": "u-1",
                "labels": {"app": "web"},
                "annotations": {"big": "x"},
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-6f", "uid": "rs", "controller": true}],
                "deletionTimestamp": "2026-12-02T00:00:00Z"
            },
            "spec": {
                "nodeName": "cp-1",
                "containers": [{"name": "app", "image": "web:1", "resources": {"requests": {"cpu": "100m"}}}],
                "initContainers": [{"name": "proxy", "restartPolicy": "Always"}],
                "tolerations": [{"key": "k", "operator": "Exists"}],
                "priority": 7,
                "volumes": [{"name": "data", "emptyDir": {}}]
            },
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-02T00:00:00Z"}],
                "containerStatuses": [{"name": "app", "ready": true}]
            }
        }));
        assert_eq!(pod.metadata.name.as_deref(), Some("web-1"));
        assert_eq!(
            pod.metadata.labels.as_ref().map(|l| l["app"].as_str()),
            Some("web")
        );
        assert!(pod.metadata.deletion_timestamp.is_some());
        assert_eq!(
            pod.metadata.owner_references.as_ref().map(Vec::len),
            Some(1)
        );
        assert_eq!(pod.metadata.annotations, None);
        assert_eq!(pod.metadata.managed_fields, None);
        let spec = pod.spec.as_ref().expect("a spec");
        assert_eq!(spec.node_name.as_deref(), Some("cp-1"));
        assert_eq!(spec.containers[0].name, "app");
        assert_eq!(
            spec.containers[0]
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .map(|r| r["cpu"].0.as_str()),
            Some("100m")
        );
        assert_eq!(
            spec.init_containers
                .as_ref()
                .and_then(|i| i[0].restart_policy.as_deref()),
            Some("Always")
        );
        assert_eq!(spec.priority, Some(7));
        let status = pod.status.as_ref().expect("a status");
        assert_eq!(
            status
                .conditions
                .as_ref()
                .map(|c| (c[0].type_.as_str(), c[0].status.as_str())),
            Some(("Ready", "True"))
        );
        // What was dropped does not come back when the pod is written out.
        let written = serde_json::to_value(&pod).expect("serializes");
        assert_eq!(written["spec"].get("volumes"), None);
        assert_eq!(written["status"].get("containerStatuses"), None);
    }

    #[test]
    fn a_host_port_keeps_the_host_address_it_binds_under_the_apis_key() {
        let pod = decode(json!({
            "spec": {"containers": [{"name": "a", "ports": [
                {"containerPort": 80, "hostPort": 80, "hostIP": "10.0.0.1", "protocol": "UDP"}
            ]}]}
        }));
        let port = &pod.spec.as_ref().expect("a spec").containers[0].ports[0];
        assert_eq!(port.host_ip.as_deref(), Some("10.0.0.1"));
        let written = serde_json::to_value(&pod).expect("serializes");
        assert_eq!(
            written["spec"]["containers"][0]["ports"][0]["hostIP"],
            "10.0.0.1"
        );
    }

    #[test]
    fn nulls_and_missing_fields_read_as_defaults_like_k8s_openapi() {
        let text = json!({
            "metadata": null,
            "spec": {"containers": null, "nodeName": null},
            "status": {"conditions": [{"type": null, "status": "True"}]}
        });
        let slim = decode(text.clone());
        let full: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(text).expect("k8s-openapi reads it");
        let spec = slim.spec.as_ref().expect("a spec");
        assert!(spec.containers.is_empty());
        assert_eq!(spec.node_name, None);
        assert_eq!(full.spec.as_ref().map(|s| s.containers.len()), Some(0));
        let conditions = slim.status.and_then(|s| s.conditions).expect("conditions");
        assert_eq!(conditions[0].type_, "");
        assert_eq!(conditions[0].status, "True");
        assert_eq!(slim.metadata, ObjectMeta::default());
    }

    #[test]
    fn a_field_of_the_wrong_type_is_still_refused() {
        let err = serde_json::from_value::<Pod>(json!({"spec": {"priority": "high"}}))
            .expect_err("a string priority");
        assert!(err.to_string().contains("invalid type"), "{err}");
        let err = serde_json::from_value::<Pod>(json!({"spec": {"containers": [{"name": 5}]}}))
            .expect_err("a number as a container's name");
        assert!(err.to_string().contains("invalid type"), "{err}");
    }
}
