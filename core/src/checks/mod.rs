//! The check kinds. Each is a pure function over a [`State`] and its environment: no I/O, no
//! clock. One file per kind holds its parameters, its evaluation and its tests.

pub mod api_endpoint;
pub mod capacity_headroom;
pub mod chaos_report;
pub mod control_plane_nodes;
pub mod distinct_hosts;
pub mod etcd_members;
pub mod external_traffic_policy;
pub mod failure_domains;
pub mod host_loss;
pub mod host_sharing;
pub mod l2_announcement;
pub mod longhorn_disks;
pub mod replicated_controller;
pub mod schedulable_control_plane;
pub mod talos_endpoints;

pub mod indexes;
pub mod support;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

use serde::Deserialize;

pub use indexes::Indexes;

use crate::config::Environment;
use crate::state::State;
use crate::verdict::Finding;

/// What a check sees: the collected state and the environment it belongs to, and the indexes
/// over the state that the trials of one evaluation share.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub env: &'a Environment,
    pub state: &'a State,
    pub indexes: &'a Indexes<'a>,
}

/// What every check kind implements: a pure evaluation over the state, and the name that tells
/// several trials of the kind apart (only kinds that can appear more than once in a gate have
/// one).
pub trait Check {
    /// Evaluate the check. Pure: the same state always gives the same finding.
    fn evaluate(&self, ctx: Context<'_>) -> Finding;

    /// The parts of the state the evaluation reads (every one, or a watch re-evaluates the
    /// trial too seldom and lets a stale part pass).
    fn inputs(&self) -> &'static [crate::state::Input];

    /// The instance name that tells trials of one kind apart (`coredns`).
    fn instance(&self) -> Option<&str> {
        None
    }
}

/// The registry of check kinds: one line per kind gives the variant of [`CheckSpec`], the
/// module that holds its parameters and evaluation, the name gate files use, and the one-line
/// description `gates list --kinds` prints. Adding a kind is its file, one line here, and a
/// gate file that names it (docs/architecture.md).
macro_rules! registry {
    ($($variant:ident => $module:ident, $kind:literal, $about:literal;)*) => {
        /// One check as written in a gate file: `kind` picks the variant, the other keys are
        /// its parameters.
        #[derive(Debug, Clone, Deserialize)]
        #[serde(tag = "kind")]
        pub enum CheckSpec {
            $(
                #[doc = $about]
                #[serde(rename = $kind)]
                $variant($module::Params),
            )*
        }

        /// Every kind a gate file may name, with what it asks, in registry order.
        pub const KINDS: &[(&str, &str)] = &[$(($kind, $about)),*];

        impl CheckSpec {
            /// The name gate files and trial names use (`distinct-hosts`).
            pub fn kind(&self) -> &'static str {
                match self {
                    $(CheckSpec::$variant(_) => $kind,)*
                }
            }

            fn check(&self) -> &dyn Check {
                match self {
                    $(CheckSpec::$variant(p) => p,)*
                }
            }
        }
    };
}

registry! {
    ControlPlaneNodes => control_plane_nodes, "control-plane-nodes",
        "exactly N nodes carry the control-plane role, all Ready";
    DistinctHosts => distinct_hosts, "distinct-hosts",
        "every node names its Proxmox host, and the control planes sit on distinct hosts";
    SchedulableControlPlane => schedulable_control_plane, "schedulable-control-plane",
        "no control-plane node keeps the control-plane NoSchedule taint";
    ReplicatedController => replicated_controller, "replicated-controller",
        "a controller runs enough ready replicas on distinct nodes and hosts, with one PDB that lets one go";
    L2Announcement => l2_announcement, "l2-announcement",
        "the Cilium L2 announcement policies of each ingress Service select every node";
    ExternalTrafficPolicy => external_traffic_policy, "external-traffic-policy",
        "each ingress Service uses externalTrafficPolicy: Cluster";
    LonghornDisks => longhorn_disks, "longhorn-disks",
        "every node has a schedulable Longhorn disk, volumes are healthy, replicas on distinct hosts";
    CapacityHeadroom => capacity_headroom, "capacity-headroom",
        "every node keeps the capacity margin free, for CPU and memory, measured";
    ChaosReport => chaos_report, "chaos-report",
        "the newest chaos report of the environment proves the host-failure gate";
    EtcdMembers => etcd_members, "etcd-members",
        "every control plane, asked over the Talos API, sees the same N voting etcd members";
    TalosEndpoints => talos_endpoints, "talos-endpoints",
        "the talosconfig lists every control-plane address and not the API VIP";
    ApiEndpoint => api_endpoint, "api-endpoint",
        "the kubeconfig points at the API VIP, which answers /readyz under the cluster CA";
    HostSharing => host_sharing, "host-sharing",
        "informational: which environments' VMs each Proxmox host runs";
    FailureDomains => failure_domains, "failure-domains",
        "no switch, power feed or shared datastore carries a quorum of the control planes";
    HostLoss => host_loss, "host-loss",
        "the loss of every Proxmox host is predicted survivable (etcd, VIP, L2, workloads, room, Longhorn)";
}

