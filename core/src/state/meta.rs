//! Object metadata read down to what the checks use, for the kinds a cluster has by the
//! hundred thousand (pods and their metrics).
//!
//! The result is still k8s-openapi's `ObjectMeta`, so helpers that name or label any object
//! keep working; the fields nothing reads (annotations, `managedFields`, timestamps other
//! than deletion, resource versions) are skipped while decoding instead of being held. On a
//! real cluster `managedFields` alone is often larger than the rest of a pod.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Deserializer};

/// Who an object is, what it is labelled, who owns it and whether it is being deleted.
pub fn placement<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Placement {
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        namespace: Option<String>,
        #[serde(default)]
        uid: Option<String>,
        #[serde(default)]
        labels: Option<BTreeMap<String, String>>,
        #[serde(default)]
        owner_references: Option<Vec<OwnerReference>>,
        #[serde(default)]
        deletion_timestamp: Option<Time>,
    }
    let Some(m) = Option::<Placement>::deserialize(deserializer)? else {
        return Ok(ObjectMeta::default());
    };
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        labels: m.labels,
        owner_references: m.owner_references,
        deletion_timestamp: m.deletion_timestamp,
        ..ObjectMeta::default()
    })
}

/// Only the name and namespace: metrics are matched to their pod or node by name.
pub fn identity<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    #[derive(Deserialize)]
    struct Identity {
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        namespace: Option<String>,
    }
    let Some(m) = Option::<Identity>::deserialize(deserializer)? else {
        return Ok(ObjectMeta::default());
    };
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        ..ObjectMeta::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Deserialize)]
    struct Placed {
        #[serde(deserialize_with = "placement")]
        metadata: ObjectMeta,
    }

    #[derive(Deserialize)]
    struct Named {
        #[serde(deserialize_with = "identity")]
        metadata: ObjectMeta,
    }

    fn full() -> serde_json::Value {
        json!({"metadata": {
            "name": "web-1", "namespace": "apps", "uid": "u-1", "labels": {"app": "web"},
            "annotations": {"a": "b"}, "resourceVersion": "9", "generateName": "web-",
            "creationTimestamp": "2026-12-02T00:00:00Z", "finalizers": ["f"],
            "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}],
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-6f", "uid": "rs"}]
        }})
    }

    #[test]
    fn placement_keeps_names_labels_owners_and_deletion_and_skips_the_rest() {
        let meta = serde_json::from_value::<Placed>(full())
            .expect("metadata")
            .metadata;
        let expected = ObjectMeta {
            name: Some("web-1".into()),
            namespace: Some("apps".into()),
            uid: Some("u-1".into()),
            labels: Some([("app".to_string(), "web".to_string())].into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: "web-6f".into(),
                uid: "rs".into(),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        };
        assert_eq!(meta, expected);
    }

    #[test]
    fn identity_keeps_only_the_name_and_namespace() {
        let meta = serde_json::from_value::<Named>(full())
            .expect("metadata")
            .metadata;
        assert_eq!(meta.name.as_deref(), Some("web-1"));
        assert_eq!(meta.namespace.as_deref(), Some("apps"));
        assert_eq!(meta.labels, None);
        assert_eq!(meta.uid, None);
    }

    #[test]
    fn null_metadata_is_empty_and_a_wrong_type_is_refused() {
        let meta = serde_json::from_value::<Placed>(json!({"metadata": null})).expect("null");
        assert_eq!(meta.metadata, ObjectMeta::default());
        let err = serde_json::from_value::<Placed>(json!({"metadata": {"labels": ["a"]}}))
            .err()
            .expect("labels as a list");
        assert!(err.to_string().contains("invalid type"), "{err}");
        let err = serde_json::from_value::<Named>(json!({"metadata": {"name": 3}}))
            .err()
            .expect("a number name");
        assert!(err.to_string().contains("invalid type"), "{err}");
    }
}
