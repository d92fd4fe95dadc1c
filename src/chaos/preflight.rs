//! Preflight: the reasons not to inject. Nothing is powered off unless the static gates 1 to
//! 3 pass, the cluster is at steady state (every node Ready, etcd healthy with all members,
//! no protected controller's PDB at zero allowed disruptions) and no Proxmox host is already
//! down. Pure over a collected state and the gate trials evaluated on it.

use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use super::cluster::{self, selects};
use crate::checks::replicated_controller::Params as Controller;
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
    pdbs: &[PodDisruptionBudget],
    pods: &[k8s_openapi::api::core::v1::Pod],
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
