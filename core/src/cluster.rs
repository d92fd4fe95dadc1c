//! What the chaos step reads from a collected state: the protected controllers (gate 2's
//! `replicated-controller` checks), node readiness, etcd health as the Talos API reports it,
//! and Longhorn volume health. Pure functions, shared by preflight, probes and recovery.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use crate::checks::CheckSpec;
use crate::checks::replicated_controller::Params as Controller;
use crate::config::Gate;
use crate::state::{LonghornVolume, Pod, TalosState};

/// The controllers the `chaos-protected` gate (gate 2 of ADR 007) names, among `gates` (the
/// configuration's).
pub fn protected_controllers(gates: &[Gate]) -> Vec<Controller> {
    gates
        .iter()
        .filter(|g| g.has(crate::config::GateRole::ChaosProtected))
        .flat_map(|g| g.checks.iter())
        .filter_map(|c| match c {
            CheckSpec::ReplicatedController(p) => Some(p.clone()),
            _ => None,
        })
        .collect()
}

/// The pods of a controller: its selector's labels, in its namespace when it names one.
pub fn selects(controller: &Controller, pod: &Pod) -> bool {
    if let Some(ns) = &controller.namespace
        && pod.metadata.namespace.as_deref() != Some(ns.as_str())
    {
        return false;
    }
    let labels = pod.metadata.labels.as_ref();
    controller
        .selector
        .iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

pub use crate::checks::support::pod_is_ready as pod_ready;

/// Ready condition `True`.
pub fn node_ready(node: &Node) -> bool {
    crate::checks::support::node_ready_status(node) == Some("True")
}

pub fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

/// Nodes that are not Ready, by name.
pub fn not_ready_nodes(nodes: &[Arc<Node>]) -> Vec<String> {
    nodes
        .iter()
        .filter(|n| !node_ready(n))
        .map(|n| node_name(n).to_string())
        .collect()
}

/// Controllers with no ready replica among `pods`, by name.
/// `pods` is the state's list or one read anew (chaos's watcher), hence any `Borrow<Pod>`.
pub fn controllers_without_ready_replica<P: std::borrow::Borrow<Pod>>(
    controllers: &[Controller],
    pods: &[P],
) -> Vec<String> {
    controllers
        .iter()
        .filter(|c| {
            !pods
                .iter()
                .map(P::borrow)
                .any(|p| selects(c, p) && pod_ready(p))
        })
        .map(|c| c.name.clone())
        .collect()
}

/// Why etcd is not healthy with every member, from every control-plane endpoint's view;
/// empty when each endpoint answered, all agree on the members, each member answered for
/// itself, every one follows a leader and no alarm is raised.
pub fn etcd_problems(talos: &TalosState) -> Vec<String> {
    let mut problems = Vec::new();
    let mut member_sets = BTreeSet::new();
    let mut answered = BTreeSet::new();
    let mut listed = BTreeSet::new();
    for endpoint in &talos.endpoints {
        match &endpoint.view {
            Err(err) => problems.push(format!("{}: {err}", endpoint.endpoint)),
            Ok(view) => {
                let ids: BTreeSet<String> = view.members.iter().map(|m| m.id.clone()).collect();
                for m in &view.members {
                    listed.insert((m.id.clone(), m.hostname.clone()));
                    if m.learner {
                        problems.push(format!("member {} is still a learner", m.hostname));
                    }
                }
                member_sets.insert(ids);
                answered.insert(view.member_id.clone());
                if view.leader.is_empty() {
                    problems.push(format!(
                        "{}: its member follows no leader",
                        endpoint.endpoint
                    ));
                }
                problems.extend(
                    view.alarms
                        .iter()
                        .map(|a| format!("{}: alarm {a}", endpoint.endpoint)),
                );
                problems.extend(
                    view.errors
                        .iter()
                        .map(|e| format!("{}: {e}", endpoint.endpoint)),
                );
            }
        }
    }
    if member_sets.len() > 1 {
        problems.push("the endpoints disagree on the member list".to_string());
    }
    for (id, hostname) in &listed {
        if !answered.contains(id) {
            problems.push(format!(
                "member {hostname} ({id}) did not answer through its own endpoint"
            ));
        }
    }
    problems.sort();
    problems.dedup();
    problems
}

/// Longhorn volumes that are attached but not healthy.
pub fn unhealthy_volumes(volumes: &[Arc<LonghornVolume>]) -> Vec<String> {
    volumes
        .iter()
        .filter_map(|v| {
            let status = &v.status;
            (status.state == "attached" && status.robustness != "healthy").then(|| {
                format!(
                    "{} is {} on {}",
                    v.metadata.name.as_deref().unwrap_or_default(),
                    status.robustness,
                    status.current_node_id
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::pod;

    fn controller(yaml: &str) -> Controller {
        crate::yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn a_controller_needs_one_ready_pod_of_its_own_labels_and_namespace() {
        let coredns = controller("{name: coredns, selector: {k8s-app: kube-dns}}");
        let traefik = controller(
            "{name: traefik, namespace: traefik, selector: {app.kubernetes.io/name: traefik}}",
        );
        let pods = vec![
            pod("kube-system", "coredns-a")
                .labels(&[("k8s-app", "kube-dns")])
                .not_ready()
                .build(),
            pod("kube-system", "coredns-b")
                .labels(&[("k8s-app", "kube-dns")])
                .terminating()
                .build(),
            // The right labels in the wrong namespace do not count.
            pod("default", "traefik-a")
                .labels(&[("app.kubernetes.io/name", "traefik")])
                .build(),
        ];
        assert_eq!(
            controllers_without_ready_replica(&[coredns.clone(), traefik.clone()], &pods),
            vec!["coredns", "traefik"]
        );
        let mut pods = pods;
        pods.push(
            pod("traefik", "traefik-b")
                .labels(&[("app.kubernetes.io/name", "traefik")])
                .build(),
        );
        pods.push(
            pod("kube-system", "coredns-c")
                .labels(&[("k8s-app", "kube-dns")])
                .build(),
        );
        assert!(controllers_without_ready_replica(&[coredns, traefik], &pods).is_empty());
    }

    #[test]
    fn only_attached_volumes_must_be_healthy() {
        let volume = |name: &str, state: &str, robustness: &str| -> Arc<LonghornVolume> {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "status": {"state": state, "robustness": robustness, "currentNodeID": "cp1"}
            }))
            .unwrap()
        };
        let got = unhealthy_volumes(&[
            volume("a", "attached", "healthy"),
            volume("b", "attached", "degraded"),
            volume("c", "detached", "unknown"),
        ]);
        assert_eq!(got, vec!["b is degraded on cp1"]);
    }
}
