//! Longhorn's custom resources as longhorn-manager keeps them: its settings, a Node per
//! Kubernetes node with the default disk where replicas may go, Volumes with their
//! robustness and Kubernetes status, and the Replicas on the nodes' disks.

use super::super::*;
use crate::ids;
use crate::quantity;
use crate::resources::Res;
use crate::scenario::LonghornSpec;
use serde_json::json;

/// What longhorn-manager weighs a disk's room against: the disk's size and the
/// storage-minimal-available and storage-over-provisioning percentages.
#[derive(Debug, Clone, Copy)]
struct DiskLimits {
    disk_size: i64,
    minimal_pct: i64,
    over_pct: i64,
}

impl World {
    /// Longhorn's Settings, defaults and the scenario's, when the environment runs Longhorn.
    pub(super) fn render_longhorn_settings(&self, env: usize, puts: &mut Vec<(Res, Value)>) {
        let e = &self.envs[env];
        if e.spec.longhorn.is_some() {
            for (k, v) in &e.longhorn_settings {
                puts.push((
                    Res::LonghornSettings,
                    json!({
                        "apiVersion": "longhorn.io/v1beta2",
                        "kind": "Setting",
                        "metadata": {"name": k, "namespace": "longhorn-system", "uid": ids::uuid(&[&e.spec.name, "setting", k]), "generation": 1, "creationTimestamp": self.rfc3339(Duration::ZERO)},
                        "value": v,
                        "status": {"applied": true},
                    }),
                ));
            }
        }
    }

    /// The instance managers, then every node's Longhorn Node, then each Volume followed by
    /// its Replicas.
    pub(super) fn render_longhorn(&self, env: usize, puts: &mut Vec<(Res, Value)>) {
        let e = &self.envs[env];
        let Some(lh) = &e.spec.longhorn else { return };
        self.render_instance_managers(env, puts);
        let limits = self.disk_limits(env, lh);
        let t0 = self.rfc3339(Duration::ZERO);
        for &n in &e.nodes {
            puts.push((Res::LonghornNodes, self.longhorn_node(env, n, limits, &t0)));
        }
        for v in &e.volumes {
            puts.push((Res::LonghornVolumes, self.longhorn_volume(env, v, &t0)));
            for r in &v.replicas {
                puts.push((Res::LonghornReplicas, self.longhorn_replica(env, v, r, &t0)));
            }
        }
    }

    /// The disk size the scenario gives every disk node and the storage percentages in force.
    fn disk_limits(&self, env: usize, lh: &LonghornSpec) -> DiskLimits {
        let e = &self.envs[env];
        let disk_size = quantity::bytes(&lh.disk_size).unwrap_or(200 << 30);
        // Longhorn's defaults (types/setting.go), unless the scenario sets them.
        let percent = |key: &str, default: i64| {
            e.longhorn_settings
                .get(key)
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(default)
        };
        let minimal_pct = percent("storage-minimal-available-percentage", 25);
        let over_pct = percent("storage-over-provisioning-percentage", 100);
        DiskLimits {
            disk_size,
            minimal_pct,
            over_pct,
        }
    }

    /// A condition of a Longhorn Node or disk: empty reason and message when it holds, and
    /// the node's last Ready change as its transition time.
    fn longhorn_condition(&self, node: &Node, t: &str, ok: bool, reason: &str, msg: &str) -> Value {
        json!({"type": t, "status": if ok {"True"} else {"False"}, "reason": if ok {""} else {reason}, "message": if ok {""} else {msg}, "lastProbeTime": "", "lastTransitionTime": self.rfc3339(node.ready_changed)})
    }

    /// A Longhorn Node: Ready and Schedulable with the Kubernetes node, its default disk if
    /// it is a disk node, its zone the Proxmox host.
    fn longhorn_node(&self, env: usize, n: usize, limits: DiskLimits, t0: &str) -> Value {
        let e = &self.envs[env];
        let node = &self.nodes[n];
        // longhorn-manager runs where the DaemonSet does; it exists as a node object there.
        let has_disk = e.disk_nodes.contains(&n);
        let cond = |t: &str, ok: bool, reason: &str, msg: &str| {
            self.longhorn_condition(node, t, ok, reason, msg)
        };
        let ready = node.ready;
        let (disks, disk_status) = if has_disk {
            self.longhorn_disk(env, n, limits)
        } else {
            (serde_json::Map::new(), serde_json::Map::new())
        };
        json!({
            "apiVersion": "longhorn.io/v1beta2",
            "kind": "Node",
            "metadata": {"name": node.name, "namespace": "longhorn-system", "uid": ids::uuid(&[&e.spec.name, "lhnode", &node.name]), "generation": 1, "creationTimestamp": t0},
            "spec": {"name": node.name, "allowScheduling": true, "evictionRequested": false, "tags": [], "instanceManagerCPURequest": 0, "disks": disks},
            "status": {
                "conditions": [
                    cond("Ready", ready, "KubernetesNodeNotReady", &format!("Kubernetes node {} not ready: Unknown", node.name)),
                    cond("Schedulable", ready, "KubernetesNodeNotReady", "node is not ready"),
                    cond("MountPropagation", true, "", ""),
                ],
                "diskStatus": disk_status,
                "region": "",
                "zone": node.labels.get(super::super::node_facts::HOST_LABEL).cloned().unwrap_or_default(),
                "autoEvicting": false,
            },
        })
    }

