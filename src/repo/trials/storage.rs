//! Gate 5 on the repository: Longhorn may run on every declared node (the Terraform role
//! lists the ADR cites, and the Longhorn chart's node selectors), and the declared requests
//! fit in the declared VM sizes with the capacity margin free.

use crate::quantity;
use crate::selector::Selector;
use crate::verdict::Finding;

use super::{RepoContext, at, declared_nodes, manifests, node_labels, talos_patches};
use crate::repo::declared::DeclaredNode;
use crate::repo::yaml::Node;

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
    let mut problems = Vec::new();
    let mut evidence = Vec::new();
    let mut looked = 0;
    // The Terraform flags: every variable that lists the node roles that get Longhorn, its
    // default and any value given to it by tfvars or a module call.
    for var in tf
        .variables
        .iter()
        .filter(|v| v.name.contains("longhorn") && v.name.contains("role"))
    {
        let given = tf.module_inputs.get(&var.qualified());
        for (what, value) in [("default", var.default.as_ref()), ("value", given)] {
            let Some(value) = value else { continue };
            looked += 1;
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
            if left_out.is_empty() {
                evidence.push(line);
            } else {
                problems.push(format!("{line} leaves out {}", left_out.join(", ")));
            }
        }
    }
    // The Longhorn chart's node selectors, where the repository sets them.
    let m = match manifests(ctx.env) {
        Ok(m) => m,
        Err(finding) => return finding,
    };
    let patches = match talos_patches(ctx.env) {
        Ok(p) => p,
        Err(finding) => return finding,
    };
    for hr in m
        .helm_releases
        .iter()
        .filter(|hr| hr.chart.as_deref() == Some("longhorn"))
    {
        let values = match &hr.values {
            Ok(v) => v,
            Err(err) => {
                return Finding::error(format!(
                    "the values of HelmRelease {}/{} cannot be known: {err}",
                    hr.namespace, hr.name
                ));
            }
        };
        looked += 1;
        for path in [
            ["longhornManager", "nodeSelector"],
            ["longhornDriver", "nodeSelector"],
        ] {
            let Some(selector) = values.get(&path) else {
                continue;
            };
            let Some(labels) = selector.string_map() else {
                return Finding::error(format!(
                    "{}: {} is not a map of labels",
                    selector.site,
                    path.join(".")
                ));
            };
            let selector_fn = Selector::from_labels(&labels);
            let left_out: Vec<&str> = nodes
                .iter()
                .filter(|n| !selector_fn.matches(&node_labels(n, patches)))
                .map(|n| n.name())
                .collect();
            let line = at(
                &selector.site,
                &format!("{}/{} {}", hr.namespace, hr.name, path.join(".")),
                selector.show(),
            );
            if left_out.is_empty() {
                evidence.push(line);
            } else {
                problems.push(format!("{line} leaves out {}", left_out.join(", ")));
            }
        }
    }
    // Taints keep Longhorn's manager off a node unless the chart tolerates them.
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
        for node in &nodes {
            for taint in taints(node, patches) {
                problems.push(format!(
                    "{taint} keeps Longhorn off {}: HelmRelease {}/{} sets no longhornManager.tolerations",
                    node.name(),
                    hr.namespace,
                    hr.name
                ));
            }
        }
    }
    if looked == 0 {
        return Finding::skip(
            "the repository says nothing about where Longhorn runs (no *longhorn*role* variable, no Longhorn HelmRelease)",
        );
    }
    if problems.is_empty() {
        Finding::pass(format!(
            "Longhorn is allowed on all {} declared nodes",
            nodes.len()
        ))
        .with_evidence(evidence)
    } else {
        Finding::fail(format!(
            "the repository keeps Longhorn off some nodes of {}",
            ctx.env.name
        ))
        .with_evidence(problems.into_iter().chain(evidence))
    }
}

