//! The check kinds. Each is a pure function over a [`State`] and its environment: no I/O, no
//! clock. One file per kind holds its parameters, its evaluation and its tests.

pub mod api_endpoint;
pub mod capacity_headroom;
pub mod chaos_report;
pub mod control_plane_nodes;
pub mod distinct_hosts;
pub mod etcd_members;
pub mod external_traffic_policy;
pub mod host_sharing;
pub mod l2_announcement;
pub mod longhorn_disks;
pub mod replicated_controller;
pub mod schedulable_control_plane;
pub mod talos_endpoints;

pub(crate) mod support;
#[cfg(test)]
pub(crate) mod testing;

use serde::Deserialize;

use crate::config::Environment;
use crate::state::State;
use crate::verdict::Finding;

/// What a check sees: the collected state and the environment it belongs to.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub env: &'a Environment,
    pub state: &'a State,
}

/// One check as written in a gate file: `kind` picks the variant, the other keys are its
/// parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CheckSpec {
    ControlPlaneNodes(control_plane_nodes::Params),
    DistinctHosts(distinct_hosts::Params),
    SchedulableControlPlane(schedulable_control_plane::Params),
    ReplicatedController(replicated_controller::Params),
    L2Announcement(l2_announcement::Params),
    ExternalTrafficPolicy(external_traffic_policy::Params),
    LonghornDisks(longhorn_disks::Params),
    CapacityHeadroom(capacity_headroom::Params),
    ChaosReport(chaos_report::Params),
    EtcdMembers(etcd_members::Params),
    TalosEndpoints(talos_endpoints::Params),
    ApiEndpoint(api_endpoint::Params),
    HostSharing(host_sharing::Params),
}

/// Every kind a gate file may name, for error messages and `gates list`.
pub const KINDS: &[&str] = &[
    "control-plane-nodes",
    "distinct-hosts",
    "schedulable-control-plane",
    "replicated-controller",
    "l2-announcement",
    "external-traffic-policy",
    "longhorn-disks",
    "capacity-headroom",
    "chaos-report",
    "etcd-members",
    "talos-endpoints",
    "api-endpoint",
    "host-sharing",
];

