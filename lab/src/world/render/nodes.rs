//! Kubernetes Nodes as the kubelet reports them on a Talos machine: labels, taints,
//! capacity, conditions, addresses and system info; their NodeMetrics and heartbeat Leases.

use super::super::node_facts::{RESERVED_CPU_MILLI, RESERVED_MEMORY};
use super::super::*;
use super::common::{pod_cidr, q, to_value};
use crate::ids;
use crate::quantity;
use crate::resources::Res;
use k8s_openapi::api::coordination::v1 as coord;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::json;

impl World {
    /// Every Node of the environment and, with metrics on, its NodeMetrics while it runs
    /// (deleted while it is down).
    pub(super) fn render_nodes(
        &self,
        env: usize,
        puts: &mut Vec<(Res, Value)>,
        deletes: &mut Vec<(Res, Key)>,
    ) {
        let e = &self.envs[env];
        let metrics = e.spec.metrics;
        let usage = if metrics {
            self.usage_by_node(env)
        } else {
            Vec::new()
        };
        for &n in &e.nodes {
            let node = &self.nodes[n];
            puts.push((Res::Nodes, to_value(&self.node_object(env, n))));
            if metrics && node.booted {
                let (cpu, mem) = usage.get(n).copied().unwrap_or_default();
                puts.push((
                    Res::NodeMetrics,
                    json!({
                        "kind": "NodeMetrics",
                        "apiVersion": "metrics.k8s.io/v1beta1",
                        "metadata": {"name": node.name, "creationTimestamp": self.rfc3339(Duration::ZERO), "labels": node.labels},
                        "timestamp": self.rfc3339(node.booted_at),
                        "window": "20.05s",
                        "usage": {"cpu": quantity::cpu_nano_string(cpu), "memory": format!("{}Ki", mem / 1024)},
                    }),
                ));
            } else {
                deletes.push((Res::NodeMetrics, (String::new(), node.name.clone())));
            }
        }
    }

    /// A Node object: Talos's annotations, its podCIDR and taints, and the status the kubelet
    /// posts (or last posted, once it stopped).
    fn node_object(&self, env: usize, n: usize) -> core::Node {
        let e = &self.envs[env];
        let node = &self.nodes[n];
        let taints = self.node_taints(node);
        let (capacity, allocatable) = node_resources(node);
        let conditions = self.node_conditions(node);
        let ip = if node.addressed {
            self.plan.node_ip(n).to_string()
        } else {
            format!("10.{}.{}.{}", 128 + n / 65536, (n / 256) % 256, n % 256)
        };
        core::Node {
            metadata: ObjectMeta {
                annotations: Some(BTreeMap::from([
                    ("node.alpha.kubernetes.io/ttl".to_string(), "0".to_string()),
                    (
                        "talos.dev/owned-labels".to_string(),
                        "[\"node-role.kubernetes.io/control-plane\"]".to_string(),
                    ),
                ])),
                ..self.meta(
                    env,
                    "node",
                    None,
                    &node.name,
                    node.labels.clone(),
                    Duration::ZERO,
                )
            },
            spec: Some(core::NodeSpec {
                pod_cidr: Some(pod_cidr(n)),
                pod_cidrs: Some(vec![pod_cidr(n)]),
                taints: if taints.is_empty() {
                    None
                } else {
                    Some(taints)
                },
                ..Default::default()
            }),
            status: Some(core::NodeStatus {
                addresses: Some(vec![
                    core::NodeAddress {
                        type_: "InternalIP".into(),
                        address: ip,
                    },
                    core::NodeAddress {
                        type_: "Hostname".into(),
                        address: node.name.clone(),
                    },
                ]),
                allocatable: Some(allocatable),
                capacity: Some(capacity),
                conditions: Some(conditions),
                daemon_endpoints: Some(core::NodeDaemonEndpoints {
                    kubelet_endpoint: Some(core::DaemonEndpoint { port: 10250 }),
                }),
                node_info: Some(core::NodeSystemInfo {
                    architecture: "amd64".into(),
                    boot_id: ids::uuid(&["boot", &node.name, &node.epoch.to_string()]),
                    container_runtime_version: "containerd://2.1.5".into(),
                    kernel_version: "6.12.57-talos".into(),
                    kube_proxy_version: String::new(),
                    kubelet_version: e.spec.kubernetes_version.clone(),
                    machine_id: ids::suffix(&["machine-id", &node.name], 32),
                    operating_system: "linux".into(),
                    os_image: format!("Talos ({})", e.spec.talos_version),
                    system_uuid: node.uuid.to_lowercase(),
                    swap: None,
                }),
                ..Default::default()
            }),
        }
    }

    /// The control-plane taint when scheduling there is not allowed, and the node
    /// lifecycle controller's unreachable taints while the node is not Ready.
    fn node_taints(&self, node: &Node) -> Vec<core::Taint> {
        let mut taints = Vec::new();
        if node.cp_taint {
            taints.push(core::Taint {
                key: "node-role.kubernetes.io/control-plane".into(),
                effect: "NoSchedule".into(),
                ..Default::default()
            });
        }
        if !node.ready {
            taints.push(core::Taint {
                key: "node.kubernetes.io/unreachable".into(),
                effect: "NoSchedule".into(),
                time_added: Some(self.time(node.ready_changed)),
                ..Default::default()
            });
            taints.push(core::Taint {
                key: "node.kubernetes.io/unreachable".into(),
                effect: "NoExecute".into(),
                time_added: Some(self.time(node.ready_changed)),
                ..Default::default()
            });
        }
        taints
    }