    /// A disk node's default disk: its spec, and its status with the replicas scheduled on it
    /// and whether it takes more.
    fn longhorn_disk(
        &self,
        env: usize,
        n: usize,
        limits: DiskLimits,
    ) -> (
        serde_json::Map<String, Value>,
        serde_json::Map<String, Value>,
    ) {
        let e = &self.envs[env];
        let node = &self.nodes[n];
        let DiskLimits {
            disk_size,
            minimal_pct,
            over_pct,
        } = limits;
        let cond = |t: &str, ok: bool, reason: &str, msg: &str| {
            self.longhorn_condition(node, t, ok, reason, msg)
        };
        let ready = node.ready;
        let mut disks = serde_json::Map::new();
        let mut disk_status = serde_json::Map::new();
        let disk = format!("default-disk-{}", ids::suffix(&[&node.name, "disk"], 12));
        let scheduled: i64 = e
            .volumes
            .iter()
            .filter(|v| v.replicas.iter().any(|r| r.node == n))
            .map(|v| v.size_bytes)
            .sum();
        let replicas: serde_json::Map<String, Value> = e
            .volumes
            .iter()
            .flat_map(|v| {
                v.replicas
                    .iter()
                    .filter(|r| r.node == n)
                    .map(move |r| (r.name.clone(), json!(v.size_bytes)))
            })
            .collect();
        let reserved = disk_size * 3 / 10;
        let available = disk_size - scheduled;
        // longhorn-manager's node controller sets the disk's Schedulable condition from
        // `IsSchedulableToDisk(0, 0, info)` (scheduler/replica_scheduler.go): False with
        // DiskPressure on a full disk, whatever allowScheduling says.
        let schedulable = match (
            ready,
            disk_pressure(
                disk_size,
                available,
                scheduled,
                reserved,
                minimal_pct,
                over_pct,
            ),
        ) {
            (false, _) => cond("Schedulable", false, "DiskNotReady", "node is down"),
            (true, Some(why)) => cond(
                "Schedulable",
                false,
                "DiskPressure",
                &format!(
                    "Disk {disk} (/var/lib/longhorn/) on the node {} is not schedulable for more replica; {why}",
                    node.name
                ),
            ),
            (true, None) => cond("Schedulable", true, "", ""),
        };
        disks.insert(disk.clone(), json!({"diskType": "filesystem", "path": "/var/lib/longhorn/", "allowScheduling": true, "evictionRequested": false, "storageReserved": reserved, "tags": [], "diskDriver": ""}));
        disk_status.insert(
            disk,
            json!({
                "conditions": [cond("Ready", ready, "DiskNotReady", "node is down"), schedulable],
                "storageAvailable": disk_size - scheduled,
                "storageMaximum": disk_size,
                "storageScheduled": scheduled,
                "scheduledReplica": replicas,
                "diskUUID": ids::uuid(&[&node.name, "disk"]),
                "diskPath": "/var/lib/longhorn/",
                "diskType": "filesystem",
            }),
        );
        (disks, disk_status)
    }

    /// A Longhorn Volume: attached or detached, its robustness from its running replicas,
    /// when it last degraded, and what Kubernetes uses it.
    fn longhorn_volume(&self, env: usize, v: &Volume, t0: &str) -> Value {
        let healthy = v.replicas.iter().filter(|r| r.running).count();
        let (state, robustness) = match v.attached_to {
            Some(_) if healthy == 0 => ("attached", "faulted"),
            Some(_) if healthy >= v.number_of_replicas => ("attached", "healthy"),
            Some(_) => ("attached", "degraded"),
            None => ("detached", "unknown"),
        };
        let last_degraded = v
            .replicas
            .iter()
            .filter_map(|r| r.failed_at)
            .max()
            .map(|t| self.rfc3339(t))
            .unwrap_or_default();
        let ks = self.volume_kubernetes_status(env, v);
        json!({
            "apiVersion": "longhorn.io/v1beta2",
            "kind": "Volume",
            "metadata": {"name": v.name, "namespace": "longhorn-system", "uid": v.uid, "generation": 1, "creationTimestamp": t0},
            "spec": {"numberOfReplicas": v.number_of_replicas, "size": v.size_bytes.to_string(), "dataLocality": "disabled", "accessMode": "rwo", "nodeID": v.attached_to.map(|n| self.nodes[n].name.clone()).unwrap_or_default(), "dataEngine": "v1", "replicaAutoBalance": "ignored", "replicaSoftAntiAffinity": "ignored", "replicaZoneSoftAntiAffinity": "ignored", "replicaDiskSoftAntiAffinity": "ignored", "staleReplicaTimeout": 30, "nodeSelector": [], "diskSelector": []},
            "status": {
                "state": state,
                "robustness": robustness,
                "currentNodeID": v.attached_to.map(|n| self.nodes[n].name.clone()).unwrap_or_default(),
                "kubernetesStatus": ks,
                "lastDegradedAt": last_degraded,
                "conditions": [{"type": "Scheduled", "status": "True", "reason": "", "message": "", "lastProbeTime": "", "lastTransitionTime": t0}],
                "shareState": "",
            },
        })
    }

