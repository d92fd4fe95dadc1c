//! Names, namespaces and labels of Kubernetes objects, read one way everywhere, as kube-core's
//! `ResourceExt` reads them: a missing label map is an empty one, a missing name reads
//! `<unnamed>` (an object the API server stored always has one; a hand-written snapshot may
//! not), and `namespace/name` names a namespaced object in messages.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

static NO_LABELS: LazyLock<BTreeMap<String, String>> = LazyLock::new(BTreeMap::new);

/// An object's labels; none is the same as empty.
pub fn labels(meta: &ObjectMeta) -> &BTreeMap<String, String> {
    meta.labels.as_ref().unwrap_or(&NO_LABELS)
}

/// An object's name, `<unnamed>` when it has none.
pub fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("<unnamed>")
}

/// `namespace/name`, or just the name for cluster-scoped objects.
pub fn ns_name(meta: &ObjectMeta) -> String {
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{}", name(meta)),
        _ => name(meta).to_string(),
    }
}

/// The marker label Talos puts on control-plane nodes.
pub const CONTROL_PLANE_LABEL: &str = "node-role.kubernetes.io/control-plane";

/// Whether the node carries the control-plane role label (whatever its value).
pub fn is_control_plane(node: &k8s_openapi::api::core::v1::Node) -> bool {
    labels(&node.metadata).contains_key(CONTROL_PLANE_LABEL)
}

/// The same, on the objects themselves (`node.name_any()`), for any typed Kubernetes object.
pub trait ResourceExt {
    fn name_any(&self) -> &str;
    fn labels(&self) -> &BTreeMap<String, String>;
    fn ns_name(&self) -> String;
}

impl<T: k8s_openapi::Metadata<Ty = ObjectMeta>> ResourceExt for T {
    fn name_any(&self) -> &str {
        name(self.metadata())
    }

    fn labels(&self) -> &BTreeMap<String, String> {
        labels(self.metadata())
    }

    fn ns_name(&self) -> String {
        ns_name(self.metadata())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Node, Pod};

    #[test]
    fn a_missing_name_reads_unnamed_and_missing_labels_read_empty() {
        let node = Node::default();
        assert_eq!(node.name_any(), "<unnamed>");
        assert!(ResourceExt::labels(&node).is_empty());
        let mut pod = Pod::default();
        pod.metadata.name = Some("web-0".into());
        pod.metadata.namespace = Some("apps".into());
        assert_eq!(pod.ns_name(), "apps/web-0");
        pod.metadata.namespace = Some(String::new());
        assert_eq!(pod.ns_name(), "web-0");
    }
}