impl CheckSpec {
    pub fn kind(&self) -> &'static str {
        match self {
            CheckSpec::ControlPlaneNodes(_) => "control-plane-nodes",
            CheckSpec::DistinctHosts(_) => "distinct-hosts",
            CheckSpec::SchedulableControlPlane(_) => "schedulable-control-plane",
            CheckSpec::ReplicatedController(_) => "replicated-controller",
            CheckSpec::L2Announcement(_) => "l2-announcement",
            CheckSpec::ExternalTrafficPolicy(_) => "external-traffic-policy",
            CheckSpec::LonghornDisks(_) => "longhorn-disks",
            CheckSpec::CapacityHeadroom(_) => "capacity-headroom",
            CheckSpec::ChaosReport(_) => "chaos-report",
            CheckSpec::EtcdMembers(_) => "etcd-members",
            CheckSpec::TalosEndpoints(_) => "talos-endpoints",
            CheckSpec::ApiEndpoint(_) => "api-endpoint",
            CheckSpec::HostSharing(_) => "host-sharing",
        }
    }

    /// The instance name that tells trials of one kind apart (`coredns`).
    pub fn instance(&self) -> Option<&str> {
        match self {
            CheckSpec::ReplicatedController(p) => Some(&p.name),
            CheckSpec::ControlPlaneNodes(_)
            | CheckSpec::DistinctHosts(_)
            | CheckSpec::SchedulableControlPlane(_)
            | CheckSpec::L2Announcement(_)
            | CheckSpec::ExternalTrafficPolicy(_)
            | CheckSpec::LonghornDisks(_)
            | CheckSpec::CapacityHeadroom(_)
            | CheckSpec::ChaosReport(_)
            | CheckSpec::EtcdMembers(_)
            | CheckSpec::TalosEndpoints(_)
            | CheckSpec::ApiEndpoint(_)
            | CheckSpec::HostSharing(_) => None,
        }
    }

    /// Evaluate the check. Pure: the same state always gives the same finding.
    pub fn evaluate(&self, ctx: Context<'_>) -> Finding {
        match self {
            CheckSpec::ControlPlaneNodes(p) => control_plane_nodes::evaluate(ctx, p),
            CheckSpec::DistinctHosts(p) => distinct_hosts::evaluate(ctx, p),
            CheckSpec::SchedulableControlPlane(p) => schedulable_control_plane::evaluate(ctx, p),
            CheckSpec::ReplicatedController(p) => replicated_controller::evaluate(ctx, p),
            CheckSpec::L2Announcement(p) => l2_announcement::evaluate(ctx, p),
            CheckSpec::ExternalTrafficPolicy(p) => external_traffic_policy::evaluate(ctx, p),
            CheckSpec::LonghornDisks(p) => longhorn_disks::evaluate(ctx, p),
            CheckSpec::CapacityHeadroom(p) => capacity_headroom::evaluate(ctx, p),
            CheckSpec::ChaosReport(p) => chaos_report::evaluate(ctx, p),
            CheckSpec::EtcdMembers(p) => etcd_members::evaluate(ctx, p),
            CheckSpec::TalosEndpoints(p) => talos_endpoints::evaluate(ctx, p),
            CheckSpec::ApiEndpoint(p) => api_endpoint::evaluate(ctx, p),
            CheckSpec::HostSharing(p) => host_sharing::evaluate(ctx, p),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of a gate file, as far as the checks are concerned.
    #[derive(Deserialize)]
    struct GateFile {
        gate: u32,
        title: String,
        environments: serde_yaml_ng::Value,
        checks: Vec<CheckSpec>,
    }

    const GATE_FILES: [(&str, &str); 5] = [
        (
            "1-control-plane.yaml",
            include_str!("../../gates/adr-007/1-control-plane.yaml"),
        ),
        (
            "2-controllers.yaml",
            include_str!("../../gates/adr-007/2-controllers.yaml"),
        ),
        (
            "3-ingress-address.yaml",
            include_str!("../../gates/adr-007/3-ingress-address.yaml"),
        ),
        (
            "4-host-failure.yaml",
            include_str!("../../gates/adr-007/4-host-failure.yaml"),
        ),
        (
            "5-production-capacity.yaml",
            include_str!("../../gates/adr-007/5-production-capacity.yaml"),
        ),
    ];

    #[test]
    fn the_shipped_gate_files_parse_into_known_checks() {
        let mut kinds_used = std::collections::BTreeSet::new();
        for (i, (file, text)) in GATE_FILES.iter().enumerate() {
            let gate: GateFile =
                serde_yaml_ng::from_str(text).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(gate.gate as usize, i + 1, "{file}");
            assert!(
                gate.title.ends_with('.') && !gate.title.contains("open"),
                "{file}"
            );
            assert!(!gate.checks.is_empty(), "{file}");
            let mut trials = std::collections::BTreeSet::new();
            for check in &gate.checks {
                assert!(KINDS.contains(&check.kind()));
                kinds_used.insert(check.kind());
                let trial = format!("{}::{}", check.kind(), check.instance().unwrap_or(""));
                assert!(
                    trials.insert(trial.clone()),
                    "{file}: duplicate trial {trial}"
                );
            }
            let envs = &gate.environments;
            assert!(envs.is_sequence() || envs.as_str() == Some("all"), "{file}");
        }
        assert_eq!(
            kinds_used.len(),
            KINDS.len(),
            "every kind is used by some gate"
        );
    }

    #[test]
    fn gate_2_covers_every_controller_group_of_the_adr() {
        let gate: GateFile = serde_yaml_ng::from_str(GATE_FILES[1].1).unwrap();
        let names: Vec<&str> = gate.checks.iter().filter_map(|c| c.instance()).collect();
        assert_eq!(
            names,
            [
                "cilium-operator",
                "longhorn-csi-attacher",
                "longhorn-csi-provisioner",
                "longhorn-csi-resizer",
                "longhorn-csi-snapshotter",
                "coredns",
                "traefik",
                "cert-manager-webhook",
                "external-secrets",
                "external-secrets-webhook",
            ]
        );
    }

    #[test]
    fn unknown_parameters_and_kinds_are_rejected() {
        let bad: Result<CheckSpec, _> =
            serde_yaml_ng::from_str("{kind: distinct-hosts, spread: host}");
        assert!(
            bad.unwrap_err()
                .to_string()
                .contains("unknown field `spread`")
        );
        let bad: Result<CheckSpec, _> = serde_yaml_ng::from_str(
            "{kind: replicated-controller, name: x, selector: {a: b}, replicas: 2}",
        );
        assert!(
            bad.unwrap_err()
                .to_string()
                .contains("unknown field `replicas`")
        );
        let bad: Result<CheckSpec, _> = serde_yaml_ng::from_str("{kind: distinct-host}");
        assert!(
            bad.unwrap_err()
                .to_string()
                .contains("unknown variant `distinct-host`")
        );
        let ok: CheckSpec =
            serde_yaml_ng::from_str("{kind: replicated-controller, name: x, selector: {a: b}}")
                .unwrap();
        match ok {
            CheckSpec::ReplicatedController(p) => assert_eq!(p.min_replicas, 2),
            other => panic!("{other:?}"),
        }
    }
}