pub fn capacity_headroom(ctx: &RepoContext<'_>) -> Finding {
    let nodes = match declared_nodes(ctx.env) {
        Ok(nodes) => nodes,
        Err(finding) => return finding,
    };
    let m = match manifests(ctx.env) {
        Ok(m) => m,
        Err(finding) => return finding,
    };
    let (mut cpu_m, mut mem_b) = (0i128, 0i128);
    for node in &nodes {
        let (Some(cores), Some(mem)) = (
            node.vm.cores.as_ref().and_then(Node::as_i64),
            node.vm.memory_mib.as_ref().and_then(Node::as_i64),
        ) else {
            return Finding::error(format!(
                "{}: VM {} declares no cores or memory",
                node.vm.name.site,
                node.name()
            ));
        };
        cpu_m += i128::from(cores) * 1000;
        mem_b += i128::from(mem) * 1024 * 1024;
    }
    let (mut req_cpu, mut req_mem) = (0i128, 0i128);
    let mut counted = 0;
    for object in &m.objects {
        let kind = object.get_str(&["kind"]).unwrap_or_default();
        let copies = match kind {
            "Deployment" | "StatefulSet" => object
                .get(&["spec", "replicas"])
                .and_then(Node::as_i64)
                .unwrap_or(1) as i128,
            "DaemonSet" => nodes.len() as i128,
            _ => continue,
        };
        counted += 1;
        for container in object
            .get(&["spec", "template", "spec", "containers"])
            .and_then(Node::as_seq)
            .unwrap_or_default()
        {
            for (key, total, parse) in [
                (
                    "cpu",
                    &mut req_cpu,
                    quantity::cpu_millicores as fn(&str) -> Result<i128, quantity::QuantityError>,
                ),
                ("memory", &mut req_mem, quantity::memory_bytes),
            ] {
                if let Some(v) = container.get(&["resources", "requests", key]) {
                    match parse(v.as_str().unwrap_or_default()) {
                        Ok(amount) => *total = total.saturating_add(amount.saturating_mul(copies)),
                        Err(err) => {
                            return Finding::error(format!(
                                "{}: resources.requests.{key}: {err}",
                                v.site
                            ));
                        }
                    }
                }
            }
        }
    }
    // HelmRelease workloads: counted where the values set every request of a chart whose
    // workloads gates knows; otherwise unknown, not counted, and named.
    let mut unknown = Vec::new();
    let mut charted = Vec::new();
    for hr in &m.helm_releases {
        match chart_requests(hr, nodes.len()) {
            Ok(requests) => {
                req_cpu = req_cpu.saturating_add(requests.cpu);
                req_mem = req_mem.saturating_add(requests.memory);
                charted.push(requests.evidence);
            }
            Err(why) => unknown.push(format!(
                "{}: HelmRelease {}/{} ({}): requests unknown, not counted: {why}",
                hr.site,
                hr.namespace,
                hr.name,
                hr.chart.as_deref().unwrap_or("chart not named")
            )),
        }
    }
    let free = 1.0 - ctx.settings.capacity.margin;
    let fits = |req: i128, cap: i128| (req as f64) <= free * cap as f64;
    let mut evidence = vec![
        format!(
            "declared: {} nodes, {} CPU and {} memory (VM sizes, before the kubelet's reservations)",
            nodes.len(),
            show_cpu(cpu_m),
            show_bytes(mem_b)
        ),
        format!(
            "requested by {counted} workload manifests and {} HelmRelease(s): {} CPU and {} memory",
            charted.len(),
            show_cpu(req_cpu),
            show_bytes(req_mem)
        ),
        format!(
            "margin: {:.0}% kept free",
            ctx.settings.capacity.margin * 100.0
        ),
    ];
    evidence.extend(charted);
    evidence.extend(unknown.iter().cloned());
    // What is counted is a lower bound: too much already is a fail; enough is a pass only
    // when nothing was left uncounted.
    match (fits(req_cpu, cpu_m) && fits(req_mem, mem_b), unknown.is_empty()) {
        (false, _) => Finding::fail(
            "the declared requests do not leave the margin free on the declared nodes",
        )
        .with_evidence(evidence),
        (true, true) => {
            Finding::pass("the declared requests fit the declared nodes with the margin free")
                .with_evidence(evidence)
        }
        (true, false) => Finding::skip(format!(
            "the requests counted fit with the margin free, but {} HelmRelease(s) request what their charts' defaults say, which the repository does not hold (unknown, not counted); the live capacity trial measures them",
            unknown.len()
        ))
        .with_evidence(evidence),
    }
}

