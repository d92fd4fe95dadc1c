//! Drift of where things may run: a controller's PodDisruptionBudget, workloads on control
//! planes, the nodes Longhorn is on, and each node's host label. Each compares what the
//! cluster shows with what the repository declares and, where they disagree, fails naming
//! both sides; a side that could not be read is an error, one not declared a skip.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Node as KubeNode;

use crate::checks::replicated_controller::Params;
use crate::checks::support;
use crate::selector::{Selector, WhenNil};
use crate::verdict::Finding;

use super::controllers::declared_pdb;

use super::live_workloads::{in_namespace, live_workloads};
use super::{RepoContext, at, both, named_nodes, nodes_and_patches};
use crate::declared::environments::DeclaredNode;
use crate::declared::yaml::Node;

fn agree(same: bool, what: &str, evidence: Vec<String>) -> Finding {
    if same {
        Finding::pass(format!("{what}: live and declared agree")).with_evidence(evidence)
    } else {
        Finding::fail(format!("{what}: live and declared differ")).with_evidence(evidence)
    }
}

/// A controller has a PodDisruptionBudget live exactly when the repository declares one.
pub fn pdb(ctx: &RepoContext<'_>, params: &Params) -> Finding {
    let declared = match declared_pdb(ctx, params) {
        Ok(Some(d)) => d,
        Ok(None) => {
            return Finding::skip(format!(
                "the repository declares no PodDisruptionBudget for {} (not deployed from it, or a chart's default decides)",
                params.name
            ));
        }
        Err(finding) => return finding,
    };
    let pdbs = match ctx.live.pdbs.get("poddisruptionbudgets") {
        Ok(p) => p,
        Err(finding) => return finding,
    };
    let templates: Vec<BTreeMap<String, String>> = match live_workloads(ctx, params) {
        Ok(workloads) => workloads.into_iter().map(|w| w.template).collect(),
        Err(finding) => return finding,
    };
    let pods = if templates.is_empty() {
        vec![params.selector.clone()]
    } else {
        templates
    };
    let live: Vec<String> = pdbs
        .iter()
        .filter(|p| in_namespace(params, p.metadata.namespace.as_deref()))
        .filter(|p| {
            let selector = p.spec.as_ref().and_then(|s| s.selector.as_ref());
            Selector::compile(selector, WhenNil::MatchesNothing)
                .is_ok_and(|s| pods.iter().any(|l| s.matches(l)))
        })
        .map(|p| support::ns_name(&p.metadata))
        .collect();
    let live_text = if live.is_empty() {
        format!("no PodDisruptionBudget selects the pods of {}", params.name)
    } else {
        format!("PodDisruptionBudget {}", live.join(", "))
    };
    agree(
        live.is_empty() != declared.0,
        &format!("{}'s PodDisruptionBudget", params.name),
        both(live_text, declared.1),
    )
}

fn tainted_off(node: &KubeNode) -> Option<String> {
    node.spec
        .as_ref()?
        .taints
        .iter()
        .flatten()
        .find(|t| {
            t.key == "node-role.kubernetes.io/control-plane"
                && matches!(t.effect.as_str(), "NoSchedule" | "NoExecute")
        })
        .map(|t| format!("{}:{}", t.key, t.effect))
}

/// Workloads may run on the control planes live exactly when the Talos patches allow it.
pub fn schedulable_control_plane(ctx: &RepoContext<'_>) -> Finding {
    let (nodes, patches) = match nodes_and_patches(ctx.env, || {
        format!("the repository has no Talos patches for {}", ctx.env.name)
    }) {
        Ok(found) => found,
        Err(finding) => return finding,
    };
    let live_nodes = match ctx.live.nodes.get("nodes") {
        Ok(n) => n,
        Err(finding) => return finding,
    };
    let live_cps: Vec<&KubeNode> = live_nodes
        .iter()
        .map(|n| &**n)
        .filter(|n| support::is_control_plane(n))
        .collect();
    if live_cps.is_empty() {
        return Finding::error("the cluster shows no control-plane node to compare with");
    }
    let live_tainted: Vec<String> = live_cps
        .iter()
        .filter_map(|n| tainted_off(n).map(|t| format!("{} {t}", support::name(&n.metadata))))
        .collect();
    let mut declared_off = Vec::new();
    let mut declared_on = Vec::new();
    for node in nodes.iter().filter(|n| n.control_plane == Some(true)) {
        let scheduling = patches.control_plane_scheduling(node.name());
        match scheduling.blocked.first() {
            None => declared_on.push(format!(
                "{} ({})",
                node.name(),
                scheduling.evidence.join("; ")
            )),
            Some(first) => declared_off.push(format!("{} ({first})", node.name())),
        }
    }
    let live_allowed = live_tainted.is_empty();
    let declared_allowed = declared_off.is_empty();
    let live_text = if live_allowed {
        format!(
            "workloads allowed on {} control plane(s) (no control-plane NoSchedule taint)",
            live_cps.len()
        )
    } else {
        format!("kept off by {}", live_tainted.join(", "))
    };
    let declared_text = if declared_allowed {
        format!("workloads allowed on {}", declared_on.join(", "))
    } else {
        format!("kept off {}", declared_off.join(", "))
    };
    agree(
        live_allowed == declared_allowed,
        "workloads on control planes",
        both(live_text, declared_text),
    )
}

