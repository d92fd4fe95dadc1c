//! Every Proxmox host's loss is survivable, as the host-loss model predicts it from the
//! collected state: etcd keeps quorum and a control plane for the API VIP, every ingress
//! Service keeps an announcer, every protected controller keeps a ready replica and every pod
//! that must move finds a node, memory holds, and no Longhorn volume loses its last replica.
//!
//! Protected here are the controllers a PodDisruptionBudget covers (a check sees no other gate;
//! `gates predict` adds gate 2's named controllers). Fails with the host and its first reason;
//! `error` when the prediction cannot tell (something it needs could not be read).

use serde::Deserialize;

use super::Context;
use crate::hostloss::{self, Input, Outcome};
use crate::verdict::Finding;

/// No parameters: margins come from the environment's `capacity` section.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {}

impl super::Check for Params {
    fn inputs(&self) -> &'static [crate::state::Input] {
        use crate::state::Input;
        &[
            Input::Nodes,
            Input::Pods,
            Input::Deployments,
            Input::DaemonSets,
            Input::StatefulSets,
            Input::Pdbs,
            Input::Services,
            Input::Leases,
            Input::L2Policies,
            Input::LonghornNodes,
            Input::LonghornVolumes,
            Input::LonghornReplicas,
            Input::LonghornSettings,
            Input::NodeMetrics,
            Input::PodMetrics,
            Input::NodeLoad,
            Input::Talos,
            Input::Proxmox,
            Input::Api,
        ]
    }

    fn evaluate(&self, ctx: Context<'_>) -> Finding {
        evaluate(ctx, self)
    }
}

pub fn evaluate(ctx: Context<'_>, _params: &Params) -> Finding {
    let prediction = hostloss::predict(
        Input {
            env: ctx.env,
            state: ctx.state,
            protected: &[],
            pause: ctx.pause,
        },
        None,
    );
    if let Some(why) = prediction.not_survivable.first() {
        return Finding::fail(format!("no host's loss is survivable: {why}"))
            .with_evidence(prediction.not_survivable.iter().skip(1).cloned());
    }
    if let Some(why) = prediction.cannot_tell.first() {
        return Finding::error(format!("cannot predict a host loss: {why}"));
    }
    let summary_line = |h: &hostloss::HostLoss| {
        format!(
            "{}: {}{}",
            h.host,
            h.outcome.as_str(),
            h.first_reason()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        )
    };
    let evidence: Vec<String> = prediction.hosts.iter().map(summary_line).collect();
    let lost: Vec<&hostloss::HostLoss> = prediction
        .hosts
        .iter()
        .filter(|h| h.outcome == Outcome::Lost)
        .collect();
    if let Some(first) = lost.first() {
        let detail: Vec<String> = first
            .reasons
            .iter()
            .skip(1)
            .map(|r| format!("{}: {}", r.severity.as_str(), r.text))
            .collect();
        return Finding::fail(format!(
            "losing host {} is not survivable: {}",
            first.host,
            first.first_reason().unwrap_or_default()
        ))
        .with_evidence(detail.into_iter().chain(evidence));
    }
    if let Some(unknown) = prediction
        .hosts
        .iter()
        .find(|h| h.outcome == Outcome::Unknown)
    {
        return Finding::error(format!(
            "cannot tell whether losing host {} is survivable: {}",
            unknown.host,
            unknown.first_reason().unwrap_or_default()
        ))
        .with_evidence(evidence);
    }
    if prediction.hosts.is_empty() {
        return Finding::error("no host runs a node of the environment");
    }
    let worst = prediction
        .worst
        .as_deref()
        .and_then(|w| prediction.host(w))
        .map(|h| format!("; worst: {}", summary_line(h)))
        .unwrap_or_default();
    Finding::pass(format!(
        "the loss of each of the {} hosts is survivable{worst}",
        prediction.hosts.len()
    ))
    .with_evidence(evidence)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::config::CapacityBasis;
    use crate::verdict::Verdict;

    fn check(state: &crate::state::State) -> Finding {
        let mut env = env();
        env.capacity.basis = CapacityBasis::Requests;
        env.ingress.services.clear();
        run(&env, state, &Params {}, evaluate)
    }

    #[test]
    fn three_hosts_with_nothing_on_them_pass_naming_each() {
        let f = check(&state().nodes(target_nodes()).build());
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert_eq!(
            f.summary,
            "the loss of each of the 3 hosts is survivable; worst: pve1: survives"
        );
        assert_eq!(
            f.evidence,
            ["pve1: survives", "pve2: survives", "pve3: survives"]
        );
    }

    #[test]
    fn a_host_carrying_two_control_planes_fails_with_the_host_and_first_reason() {
        let nodes = vec![
            node("cp-1").host("pve1").control_plane().ready().build(),
            node("cp-2").host("pve1").control_plane().ready().build(),
            node("cp-3").host("pve2").control_plane().ready().build(),
        ];
        let f = check(&state().nodes(nodes).build());
        assert_eq!(f.verdict, Verdict::Fail);
        assert_eq!(
            f.summary,
            "losing host pve1 is not survivable: etcd loses quorum: 1 of 3 members left, 2 needed (lost: cp-1, cp-2)"
        );
    }

    #[test]
    fn a_node_whose_vm_config_could_not_be_read_is_an_error_naming_the_vm_not_a_failure() {
        let s = state()
            .nodes(target_nodes())
            .with(|s| {
                s.proxmox = proxmox(
                    &[("cp-1", "pve1"), ("cp-2", "pve2")],
                    &["VM 103 cp-3 on pve3: timed out"],
                )
            })
            .build();
        let f = check(&s);
        assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
        assert!(
            f.summary.contains("the host of node cp-3 is unknown"),
            "{}",
            f.summary
        );
        assert!(
            f.summary.contains("VM 103 cp-3 on pve3: timed out"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn unreadable_pods_are_an_error_not_a_pass() {
        let s = state()
            .nodes(target_nodes())
            .with(|s| s.pods = absent("forbidden"))
            .build();
        let f = check(&s);
        assert_eq!(f.verdict, Verdict::Error);
        assert_eq!(
            f.summary,
            "cannot predict a host loss: pods could not be read: forbidden"
        );
    }
}
