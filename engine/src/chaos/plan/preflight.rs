//! Preflight: the reasons not to inject. Nothing is powered off unless the static gates 1 to
//! 3 pass, the cluster is at steady state (every node Ready, etcd healthy with all members,
//! no protected controller's PDB at zero allowed disruptions) and no Proxmox host is already
//! down. Pure over a collected state and the gate trials evaluated on it.

use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use crate::checks::replicated_controller::Params as Controller;
use crate::cluster::{self, selects};
use crate::runner::TrialResult;
use crate::selector::{Selector, WhenNil};
use crate::state::State;
use crate::verdict::Verdict;

/// Every reason to refuse; empty when the run may go ahead.
pub fn refusals(
    state: &State,
    gate_trials: &[TrialResult],
    controllers: &[Controller],
) -> Vec<String> {
    let mut out = Vec::new();
    let gated: Vec<&TrialResult> = gate_trials
        .iter()
        .filter(|t| (1..=3).contains(&t.gate))
        .collect();
    if gated.is_empty() {
        out.push(
            "no trial of gates 1 to 3 applies to this environment, so none proves it ready"
                .to_string(),
        );
    }
    for trial in gated {
        if trial.finding.verdict != Verdict::Pass {
            out.push(format!(
                "gate {} does not pass: {} is {}: {}",
                trial.gate,
                trial.name,
                trial.finding.verdict.as_str(),
                trial.finding.summary
            ));
        }
    }
    match state.nodes.present() {
        Some(nodes) => {
            let not_ready = cluster::not_ready_nodes(nodes);
            if !not_ready.is_empty() {
                out.push(format!("nodes not Ready: {}", not_ready.join(", ")));
            }
        }
        None => out.push("the node list could not be read".to_string()),
    }
    match state.talos.present() {
        Some(talos) => {
            let problems = cluster::etcd_problems(talos);
            if !problems.is_empty() {
                out.push(format!("etcd is not healthy with all members: {}", problems.join("; ")));
            }
        }
        None => out.push(
            "etcd health is unknown: the environment's Talos API could not be read (a `talos` section is required)"
                .to_string(),
        ),
    }
    match (state.pdbs.present(), state.pods.present()) {
        (Some(pdbs), Some(pods)) => {
            for pdb in blocking_pdbs(pdbs, pods, controllers) {
                out.push(pdb);
            }
        }
        _ => out.push("PodDisruptionBudgets or pods could not be read".to_string()),
    }
    match state.proxmox.present() {
        Some(proxmox) => {
            let down: Vec<&str> = proxmox
                .hosts
                .iter()
                .filter(|h| !h.online)
                .map(|h| h.name.as_str())
                .collect();
            if !down.is_empty() {
                out.push(format!("Proxmox host already down: {}", down.join(", ")));
            }
            if let Some(err) = &proxmox.mapping_error {
                out.push(format!("nodes cannot be mapped to VMs: {err}"));
            }
        }
        None => out.push(
            "the Proxmox API could not be read (a `proxmox` section is required)".to_string(),
        ),
    }
    out
}

