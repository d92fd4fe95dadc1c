//! The declared evaluation of each check kind that has a declared part: which trial family
//! judges its repository trial and its drift trials, and where in the Talos configuration
//! its repository trial reads. The registry line of the kind (`crate::checks`) names the
//! trials; this evaluates them.

use crate::checks::{
    api_endpoint, capacity_headroom, control_plane_nodes, distinct_hosts, external_traffic_policy,
    l2_announcement, longhorn_disks, replicated_controller, schedulable_control_plane,
    talos_endpoints,
};
use crate::verdict::Finding;

use super::{
    DeclaredCheck, RepoContext, capacity, controllers, drift, drift_addresses, drift_placement,
    ingress, l2, nodes, storage,
};

/// Where the API addresses are: the VIP and the control planes' addresses.
const ADDRESSES: &[&str] = &["machine.network", "cluster.controlPlane"];

impl DeclaredCheck for control_plane_nodes::Params {
    fn evaluate_declared(&self, ctx: &RepoContext<'_>) -> Finding {
        nodes::control_plane_nodes(ctx)
    }

    fn evaluate_drift(&self, _kind: &str, ctx: &RepoContext<'_>) -> Finding {
        drift::control_planes(ctx)
    }
}

impl DeclaredCheck for distinct_hosts::Params {
    fn evaluate_declared(&self, ctx: &RepoContext<'_>) -> Finding {
        nodes::distinct_hosts(ctx)
    }

    fn evaluate_drift(&self, _kind: &str, ctx: &RepoContext<'_>) -> Finding {
        drift_placement::host_labels(ctx)
    }

    fn talos_reads(&self) -> Option<&'static [&'static str]> {
        Some(&["machine.nodeLabels"])
    }

    fn settles_a_fail(&self, ctx: &RepoContext<'_>) -> bool {
        nodes::hosts_settle_a_fail(ctx)
    }
}

impl DeclaredCheck for schedulable_control_plane::Params {
    fn evaluate_declared(&self, ctx: &RepoContext<'_>) -> Finding {
        nodes::schedulable_control_plane(ctx)
    }

    fn evaluate_drift(&self, _kind: &str, ctx: &RepoContext<'_>) -> Finding {
        drift_placement::schedulable_control_plane(ctx)
    }

    fn talos_reads(&self) -> Option<&'static [&'static str]> {
        Some(&[
            "cluster.allowSchedulingOnControlPlanes",
            "machine.nodeTaints",
        ])
    }
}

impl DeclaredCheck for replicated_controller::Params {
    fn evaluate_declared(&self, ctx: &RepoContext<'_>) -> Finding {
        controllers::evaluate(ctx, self)
    }

    /// Two drift trials: the replicas, and the PodDisruptionBudget (which the repository
    /// trial checks as part of the controller).
    fn evaluate_drift(&self, kind: &str, ctx: &RepoContext<'_>) -> Finding {
        if kind == "drift::pdb" {
            drift_placement::pdb(ctx, self)
        } else {
            drift::replicas(ctx, self)
        }
    }
}

impl DeclaredCheck for l2_announcement::Params {
    fn evaluate_declared(&self, ctx: &RepoContext<'_>) -> Finding {
        l2::l2_announcement(ctx)
    }

    fn evaluate_drift(&self, _kind: &str, ctx: &RepoContext<'_>) -> Finding {
        drift::l2_policies(ctx)
    }

    /// Cilium's L2 announcer reads node labels only.
    fn talos_reads(&self) -> Option<&'static [&'static str]> {
        Some(&["machine.nodeLabels"])
    }

    fn settles_a_fail(&self, ctx: &RepoContext<'_>) -> bool {
        l2::fails_without_nodes(ctx)
    }
}

impl DeclaredCheck for external_traffic_policy::Params {
    fn evaluate_declared(&self, ctx: &RepoContext<'_>) -> Finding {
        ingress::external_traffic_policy(ctx)
    }

    fn evaluate_drift(&self, _kind: &str, ctx: &RepoContext<'_>) -> Finding {
        drift::traffic_policy(ctx)
    }
}

impl DeclaredCheck for longhorn_disks::Params {
    fn evaluate_declared(&self, ctx: &RepoContext<'_>) -> Finding {
        storage::longhorn_disks(ctx)
    }

    fn evaluate_drift(&self, _kind: &str, ctx: &RepoContext<'_>) -> Finding {
        drift_placement::longhorn_nodes(ctx)
    }

    fn talos_reads(&self) -> Option<&'static [&'static str]> {
        Some(&[
            "machine.kubelet",
            "machine.disks",
            "machine.nodeLabels",
            "machine.nodeTaints",
            "cluster.allowSchedulingOnControlPlanes",
        ])
    }
}

impl DeclaredCheck for capacity_headroom::Params {
    fn evaluate_declared(&self, ctx: &RepoContext<'_>) -> Finding {
        capacity::capacity_headroom(ctx)
    }
}

impl DeclaredCheck for talos_endpoints::Params {
    fn evaluate_declared(&self, ctx: &RepoContext<'_>) -> Finding {
        nodes::talos_endpoints(ctx)
    }

    fn evaluate_drift(&self, _kind: &str, ctx: &RepoContext<'_>) -> Finding {
        drift_addresses::talos_endpoints(ctx)
    }

    fn talos_reads(&self) -> Option<&'static [&'static str]> {
        Some(ADDRESSES)
    }
}

impl DeclaredCheck for api_endpoint::Params {
    /// The repository declares the VIP the kubeconfig should point at.
    fn evaluate_declared(&self, ctx: &RepoContext<'_>) -> Finding {
        nodes::vip(ctx)
    }

    fn evaluate_drift(&self, _kind: &str, ctx: &RepoContext<'_>) -> Finding {
        drift_addresses::vip(ctx)
    }

    fn talos_reads(&self) -> Option<&'static [&'static str]> {
        Some(ADDRESSES)
    }
}
