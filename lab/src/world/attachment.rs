//! ReadWriteOnce Longhorn volumes and the pods that mount them, as Longhorn and Kubernetes'
//! attach-detach controller treat them when a node goes down.
//!
//! A scenario volume with `used_by` is attached to the node of its workload's pod. A pod on
//! another node can start only once no pod of the workload is left on the volume's node:
//! until then it waits in `ContainerCreating` (the attach fails as a multi-attach). A pod on a
//! dead node is evicted and stays Terminating, because its kubelet never confirms, so its
//! replacement waits for as long as the node is down, unless Longhorn's
//! `node-down-pod-deletion-policy` says to force-delete such a pod for its owner's kind
//! (longhorn-manager `controller/kubernetes_pod_controller.go`, `handlePodDeletionIfNodeDown`:
//! it deletes the pod's VolumeAttachments and force-deletes it; choices and the `do-nothing`
//! default in `types/setting.go`). The lab force-deletes `pod_start` after the eviction and
//! detaches at once; Longhorn's own delay is its controller's next pass.

use std::time::Duration;

use super::{Action, Key, World};
use crate::scenario::WorkloadKind;

pub(crate) const POLICY: &str = "node-down-pod-deletion-policy";

impl World {
    /// The volumes (by index) that workload `wi` of environment `env` mounts.
    fn volumes_of(&self, env: usize, wi: usize) -> Vec<usize> {
        self.envs[env]
            .volumes
            .iter()
            .enumerate()
            .filter(|(_, v)| v.used_by == Some(wi))
            .map(|(i, _)| i)
            .collect()
    }

    /// Whether a pod of workload `wi` (other than `except`) is on node `n`, Terminating or not.
    fn workload_on(&self, env: usize, wi: usize, n: usize, except: &Key) -> bool {
        self.envs[env]
            .pods
            .iter()
            .any(|(k, p)| k != except && p.workload == wi && p.node == Some(n))
    }

    /// Attach the volumes of the pod `key` to its node, if each is free for it: detached,
    /// already there, or attached where no pod of the workload is left. `false`: the pod waits
    /// in `ContainerCreating` (an event says which volume holds it).
    pub(crate) fn attach_for(&mut self, env: usize, key: &Key, now: Duration) -> bool {
        let Some(p) = self.envs[env].pods.get(key) else {
            return false;
        };
        let (wi, Some(node)) = (p.workload, p.node) else {
            return false;
        };
        let volumes = self.volumes_of(env, wi);
        for &vi in &volumes {
            if let Some(m) = self.envs[env].volumes[vi].attached_to
                && m != node
                && self.workload_on(env, wi, m, key)
            {
                let detail = format!(
                    "volume {} is still attached to {}",
                    self.envs[env].volumes[vi].name, self.nodes[m].name
                );
                self.event(
                    now,
                    "attach-blocked",
                    Some(env),
                    &format!("{}/{}", key.0, key.1),
                    detail,
                );
                return false;
            }
        }
        for vi in volumes {
            if self.envs[env].volumes[vi].attached_to != Some(node) {
                self.envs[env].volumes[vi].attached_to = Some(node);
                let name = self.envs[env].volumes[vi].name.clone();
                let to = self.nodes[node].name.clone();
                self.event(now, "volume-attached", Some(env), &name, format!("to {to}"));
                self.envs[env].dirty.longhorn = true;
            }
        }
        true
    }