/// PDBs that select a protected controller's pods and allow no disruption right now.
fn blocking_pdbs(
    pdbs: &[std::sync::Arc<PodDisruptionBudget>],
    pods: &[std::sync::Arc<gates_core::state::Pod>],
    controllers: &[Controller],
) -> Vec<String> {
    let mut out = Vec::new();
    for pdb in pdbs {
        let allowed = pdb
            .status
            .as_ref()
            .map(|s| s.disruptions_allowed)
            .unwrap_or(0);
        if allowed > 0 {
            continue;
        }
        let Ok(selector) = Selector::compile(
            pdb.spec.as_ref().and_then(|s| s.selector.as_ref()),
            WhenNil::MatchesNothing,
        ) else {
            continue;
        };
        let ns = pdb.metadata.namespace.as_deref();
        let guarded: Vec<&str> = controllers
            .iter()
            .filter(|c| {
                pods.iter().any(|p| {
                    selects(c, p)
                        && p.metadata.namespace.as_deref() == ns
                        && p.metadata
                            .labels
                            .as_ref()
                            .is_some_and(|l| selector.matches(l))
                })
            })
            .map(|c| c.name.as_str())
            .collect();
        if !guarded.is_empty() {
            out.push(format!(
                "PodDisruptionBudget {}/{} of {} allows 0 disruptions",
                ns.unwrap_or_default(),
                pdb.metadata.name.as_deref().unwrap_or_default(),
                guarded.join(", ")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::checks::testing::{listed, node, pdb, pod, state};
    use crate::state::{
        Collected, EtcdMemberView, EtcdView, ProxmoxHost, ProxmoxState, TalosEndpoint, TalosState,
    };
    use crate::verdict::Finding;

    fn coredns() -> Controller {
        gates_core::yaml::from_str("{name: coredns, selector: {k8s-app: kube-dns}}").unwrap()
    }

    fn trial(gate: u32, finding: Finding) -> TrialResult {
        TrialResult {
            name: format!("gate{gate}::staging::x"),
            gate,
            kind: "x".into(),
            instance: None,
            finding,
            duration: Duration::ZERO,
        }
    }

    fn member(id: &str, host: &str) -> EtcdMemberView {
        EtcdMemberView {
            id: id.into(),
            hostname: host.into(),
            peer_urls: vec![],
            learner: false,
        }
    }

    fn talos(answering: &[(&str, &str)]) -> TalosState {
        let members = vec![
            member("01", "cp1"),
            member("02", "cp2"),
            member("03", "cp3"),
        ];
        TalosState {
            endpoints: answering
                .iter()
                .map(|(endpoint, id)| TalosEndpoint {
                    endpoint: endpoint.to_string(),
                    view: Ok(EtcdView {
                        members: members.clone(),
                        member_id: id.to_string(),
                        leader: "01".into(),
                        ..Default::default()
                    }),
                    addresses: Ok(Vec::new()),
                })
                .collect(),
            ..Default::default()
        }
    }

    fn healthy() -> crate::state::State {
        state()
            .nodes(["cp1", "cp2", "cp3"].map(|n| node(n).control_plane().ready().build()))
            .pods([
                pod("kube-system", "coredns-a")
                    .labels(&[("k8s-app", "kube-dns")])
                    .on("cp1")
                    .build(),
                pod("kube-system", "coredns-b")
                    .labels(&[("k8s-app", "kube-dns")])
                    .on("cp2")
                    .build(),
            ])
            .pdbs([pdb("kube-system", "coredns", &[("k8s-app", "kube-dns")])
                .max_unavailable(1)
                .status_counts(2, 2, 1, 1)
                .build()])
            .with(|s| {
                s.talos = Collected::Present(talos(&[
                    ("10.0.0.1", "01"),
                    ("10.0.0.2", "02"),
                    ("10.0.0.3", "03"),
                ]));
                s.proxmox = Collected::Present(ProxmoxState {
                    hosts: ["pve1", "pve2", "pve3"]
                        .iter()
                        .map(|h| ProxmoxHost {
                            name: h.to_string(),
                            online: true,
                        })
                        .collect(),
                    ..Default::default()
                });
            })
            .build()
    }

    #[test]
    fn a_healthy_cluster_with_passing_gates_may_go_ahead() {
        let got = refusals(&healthy(), &[trial(1, Finding::pass("ok"))], &[coredns()]);
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn a_gate_that_does_not_pass_refuses_and_says_which() {
        let got = refusals(
            &healthy(),
            &[
                trial(1, Finding::pass("ok")),
                trial(2, Finding::skip("not applicable")),
                trial(3, Finding::fail("policy selects one node")),
                trial(4, Finding::skip("no chaos report")),
            ],
            &[coredns()],
        );
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(
            got[1].contains("gate 3 does not pass") && got[1].contains("policy selects one node")
        );
        assert!(refusals(&healthy(), &[], &[coredns()])[0].contains("no trial of gates 1 to 3"));
    }

    #[test]
    fn a_not_ready_node_a_down_host_and_a_blocking_pdb_each_refuse() {
        let mut s = healthy();
        s.nodes = listed(vec![
            node("cp1").control_plane().ready().build(),
            node("cp2").control_plane().not_ready().build(),
        ]);
        if let Collected::Present(p) = &mut s.proxmox {
            p.hosts[2].online = false;
        }
        s.pdbs = listed(vec![
            pdb("kube-system", "coredns", &[("k8s-app", "kube-dns")])
                .max_unavailable(1)
                .status_counts(2, 1, 1, 0)
                .build(),
        ]);
        let got = refusals(&s, &[trial(1, Finding::pass("ok"))], &[coredns()]);
        let text = got.join("\n");
        assert!(text.contains("nodes not Ready: cp2"), "{text}");
        assert!(text.contains("Proxmox host already down: pve3"), "{text}");
        assert!(
            text.contains(
                "PodDisruptionBudget kube-system/coredns of coredns allows 0 disruptions"
            ),
            "{text}"
        );
    }

    #[test]
    fn etcd_with_a_silent_member_or_without_talos_refuses() {
        let mut s = healthy();
        s.talos = Collected::Present(talos(&[("10.0.0.1", "01"), ("10.0.0.2", "02")]));
        let got = refusals(&s, &[trial(1, Finding::pass("ok"))], &[coredns()]).join("\n");
        assert!(got.contains("member cp3 (03) did not answer"), "{got}");
        s.talos = Collected::NotApplicable("no talos section".into());
        let got = refusals(&s, &[trial(1, Finding::pass("ok"))], &[coredns()]).join("\n");
        assert!(got.contains("etcd health is unknown"), "{got}");
    }
}
