//! Helpers shared by several checks: labels, node roles and readiness, pod state, the
//! node → physical host lookup, and finding the configured LoadBalancer Services.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Service};

use crate::state::Pod;

use super::Context;
use crate::config::ServiceRef;
use crate::selector::Selector;
use crate::state::Collected;

pub use crate::meta::{CONTROL_PLANE_LABEL, is_control_plane, labels, name, ns_name};

/// The node's Ready condition status (`True`, `False`, `Unknown`), `None` when not reported.
pub fn node_ready_status(node: &Node) -> Option<&str> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str())
}

/// Ready, and not on its way out.
pub fn pod_is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Succeeded or Failed: the pod holds no resources and counts for nothing.
pub fn pod_is_terminated(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded") | Some("Failed")
    )
}

pub fn pod_node(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()?
        .node_name
        .as_deref()
        .filter(|n| !n.is_empty())
}

/// Which physical host each node runs on. This is the one place that answers that question:
/// Proxmox's placement (VM by SMBIOS uuid) when Proxmox was read, else the environment's host
/// label. A failed read is never a label: when Proxmox could not be read, or a node matches no
/// VM while some VM configs could not be read, that node's host is unknown and
/// [`Hosts::unread`] says why, so a check can give `error` instead of judging a guess.
#[derive(Debug, Clone)]
pub struct Hosts {
    label: String,
    by_node: BTreeMap<String, Option<String>>,
    /// Node → (Proxmox host, VM description), when Proxmox was read.
    placed: Option<BTreeMap<String, (String, String)>>,
    /// Why Proxmox could not be read at all, when it could not.
    unreadable: Option<String>,
    /// The VMs whose config could not be read (`VM 102 cp-2 on pve2: why`).
    unread_vm_configs: Vec<String>,
}

impl Hosts {
    pub fn new(ctx: Context<'_>, nodes: &[Arc<Node>]) -> Self {
        let label = ctx.env.nodes.host_label.clone();
        let by_node = nodes
            .iter()
            .map(|n| {
                let host = labels(&n.metadata)
                    .get(&label)
                    .filter(|h| !h.is_empty())
                    .cloned();
                (name(&n.metadata).to_string(), host)
            })
            .collect();
        let placed = ctx.state.proxmox.present().map(|proxmox| {
            proxmox
                .placements
                .iter()
                .map(|p| {
                    (
                        p.node.clone(),
                        (p.host.clone(), format!("VM {} {}", p.vmid, p.vm_name)),
                    )
                })
                .collect()
        });
        let unreadable = match &ctx.state.proxmox {
            Collected::Absent(reason) => Some(reason.clone()),
            Collected::Present(_) | Collected::NotApplicable(_) => None,
        };
        let unread_vm_configs = ctx
            .state
            .proxmox
            .present()
            .map(|p| p.unread_vm_configs.clone())
            .unwrap_or_default();
        Hosts {
            label,
            by_node,
            placed,
            unreadable,
            unread_vm_configs,
        }
    }

    /// The host of a node, if known: Proxmox's answer when Proxmox was read, else the label
    /// (only when Proxmox is not part of the environment: an unreadable one is no label).
    pub fn of(&self, node: &str) -> Option<&str> {
        match (&self.placed, &self.unreadable) {
            (Some(placed), _) => placed.get(node).map(|(host, _)| host.as_str()),
            (None, Some(_)) => None,
            (None, None) => self.labelled(node),
        }
    }

