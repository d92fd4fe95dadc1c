//! Whether Talos lets workloads onto a control plane, from the patches of the node.
//!
//! Two configuration models decide it (Talos `pkg/machinery/config/container/container.go`,
//! `K8sNodeConfig`): where a node's configuration holds a `KubeNodeConfig` document (Talos
//! 1.14's multi-document Kubernetes configuration), that document's `taints` are the node's
//! taints and nothing is added; `talosctl gen config` writes one with
//! `node-role.kubernetes.io/control-plane: NoSchedule` on control planes unless scheduling was
//! allowed (`pkg/machinery/config/generate/kubernetes.go`), and Talos refuses
//! `.cluster.allowSchedulingOnControlPlanes` and `.machine.nodeTaints` beside the document
//! (`pkg/machinery/config/types/k8s/node.go`). Otherwise the v1alpha1 shim taints a control
//! plane unless `cluster.allowSchedulingOnControlPlanes` is true
//! (`pkg/machinery/config/types/v1alpha1/v1alpha1_k8s_bridge.go`), beside `machine.nodeTaints`.
//!
//! A repository that holds a complete machine configuration (`version: v1alpha1` with
//! `machine.token`, the base `talosctl machineconfig patch` starts from) did not take its
//! Kubernetes documents from `gen config`, so no generated taint is assumed for it.

use crate::declared::site::at;
use crate::declared::yaml::Node;

use super::{Patch, Patches};

/// The marker [`super::normalize`] leaves on a `KubeNodeConfig` read as node labels and taints.
pub const KUBE_NODE_CONFIG: &str = "KubeNodeConfig";

const CONTROL_PLANE_TAINT: &str = "node-role.kubernetes.io/control-plane";

/// What keeps workloads off a control plane, and the lines that say it may run them; each
/// line names its file and line, not the node (the trial says which node it is about).
#[derive(Debug, Default)]
pub struct Scheduling {
    pub blocked: Vec<String>,
    pub evidence: Vec<String>,
}

fn is_kube_node_config(doc: &Node) -> bool {
    doc.get_str(&["kind"]) == Some(KUBE_NODE_CONFIG)
}

/// A complete machine configuration rather than a patch over a generated one.
fn is_complete(doc: &Node) -> bool {
    doc.get_str(&["version"]) == Some("v1alpha1") && doc.get(&["machine", "token"]).is_some()
}

fn blocks(taint: &Node) -> bool {
    taint
        .as_str()
        .is_some_and(|t| t.ends_with("NoSchedule") || t.ends_with("NoExecute"))
}

/// Which of Talos's two models configures a node's labels and taints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// The v1alpha1 machine config: Talos adds the control-plane role label itself.
    Legacy,
    /// A `KubeNodeConfig` document: its labels and taints alone; `generated`: the repository
    /// patches what `talosctl gen config` wrote (control-plane label, exclusion label and
    /// taint on control planes), rather than holding a complete configuration.
    Multidoc { generated: bool },
}

impl Patches {
    /// The model of the node `name`.
    pub fn model(&self, name: &str, control_plane: bool) -> Model {
        let patches: Vec<&Patch> = self.for_node(name, control_plane).collect();
        if patches.iter().any(|p| is_kube_node_config(&p.doc)) {
            Model::Multidoc {
                generated: !patches.iter().any(|p| is_complete(&p.doc)),
            }
        } else {
            Model::Legacy
        }
    }

    /// Whether the control plane `name` takes workloads, by its Talos patches.
    pub fn control_plane_scheduling(&self, name: &str) -> Scheduling {
        let patches: Vec<&Patch> = self.for_node(name, true).collect();
        if patches.iter().any(|p| is_kube_node_config(&p.doc)) {
            multidoc(&patches)
        } else {
            legacy(self, &patches, name)
        }
    }
}

fn multidoc(patches: &[&Patch]) -> Scheduling {
    let mut out = Scheduling::default();
    let complete = patches.iter().find(|p| is_complete(&p.doc));
    // The taints in the order the patches set them; `None`: deleted by `$patch: delete`.
    let mut taints: Vec<(String, Option<Node>)> = Vec::new();
    let mut generated = None;
    match complete {
        Some(p) => out.evidence.push(format!(
            "{}: a complete machine configuration (version v1alpha1 with machine.token): no generated KubeNodeConfig taint",
            p.doc.site
        )),
        None => {
            generated = Some(format!(
                "{CONTROL_PLANE_TAINT}: NoSchedule, which `talosctl gen config` writes in a control plane's KubeNodeConfig unless a patch deletes it"
            ));
            taints.push((CONTROL_PLANE_TAINT.to_string(), None));
        }
    }
    for patch in patches {
        let node_taints = patch.doc.get(&["machine", "nodeTaints"]);
        if !is_kube_node_config(&patch.doc) {
            if let Some(v) = patch
                .doc
                .get(&["cluster", "allowSchedulingOnControlPlanes"])
            {
                out.blocked.push(format!(
                    "{}: Talos refuses it beside a KubeNodeConfig document, so the configuration does not apply; allow scheduling by the KubeNodeConfig's taints",
                    at(&v.site, "cluster.allowSchedulingOnControlPlanes", v.show())
                ));
            }
            if let Some(t) = node_taints {
                out.blocked.push(format!(
                    "{}: machine.nodeTaints: Talos refuses it beside a KubeNodeConfig document, so the configuration does not apply",
                    t.site
                ));
            }
            continue;
        }
        out.evidence
            .push(format!("{}: KubeNodeConfig", patch.doc.site));
        for (key, value) in node_taints.and_then(Node::as_map).unwrap_or_default() {
            if key == CONTROL_PLANE_TAINT {
                generated = None;
            }
            taints.retain(|(k, _)| k != key);
            let deleted = value.get_str(&["$patch"]) == Some("delete");
            taints.push((key.clone(), (!deleted).then(|| value.clone())));
        }
    }
    out.blocked.extend(generated);
    for (key, value) in taints {
        if let Some(v) = value.filter(blocks) {
            out.blocked.push(at(
                &v.site,
                &format!("KubeNodeConfig taints.{key}"),
                v.show(),
            ));
        }
    }
    out
}

fn legacy(all: &Patches, patches: &[&Patch], name: &str) -> Scheduling {
    let mut out = Scheduling::default();
    match all.value(name, true, &["cluster", "allowSchedulingOnControlPlanes"]) {
        Some(v) if v.as_bool() == Some(true) => out
            .evidence
            .push(at(&v.site, "cluster.allowSchedulingOnControlPlanes", v.show())),
        Some(v) => out.blocked.push(at(
            &v.site,
            "cluster.allowSchedulingOnControlPlanes",
            v.show(),
        )),
        None => out.blocked.push(
            "cluster.allowSchedulingOnControlPlanes is not set in its Talos patches (Talos defaults to false)"
                .to_string(),
        ),
    }
    for (key, taint) in patches
        .iter()
        .filter_map(|p| p.doc.get(&["machine", "nodeTaints"]).and_then(Node::as_map))
        .flatten()
    {
        if blocks(taint) {
            out.blocked.push(format!(
                "{} (on {name})",
                at(
                    &taint.site,
                    &format!("machine.nodeTaints.{key}"),
                    taint.show()
                )
            ));
        }
    }
    out
}