impl CheckSpec {
    /// The labels of the objects a trial judges, where one label selector names them: a
    /// controller's pods, the one ingress Service. `None` where the subject is the cluster
    /// itself (its nodes, etcd, the Talos and Proxmox APIs, the host-loss model) or more than
    /// one selector (several ingress Services). What a PolicyReport result's
    /// `resourceSelector` says.
    pub fn subject_labels(
        &self,
        env: &crate::config::Environment,
    ) -> Option<std::collections::BTreeMap<String, String>> {
        let one_ingress_service = || match env.ingress.services.as_slice() {
            [one] => Some(one.selector.clone()),
            _ => None,
        };
        match self {
            CheckSpec::ReplicatedController(p) => Some(p.selector.clone()),
            CheckSpec::L2Announcement(_) | CheckSpec::ExternalTrafficPolicy(_) => {
                one_ingress_service()
            }
            CheckSpec::ControlPlaneNodes(_)
            | CheckSpec::DistinctHosts(_)
            | CheckSpec::SchedulableControlPlane(_)
            | CheckSpec::LonghornDisks(_)
            | CheckSpec::CapacityHeadroom(_)
            | CheckSpec::ChaosReport(_)
            | CheckSpec::EtcdMembers(_)
            | CheckSpec::TalosEndpoints(_)
            | CheckSpec::ApiEndpoint(_)
            | CheckSpec::HostSharing(_)
            | CheckSpec::FailureDomains(_)
            | CheckSpec::HostLoss(_) => None,
        }
    }

    /// The instance name that tells trials of one kind apart (`coredns`).
    pub fn instance(&self) -> Option<&str> {
        self.check().instance()
    }

    /// Evaluate the check. Pure: the same state always gives the same finding.
    pub fn evaluate(&self, ctx: Context<'_>) -> Finding {
        self.check().evaluate(ctx)
    }

    /// The parts of the state the check reads.
    pub fn inputs(&self) -> &'static [crate::state::Input] {
        self.check().inputs()
    }
}

/// The names of every kind, for error messages that list the valid choices.
pub fn kind_names() -> impl Iterator<Item = &'static str> {
    KINDS.iter().map(|(kind, _)| *kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of a gate file, as far as the checks are concerned.
    #[derive(Deserialize)]
    struct GateFile {
        gate: u32,
        title: String,
        environments: serde_json::Value,
        checks: Vec<CheckSpec>,
    }

    const GATE_FILES: [(&str, &str); 5] = [
        (
            "1-control-plane.yaml",
            include_str!("../../../gates/adr-007/1-control-plane.yaml"),
        ),
        (
            "2-controllers.yaml",
            include_str!("../../../gates/adr-007/2-controllers.yaml"),
        ),
        (
            "3-ingress-address.yaml",
            include_str!("../../../gates/adr-007/3-ingress-address.yaml"),
        ),
        (
            "4-host-failure.yaml",
            include_str!("../../../gates/adr-007/4-host-failure.yaml"),
        ),
        (
            "5-production-capacity.yaml",
            include_str!("../../../gates/adr-007/5-production-capacity.yaml"),
        ),
    ];

    #[test]
    fn the_shipped_gate_files_parse_into_known_checks() {
        let mut kinds_used = std::collections::BTreeSet::new();
        for (i, (file, text)) in GATE_FILES.iter().enumerate() {
            let gate: GateFile =
                crate::yaml::from_str(text).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(gate.gate as usize, i + 1, "{file}");
            assert!(
                gate.title.ends_with('.') && !gate.title.contains("open"),
                "{file}"
            );
            assert!(!gate.checks.is_empty(), "{file}");
            let mut trials = std::collections::BTreeSet::new();
            for check in &gate.checks {
                assert!(kind_names().any(|k| k == check.kind()));
                kinds_used.insert(check.kind());
                let trial = format!("{}::{}", check.kind(), check.instance().unwrap_or(""));
                assert!(
                    trials.insert(trial.clone()),
                    "{file}: duplicate trial {trial}"
                );
            }
            let envs = &gate.environments;
            assert!(envs.is_array() || envs.as_str() == Some("all"), "{file}");
        }
        assert_eq!(
            kinds_used.len(),
            KINDS.len(),
            "every kind is used by some gate"
        );
    }

    #[test]
    fn gate_2_covers_every_controller_group_of_the_adr() {
        let gate: GateFile = crate::yaml::from_str(GATE_FILES[1].1).unwrap();
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
            crate::yaml::from_str("{kind: distinct-hosts, spread: host}");
        assert!(
            bad.unwrap_err()
                .to_string()
                .contains("unknown field `spread`")
        );
        let bad: Result<CheckSpec, _> = crate::yaml::from_str(
            "{kind: replicated-controller, name: x, selector: {a: b}, replicas: 2}",
        );
        assert!(
            bad.unwrap_err()
                .to_string()
                .contains("unknown field `replicas`")
        );
        let bad: Result<CheckSpec, _> = crate::yaml::from_str("{kind: distinct-host}");
        assert!(
            bad.unwrap_err()
                .to_string()
                .contains("unknown variant `distinct-host`")
        );
        let ok: CheckSpec =
            crate::yaml::from_str("{kind: replicated-controller, name: x, selector: {a: b}}")
                .unwrap();
        match ok {
            CheckSpec::ReplicatedController(p) => assert_eq!(p.min_replicas, 2),
            other => panic!("{other:?}"),
        }
    }
}
