//! The parts of a [`State`] a check may read, named, so that something that keeps a state
//! current (`gates watch`) re-evaluates only the trials whose inputs changed, and turns only
//! those into errors when a part goes stale. Each check kind declares its inputs
//! ([`Check::inputs`](crate::checks::Check::inputs)); a test withholds every part a kind
//! does not declare and asserts its findings stay the same, so a declaration that misses a
//! part fails.

use super::{Collected, State};

/// One part of a [`State`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Input {
    Nodes,
    Pods,
    Deployments,
    DaemonSets,
    StatefulSets,
    Pdbs,
    Services,
    Leases,
    L2Policies,
    LonghornNodes,
    LonghornVolumes,
    LonghornReplicas,
    LonghornSettings,
    NodeMetrics,
    PodMetrics,
    /// The load measured over a window (`capacity.basis: prometheus`).
    NodeLoad,
    Talos,
    Proxmox,
    Api,
    /// The newest chaos report of the environment.
    ChaosReport,
    /// What identifies the cluster (its `kube-system` UID), for provenance.
    ClusterIdentity,
    /// The moment the state stands for: checks that judge ages (a chaos report's, a
    /// lease's) read it, so they are re-evaluated as time passes.
    Clock,
}

impl Input {
    pub const ALL: [Input; 22] = [
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
        Input::ChaosReport,
        Input::ClusterIdentity,
        Input::Clock,
    ];
}

impl State {
    /// Make `input` absent with `why` (a part gone stale); [`Input::Clock`] and
    /// [`Input::ClusterIdentity`] have no absent form and are left as they are.
    pub fn make_absent(&mut self, input: Input, why: &str) {
        fn absent<T>(field: &mut Collected<T>, why: &str) {
            *field = Collected::Absent(why.to_string());
        }
        match input {
            Input::Nodes => absent(&mut self.nodes, why),
            Input::Pods => absent(&mut self.pods, why),
            Input::Deployments => absent(&mut self.deployments, why),
            Input::DaemonSets => absent(&mut self.daemonsets, why),
            Input::StatefulSets => absent(&mut self.statefulsets, why),
            Input::Pdbs => absent(&mut self.pdbs, why),
            Input::Services => absent(&mut self.services, why),
            Input::Leases => absent(&mut self.leases, why),
            Input::L2Policies => absent(&mut self.l2_policies, why),
            Input::LonghornNodes => absent(&mut self.longhorn_nodes, why),
            Input::LonghornVolumes => absent(&mut self.longhorn_volumes, why),
            Input::LonghornReplicas => absent(&mut self.longhorn_replicas, why),
            Input::LonghornSettings => absent(&mut self.longhorn_settings, why),
            Input::NodeMetrics => absent(&mut self.node_metrics, why),
            Input::PodMetrics => absent(&mut self.pod_metrics, why),
            Input::NodeLoad => absent(&mut self.node_load, why),
            Input::Talos => absent(&mut self.talos, why),
            Input::Proxmox => absent(&mut self.proxmox, why),
            Input::Api => absent(&mut self.api, why),
            Input::ChaosReport => absent(&mut self.chaos_report, why),
            Input::ClusterIdentity | Input::Clock => {}
        }
    }

    /// The state with `input` taken away as thoroughly as it can be: absent, or for the
    /// clock a day later and for the identity another cluster's. What the declaration test
    /// compares findings against.
    #[cfg(any(test, feature = "testing"))]
    pub fn without(&self, input: Input) -> State {
        let mut state = self.clone();
        match input {
            Input::Clock => state.collected_at += chrono::Duration::days(1),
            Input::ClusterIdentity => {
                state.cluster_identity = super::provenance::ClusterIdentity::default()
            }
            other => state.make_absent(other, "withheld by the test"),
        }
        state
    }
}
