//! Gate 5 on the repository: Longhorn may run on every declared node (the Terraform role
//! lists the ADR cites, and the Longhorn chart's node selectors). The capacity trial is in
//! `capacity.rs`.

use crate::selector::Selector;
use crate::verdict::Finding;

use super::l2::node_labels;
use super::{RepoContext, at, declared_nodes, manifests, reads, talos_patches};
use crate::declared::environments::DeclaredNode;
use crate::declared::manifests::Manifests;
use crate::declared::talos::Patches;
use crate::declared::terraform::Terraform;
use crate::declared::yaml::Node;

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

pub fn longhorn_disks(ctx: &RepoContext<'_>) -> Finding {
    let nodes = match declared_nodes(ctx.env) {
        Ok(nodes) => nodes,
        Err(finding) => return finding,
    };
    let Some(Ok(tf)) = &ctx.env.terraform else {
        return Finding::error("the Terraform cannot be read");
    };
    let mut said = Said::default();
    said.terraform_flags(tf, &nodes);
    let m = match manifests(ctx.env, reads::LONGHORN) {
        Ok(m) => m,
        Err(finding) => return finding,
    };
    let patches = match talos_patches(ctx.env) {
        Ok(p) => p,
        Err(finding) => return finding,
    };
    if let Err(finding) = said.chart_selectors(m, &nodes, patches) {
        return finding;
    }
    said.chart_tolerations(m, &nodes, patches);
    if said.looked == 0 {
        return Finding::skip(
            "the repository says nothing about where Longhorn runs (no *longhorn*role* variable, no Longhorn HelmRelease)",
        );
    }
    if said.problems.is_empty() {
        Finding::pass(format!(
            "Longhorn is allowed on all {} declared nodes",
            nodes.len()
        ))
        .with_evidence(said.evidence)
    } else {
        Finding::fail(format!(
            "the repository keeps Longhorn off some nodes of {}",
            ctx.env.name
        ))
        .with_evidence(said.problems.into_iter().chain(said.evidence))
    }
}

/// What the repository says about where Longhorn runs: what keeps it off a node, what allows
/// it, and how many places said anything.
#[derive(Default)]
struct Said {
    problems: Vec<String>,
    evidence: Vec<String>,
    looked: usize,
}

impl Said {
    /// A node left out of `line`'s setting is a problem; none left out is evidence.
    fn judged(&mut self, line: String, left_out: Vec<&str>) {
        if left_out.is_empty() {
            self.evidence.push(line);
        } else {
            self.problems
                .push(format!("{line} leaves out {}", left_out.join(", ")));
        }
    }

    /// The Terraform flags: every variable that lists the node roles that get Longhorn, its
    /// default and any value given to it by tfvars or a module call.
    fn terraform_flags(&mut self, tf: &Terraform, nodes: &[DeclaredNode<'_>]) {
        for var in tf
            .variables
            .iter()
            .filter(|v| v.name.contains("longhorn") && v.name.contains("role"))
        {
            let given = tf.module_inputs.get(&var.qualified());
            for (what, value) in [("default", var.default.as_ref()), ("value", given)] {
                let Some(value) = value else { continue };
                self.looked += 1;
                let left_out: Vec<&str> = nodes
                    .iter()
                    .filter(|n| !admits(value, n))
                    .map(|n| n.name())
                    .collect();
                let line = at(
                    &value.site,
                    &format!("{} {what}", var.qualified()),
                    value.show(),
                );
                self.judged(line, left_out);
            }
        }
    }

    /// The Longhorn chart's node selectors, where the repository sets them; an error finding
    /// when a release's values cannot be known or a selector is not a map of labels.
    fn chart_selectors(
        &mut self,
        m: &Manifests,
        nodes: &[DeclaredNode<'_>],
        patches: Option<&Patches>,
    ) -> Result<(), Finding> {
        for hr in m
            .helm_releases
            .iter()
            .filter(|hr| hr.chart.as_deref() == Some("longhorn"))
        {
            let values = hr.values.as_ref().map_err(|err| {
                Finding::error(format!(
                    "the values of HelmRelease {}/{} cannot be known: {err}",
                    hr.namespace, hr.name
                ))
            })?;
            self.looked += 1;
            for path in [
                ["longhornManager", "nodeSelector"],
                ["longhornDriver", "nodeSelector"],
            ] {
                let Some(selector) = values.get(&path) else {
                    continue;
                };
                let Some(labels) = selector.string_map() else {
                    return Err(Finding::error(format!(
                        "{}: {} is not a map of labels",
                        selector.site,
                        path.join(".")
                    )));
                };
                let selector_fn = Selector::from_labels(&labels);
                let left_out: Vec<&str> = nodes
                    .iter()
                    .filter(|n| !selector_fn.matches(&node_labels(n, patches).labels))
                    .map(|n| n.name())
                    .collect();
                let line = at(
                    &selector.site,
                    &format!("{}/{} {}", hr.namespace, hr.name, path.join(".")),
                    selector.show(),
                );
                self.judged(line, left_out);
            }
        }
        Ok(())
    }

    /// Taints keep Longhorn's manager off a node unless the chart tolerates them.
    fn chart_tolerations(
        &mut self,
        m: &Manifests,
        nodes: &[DeclaredNode<'_>],
        patches: Option<&Patches>,
    ) {
        for hr in m
            .helm_releases
            .iter()
            .filter(|hr| hr.chart.as_deref() == Some("longhorn"))
        {
            let Ok(values) = &hr.values else { continue };
            let tolerated = values.get(&["longhornManager", "tolerations"]).is_some()
                || values
                    .get(&["defaultSettings", "taintToleration"])
                    .is_some();
            if tolerated {
                continue;
            }
            for node in nodes {
                for taint in taints(node, patches) {
                    self.problems.push(format!(
                        "{taint} keeps Longhorn off {}: HelmRelease {}/{} sets no longhornManager.tolerations",
                        node.name(),
                        hr.namespace,
                        hr.name
                    ));
                }
            }
        }
    }
}

/// The NoSchedule and NoExecute taints a node's Talos patches give it, as evidence lines.
fn taints(
    node: &DeclaredNode<'_>,
    patches: Option<&crate::declared::talos::Patches>,
) -> Vec<String> {
    let Some(patches) = patches else {
        return Vec::new();
    };
    let control_plane = node.control_plane == Some(true);
    if control_plane {
        return patches.control_plane_scheduling(node.name()).blocked;
    }
    let mut out = Vec::new();
    for patch in patches.for_node(node.name(), control_plane) {
        for (key, value) in patch
            .doc
            .get(&["machine", "nodeTaints"])
            .and_then(Node::as_map)
            .unwrap_or_default()
        {
            if value
                .as_str()
                .is_some_and(|t| t.ends_with("NoSchedule") || t.ends_with("NoExecute"))
            {
                out.push(at(
                    &value.site,
                    &format!("machine.nodeTaints.{key}"),
                    value.show(),
                ));
            }
        }
    }
    out
}