    /// A pod of workload `wi` left node `n`: a volume of the workload attached there with no
    /// pod of it left is detached, and the workload's pods waiting for it try again.
    pub(crate) fn release_volumes(&mut self, env: usize, wi: usize, n: usize, now: Duration) {
        let none = (String::new(), String::new());
        let mut released = false;
        for vi in self.volumes_of(env, wi) {
            if self.envs[env].volumes[vi].attached_to == Some(n)
                && !self.workload_on(env, wi, n, &none)
            {
                self.envs[env].volumes[vi].attached_to = None;
                let name = self.envs[env].volumes[vi].name.clone();
                let from = self.nodes[n].name.clone();
                self.event(
                    now,
                    "volume-detached",
                    Some(env),
                    &name,
                    format!("from {from}"),
                );
                self.envs[env].dirty.longhorn = true;
                released = true;
            }
        }
        if !released {
            return;
        }
        let waiting: Vec<(Key, String)> = self.envs[env]
            .pods
            .iter()
            .filter(|(_, p)| p.workload == wi && p.deleting.is_none() && !p.running)
            .filter(|(_, p)| p.node.is_some_and(|m| self.nodes[m].booted))
            .map(|(k, p)| (k.clone(), p.uid.clone()))
            .collect();
        for (key, uid) in waiting {
            self.schedule(
                now + self.timings.pod_start,
                Action::PodStarted { env, key, uid },
            );
        }
    }

    /// Pods just evicted from the dead node `n`: those that mount a volume, and whose owner
    /// Longhorn's node-down policy names, are force-deleted `pod_start` later.
    pub(crate) fn longhorn_node_down(&mut self, env: usize, evicted: &[Key], now: Duration) {
        let policy = self.envs[env]
            .longhorn_settings
            .get(POLICY)
            .cloned()
            .unwrap_or_default();
        for key in evicted {
            let Some(p) = self.envs[env].pods.get(key) else {
                continue;
            };
            let wi = p.workload;
            if self.volumes_of(env, wi).is_empty() {
                continue;
            }
            let releases = match self.envs[env].workloads[wi].spec.kind {
                WorkloadKind::StatefulSet => matches!(
                    policy.as_str(),
                    "delete-statefulset-pod" | "delete-both-statefulset-and-deployment-pod"
                ),
                WorkloadKind::Deployment => matches!(
                    policy.as_str(),
                    "delete-deployment-pod" | "delete-both-statefulset-and-deployment-pod"
                ),
                WorkloadKind::DaemonSet => false,
            };
            if releases {
                let uid = p.uid.clone();
                self.schedule(
                    now + self.timings.pod_start,
                    Action::LonghornForceDelete {
                        env,
                        key: key.clone(),
                        uid,
                    },
                );
            }
        }
    }

    /// Longhorn force-deletes a Terminating pod on a dead node: it leaves the API, its
    /// volumes detach, and its controller makes (or starts) its replacement.
    pub(crate) fn longhorn_force_delete(
        &mut self,
        env: usize,
        key: &Key,
        uid: &str,
        now: Duration,
    ) {
        let Some(p) = self.envs[env].pods.get(key) else {
            return;
        };
        if p.uid != uid || p.deleting.is_none() || p.node.is_some_and(|n| self.nodes[n].booted) {
            return;
        }
        let wi = p.workload;
        self.event(
            now,
            "pod-force-deleted",
            Some(env),
            &format!("{}/{}", key.0, key.1),
            format!("by Longhorn ({POLICY})"),
        );
        self.remove_pod(env, key, now);
        self.reconcile_workload(env, wi, now);
    }

    /// A Terminating pod leaves the API: its node's load, the indexes and its volumes.
    pub(crate) fn remove_pod(&mut self, env: usize, key: &Key, now: Duration) {
        let Some(p) = self.envs[env].pods.remove(key) else {
            return;
        };
        let (wi, node) = (p.workload, p.node);
        if let Some(n) = node {
            self.index_removed(env, wi, n);
        }
        if let Some(set) = self.envs[env].load.by_workload.get_mut(wi) {
            set.remove(key);
        }
        self.envs[env].dirty.removed_pods.insert(key.clone());
        self.envs[env].dirty.pods.remove(key);
        self.envs[env].dirty.nodes = true;
        if let Some(n) = node {
            self.release_volumes(env, wi, n, now);
        }
    }
}
