//! The Eviction subresource's effect on the world: an evicted pod is marked for deletion at
//! once (its controller makes a replacement, its PDB counts it out), and the kubelet removes
//! it when its containers have stopped (`pod_start`, the lab's container start/stop time).
//! Whether the PDB allows the eviction is decided by the API from the PDB's status, as the
//! real eviction handler does.

use std::time::Duration;

use super::{Action, Key, World};

/// Why an eviction was not carried out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvictError {
    NoSuchPod,
}

impl World {
    pub(crate) fn evict_pod(
        &mut self,
        env: usize,
        key: &Key,
        now: Duration,
    ) -> Result<(), EvictError> {
        let Some(p) = self.envs[env].pods.get_mut(key) else {
            return Err(EvictError::NoSuchPod);
        };
        if p.deleting.is_some() {
            return Ok(());
        }
        p.deleting = Some(now);
        if p.api_ready {
            p.api_ready = false;
            p.ready_changed = now;
        }
        let (wi, node, uid) = (p.workload, p.node, p.uid.clone());
        if let Some(n) = node {
            self.index_terminating(env, wi, n);
        }
        self.event(
            now,
            "pod-evicted",
            Some(env),
            &format!("{}/{}", key.0, key.1),
            "by the Eviction API".into(),
        );
        self.envs[env].dirty.pods.insert(key.clone());
        self.envs[env].dirty.nodes = true;
        self.reconcile_workload(env, wi, now);
        self.schedule(
            now + self.timings.pod_start,
            Action::PodGone {
                env,
                key: key.clone(),
                uid,
            },
        );
        Ok(())
    }

    /// The kubelet finished stopping an evicted pod: it leaves the API.
    pub(crate) fn pod_gone(&mut self, env: usize, key: &Key, uid: &str, now: Duration) {
        let Some(p) = self.envs[env].pods.get(key) else {
            return;
        };
        if p.uid != uid || p.deleting.is_none() {
            return;
        }
        // A pod on a powered-off node waits for its kubelet, as the other Terminating pods do.
        if p.node.is_some_and(|n| !self.nodes[n].booted) {
            return;
        }
        self.remove_pod(env, key, now);
    }
}
