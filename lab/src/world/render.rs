//! Rendering the world into Kubernetes objects (k8s-openapi types for built-in kinds, JSON
//! for the Cilium, Longhorn and metrics shapes) and writing what changed into the store.

use super::*;
use crate::ids;
use crate::quantity;
use crate::resources::Res;
use crate::scenario::WorkloadKind;
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::coordination::v1 as coord;
use k8s_openapi::api::core::v1 as core;

use super::node_facts::node_down_tolerations;
use k8s_openapi::api::discovery::v1 as disc;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    Condition, LabelSelector, MicroTime, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

fn q(s: String) -> Quantity {
    Quantity(s)
}

fn to_value<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

fn owner(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

impl World {
    pub(super) fn time(&self, d: Duration) -> Time {
        let w = self.clock.wall_of(d);
        Time(Timestamp::from_second(w.timestamp()).unwrap_or(Timestamp::UNIX_EPOCH))
    }

    fn micro(&self, d: Duration) -> MicroTime {
        let w = self.clock.wall_of(d);
        MicroTime(
            Timestamp::from_microsecond(w.timestamp_micros()).unwrap_or(Timestamp::UNIX_EPOCH),
        )
    }

    fn rfc3339(&self, d: Duration) -> String {
        self.clock
            .wall_of(d)
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }

    fn meta(
        &self,
        env: usize,
        kind: &str,
        ns: Option<&str>,
        name: &str,
        labels: BTreeMap<String, String>,
        created: Duration,
    ) -> ObjectMeta {
        let e = &self.envs[env];
        ObjectMeta {
            name: Some(name.into()),
            namespace: ns.map(String::from),
            uid: Some(ids::uuid(&[&e.spec.name, kind, ns.unwrap_or(""), name])),
            labels: if labels.is_empty() {
                None
            } else {
                Some(labels)
            },
            creation_timestamp: Some(self.time(created)),
            generation: None,
            ..Default::default()
        }
    }

    /// Write everything the dirty flags name into the environment's store.
    pub(crate) fn flush(&mut self, env: usize) {
        let dirty = std::mem::take(&mut self.envs[env].dirty);
        let mut puts: Vec<(Res, Value)> = Vec::new();
        let mut deletes: Vec<(Res, Key)> = Vec::new();
        if dirty.all {
            self.render_static(env, &mut puts);
        }
        let pods_changed = dirty.all || dirty.any_pods();
        if dirty.all {
            for p in self.envs[env].pods.values() {
                puts.push((Res::Pods, self.render_pod(env, p)));
            }
        } else {
            for k in &dirty.pods {
                if let Some(p) = self.envs[env].pods.get(k) {
                    puts.push((Res::Pods, self.render_pod(env, p)));
                }
            }
        }
        for k in &dirty.removed_pods {
            deletes.push((Res::Pods, k.clone()));
        }
        if dirty.all || dirty.nodes || pods_changed {
            self.render_nodes(env, &mut puts, &mut deletes);
        }
        if pods_changed || dirty.nodes || dirty.longhorn {
            self.render_pdbs(env, &mut puts, &mut deletes);
        }
        if pods_changed || dirty.nodes {
            self.render_workloads(env, &mut puts);
            self.render_endpoints(env, &mut puts);
            if dirty.all {
                self.render_pod_metrics(env, &mut puts, &mut deletes, None);
            } else {
                let keys: BTreeSet<Key> = dirty.pods.union(&dirty.removed_pods).cloned().collect();
                self.render_pod_metrics(env, &mut puts, &mut deletes, Some(&keys));
            }
        }
        if dirty.all || dirty.leases {
            self.render_lease(env, &mut puts);
        }
        if dirty.all {
            for &n in &self.envs[env].nodes {
                puts.push((Res::Leases, self.render_node_lease(env, n)));
            }
        } else {
            for &n in &dirty.node_leases {
                puts.push((Res::Leases, self.render_node_lease(env, n)));
            }
        }
        if dirty.all || dirty.longhorn || dirty.nodes {
            self.render_longhorn(env, &mut puts);
        }
        for ev in &dirty.events {
            puts.push((Res::Events, self.render_event(env, ev)));
        }
        let store = &mut self.envs[env].store;
        for (res, v) in puts {
            store.put(res, v);
        }
        for (res, (ns, name)) in deletes {
            store.delete(res, &ns, &name);
        }
    }

    /// An Event object as the core/v1 API shows it; its name is the object's name and a
    /// hex suffix, as client-go's recorder makes it.
    fn render_event(&self, env: usize, ev: &KubeEvent) -> Value {
        let e = &self.envs[env];
        let suffix = ids::suffix(
            &[
                &e.spec.name,
                &ev.name,
                ev.reason,
                &ev.at.as_nanos().to_string(),
            ],
            16,
        );
        let name = format!("{}.{suffix}", ev.name);
        let uid = match ev.kind {
            "Pod" => e
                .pods
                .get(&(ev.namespace.clone(), ev.name.clone()))
                .map(|p| p.uid.clone())
                .unwrap_or_default(),
            _ => ids::uuid(&[&e.spec.name, "node", "", &ev.name]),
        };
        let at = self.rfc3339(ev.at);
        json!({
            "metadata": {
                "name": name,
                "namespace": ev.namespace,
                "uid": ids::uuid(&[&e.spec.name, "event", &name]),
                "creationTimestamp": at,
            },
            "involvedObject": {
                "kind": ev.kind,
                "namespace": if ev.kind == "Pod" { ev.namespace.as_str() } else { "" },
                "name": ev.name,
                "uid": uid,
                "apiVersion": "v1",
            },
            "reason": ev.reason,
            "message": ev.message,
            "source": {"component": ev.component},
            "firstTimestamp": at,
            "lastTimestamp": at,
            "count": 1,
            "type": if ev.warning { "Warning" } else { "Normal" },
            "eventTime": null,
            "reportingComponent": ev.component,
            "reportingInstance": "",
        })
    }

    fn render_static(&self, env: usize, puts: &mut Vec<(Res, Value)>) {
        let e = &self.envs[env];
        let mut namespaces: BTreeSet<String> =
            ["default", "kube-system", "kube-public", "kube-node-lease"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        namespaces.extend(e.workloads.iter().map(|w| w.spec.namespace.clone()));
        namespaces.extend(e.spec.services.iter().map(|s| s.namespace.clone()));
        if let Some(i) = &e.spec.ingress {
            namespaces.insert(i.namespace.clone());
        }
        if e.spec.longhorn.is_some() {
            namespaces.insert("longhorn-system".into());
        }
        for ns in namespaces {
            let labels = BTreeMap::from([("kubernetes.io/metadata.name".to_string(), ns.clone())]);
            let obj = core::Namespace {
                metadata: self.meta(env, "namespace", None, &ns, labels, Duration::ZERO),
                spec: Some(core::NamespaceSpec {
                    finalizers: Some(vec!["kubernetes".into()]),
                }),
                status: Some(core::NamespaceStatus {
                    phase: Some("Active".into()),
                    conditions: None,
                }),
            };
            puts.push((Res::Namespaces, to_value(&obj)));
        }

        // Services: the API's own, the scenario's, and the ingress LoadBalancer.
        let mut services = vec![core::Service {
            metadata: self.meta(
                env,
                "service",
                Some("default"),
                "kubernetes",
                BTreeMap::from([
                    ("component".into(), "apiserver".into()),
                    ("provider".into(), "kubernetes".into()),
                ]),
                Duration::ZERO,
            ),
            spec: Some(core::ServiceSpec {
                type_: Some("ClusterIP".into()),
                cluster_ip: Some("10.96.0.1".into()),
                cluster_ips: Some(vec!["10.96.0.1".into()]),
                ports: Some(vec![core::ServicePort {
                    name: Some("https".into()),
                    port: 443,
                    protocol: Some("TCP".into()),
                    target_port: Some(IntOrString::Int(6443)),
                    ..Default::default()
                }]),
                session_affinity: Some("None".into()),
                ..Default::default()
            }),
            status: Some(core::ServiceStatus::default()),
        }];
        for (i, s) in e.spec.services.iter().enumerate() {
            let ports = s
                .ports
                .iter()
                .map(|p| {
                    let (num, proto) = p.split_once('/').unwrap_or((p.as_str(), "TCP"));
                    let port: i32 = num.parse().unwrap_or(80);
                    core::ServicePort {
                        name: Some(format!("{}-{}", proto.to_lowercase(), port)),
                        port,
                        protocol: Some(proto.to_string()),
                        target_port: Some(IntOrString::Int(port)),
                        ..Default::default()
                    }
                })
                .collect();
            let ip = format!("10.96.{}.{}", 1 + i / 250, 10 + i % 250);
            services.push(core::Service {
                metadata: self.meta(
                    env,
                    "service",
                    Some(&s.namespace),
                    &s.name,
                    s.labels.clone(),
                    Duration::ZERO,
                ),
                spec: Some(core::ServiceSpec {
                    type_: Some("ClusterIP".into()),
                    cluster_ip: Some(ip.clone()),
                    cluster_ips: Some(vec![ip]),
                    selector: Some(s.selector.clone()),
                    ports: Some(ports),
                    session_affinity: Some("None".into()),
                    ..Default::default()
                }),
                status: Some(core::ServiceStatus::default()),
            });
        }
        if let Some(ing) = &e.spec.ingress {
            services.push(core::Service {
                metadata: self.meta(
                    env,
                    "service",
                    Some(&ing.namespace),
                    &ing.service,
                    ing.labels.clone(),
                    Duration::ZERO,
                ),
                spec: Some(core::ServiceSpec {
                    type_: Some("LoadBalancer".into()),
                    cluster_ip: Some("10.96.200.10".into()),
                    cluster_ips: Some(vec!["10.96.200.10".into()]),
                    selector: Some(ing.selector.clone()),
                    external_traffic_policy: Some(ing.external_traffic_policy.clone()),
                    allocate_load_balancer_node_ports: Some(true),
                    ports: Some(vec![
                        core::ServicePort {
                            name: Some("web".into()),
                            port: 80,
                            protocol: Some("TCP".into()),
                            target_port: Some(IntOrString::String("web".into())),
                            node_port: Some(30080),
                            ..Default::default()
                        },
                        core::ServicePort {
                            name: Some("websecure".into()),
                            port: 443,
                            protocol: Some("TCP".into()),
                            target_port: Some(IntOrString::String("websecure".into())),
                            node_port: Some(30443),
                            ..Default::default()
                        },
                    ]),
                    session_affinity: Some("None".into()),
                    ..Default::default()
                }),
                status: Some(core::ServiceStatus {
                    load_balancer: Some(core::LoadBalancerStatus {
                        ingress: Some(vec![core::LoadBalancerIngress {
                            ip: Some(self.plan.ingress_ip(env).to_string()),
                            ip_mode: Some("VIP".into()),
                            ..Default::default()
                        }]),
                    }),
                    conditions: Some(vec![Condition {
                        type_: "io.cilium/lb-ipam-request-satisfied".into(),
                        status: "True".into(),
                        reason: "satisfied".into(),
                        message: String::new(),
                        last_transition_time: self.time(Duration::ZERO),
                        observed_generation: Some(1),
                    }]),
                }),
            });
        }
        for s in services {
            puts.push((Res::Services, to_value(&s)));
        }

        for p in &e.policies {
            let mut spec = serde_json::Map::new();
            if let Some(ns) = &p.node_selector_json {
                spec.insert("nodeSelector".into(), ns.clone());
            }
            if let Some(ss) = &p.service_selector_json {
                spec.insert("serviceSelector".into(), ss.clone());
            }
            spec.insert("loadBalancerIPs".into(), json!(p.load_balancer_ips));
            spec.insert("externalIPs".into(), json!(false));
            puts.push((
                Res::CiliumL2Policies,
                json!({
                    "apiVersion": "cilium.io/v2alpha1",
                    "kind": "CiliumL2AnnouncementPolicy",
                    "metadata": {"name": p.name, "uid": p.uid, "generation": 1, "creationTimestamp": self.rfc3339(Duration::ZERO)},
                    "spec": spec,
                    "status": {"conditions": []},
                }),
            ));
        }
        if let Some(ing) = &e.spec.ingress {
            let ip = self.plan.ingress_ip(env).to_string();
            puts.push((
                Res::CiliumLbIpPools,
                json!({
                    "apiVersion": "cilium.io/v2",
                    "kind": "CiliumLoadBalancerIPPool",
                    "metadata": {"name": "ingress", "uid": ids::uuid(&[&e.spec.name, "ippool"]), "generation": 1, "creationTimestamp": self.rfc3339(Duration::ZERO)},
                    "spec": {"blocks": [{"start": ip, "stop": ip}], "serviceSelector": {"matchLabels": {"io.kubernetes.service.name": ing.service}}, "disabled": false},
                    "status": {"conditions": [
                        {"type": "cilium.io/IPsTotal", "status": "Unknown", "reason": "noreason", "message": "1", "lastTransitionTime": self.rfc3339(Duration::ZERO)},
                        {"type": "cilium.io/IPsAvailable", "status": "Unknown", "reason": "noreason", "message": "0", "lastTransitionTime": self.rfc3339(Duration::ZERO)},
                        {"type": "cilium.io/IPsUsed", "status": "Unknown", "reason": "noreason", "message": "1", "lastTransitionTime": self.rfc3339(Duration::ZERO)}
                    ]},
                }),
            ));
        }
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

    fn render_nodes(
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
                    q(quantity::cpu_string(
                        node.cpu_milli - super::node_facts::RESERVED_CPU_MILLI,
                    )),
                ),
                (
                    "memory".to_string(),
                    q(format!(
                        "{}Ki",
                        (node.memory_bytes - super::node_facts::RESERVED_MEMORY) / 1024
                    )),
                ),
                ("pods".to_string(), q("110".into())),
                ("ephemeral-storage".to_string(), q("94580335255".into())),
            ]);
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
            let ip = if node.addressed {
                self.plan.node_ip(n).to_string()
            } else {
                format!("10.{}.{}.{}", 128 + n / 65536, (n / 256) % 256, n % 256)
            };
            let obj = core::Node {
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
            };
            puts.push((Res::Nodes, to_value(&obj)));
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

    fn render_pod(&self, env: usize, p: &Pod) -> Value {
        let e = &self.envs[env];
        let w = &e.workloads[p.workload];
        let mut labels = self.pod_labels(w);
        let (owner_ref, extra) = match w.spec.kind {
            WorkloadKind::Deployment => {
                labels.insert("pod-template-hash".into(), w.template_hash.clone());
                let rs = format!("{}-{}", w.spec.name, w.template_hash);
                (
                    owner(
                        "apps/v1",
                        "ReplicaSet",
                        &rs,
                        &ids::uuid(&[&e.spec.name, "replicaset", &w.spec.namespace, &rs]),
                    ),
                    None,
                )
            }
            WorkloadKind::DaemonSet => {
                labels.insert("controller-revision-hash".into(), w.template_hash.clone());
                labels.insert("pod-template-generation".into(), "1".into());
                (owner("apps/v1", "DaemonSet", &w.spec.name, &w.uid), None)
            }
            WorkloadKind::StatefulSet => {
                labels.insert(
                    "controller-revision-hash".into(),
                    format!("{}-{}", w.spec.name, w.template_hash),
                );
                labels.insert("statefulset.kubernetes.io/pod-name".into(), p.name.clone());
                if let Some(o) = p.ordinal {
                    labels.insert("apps.kubernetes.io/pod-index".into(), o.to_string());
                }
                (
                    owner("apps/v1", "StatefulSet", &w.spec.name, &w.uid),
                    Some(p.name.clone()),
                )
            }
        };
        let node_name = p.node.map(|n| self.nodes[n].name.clone());
        let image = w
            .spec
            .image
            .clone()
            .unwrap_or_else(|| format!("registry.lab.internal/{}:v1", w.spec.name));
        // The DefaultTolerationSeconds admission plugin adds these only to a pod that does not
        // already tolerate the taints; a toleration with neither key nor effect does.
        let mut tolerations = if w.spec.tolerate_all {
            Vec::new()
        } else {
            // A DaemonSet's pods tolerate them for ever (the DaemonSet controller adds them).
            node_down_tolerations(
                (w.spec.kind != WorkloadKind::DaemonSet)
                    .then_some(self.timings.toleration.as_secs() as i64),
            )
        };
        // Added to pods, not templates: by the DaemonSet controller or, for the others, the
        // DefaultTolerationSeconds admission plugin.
        tolerations.extend(template_tolerations(w));
        let phase = if p.node.is_none() {
            "Pending"
        } else if p.started_at.is_some() || p.running {
            "Running"
        } else {
            "Pending"
        };
        let container_status = core::ContainerStatus {
            name: w.spec.name.clone(),
            image: image.clone(),
            image_id: format!("{image}@sha256:{}", ids::suffix(&[&image], 24)),
            container_id: p
                .started_at
                .map(|_| format!("containerd://{}", ids::suffix(&[&p.uid, "container"], 32))),
            ready: p.api_ready,
            started: Some(p.running),
            restart_count: p.restarts,
            state: Some(if p.started_at.is_some() {
                core::ContainerState {
                    running: Some(core::ContainerStateRunning {
                        started_at: p.started_at.map(|s| self.time(s)),
                    }),
                    ..Default::default()
                }
            } else {
                core::ContainerState {
                    waiting: Some(core::ContainerStateWaiting {
                        reason: Some("ContainerCreating".into()),
                        message: None,
                    }),
                    ..Default::default()
                }
            }),
            ..Default::default()
        };
        let ready_status = if p.api_ready { "True" } else { "False" };
        let mut conditions = vec![core::PodCondition {
            type_: "PodScheduled".into(),
            status: if p.node.is_some() { "True" } else { "False" }.into(),
            reason: if p.node.is_some() {
                None
            } else {
                Some("Unschedulable".into())
            },
            message: if p.node.is_some() {
                None
            } else {
                Some(format!(
                    "0/{} nodes are available: insufficient resources or node affinity/taints.",
                    e.nodes.len()
                ))
            },
            last_transition_time: Some(self.time(p.created)),
            ..Default::default()
        }];
        if p.node.is_some() {
            conditions.push(core::PodCondition {
                type_: "Initialized".into(),
                status: "True".into(),
                last_transition_time: Some(self.time(p.created)),
                ..Default::default()
            });
            conditions.push(core::PodCondition {
                type_: "ContainersReady".into(),
                status: ready_status.into(),
                last_transition_time: Some(self.time(p.ready_changed)),
                ..Default::default()
            });
            conditions.push(core::PodCondition {
                type_: "Ready".into(),
                status: ready_status.into(),
                last_transition_time: Some(self.time(p.ready_changed)),
                ..Default::default()
            });
        }
        let obj = core::Pod {
            metadata: ObjectMeta {
                name: Some(p.name.clone()),
                namespace: Some(p.namespace.clone()),
                uid: Some(p.uid.clone()),
                labels: Some(labels),
                creation_timestamp: Some(self.time(p.created)),
                deletion_timestamp: p.deleting.map(|d| self.time(d + Duration::from_secs(30))),
                deletion_grace_period_seconds: p.deleting.map(|_| 30),
                owner_references: Some(vec![owner_ref]),
                generate_name: if extra.is_none() {
                    p.name.rsplit_once('-').map(|(a, _)| format!("{a}-"))
                } else {
                    None
                },
                ..Default::default()
            },
            spec: Some(core::PodSpec {
                node_name: node_name.clone(),
                hostname: extra,
                tolerations: Some(tolerations),
                ..self.pod_spec(w)
            }),
            status: Some(core::PodStatus {
                phase: Some(phase.into()),
                conditions: Some(conditions),
                host_ip: p
                    .node
                    .filter(|&n| self.nodes[n].addressed)
                    .map(|n| self.plan.node_ip(n).to_string()),
                pod_ip: pod_ip(p),
                pod_ips: pod_ip(p).map(|ip| vec![core::PodIP { ip }]),
                qos_class: Some("Burstable".into()),
                start_time: p.node.map(|_| self.time(p.created)),
                container_statuses: p.node.map(|_| vec![container_status]),
                ..Default::default()
            }),
        };
        to_value(&obj)
    }

    /// The pod spec a workload's template holds, which the real controllers create pods
    /// from (the DaemonSet controller also judges which nodes are eligible by it): the
    /// container with its requests, node selector, control-plane toleration, anti-affinity.
    fn pod_spec(&self, w: &Workload) -> core::PodSpec {
        let image = w
            .spec
            .image
            .clone()
            .unwrap_or_else(|| format!("registry.lab.internal/{}:v1", w.spec.name));
        let affinity = match w.spec.anti_affinity {
            crate::scenario::AntiAffinity::None => None,
            aa => {
                let term = core::PodAffinityTerm {
                    label_selector: Some(LabelSelector {
                        match_labels: Some(w.spec.labels.clone()),
                        match_expressions: None,
                    }),
                    topology_key: "kubernetes.io/hostname".into(),
                    ..Default::default()
                };
                Some(core::Affinity {
                    pod_anti_affinity: Some(if aa == crate::scenario::AntiAffinity::Required {
                        core::PodAntiAffinity {
                            required_during_scheduling_ignored_during_execution: Some(vec![term]),
                            ..Default::default()
                        }
                    } else {
                        core::PodAntiAffinity {
                            preferred_during_scheduling_ignored_during_execution: Some(vec![
                                core::WeightedPodAffinityTerm {
                                    pod_affinity_term: term,
                                    weight: 100,
                                },
                            ]),
                            ..Default::default()
                        }
                    }),
                    ..Default::default()
                })
            }
        };
        let requests = BTreeMap::from([
            ("cpu".to_string(), q(quantity::cpu_string(w.cpu_milli))),
            (
                "memory".to_string(),
                q(quantity::mem_string(w.memory_bytes)),
            ),
        ]);
        core::PodSpec {
            containers: vec![core::Container {
                name: w.spec.name.clone(),
                image: Some(image),
                resources: Some(core::ResourceRequirements {
                    requests: Some(requests),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            node_selector: if w.spec.node_selector.is_empty() {
                None
            } else {
                Some(w.spec.node_selector.clone())
            },
            tolerations: Some(template_tolerations(w)),
            affinity,
            restart_policy: Some("Always".into()),
            scheduler_name: Some("default-scheduler".into()),
            service_account_name: Some(w.spec.name.clone()),
            termination_grace_period_seconds: Some(30),
            ..Default::default()
        }
    }

    /// Pod metrics of the given pods (all pods when `keys` is None): present while running.
    fn render_pod_metrics(
        &self,
        env: usize,
        puts: &mut Vec<(Res, Value)>,
        deletes: &mut Vec<(Res, Key)>,
        keys: Option<&BTreeSet<Key>>,
    ) {
        let e = &self.envs[env];
        if !e.spec.metrics {
            return;
        }
        let all: Vec<&Key>;
        let keys: Vec<&Key> = match keys {
            Some(k) => k.iter().collect(),
            None => {
                all = e.pods.keys().collect();
                all
            }
        };
        for k in keys {
            let Some(p) = e.pods.get(k).filter(|p| p.running) else {
                deletes.push((Res::PodMetrics, k.clone()));
                continue;
            };
            let w = &e.workloads[p.workload];
            puts.push((
                Res::PodMetrics,
                json!({
                    "kind": "PodMetrics",
                    "apiVersion": "metrics.k8s.io/v1beta1",
                    "metadata": {"name": p.name, "namespace": p.namespace, "creationTimestamp": self.rfc3339(Duration::ZERO), "labels": self.pod_labels(w)},
                    "timestamp": self.rfc3339(p.started_at.unwrap_or_default()),
                    "window": "18.433s",
                    "containers": [{"name": w.spec.name, "usage": {"cpu": quantity::cpu_nano_string(w.usage_cpu_milli), "memory": format!("{}Ki", w.usage_memory_bytes / 1024)}}],
                }),
            ));
        }
    }

    fn render_workloads(&self, env: usize, puts: &mut Vec<(Res, Value)>) {
        let e = &self.envs[env];
        // Pods per workload: (total non-terminating, ready, all pods).
        let mut counts = vec![(0i32, 0i32, 0i32); e.workloads.len()];
        for p in e.pods.values() {
            let c = &mut counts[p.workload];
            c.2 += 1;
            if p.deleting.is_none() {
                c.0 += 1;
                if p.api_ready {
                    c.1 += 1;
                }
            }
        }
        for (wi, w) in e.workloads.iter().enumerate() {
            let (active, ready, _) = counts[wi];
            let labels = w.spec.labels.clone();
            let selector = LabelSelector {
                match_labels: Some(w.spec.labels.clone()),
                match_expressions: None,
            };
            let mut meta = self.meta(
                env,
                "workload",
                Some(&w.spec.namespace),
                &w.spec.name,
                labels.clone(),
                Duration::ZERO,
            );
            meta.uid = Some(w.uid.clone());
            meta.generation = Some(1);
            let template = core::PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(self.pod_labels(w)),
                    ..Default::default()
                }),
                spec: Some(self.pod_spec(w)),
            };
            match w.spec.kind {
                WorkloadKind::Deployment => {
                    let available = ready >= w.spec.replicas;
                    let cond = |t: &str, ok: bool, reason: &str| apps::DeploymentCondition {
                        type_: t.into(),
                        status: if ok { "True" } else { "False" }.into(),
                        reason: Some(reason.into()),
                        last_transition_time: Some(self.time(Duration::ZERO)),
                        last_update_time: Some(self.time(Duration::ZERO)),
                        ..Default::default()
                    };
                    let d = apps::Deployment {
                        metadata: meta.clone(),
                        spec: Some(apps::DeploymentSpec {
                            replicas: Some(w.spec.replicas),
                            selector: selector.clone(),
                            template: template.clone(),
                            ..Default::default()
                        }),
                        status: Some(apps::DeploymentStatus {
                            observed_generation: Some(1),
                            replicas: Some(active),
                            updated_replicas: Some(active),
                            ready_replicas: Some(ready),
                            available_replicas: Some(ready),
                            unavailable_replicas: if active - ready > 0 {
                                Some(active - ready)
                            } else {
                                None
                            },
                            conditions: Some(vec![
                                cond(
                                    "Available",
                                    available,
                                    if available {
                                        "MinimumReplicasAvailable"
                                    } else {
                                        "MinimumReplicasUnavailable"
                                    },
                                ),
                                cond("Progressing", true, "NewReplicaSetAvailable"),
                            ]),
                            ..Default::default()
                        }),
                    };
                    puts.push((Res::Deployments, to_value(&d)));
                    let rs_name = format!("{}-{}", w.spec.name, w.template_hash);
                    let mut rs_labels = self.pod_labels(w);
                    rs_labels.insert("pod-template-hash".into(), w.template_hash.clone());
                    let mut rs_meta = self.meta(
                        env,
                        "replicaset",
                        Some(&w.spec.namespace),
                        &rs_name,
                        rs_labels,
                        Duration::ZERO,
                    );
                    rs_meta.owner_references =
                        Some(vec![owner("apps/v1", "Deployment", &w.spec.name, &w.uid)]);
                    rs_meta.generation = Some(1);
                    let rs = apps::ReplicaSet {
                        metadata: rs_meta,
                        spec: Some(apps::ReplicaSetSpec {
                            replicas: Some(w.spec.replicas),
                            selector: selector.clone(),
                            template: Some(template),
                            ..Default::default()
                        }),
                        status: Some(apps::ReplicaSetStatus {
                            replicas: active,
                            fully_labeled_replicas: Some(active),
                            ready_replicas: Some(ready),
                            available_replicas: Some(ready),
                            observed_generation: Some(1),
                            ..Default::default()
                        }),
                    };
                    puts.push((Res::ReplicaSets, to_value(&rs)));
                }
                WorkloadKind::DaemonSet => {
                    let desired = e
                        .nodes
                        .iter()
                        .filter(|&&n| self.eligible_for_daemon(env, wi, n))
                        .count() as i32;
                    let d = apps::DaemonSet {
                        metadata: meta,
                        spec: Some(apps::DaemonSetSpec {
                            selector,
                            template,
                            ..Default::default()
                        }),
                        status: Some(apps::DaemonSetStatus {
                            current_number_scheduled: active,
                            desired_number_scheduled: desired,
                            number_misscheduled: 0,
                            number_ready: ready,
                            number_available: Some(ready),
                            number_unavailable: if desired - ready > 0 {
                                Some(desired - ready)
                            } else {
                                None
                            },
                            updated_number_scheduled: Some(active),
                            observed_generation: Some(1),
                            ..Default::default()
                        }),
                    };
                    puts.push((Res::DaemonSets, to_value(&d)));
                }
                WorkloadKind::StatefulSet => {
                    let s = apps::StatefulSet {
                        metadata: meta,
                        spec: Some(apps::StatefulSetSpec {
                            replicas: Some(w.spec.replicas),
                            selector,
                            template,
                            service_name: Some(w.spec.name.clone()),
                            ..Default::default()
                        }),
                        status: Some(apps::StatefulSetStatus {
                            replicas: active,
                            ready_replicas: Some(ready),
                            available_replicas: Some(ready),
                            current_replicas: Some(active),
                            updated_replicas: Some(active),
                            observed_generation: Some(1),
                            ..Default::default()
                        }),
                    };
                    puts.push((Res::StatefulSets, to_value(&s)));
                }
            }
        }
    }

    /// The PodDisruptionBudgets that exist now, with their status; a Longhorn one whose
    /// volumes are all detached is deleted.
    fn render_pdbs(&self, env: usize, puts: &mut Vec<(Res, Value)>, deletes: &mut Vec<(Res, Key)>) {
        for pdb in &self.envs[env].pdbs {
            if self.pdb_exists(env, pdb) {
                puts.push((Res::PodDisruptionBudgets, self.render_pdb(env, pdb)));
            } else {
                deletes.push((
                    Res::PodDisruptionBudgets,
                    (pdb.namespace.clone(), pdb.name.clone()),
                ));
            }
        }
    }

    pub(super) fn eligible_for_daemon(&self, env: usize, wi: usize, n: usize) -> bool {
        let node = &self.nodes[n];
        let w = &self.envs[env].workloads[wi];
        (!node.cp_taint || w.spec.tolerate_control_plane || w.spec.tolerate_all)
            && w.spec
                .node_selector
                .iter()
                .all(|(k, v)| node.labels.get(k) == Some(v))
    }

    /// PDB status as the disruption controller computes it (pkg/controller/disruption).
    fn render_pdb(&self, env: usize, pdb: &Pdb) -> Value {
        let e = &self.envs[env];
        let selector = pdb.selector.as_ref().map(Selector::from_map);
        let matching: Vec<&Pod> = match &selector {
            None => vec![],
            Some(s) => e
                .pods
                .values()
                .filter(|p| {
                    p.namespace == pdb.namespace
                        && s.matches(&self.pod_labels(&e.workloads[p.workload]))
                })
                .collect(),
        };
        let healthy = matching
            .iter()
            .filter(|p| p.api_ready && p.deleting.is_none())
            .count() as i32;
        // The scale of the owning controllers.
        let owners: BTreeSet<usize> = matching.iter().map(|p| p.workload).collect();
        let scale: i32 = owners.iter().map(|&w| e.workloads[w].spec.replicas).sum();
        let (expected, desired) = match (&pdb.min_available, &pdb.max_unavailable) {
            (_, Some(max)) => {
                let max = scaled(max, scale);
                (scale, (scale - max).max(0))
            }
            (Some(IntOrString::Int(min)), None) => (
                matching.iter().filter(|p| p.deleting.is_none()).count() as i32,
                *min,
            ),
            (Some(min @ IntOrString::String(_)), None) => (scale, scaled(min, scale)),
            // policy/v1 defaults neither field: the disruption controller expects no pods and
            // never allows a disruption (`getExpectedPodCount`).
            (None, None) => (0, 0),
        };
        let allowed = if expected <= 0 {
            0
        } else {
            (healthy - desired).max(0)
        };
        let obj = policy::PodDisruptionBudget {
            metadata: ObjectMeta {
                uid: Some(pdb.uid.clone()),
                generation: Some(1),
                ..self.meta(
                    env,
                    "pdb",
                    Some(&pdb.namespace),
                    &pdb.name,
                    BTreeMap::new(),
                    Duration::ZERO,
                )
            },
            spec: Some(policy::PodDisruptionBudgetSpec {
                min_available: pdb.min_available.clone(),
                max_unavailable: pdb.max_unavailable.clone(),
                selector: pdb.selector.as_ref().map(|m| LabelSelector {
                    match_labels: Some(m.clone()),
                    match_expressions: None,
                }),
                ..Default::default()
            }),
            status: Some(policy::PodDisruptionBudgetStatus {
                current_healthy: healthy,
                desired_healthy: desired,
                disruptions_allowed: allowed,
                expected_pods: expected,
                observed_generation: Some(1),
                conditions: Some(vec![Condition {
                    type_: "DisruptionAllowed".into(),
                    status: if allowed > 0 { "True" } else { "False" }.into(),
                    reason: if allowed > 0 {
                        "SufficientPods"
                    } else {
                        "InsufficientPods"
                    }
                    .into(),
                    message: String::new(),
                    last_transition_time: self.time(Duration::ZERO),
                    observed_generation: Some(1),
                }]),
                ..Default::default()
            }),
        };
        to_value(&obj)
    }

    fn render_endpoints(&self, env: usize, puts: &mut Vec<(Res, Value)>) {
        let e = &self.envs[env];
        let mut services: Vec<SvcEndpoints> = e
            .spec
            .services
            .iter()
            .map(|s| {
                let ports = s
                    .ports
                    .iter()
                    .map(|p| {
                        let (num, proto) = p.split_once('/').unwrap_or((p.as_str(), "TCP"));
                        let port: i32 = num.parse().unwrap_or(80);
                        (
                            format!("{}-{}", proto.to_lowercase(), port),
                            port,
                            proto.to_string(),
                        )
                    })
                    .collect();
                (
                    s.namespace.clone(),
                    s.name.clone(),
                    s.selector.clone(),
                    ports,
                )
            })
            .collect();
        if let Some(ing) = &e.spec.ingress {
            services.push((
                ing.namespace.clone(),
                ing.service.clone(),
                ing.selector.clone(),
                vec![
                    ("web".into(), 8000, "TCP".into()),
                    ("websecure".into(), 8443, "TCP".into()),
                ],
            ));
        }
        for (ns, name, sel, ports) in services {
            let s = Selector::from_map(&sel);
            let endpoints: Vec<disc::Endpoint> = e
                .pods
                .values()
                .filter(|p| {
                    p.namespace == ns
                        && p.node.is_some()
                        && s.matches(&self.pod_labels(&e.workloads[p.workload]))
                })
                .map(|p| {
                    let node = p.node.map(|n| &self.nodes[n]);
                    disc::Endpoint {
                        addresses: pod_ip(p).into_iter().collect(),
                        conditions: Some(disc::EndpointConditions {
                            ready: Some(p.api_ready && p.deleting.is_none()),
                            serving: Some(p.api_ready),
                            terminating: Some(p.deleting.is_some()),
                        }),
                        node_name: node.map(|n| n.name.clone()),
                        zone: node
                            .and_then(|n| n.labels.get(super::node_facts::HOST_LABEL).cloned()),
                        target_ref: Some(core::ObjectReference {
                            kind: Some("Pod".into()),
                            name: Some(p.name.clone()),
                            namespace: Some(p.namespace.clone()),
                            uid: Some(p.uid.clone()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }
                })
                .collect();
            let slice_name = format!(
                "{name}-{}",
                ids::suffix(&[&e.spec.name, &ns, &name, "slice"], 5)
            );
            let labels = BTreeMap::from([
                ("kubernetes.io/service-name".to_string(), name.clone()),
                (
                    "endpointslice.kubernetes.io/managed-by".to_string(),
                    "endpointslice-controller.k8s.io".to_string(),
                ),
            ]);
            let mut meta = self.meta(
                env,
                "endpointslice",
                Some(&ns),
                &slice_name,
                labels,
                Duration::ZERO,
            );
            meta.owner_references = Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Service".into(),
                name: name.clone(),
                uid: ids::uuid(&[&e.spec.name, "service", &ns, &name]),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]);
            meta.generate_name = Some(format!("{name}-"));
            let slice = disc::EndpointSlice {
                metadata: meta,
                address_type: "IPv4".into(),
                endpoints,
                ports: Some(
                    ports
                        .into_iter()
                        .map(|(n, p, proto)| disc::EndpointPort {
                            name: Some(n),
                            port: Some(p),
                            protocol: Some(proto),
                            app_protocol: None,
                        })
                        .collect(),
                ),
            };
            puts.push((Res::EndpointSlices, to_value(&slice)));
        }
    }

    /// The kubelet's heartbeat Lease (kube-node-lease/<node>), owned by its Node.
    fn render_node_lease(&self, env: usize, n: usize) -> Value {
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

    fn render_lease(&self, env: usize, puts: &mut Vec<(Res, Value)>) {
        let e = &self.envs[env];
        let (Some(ing), Some(l)) = (&e.spec.ingress, &e.lease) else {
            return;
        };
        if !l.ever_held {
            // No agent has campaigned: Cilium has not created the Lease.
            return;
        }
        let name = format!("cilium-l2announce-{}-{}", ing.namespace, ing.service);
        let lease = coord::Lease {
            metadata: self.meta(
                env,
                "lease",
                Some("kube-system"),
                &name,
                BTreeMap::new(),
                Duration::ZERO,
            ),
            spec: Some(coord::LeaseSpec {
                holder_identity: Some(
                    l.holder
                        .map(|h| self.nodes[h].name.clone())
                        .unwrap_or_default(),
                ),
                lease_duration_seconds: Some(if l.holder.is_some() {
                    self.timings.lease_duration.as_secs() as i32
                } else {
                    1
                }),
                acquire_time: Some(self.micro(l.acquired)),
                renew_time: Some(self.micro(l.renewed)),
                lease_transitions: Some(l.transitions),
                ..Default::default()
            }),
        };
        puts.push((Res::Leases, to_value(&lease)));
    }

    fn render_longhorn(&self, env: usize, puts: &mut Vec<(Res, Value)>) {
        let e = &self.envs[env];
        let Some(lh) = &e.spec.longhorn else { return };
        self.render_instance_managers(env, puts);
        let disk_size = quantity::bytes(&lh.disk_size).unwrap_or(200 << 30);
        let t0 = self.rfc3339(Duration::ZERO);
        // Longhorn's defaults (types/setting.go), unless the scenario sets them.
        let percent = |key: &str, default: i64| {
            e.longhorn_settings
                .get(key)
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(default)
        };
        let minimal_pct = percent("storage-minimal-available-percentage", 25);
        let over_pct = percent("storage-over-provisioning-percentage", 100);
        for &n in &e.nodes {
            let node = &self.nodes[n];
            // longhorn-manager runs where the DaemonSet does; it exists as a node object there.
            let has_disk = e.disk_nodes.contains(&n);
            let cond = |t: &str, ok: bool, reason: &str, msg: &str| json!({"type": t, "status": if ok {"True"} else {"False"}, "reason": if ok {""} else {reason}, "message": if ok {""} else {msg}, "lastProbeTime": "", "lastTransitionTime": self.rfc3339(node.ready_changed)});
            let ready = node.ready;
            let mut disks = serde_json::Map::new();
            let mut disk_status = serde_json::Map::new();
            if has_disk {
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
                disk_status.insert(disk, json!({
                    "conditions": [cond("Ready", ready, "DiskNotReady", "node is down"), schedulable],
                    "storageAvailable": disk_size - scheduled,
                    "storageMaximum": disk_size,
                    "storageScheduled": scheduled,
                    "scheduledReplica": replicas,
                    "diskUUID": ids::uuid(&[&node.name, "disk"]),
                    "diskPath": "/var/lib/longhorn/",
                    "diskType": "filesystem",
                }));
            }
            puts.push((
                Res::LonghornNodes,
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
                        "zone": node.labels.get(super::node_facts::HOST_LABEL).cloned().unwrap_or_default(),
                        "autoEvicting": false,
                    },
                }),
            ));
        }
        for v in &e.volumes {
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
            let ks = match &v.pvc {
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
            };
            puts.push((
                Res::LonghornVolumes,
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
                }),
            ));
            for r in &v.replicas {
                let node = &self.nodes[r.node];
                puts.push((
                    Res::LonghornReplicas,
                    json!({
                        "apiVersion": "longhorn.io/v1beta2",
                        "kind": "Replica",
                        "metadata": {"name": r.name, "namespace": "longhorn-system", "uid": ids::uuid(&[&e.spec.name, "replica", &r.name]), "generation": 1, "creationTimestamp": t0, "labels": {"longhornvolume": v.name, "longhornnode": node.name}},
                        "spec": {"volumeName": v.name, "nodeID": node.name, "diskID": ids::uuid(&[&node.name, "disk"]), "diskPath": "/var/lib/longhorn/", "dataDirectoryName": format!("{}-{}", v.name, ids::suffix(&[&r.name], 8)), "active": true, "desireState": if v.attached_to.is_some() {"running"} else {"stopped"}, "dataEngine": "v1", "failedAt": r.failed_at.map(|t| self.rfc3339(t)).unwrap_or_default(), "healthyAt": t0, "lastHealthyAt": t0, "lastFailedAt": r.failed_at.map(|t| self.rfc3339(t)).unwrap_or_default(), "hardNodeAffinity": "", "evictionRequested": false},
                        "status": {"currentState": if r.running { if v.attached_to.is_some() {"running"} else {"stopped"} } else {"error"}, "instanceManagerName": super::longhorn_system::instance_manager_name(&node.name), "started": r.running && v.attached_to.is_some()},
                    }),
                ));
            }
        }
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

/// Namespace, name, selector and ports (name, port, protocol) of a Service.
type SvcEndpoints = (
    String,
    String,
    BTreeMap<String, String>,
    Vec<(String, i32, String)>,
);

/// Resolve an int-or-percent against a total, rounding percentages up as the controller does.
/// Node `n`'s pod range, as the node IPAM hands out /24s of the cluster CIDR.
pub(crate) fn pod_cidr(n: usize) -> String {
    format!("10.244.{}.0/24", n % 256)
}

/// A scheduled pod's address: inside its node's podCIDR (.2 to .254), fixed by its serial.
pub(crate) fn pod_ip(p: &Pod) -> Option<String> {
    p.node
        .map(|n| format!("10.244.{}.{}", n % 256, 2 + p.ip_serial % 253))
}

fn scaled(v: &IntOrString, total: i32) -> i32 {
    match v {
        IntOrString::Int(i) => *i,
        IntOrString::String(s) => {
            let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
            ((pct * i64::from(total) + 99) / 100) as i32
        }
    }
}

/// What a workload's template tolerates beyond what every pod gets added.
fn template_tolerations(w: &Workload) -> Vec<core::Toleration> {
    if w.spec.tolerate_all {
        vec![core::Toleration {
            operator: Some("Exists".into()),
            ..Default::default()
        }]
    } else if w.spec.tolerate_control_plane {
        vec![core::Toleration {
            key: Some("node-role.kubernetes.io/control-plane".into()),
            operator: Some("Exists".into()),
            effect: Some("NoSchedule".into()),
            ..Default::default()
        }]
    } else {
        Vec::new()
    }
}