/// Does a role list admit this node?
fn admits(list: &Node, node: &DeclaredNode<'_>) -> bool {
    let roles: Vec<&str> = list
        .as_seq()
        .unwrap_or_default()
        .iter()
        .filter_map(Node::as_str)
        .collect();
    match node.control_plane {
        Some(true) => roles
            .iter()
            .any(|r| *r == "control-plane" || *r == "controlplane"),
        Some(false) => roles.contains(&"worker"),
        None => false,
    }
}

/// Longhorn runs on the nodes the Terraform role lists admit, and on no others.
pub fn longhorn_nodes(ctx: &RepoContext<'_>) -> Finding {
    let nodes = match named_nodes(ctx.env) {
        Ok(nodes) => nodes,
        Err(finding) => return finding,
    };
    let Some(Ok(tf)) = &ctx.env.terraform else {
        return Finding::error("the Terraform cannot be read");
    };
    // The value in effect of each role list: given (tfvars or a module call), else default.
    let lists: Vec<(String, &Node)> = tf
        .variables
        .iter()
        .filter(|v| v.name.contains("longhorn") && v.name.contains("role"))
        .filter_map(|v| {
            let value = tf
                .module_inputs
                .get(&v.qualified())
                .or(v.default.as_ref())?;
            Some((at(&value.site, &v.qualified(), value.show()), value))
        })
        .collect();
    if lists.is_empty() {
        return Finding::skip(
            "the repository declares no *longhorn*role* list, so where Longhorn runs is not declared",
        );
    }
    let live = match ctx.live.longhorn_nodes.get("Longhorn nodes") {
        Ok(n) => n,
        Err(finding) => return finding,
    };
    let declared: BTreeSet<&str> = nodes
        .iter()
        .filter(|n| lists.iter().all(|(_, list)| admits(list, n)))
        .map(|n| n.name())
        .collect();
    let live_set: BTreeSet<&str> = live
        .iter()
        .filter(|n| n.spec.allow_scheduling)
        .map(|n| support::name(&n.metadata))
        .collect();
    let mut evidence = both(
        format!(
            "Longhorn schedules on {}",
            live_set.iter().copied().collect::<Vec<_>>().join(", ")
        ),
        format!(
            "Longhorn allowed on {}",
            declared.iter().copied().collect::<Vec<_>>().join(", ")
        ),
    );
    evidence.extend(lists.iter().map(|(line, _)| line.clone()));
    for name in live_set.difference(&declared) {
        evidence.push(format!("{name}: live, not allowed by the repository"));
    }
    for name in declared.difference(&live_set) {
        evidence.push(format!("{name}: allowed by the repository, not live"));
    }
    agree(declared == live_set, "Longhorn's nodes", evidence)
}

/// Each node's live host label names the Proxmox host its VM is declared on.
pub fn host_labels(ctx: &RepoContext<'_>) -> Finding {
    let nodes = match named_nodes(ctx.env) {
        Ok(nodes) => nodes,
        Err(finding) => return finding,
    };
    let live = match ctx.live.nodes.get("nodes") {
        Ok(n) => n,
        Err(finding) => return finding,
    };
    if let Some(unknown) = nodes.iter().find_map(|n| n.vm.host_unknown.as_ref()) {
        return Finding::error(format!(
            "a declared VM's host is not known, so it cannot be compared with the live label: {}",
            unknown.error
        ));
    }
    let label = &ctx.settings.nodes.host_label;
    let mut same = true;
    let mut evidence = Vec::new();
    let mut compared = 0;
    for node in &nodes {
        let Some(kube) = live
            .iter()
            .find(|k| support::name(&k.metadata) == node.name())
        else {
            continue;
        };
        compared += 1;
        let live_host = support::labels(&kube.metadata).get(label.as_str());
        let declared_host = node.host();
        let line = format!(
            "{}: live {label}={}, declared on {} ({})",
            node.name(),
            live_host.map(String::as_str).unwrap_or("(unset)"),
            declared_host.unwrap_or("(no host)"),
            node.vm
                .host
                .as_ref()
                .map(|h| h.site.to_string())
                .unwrap_or_else(|| node.vm.name.site.to_string())
        );
        if live_host.map(String::as_str) != declared_host {
            same = false;
        }
        evidence.push(line);
    }
    if compared == 0 {
        return Finding::skip(format!(
            "no live node has the name of a VM the repository declares for {}",
            ctx.env.name
        ));
    }
    agree(same, "host labels", evidence)
}