    /// The volume's Kubernetes status: its PV and PVC and, for a PVC, the pods of the workload
    /// that mounts it.
    fn volume_kubernetes_status(&self, env: usize, v: &Volume) -> Value {
        let e = &self.envs[env];
        match &v.pvc {
            Some(p) => {
                let (ns, name) = p.split_once('/').unwrap_or(("default", p));
                // The pods of the workload that mounts it, Terminating ones too, as
                // Longhorn's pod controller records them.
                let users: Vec<serde_json::Value> = v
                    .used_by
                    .map(|wi| {
                        let w = &e.workloads[wi];
                        let kind = match w.spec.kind {
                            crate::scenario::WorkloadKind::StatefulSet => "StatefulSet",
                            _ => "ReplicaSet",
                        };
                        e.load.by_workload[wi]
                            .iter()
                            .map(|(_, pod)| json!({"podName": pod, "podStatus": "Running", "workloadName": w.spec.name, "workloadType": kind}))
                            .collect()
                    })
                    .unwrap_or_default();
                json!({"pvName": v.name, "pvStatus": "Bound", "namespace": ns, "pvcName": name, "workloadsStatus": users})
            }
            None => {
                json!({"pvName": v.name, "pvStatus": "Bound", "namespace": "", "pvcName": "", "workloadsStatus": null})
            }
        }
    }

    /// A Replica on its node's disk: running while the volume is attached, stopped when
    /// detached, error once failed.
    fn longhorn_replica(&self, env: usize, v: &Volume, r: &Replica, t0: &str) -> Value {
        let e = &self.envs[env];
        let node = &self.nodes[r.node];
        json!({
            "apiVersion": "longhorn.io/v1beta2",
            "kind": "Replica",
            "metadata": {"name": r.name, "namespace": "longhorn-system", "uid": ids::uuid(&[&e.spec.name, "replica", &r.name]), "generation": 1, "creationTimestamp": t0, "labels": {"longhornvolume": v.name, "longhornnode": node.name}},
            "spec": {"volumeName": v.name, "nodeID": node.name, "diskID": ids::uuid(&[&node.name, "disk"]), "diskPath": "/var/lib/longhorn/", "dataDirectoryName": format!("{}-{}", v.name, ids::suffix(&[&r.name], 8)), "active": true, "desireState": if v.attached_to.is_some() {"running"} else {"stopped"}, "dataEngine": "v1", "failedAt": r.failed_at.map(|t| self.rfc3339(t)).unwrap_or_default(), "healthyAt": t0, "lastHealthyAt": t0, "lastFailedAt": r.failed_at.map(|t| self.rfc3339(t)).unwrap_or_default(), "hardNodeAffinity": "", "evictionRequested": false},
            "status": {"currentState": if r.running { if v.attached_to.is_some() {"running"} else {"stopped"} } else {"error"}, "instanceManagerName": super::super::longhorn_system::instance_manager_name(&node.name), "started": r.running && v.attached_to.is_some()},
        })
    }
}

/// Why longhorn-manager calls a disk under pressure, as `IsSchedulableToDisk(0, 0, info)` in
/// `scheduler/replica_scheduler.go` words it; `None` when it may take more replicas.
fn disk_pressure(
    maximum: i64,
    available: i64,
    scheduled: i64,
    reserved: i64,
    minimal_pct: i64,
    over_pct: i64,
) -> Option<String> {
    if maximum <= 0 {
        return Some("Storage Max must be greater than 0".into());
    }
    if available <= 0 {
        return Some("Storage Available must be greater than 0".into());
    }
    let minimal = (maximum as f64 * minimal_pct as f64 / 100.0) as i64;
    if available <= minimal {
        return Some(format!(
            "Actual space usage condition failed: CurrentAvailable = {available} (StorageAvailable - Required) is less than or equal to MinimalAvailable = {minimal} ({minimal_pct}% of Storage Max)."
        ));
    }
    let limit = ((maximum - reserved) as f64 * over_pct as f64 / 100.0) as i64;
    if scheduled > limit {
        return Some(format!(
            "Scheduling space condition failed: ScheduledTotal = {scheduled} (Size + StorageScheduled) is greater than ProvisionedLimit = {limit} ({over_pct}% of StorageMax - StorageReserved). "
        ));
    }
    None
}
