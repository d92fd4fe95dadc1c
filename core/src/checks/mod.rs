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
    /// Where a long evaluation (the host-loss prediction) may be held: `gates watch` holds
    /// it while it evaluates a change; [`crate::pause::NEVER`] everywhere else.
    pub pause: &'a dyn crate::pause::Pause,
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
/// module that holds its parameters and evaluation, the name gate files use, the one-line
/// description `gates list --kinds` prints, and its declared part: the name of its
/// repository trial (`repo::NAME`) and of its drift trials (`drift::NAME`), or `repo: none`
/// for a kind judged on the live state only. A kind with a declared part implements the
/// trials' `DeclaredCheck` beside [`Check`]; the trials read this list through `with_registry!`
/// to dispatch to it. Adding a kind is its file, one line here, and a gate file that names
/// it (docs/architecture.md).
macro_rules! with_registry {
    ($then:ident) => {
        $then! {
            ControlPlaneNodes => control_plane_nodes, "control-plane-nodes",
                "exactly N nodes carry the control-plane role, all Ready",
                repo: "control-plane-nodes", drift: ["control-plane-nodes"];
            DistinctHosts => distinct_hosts, "distinct-hosts",
                "every node names its Proxmox host, and the control planes sit on distinct hosts",
                repo: "distinct-hosts", drift: ["host-labels"];
            SchedulableControlPlane => schedulable_control_plane, "schedulable-control-plane",
                "no control-plane node keeps the control-plane NoSchedule taint",
                repo: "schedulable-control-plane", drift: ["schedulable-control-plane"];
            ReplicatedController => replicated_controller, "replicated-controller",
                "a controller runs enough ready replicas on distinct nodes and hosts, with one PDB that lets one go",
                repo: "replicated-controller", drift: ["replicated-controller", "pdb"];
            L2Announcement => l2_announcement, "l2-announcement",
                "the Cilium L2 announcement policies of each ingress Service select every node",
                repo: "l2-announcement", drift: ["l2-announcement"];
            ExternalTrafficPolicy => external_traffic_policy, "external-traffic-policy",
                "each ingress Service uses externalTrafficPolicy: Cluster",
                repo: "external-traffic-policy", drift: ["external-traffic-policy"];
            LonghornDisks => longhorn_disks, "longhorn-disks",
                "every node has a schedulable Longhorn disk, volumes are healthy, replicas on distinct hosts",
                repo: "longhorn-disks", drift: ["longhorn-nodes"];
            // Declared and live capacity are different quantities (VM size against
            // allocatable): no drift trial.
            CapacityHeadroom => capacity_headroom, "capacity-headroom",
                "every node keeps the capacity margin free, for CPU and memory, measured",
                repo: "capacity-headroom", drift: [];
            // Chaos, membership, host sharing and the host-loss prediction are about what
            // runs, not what is declared; failure domains need Proxmox's storage list and the
            // environment's switches, which a repository does not hold.
            ChaosReport => chaos_report, "chaos-report",
                "the newest chaos report of the environment proves the host-failure gate",
                repo: none, drift: [];
            EtcdMembers => etcd_members, "etcd-members",
                "every control plane, asked over the Talos API, sees the same N voting etcd members",
                repo: none, drift: [];
            TalosEndpoints => talos_endpoints, "talos-endpoints",
                "the talosconfig lists every control-plane address and not the API VIP",
                repo: "talos-endpoints", drift: ["talos-endpoints"];
            // The live check reads the kubeconfig; the repository declares the VIP itself.
            ApiEndpoint => api_endpoint, "api-endpoint",
                "the kubeconfig points at the API VIP, which answers /readyz under the cluster CA",
                repo: "vip", drift: ["vip"];
            HostSharing => host_sharing, "host-sharing",
                "informational: which environments' VMs each Proxmox host runs",
                repo: none, drift: [];
            FailureDomains => failure_domains, "failure-domains",
                "no switch, power feed or shared datastore carries a quorum of the control planes",
                repo: none, drift: [];
            HostLoss => host_loss, "host-loss",
                "the loss of every Proxmox host is predicted survivable (etcd, VIP, L2, workloads, room, Longhorn)",
                repo: none, drift: [];
        }
    };
}
pub(crate) use with_registry;

/// The trial kinds of a declared part as a registry line writes it: `None` for `repo: none`.
macro_rules! declared_kinds {
    (none, [$($drift:literal),*]) => {
        None
    };
    ($repo:literal, [$($drift:literal),*]) => {
        Some(DeclaredKinds {
            repo: concat!("repo::", $repo),
            drifts: &[$(concat!("drift::", $drift)),*],
        })
    };
}

macro_rules! registry {
    ($($variant:ident => $module:ident, $kind:literal, $about:literal,
        repo: $repo:tt, drift: [$($drift:literal),*];)*) => {
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

        /// Every kind with the trial kinds of its declared part, in registry order.
        pub const DECLARED: &[(&str, Option<DeclaredKinds>)] =
            &[$(($kind, declared_kinds!($repo, [$($drift),*]))),*];

        impl CheckSpec {
            /// The name gate files and trial names use (`distinct-hosts`).
            pub fn kind(&self) -> &'static str {
                match self {
                    $(CheckSpec::$variant(_) => $kind,)*
                }
            }

            /// The trial kinds of the kind's declared part; `None` for a kind judged on the
            /// live state only.
            pub fn declared(&self) -> Option<DeclaredKinds> {
                match self {
                    $(CheckSpec::$variant(_) => declared_kinds!($repo, [$($drift),*]),)*
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

with_registry!(registry);

/// The trials a kind's declared part gives, by the kinds in their names: one repository
/// trial (`repo::vip`) and one drift trial for each thing both a cluster and the repository
/// say (`drift::vip`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeclaredKinds {
    pub repo: &'static str,
    pub drifts: &'static [&'static str],
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

    /// The label selector a trial looks its pods up by, in the evaluation's shared index
    /// ([`Indexes::expecting`]): told beforehand, the index reads the pods once for every
    /// trial.
    pub fn pods_asked(&self) -> Option<&std::collections::BTreeMap<String, String>> {
        match self {
            CheckSpec::ReplicatedController(p) => Some(&p.selector),
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
            | CheckSpec::HostLoss(_)
            | CheckSpec::L2Announcement(_)
            | CheckSpec::ExternalTrafficPolicy(_) => None,
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