    /// The pressure conditions and Ready: all fine while the kubelet posts status, all
    /// Unknown since the node monitor grace period ran out.
    fn node_conditions(&self, node: &Node) -> Vec<core::NodeCondition> {
        let ready = if node.ready {
            core::NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: Some("KubeletReady".into()),
                message: Some("kubelet is posting ready status".into()),
                last_heartbeat_time: Some(self.time(node.booted_at.max(node.ready_changed))),
                last_transition_time: Some(self.time(node.ready_changed)),
            }
        } else {
            core::NodeCondition {
                type_: "Ready".into(),
                status: "Unknown".into(),
                reason: Some("NodeStatusUnknown".into()),
                message: Some("Kubelet stopped posting node status.".into()),
                last_heartbeat_time: Some(
                    self.time(
                        node.ready_changed
                            .saturating_sub(self.timings.node_monitor_grace),
                    ),
                ),
                last_transition_time: Some(self.time(node.ready_changed)),
            }
        };
        let mut conditions = Vec::new();
        for (t, reason, msg) in [
            (
                "MemoryPressure",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            (
                "DiskPressure",
                "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure",
            ),
            (
                "PIDPressure",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
        ] {
            conditions.push(if node.ready {
                core::NodeCondition {
                    type_: t.into(),
                    status: "False".into(),
                    reason: Some(reason.into()),
                    message: Some(msg.into()),
                    last_heartbeat_time: ready.last_heartbeat_time.clone(),
                    last_transition_time: Some(self.time(Duration::ZERO)),
                }
            } else {
                core::NodeCondition {
                    type_: t.into(),
                    status: "Unknown".into(),
                    reason: Some("NodeStatusUnknown".into()),
                    message: Some("Kubelet stopped posting node status.".into()),
                    last_heartbeat_time: ready.last_heartbeat_time.clone(),
                    last_transition_time: Some(self.time(node.ready_changed)),
                }
            });
        }
        conditions.push(ready);
        conditions
    }

    /// Measured usage of every node of the environment (by node index): the system (Talos,
    /// etcd, the API server on control planes) plus its running pods.
    fn usage_by_node(&self, env: usize) -> Vec<(i64, i64)> {
        let e = &self.envs[env];
        let mut usage: Vec<(i64, i64)> = self
            .nodes
            .iter()
            .map(|n| {
                if n.is_control_plane() {
                    (150, 1 << 30)
                } else {
                    (40, 400 << 20)
                }
            })
            .collect();
        for p in e.pods.values().filter(|p| p.running) {
            if let Some(u) = p.node.and_then(|n| usage.get_mut(n)) {
                let w = &e.workloads[p.workload];
                u.0 += w.usage_cpu_milli;
                u.1 += w.usage_memory_bytes;
            }
        }
        usage
    }

    /// The kubelet's heartbeat Lease (kube-node-lease/<node>), owned by its Node.
    pub(super) fn render_node_lease(&self, env: usize, n: usize) -> Value {
        let node = &self.nodes[n];
        let mut meta = self.meta(
            env,
            "nodelease",
            Some("kube-node-lease"),
            &node.name,
            BTreeMap::new(),
            Duration::ZERO,
        );
        meta.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: node.name.clone(),
            uid: ids::uuid(&[self.envs[env].name(), "node", "", &node.name]),
            controller: None,
            block_owner_deletion: None,
        }]);
        let lease = coord::Lease {
            metadata: meta,
            spec: Some(coord::LeaseSpec {
                holder_identity: Some(node.name.clone()),
                lease_duration_seconds: Some(40),
                renew_time: Some(self.micro(node.heartbeat)),
                ..Default::default()
            }),
        };
        to_value(&lease)
    }
}

/// A node's capacity and allocatable (capacity less what Talos and the kubelet reserve).
fn node_resources(node: &Node) -> (BTreeMap<String, Quantity>, BTreeMap<String, Quantity>) {
    let capacity = BTreeMap::from([
        ("cpu".to_string(), q(quantity::cpu_string(node.cpu_milli))),
        (
            "memory".to_string(),
            q(format!("{}Ki", node.memory_bytes / 1024)),
        ),
        ("pods".to_string(), q("110".into())),
        ("ephemeral-storage".to_string(), q("102626232Ki".into())),
    ]);
    let allocatable = BTreeMap::from([
        (
            "cpu".to_string(),
            q(quantity::cpu_string(node.cpu_milli - RESERVED_CPU_MILLI)),
        ),
        (
            "memory".to_string(),
            q(format!(
                "{}Ki",
                (node.memory_bytes - RESERVED_MEMORY) / 1024
            )),
        ),
        ("pods".to_string(), q("110".into())),
        ("ephemeral-storage".to_string(), q("94580335255".into())),
    ]);
    (capacity, allocatable)
}
