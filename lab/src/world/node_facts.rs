//! What every node and pod of the lab shares with a real Talos cluster: what the kubelet
//! keeps for the system, the label that names a node's host, and the tolerations admission
//! adds to every pod. A leaf that the world's builder, its renderers and Longhorn's system
//! pods read alike.

use k8s_openapi::api::core::v1 as core;

/// Resources Talos reserves for the system on every node (kubelet systemReserved), in
/// millicores and bytes.
pub(crate) const RESERVED_CPU_MILLI: i64 = 50;
pub(crate) const RESERVED_MEMORY: i64 = 192 << 20;

/// The label whose value names a lab node's host (its zone).
pub(crate) const HOST_LABEL: &str = "topology.kubernetes.io/zone";

/// The not-ready and unreachable `NoExecute` tolerations the DefaultTolerationSeconds
/// admission plugin (with `seconds`) or the DaemonSet controller (without) adds to a pod.
pub(super) fn node_down_tolerations(seconds: Option<i64>) -> Vec<core::Toleration> {
    [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ]
    .into_iter()
    .map(|key| core::Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some("NoExecute".into()),
        toleration_seconds: seconds,
        ..Default::default()
    })
    .collect()
}