    /// Why the hosts of some of `nodes` are unknown because a read failed (Proxmox, or a VM
    /// config that may be theirs), naming the nodes and what could not be read; `None` when
    /// every host is known or a host is missing for a reason a read could not change (no VM,
    /// no label), which is a finding of its own.
    pub fn unread<'n>(&self, nodes: impl IntoIterator<Item = &'n str>) -> Option<String> {
        let unknown: Vec<&str> = nodes.into_iter().filter(|n| self.of(n).is_none()).collect();
        if unknown.is_empty() {
            return None;
        }
        if let Some(reason) = &self.unreadable {
            return Some(format!(
                "the host of node {} is unknown: Proxmox could not be read ({reason})",
                unknown.join(", ")
            ));
        }
        if self.placed.is_some() && !self.unread_vm_configs.is_empty() {
            return Some(format!(
                "the host of node {} is unknown: it matches no VM while {} Proxmox VM config(s) could not be read ({})",
                unknown.join(", "),
                self.unread_vm_configs.len(),
                self.unread_vm_configs.join("; ")
            ));
        }
        None
    }

    /// The VM configs that could not be read, for evidence.
    pub fn unread_vm_configs(&self) -> &[String] {
        &self.unread_vm_configs
    }

    /// The host the node's label claims, whatever Proxmox says.
    pub fn labelled(&self, node: &str) -> Option<&str> {
        self.by_node.get(node)?.as_deref()
    }

    /// Proxmox's host and VM for a node, when Proxmox was read and the node was matched.
    pub fn placement(&self, node: &str) -> Option<(&str, &str)> {
        let (host, vm) = self.placed.as_ref()?.get(node)?;
        Some((host.as_str(), vm.as_str()))
    }

    /// Whether hosts come from Proxmox.
    pub fn proxmox_known(&self) -> bool {
        self.placed.is_some()
    }

    /// The label that names hosts, for messages.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// `node cp-1 (host pve1)`, `node cp-1 (no host label topology.kubernetes.io/zone)`, or
    /// `node cp-1 (not in the node list)`.
    pub fn describe(&self, node: &str) -> String {
        format!("node {node} ({})", self.host_note(node))
    }

    /// The parenthesised part of [`Hosts::describe`].
    pub fn host_note(&self, node: &str) -> String {
        if let Some((host, vm)) = self.placement(node) {
            return format!("host {host}, {vm}");
        }
        match self.by_node.get(node) {
            Some(_) if self.unreadable.is_some() => {
                "host unknown: Proxmox could not be read".to_string()
            }
            Some(_) if self.placed.is_some() && !self.unread_vm_configs.is_empty() => {
                "host unknown: no VM matched while some VM configs could not be read".to_string()
            }
            Some(_) if self.placed.is_some() => "no VM in Proxmox".to_string(),
            Some(Some(host)) => format!("host {host}"),
            Some(None) => format!("no host label {}", self.label),
            None => "not in the node list".to_string(),
        }
    }
}

/// The LoadBalancer Services a [`ServiceRef`] names, and the non-LoadBalancer ones its labels
/// also match (for a helpful message when the type is wrong).
pub struct FoundServices<'a> {
    pub load_balancers: Vec<&'a Service>,
    pub other_types: Vec<&'a Service>,
}

pub fn find_services<'a>(services: &'a [Arc<Service>], wanted: &ServiceRef) -> FoundServices<'a> {
    let selector = Selector::from_labels(&wanted.selector);
    let mut found = FoundServices {
        load_balancers: Vec::new(),
        other_types: Vec::new(),
    };
    for svc in services {
        let ns_ok = wanted
            .namespace
            .as_deref()
            .is_none_or(|ns| svc.metadata.namespace.as_deref() == Some(ns));
        if !ns_ok || !selector.matches(labels(&svc.metadata)) {
            continue;
        }
        if service_type(svc) == "LoadBalancer" {
            found.load_balancers.push(svc);
        } else {
            found.other_types.push(svc);
        }
    }
    found
}

/// The Service type; Kubernetes defaults it to ClusterIP.
pub fn service_type(svc: &Service) -> &str {
    svc.spec
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("ClusterIP")
}

/// `app.kubernetes.io/name=traefik in any namespace`, for messages.
pub fn describe_service_ref(wanted: &ServiceRef) -> String {
    let selector = Selector::from_labels(&wanted.selector);
    match &wanted.namespace {
        Some(ns) => format!("{selector} in namespace {ns}"),
        None => format!("{selector} in any namespace"),
    }
}