/// What a HelmRelease requests, when its values say it all.
struct ChartRequests {
    cpu: i128,
    memory: i128,
    evidence: String,
}

/// The charts whose workloads gates knows: one workload whose requests and copies the values
/// set. Longhorn, cert-manager and others run several workloads, some with requests only their
/// defaults set, so they are never counted from the values alone.
fn chart_requests(
    hr: &crate::repo::flux::HelmRelease,
    nodes: usize,
) -> Result<ChartRequests, String> {
    let values = hr
        .values
        .as_ref()
        .map_err(|err| format!("its values cannot be known: {err}"))?;
    if hr.chart.as_deref() != Some("traefik") {
        return Err(
            "the chart's workloads and their default requests are not in the repository"
                .to_string(),
        );
    }
    let kind = values
        .get_str(&["deployment", "kind"])
        .unwrap_or("Deployment");
    let copies: i128 = match kind {
        "DaemonSet" => nodes as i128,
        _ => values
            .get(&["deployment", "replicas"])
            .and_then(Node::as_i64)
            .ok_or("deployment.replicas is not set (the chart's default decides)")?
            .into(),
    };
    let mut out = ChartRequests {
        cpu: 0,
        memory: 0,
        evidence: String::new(),
    };
    let mut shown = Vec::new();
    for (key, parse) in [
        (
            "cpu",
            quantity::cpu_millicores as fn(&str) -> Result<i128, quantity::QuantityError>,
        ),
        ("memory", quantity::memory_bytes),
    ] {
        let v = values.get(&["resources", "requests", key]).ok_or_else(|| {
            format!("resources.requests.{key} is not set (the chart's default decides)")
        })?;
        let amount = parse(v.as_str().unwrap_or_default())
            .map_err(|err| format!("{}: resources.requests.{key}: {err}", v.site))?;
        let total = amount.saturating_mul(copies);
        if key == "cpu" {
            out.cpu = total;
        } else {
            out.memory = total;
        }
        shown.push(at(&v.site, &format!("resources.requests.{key}"), v.show()));
    }
    out.evidence = format!(
        "HelmRelease {}/{} ({copies} {kind} cop{}): {}",
        hr.namespace,
        hr.name,
        if copies == 1 { "y" } else { "ies" },
        shown.join(", ")
    );
    Ok(out)
}

fn show_cpu(millicores: i128) -> String {
    quantity::Quantity::from_nanos(millicores.saturating_mul(1_000_000)).display_cpu()
}

fn show_bytes(bytes: i128) -> String {
    quantity::Quantity::from_nanos(bytes.saturating_mul(1_000_000_000)).display_bytes()
}

/// The NoSchedule and NoExecute taints a node's Talos patches give it, as evidence lines.
fn taints(node: &DeclaredNode<'_>, patches: Option<&crate::repo::talos::Patches>) -> Vec<String> {
    let Some(patches) = patches else {
        return Vec::new();
    };
    let control_plane = node.control_plane == Some(true);
    let mut out = Vec::new();
    if control_plane {
        match patches.value(
            node.name(),
            true,
            &["cluster", "allowSchedulingOnControlPlanes"],
        ) {
            Some(v) if v.as_bool() == Some(true) => {}
            Some(v) => out.push(at(
                &v.site,
                "cluster.allowSchedulingOnControlPlanes",
                v.show(),
            )),
            None => out.push(format!(
                "the control-plane taint (allowSchedulingOnControlPlanes is not set for {})",
                node.name()
            )),
        }
    }
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
