//! The clients of one run, built once per environment and shared by every phase: the cluster
//! access for the API probes, the Kubernetes client for the workloads probe and the event
//! watcher, and the Talos connections for the etcd probe and the VIP watcher.

use super::probes;
use super::talos_pool::TalosPool;
use crate::collect;
use crate::collect::api::ClusterAccess;
use crate::config::Environment;

pub struct Clients {
    pub access: ClusterAccess,
    /// Why no client could be built, if so (the run then stops before the fault).
    pub kube: Result<kube::Client, collect::kube::KubeError>,
    /// When the environment has a talos section.
    pub talos: Option<TalosPool>,
}

impl Clients {
    /// `timeout` bounds one Talos call of a probe.
    pub async fn build(
        env: &Environment,
        timeout: std::time::Duration,
    ) -> Result<Clients, probes::ProbeSetupError> {
        let access = collect::api::cluster_access(env)?;
        let kube = collect::kube::client(env).await;
        let talos = probes::talos_client(env, timeout)
            .transpose()?
            .map(TalosPool::new);
        Ok(Clients {
            access,
            kube,
            talos,
        })
    }
}
