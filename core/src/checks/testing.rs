//! Builder functions for the objects checks read, so tests state only what matters:
//! `node("cp-1").host("pve1").control_plane().ready().build()`.

use std::collections::BTreeMap;

use chrono::{TimeZone, Utc};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, StatefulSet, StatefulSetSpec};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    Node, NodeCondition, NodeSpec, NodeStatus, ResourceRequirements, Service, ServiceSpec, Taint,
};
use k8s_openapi::api::policy::v1::{
    PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::Context;
use crate::config::Environment;
use crate::state::{
    Collected, Container, L2AnnouncementPolicy, L2AnnouncementPolicySpec, LonghornCondition,
    LonghornDisk, LonghornDiskStatus, LonghornKubernetesStatus, LonghornNode, LonghornNodeSpec,
    LonghornNodeStatus, LonghornReplica, LonghornReplicaSpec, LonghornSetting, LonghornVolume,
    LonghornVolumeSpec, LonghornVolumeStatus, LonghornWorkloadStatus, NodeMetrics, Pod,
    PodCondition, PodSpec, PodStatus, ResourceUsage, Source, State,
};
use crate::verdict::Finding;

/// The host label of the default test environment.
pub const HOST_LABEL: &str = "topology.kubernetes.io/zone";

fn meta(namespace: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        ..Default::default()
    }
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn add_labels(meta: &mut ObjectMeta, pairs: &[(&str, &str)]) {
    meta.labels
        .get_or_insert_with(BTreeMap::new)
        .extend(map(pairs));
}

fn quantities(cpu: &str, memory: &str) -> BTreeMap<String, K8sQuantity> {
    BTreeMap::from([
        ("cpu".to_string(), K8sQuantity(cpu.to_string())),
        ("memory".to_string(), K8sQuantity(memory.to_string())),
    ])
}

// ---------------------------------------------------------------- environment and state

/// The default environment (`staging`, 3 control planes, host label zone, margin 1/3).
pub fn env() -> Environment {
    let mut env: Environment = crate::yaml::from_str("{}").expect("defaults parse");
    env.name = "staging".to_string();
    env
}

/// Builds a [`State`] in which every resource is collected and empty unless set.
pub struct StateBuilder {
    state: State,
}

pub fn state() -> StateBuilder {
    let mut state = State::empty(
        Source::Snapshot {
            files: vec!["test".into()],
        },
        Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
    );
    state.nodes = Collected::Present(Vec::new());
    state.pods = Collected::Present(Vec::new());
    state.deployments = Collected::Present(Vec::new());
    state.daemonsets = Collected::Present(Vec::new());
    state.statefulsets = Collected::Present(Vec::new());
    state.pdbs = Collected::Present(Vec::new());
    state.services = Collected::Present(Vec::new());
    state.leases = Collected::Present(Vec::new());
    state.l2_policies = Collected::Present(Vec::new());
    state.longhorn_nodes = Collected::Present(Vec::new());
    state.longhorn_volumes = Collected::Present(Vec::new());
    state.longhorn_replicas = Collected::Present(Vec::new());
    state.longhorn_settings = Collected::Present(Vec::new());
    state.node_metrics = Collected::Present(Vec::new());
    state.pod_metrics = Collected::Present(Vec::new());
    StateBuilder { state }
}

fn push<T>(list: &mut Collected<Vec<T>>, items: impl IntoIterator<Item = T>) {
    if let Collected::Absent(_) = list {
        *list = Collected::Present(Vec::new());
    }
    if let Collected::Present(v) = list {
        v.extend(items);
    }
}

macro_rules! adders {
    ($($method:ident: $field:ident: $ty:ty;)*) => {
        $(
            /// The state holds each object behind an `Arc` (shared with a copy of the state).
            pub fn $method(mut self, items: impl IntoIterator<Item = $ty>) -> Self {
                push(&mut self.state.$field, items.into_iter().map(std::sync::Arc::new));
                self
            }
        )*
    };
}

impl StateBuilder {
    adders! {
        pods: pods: Pod;
        nodes: nodes: Node;
        deployments: deployments: Deployment;
        statefulsets: statefulsets: StatefulSet;
        pdbs: pdbs: PodDisruptionBudget;
        services: services: Service;
        leases: leases: Lease;
        l2_policies: l2_policies: L2AnnouncementPolicy;
        longhorn_nodes: longhorn_nodes: LonghornNode;
        longhorn_volumes: longhorn_volumes: LonghornVolume;
        longhorn_replicas: longhorn_replicas: LonghornReplica;
        longhorn_settings: longhorn_settings: LonghornSetting;
        node_metrics: node_metrics: NodeMetrics;
    }

    /// Change anything else, e.g. `.with(|s| s.pdbs = absent("forbidden"))`.
    pub fn with(mut self, f: impl FnOnce(&mut State)) -> Self {
        f(&mut self.state);
        self
    }

    pub fn build(self) -> State {
        self.state
    }
}

/// A list as the state holds it read: each object behind an `Arc`.
pub fn listed<T>(items: impl IntoIterator<Item = T>) -> Collected<Vec<std::sync::Arc<T>>> {
    Collected::Present(items.into_iter().map(std::sync::Arc::new).collect())
}

/// A resource the collector could not read.
pub fn absent<T>(reason: &str) -> Collected<T> {
    Collected::Absent(reason.to_string())
}

/// Proxmox as read: `placed` nodes on their hosts (VM 101, 102, … named like the node), and
/// the VM configs that could not be read (`"VM 103 cp-3 on pve3: timed out"`).
pub fn proxmox(placed: &[(&str, &str)], unread: &[&str]) -> Collected<crate::state::ProxmoxState> {
    Collected::Present(crate::state::ProxmoxState {
        placements: placed
            .iter()
            .enumerate()
            .map(|(i, (node, host))| crate::state::Placement {
                node: node.to_string(),
                vmid: 101 + i as u32,
                vm_name: node.to_string(),
                host: host.to_string(),
                uuid: Some(format!("uuid-{i}")),
                matched_by: "uuid".into(),
            })
            .collect(),
        unread_vm_configs: unread.iter().map(|u| u.to_string()).collect(),
        ..Default::default()
    })
}

/// Evaluates a check against an environment and state.
pub fn run<P>(
    env: &Environment,
    state: &State,
    params: &P,
    evaluate: fn(Context<'_>, &P) -> Finding,
) -> Finding {
    evaluate(
        Context {
            env,
            state,
            indexes: &super::Indexes::new(state),
            pause: &crate::pause::NEVER,
        },
        params,
    )
}

/// The finding's text, for `contains` assertions on summary, evidence and warnings at once.
pub fn text(f: &Finding) -> String {
    f.details()
}

// ---------------------------------------------------------------- nodes

pub struct NodeBuilder {
    node: Node,
}

pub fn node(name: &str) -> NodeBuilder {
    let mut metadata = meta(None, name);
    add_labels(&mut metadata, &[("kubernetes.io/hostname", name)]);
    NodeBuilder {
        node: Node {
            metadata,
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus {
                allocatable: Some(quantities("4", "8Gi")),
                ..Default::default()
            }),
        },
    }
}

impl NodeBuilder {
    pub fn label(mut self, key: &str, value: &str) -> Self {
        add_labels(&mut self.node.metadata, &[(key, value)]);
        self
    }

    /// Places the node on a physical host through the default host label.
    pub fn host(self, host: &str) -> Self {
        self.label(HOST_LABEL, host)
    }

    pub fn control_plane(self) -> Self {
        self.label("node-role.kubernetes.io/control-plane", "")
    }

    fn condition(mut self, status: &str) -> Self {
        let st = self.node.status.get_or_insert_with(Default::default);
        st.conditions = Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: status.into(),
            reason: Some(
                if status == "True" {
                    "KubeletReady"
                } else {
                    "KubeletNotReady"
                }
                .into(),
            ),
            ..Default::default()
        }]);
        self
    }

    pub fn ready(self) -> Self {
        self.condition("True")
    }

    pub fn not_ready(self) -> Self {
        self.condition("False")
    }

    pub fn taint(mut self, key: &str, effect: &str) -> Self {
        let spec = self.node.spec.get_or_insert_with(Default::default);
        spec.taints.get_or_insert_with(Vec::new).push(Taint {
            key: key.into(),
            effect: effect.into(),
            ..Default::default()
        });
        self
    }

    pub fn allocatable(mut self, cpu: &str, memory: &str) -> Self {
        self.node
            .status
            .get_or_insert_with(Default::default)
            .allocatable = Some(quantities(cpu, memory));
        self
    }

    pub fn no_allocatable(mut self) -> Self {
        self.node
            .status
            .get_or_insert_with(Default::default)
            .allocatable = None;
        self
    }

    pub fn build(self) -> Node {
        self.node
    }
}

/// Three Ready control-plane nodes `cp-1..3` on hosts `pve1..3`: the ADR's target.
pub fn target_nodes() -> Vec<Node> {
    (1..=3)
        .map(|i| {
            node(&format!("cp-{i}"))
                .host(&format!("pve{i}"))
                .control_plane()
                .ready()
                .build()
        })
        .collect()
}

// ---------------------------------------------------------------- pods and workloads

pub struct PodBuilder {
    pod: Pod,
}

/// A Running, Ready pod without a node; give it one with `.on(..)`.
pub fn pod(namespace: &str, name: &str) -> PodBuilder {
    PodBuilder {
        pod: Pod {
            metadata: meta(Some(namespace), name),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "main".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                }]),
            }),
        },
    }
}

impl PodBuilder {
    pub fn labels(mut self, pairs: &[(&str, &str)]) -> Self {
        add_labels(&mut self.pod.metadata, pairs);
        self
    }

    pub fn on(mut self, node: &str) -> Self {
        self.pod.spec.get_or_insert_with(Default::default).node_name = Some(node.into());
        self
    }

    pub fn not_ready(mut self) -> Self {
        if let Some(status) = self.pod.status.as_mut() {
            status.conditions = Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "False".into(),
            }]);
        }
        self
    }

    pub fn phase(mut self, phase: &str) -> Self {
        self.pod.status.get_or_insert_with(Default::default).phase = Some(phase.into());
        self
    }

    pub fn terminating(mut self) -> Self {
        self.pod.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        self
    }

    /// Sets the requests of the first container.
    pub fn requests(mut self, cpu: &str, memory: &str) -> Self {
        let spec = self.pod.spec.get_or_insert_with(Default::default);
        spec.containers[0].resources = Some(ResourceRequirements {
            requests: Some(quantities(cpu, memory)),
            ..Default::default()
        });
        self
    }

    /// Binds `port` on the node from the first container (`hostPort`, TCP, every address
    /// unless `ip` names one).
    pub fn host_port(mut self, port: i32, ip: Option<&str>) -> Self {
        let spec = self.pod.spec.get_or_insert_with(Default::default);
        spec.containers[0].ports.push(crate::state::ContainerPort {
            host_port: Some(port),
            host_ip: ip.map(String::from),
            protocol: None,
        });
        self
    }

    /// Adds another app container with these requests.
    pub fn container(mut self, cpu: &str, memory: &str) -> Self {
        let spec = self.pod.spec.get_or_insert_with(Default::default);
        let name = format!("c{}", spec.containers.len());
        spec.containers.push(Container {
            name,
            resources: Some(ResourceRequirements {
                requests: Some(quantities(cpu, memory)),
                ..Default::default()
            }),
            ..Default::default()
        });
        self
    }

    /// Adds an init container; `sidecar` makes it restartable (`restartPolicy: Always`).
    pub fn init_container(mut self, cpu: &str, memory: &str, sidecar: bool) -> Self {
        let spec = self.pod.spec.get_or_insert_with(Default::default);
        let inits = spec.init_containers.get_or_insert_with(Vec::new);
        inits.push(Container {
            name: format!("init{}", inits.len()),
            restart_policy: sidecar.then(|| "Always".to_string()),
            resources: Some(ResourceRequirements {
                requests: Some(quantities(cpu, memory)),
                ..Default::default()
            }),
            ports: Vec::new(),
        });
        self
    }

    pub fn overhead(mut self, cpu: &str, memory: &str) -> Self {
        self.pod.spec.get_or_insert_with(Default::default).overhead = Some(quantities(cpu, memory));
        self
    }

    pub fn build(self) -> Pod {
        self.pod
    }
}

pub struct DeploymentBuilder {
    deployment: Deployment,
}

/// A Deployment with 2 replicas selecting `selector`.
pub fn deployment(namespace: &str, name: &str, selector: &[(&str, &str)]) -> DeploymentBuilder {
    DeploymentBuilder {
        deployment: Deployment {
            metadata: meta(Some(namespace), name),
            spec: Some(DeploymentSpec {
                replicas: Some(2),
                selector: LabelSelector {
                    match_labels: Some(map(selector)),
                    match_expressions: None,
                },
                ..Default::default()
            }),
            status: None,
        },
    }
}

impl DeploymentBuilder {
    pub fn replicas(mut self, n: i32) -> Self {
        if let Some(spec) = self.deployment.spec.as_mut() {
            spec.replicas = Some(n);
        }
        self
    }

    pub fn build(self) -> Deployment {
        self.deployment
    }
}

/// A StatefulSet with `replicas` selecting `selector`.
pub fn statefulset(
    namespace: &str,
    name: &str,
    selector: &[(&str, &str)],
    replicas: i32,
) -> StatefulSet {
    StatefulSet {
        metadata: meta(Some(namespace), name),
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(map(selector)),
                match_expressions: None,
            },
            ..Default::default()
        }),
        status: None,
    }
}

// ---------------------------------------------------------------- PDBs

pub struct PdbBuilder {
    pdb: PodDisruptionBudget,
}

/// A PDB selecting `selector` with `maxUnavailable: 1`, generation 1, and a status that allows
/// one disruption of two pods.
pub fn pdb(namespace: &str, name: &str, selector: &[(&str, &str)]) -> PdbBuilder {
    let mut metadata = meta(Some(namespace), name);
    metadata.generation = Some(1);
    PdbBuilder {
        pdb: PodDisruptionBudget {
            metadata,
            spec: Some(PodDisruptionBudgetSpec {
                selector: Some(LabelSelector {
                    match_labels: Some(map(selector)),
                    match_expressions: None,
                }),
                max_unavailable: Some(IntOrString::Int(1)),
                ..Default::default()
            }),
            status: Some(PodDisruptionBudgetStatus {
                current_healthy: 2,
                desired_healthy: 1,
                disruptions_allowed: 1,
                expected_pods: 2,
                observed_generation: Some(1),
                ..Default::default()
            }),
        },
    }
}

impl PdbBuilder {
    fn spec(&mut self) -> &mut PodDisruptionBudgetSpec {
        self.pdb.spec.get_or_insert_with(Default::default)
    }

    fn status(&mut self) -> &mut PodDisruptionBudgetStatus {
        self.pdb.status.get_or_insert_with(Default::default)
    }

    /// `minAvailable` as a number; clears `maxUnavailable`.
    pub fn min_available(mut self, n: i32) -> Self {
        self.spec().max_unavailable = None;
        self.spec().min_available = Some(IntOrString::Int(n));
        self
    }

    /// `minAvailable` as a string such as `"50%"`; clears `maxUnavailable`.
    pub fn min_available_str(mut self, s: &str) -> Self {
        self.spec().max_unavailable = None;
        self.spec().min_available = Some(IntOrString::String(s.into()));
        self
    }

    pub fn max_unavailable(mut self, n: i32) -> Self {
        self.spec().min_available = None;
        self.spec().max_unavailable = Some(IntOrString::Int(n));
        self
    }

    pub fn max_unavailable_str(mut self, s: &str) -> Self {
        self.spec().min_available = None;
        self.spec().max_unavailable = Some(IntOrString::String(s.into()));
        self
    }

    pub fn nil_selector(mut self) -> Self {
        self.spec().selector = None;
        self
    }

    pub fn selector_expression(mut self, key: &str, operator: &str, values: &[&str]) -> Self {
        let selector = self.spec().selector.get_or_insert_with(Default::default);
        selector
            .match_expressions
            .get_or_insert_with(Vec::new)
            .push(LabelSelectorRequirement {
                key: key.into(),
                operator: operator.into(),
                values: Some(values.iter().map(|v| v.to_string()).collect()),
            });
        self
    }

    /// expectedPods, currentHealthy, desiredHealthy, disruptionsAllowed.
    pub fn status_counts(
        mut self,
        expected: i32,
        healthy: i32,
        desired: i32,
        allowed: i32,
    ) -> Self {
        let st = self.status();
        st.expected_pods = expected;
        st.current_healthy = healthy;
        st.desired_healthy = desired;
        st.disruptions_allowed = allowed;
        self
    }

    pub fn generations(mut self, generation: i64, observed: i64) -> Self {
        self.pdb.metadata.generation = Some(generation);
        self.status().observed_generation = Some(observed);
        self
    }

    pub fn no_status(mut self) -> Self {
        self.pdb.status = None;
        self
    }

    pub fn build(self) -> PodDisruptionBudget {
        self.pdb
    }
}

// ---------------------------------------------------------------- services, L2, leases

pub struct ServiceBuilder {
    service: Service,
}

/// A LoadBalancer Service with `externalTrafficPolicy` unset (Cluster).
pub fn service(namespace: &str, name: &str, labels: &[(&str, &str)]) -> ServiceBuilder {
    let mut metadata = meta(Some(namespace), name);
    add_labels(&mut metadata, labels);
    ServiceBuilder {
        service: Service {
            metadata,
            spec: Some(ServiceSpec {
                type_: Some("LoadBalancer".into()),
                ..Default::default()
            }),
            status: None,
        },
    }
}

impl ServiceBuilder {
    pub fn type_(mut self, t: &str) -> Self {
        self.service.spec.get_or_insert_with(Default::default).type_ = Some(t.into());
        self
    }

    pub fn etp(mut self, policy: &str) -> Self {
        self.service
            .spec
            .get_or_insert_with(Default::default)
            .external_traffic_policy = Some(policy.into());
        self
    }

    pub fn lb_class(mut self, class: &str) -> Self {
        self.service
            .spec
            .get_or_insert_with(Default::default)
            .load_balancer_class = Some(class.into());
        self
    }

    pub fn build(self) -> Service {
        self.service
    }
}

/// The Traefik Service `traefik/traefik` that the default environment names.
pub fn traefik_service() -> ServiceBuilder {
    service(
        "traefik",
        "traefik",
        &[("app.kubernetes.io/name", "traefik")],
    )
}

pub struct L2PolicyBuilder {
    policy: L2AnnouncementPolicy,
}

/// A policy with nil selectors (all nodes, all services) announcing loadBalancerIPs.
pub fn l2_policy(name: &str) -> L2PolicyBuilder {
    L2PolicyBuilder {
        policy: L2AnnouncementPolicy {
            metadata: meta(None, name),
            spec: L2AnnouncementPolicySpec {
                load_balancer_ips: true,
                ..Default::default()
            },
        },
    }
}

impl L2PolicyBuilder {
    pub fn node_labels(mut self, pairs: &[(&str, &str)]) -> Self {
        self.policy
            .spec
            .node_selector
            .get_or_insert_with(Default::default)
            .match_labels = Some(map(pairs));
        self
    }

    pub fn node_expression(mut self, key: &str, operator: &str, values: &[&str]) -> Self {
        let selector = self
            .policy
            .spec
            .node_selector
            .get_or_insert_with(Default::default);
        selector
            .match_expressions
            .get_or_insert_with(Vec::new)
            .push(LabelSelectorRequirement {
                key: key.into(),
                operator: operator.into(),
                values: (!values.is_empty())
                    .then(|| values.iter().map(|v| v.to_string()).collect()),
            });
        self
    }

    pub fn service_labels(mut self, pairs: &[(&str, &str)]) -> Self {
        self.policy
            .spec
            .service_selector
            .get_or_insert_with(Default::default)
            .match_labels = Some(map(pairs));
        self
    }

    pub fn load_balancer_ips(mut self, on: bool) -> Self {
        self.policy.spec.load_balancer_ips = on;
        self
    }

    pub fn external_ips(mut self, on: bool) -> Self {
        self.policy.spec.external_ips = on;
        self
    }

    pub fn build(self) -> L2AnnouncementPolicy {
        self.policy
    }
}

/// A Lease held by `holder` (empty for a released lease).
pub fn lease(namespace: &str, name: &str, holder: &str) -> Lease {
    Lease {
        metadata: meta(Some(namespace), name),
        spec: Some(LeaseSpec {
            holder_identity: (!holder.is_empty()).then(|| holder.to_string()),
            lease_duration_seconds: Some(15),
            ..Default::default()
        }),
    }
}

// ---------------------------------------------------------------- Longhorn

pub struct LonghornNodeBuilder {
    node: LonghornNode,
}

fn lh_condition(kind: &str, status: &str, reason: &str, message: &str) -> LonghornCondition {
    LonghornCondition {
        type_: kind.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
    }
}

/// Set condition `kind` in `conditions` (replacing one of that type, as longhorn-manager's
/// `SetConditionAndRecord` does).
fn set_condition(conditions: &mut Vec<LonghornCondition>, c: LonghornCondition) {
    conditions.retain(|o| o.type_ != c.type_);
    conditions.push(c);
}

/// A Longhorn node object as longhorn-manager reports a healthy one: scheduling allowed,
/// conditions `Ready` and `Schedulable` `True`, no disks.
pub fn longhorn_node(name: &str) -> LonghornNodeBuilder {
    LonghornNodeBuilder {
        node: LonghornNode {
            metadata: meta(Some("longhorn-system"), name),
            spec: LonghornNodeSpec {
                allow_scheduling: true,
                eviction_requested: false,
                disks: BTreeMap::new(),
            },
            status: Some(LonghornNodeStatus {
                conditions: vec![
                    lh_condition("Ready", "True", "", ""),
                    lh_condition("Schedulable", "True", "", ""),
                ],
                ..Default::default()
            }),
        },
    }
}

impl LonghornNodeBuilder {
    /// A disk with `allowScheduling` as given whose status reports `Ready` and `Schedulable`
    /// `True`.
    pub fn disk(mut self, name: &str, allow_scheduling: bool) -> Self {
        self.node.spec.disks.insert(
            name.into(),
            LonghornDisk {
                path: format!("/var/lib/longhorn/{name}"),
                allow_scheduling,
                eviction_requested: false,
            },
        );
        self.node
            .status
            .get_or_insert_with(Default::default)
            .disk_status
            .insert(
                name.into(),
                Some(LonghornDiskStatus {
                    conditions: vec![
                        lh_condition("Ready", "True", "", ""),
                        lh_condition("Schedulable", "True", "", ""),
                    ],
                }),
            );
        self
    }

    /// longhorn-manager reports the node's condition `kind` (`Ready`, `Schedulable`) as
    /// `status`, with `reason` and `message`.
    pub fn node_condition(mut self, kind: &str, status: &str, reason: &str, message: &str) -> Self {
        let conditions = &mut self
            .node
            .status
            .get_or_insert_with(Default::default)
            .conditions;
        set_condition(conditions, lh_condition(kind, status, reason, message));
        self
    }

    /// The node's status lists no condition `kind`.
    pub fn without_node_condition(mut self, kind: &str) -> Self {
        if let Some(status) = &mut self.node.status {
            status.conditions.retain(|c| c.type_ != kind);
        }
        self
    }

    /// longhorn-manager reports disk `disk`'s condition `kind` as `status`, with `reason` and
    /// `message` (a full disk: `Schedulable` `False`, `DiskPressure`).
    pub fn disk_condition(
        mut self,
        disk: &str,
        kind: &str,
        status: &str,
        reason: &str,
        message: &str,
    ) -> Self {
        let status_of = self.node.status.get_or_insert_with(Default::default);
        let entry = status_of
            .disk_status
            .entry(disk.into())
            .or_default()
            .get_or_insert_with(Default::default);
        set_condition(
            &mut entry.conditions,
            lh_condition(kind, status, reason, message),
        );
        self
    }

    /// The node's status has no entry for disk `disk` (longhorn-manager has not reported it).
    pub fn without_disk_status(mut self, disk: &str) -> Self {
        if let Some(status) = &mut self.node.status {
            status.disk_status.remove(disk);
        }
        self
    }

    /// The node object carries no status at all.
    pub fn without_status(mut self) -> Self {
        self.node.status = None;
        self
    }

    /// Eviction requested for the whole node (`spec.evictionRequested`).
    pub fn eviction_requested(mut self) -> Self {
        self.node.spec.eviction_requested = true;
        self
    }

    pub fn allow_scheduling(mut self, on: bool) -> Self {
        self.node.spec.allow_scheduling = on;
        self
    }

    pub fn build(self) -> LonghornNode {
        self.node
    }
}

/// A Longhorn volume with 3 replicas in the given state and robustness.
pub fn longhorn_volume(
    name: &str,
    state: &str,
    robustness: &str,
    attached_to: &str,
) -> LonghornVolume {
    LonghornVolume {
        metadata: meta(Some("longhorn-system"), name),
        spec: LonghornVolumeSpec {
            number_of_replicas: 3,
            // 2 GiB.
            size: "2147483648".into(),
            access_mode: "rwo".into(),
            replica_soft_anti_affinity: String::new(),
        },
        status: LonghornVolumeStatus {
            state: state.into(),
            robustness: robustness.into(),
            current_node_id: attached_to.into(),
            kubernetes_status: None,
        },
    }
}

/// `volume` as Longhorn records it in use by `pod` of `namespace` (`workloadsStatus`).
pub fn used_by(mut volume: LonghornVolume, namespace: &str, pod: &str) -> LonghornVolume {
    let status = volume
        .status
        .kubernetes_status
        .get_or_insert_with(LonghornKubernetesStatus::default);
    status.namespace = namespace.into();
    status.pvc_name = format!("{}-claim", volume.metadata.name.as_deref().unwrap_or("v"));
    status
        .workloads_status
        .get_or_insert_with(Vec::new)
        .push(LonghornWorkloadStatus {
            pod_name: pod.into(),
            ..LonghornWorkloadStatus::default()
        });
    volume
}

/// A replica of `volume` on `node`, labelled `longhornvolume=<volume>` and with
/// `spec.volumeName` set.
pub fn longhorn_replica(name: &str, volume: &str, node: &str) -> LonghornReplica {
    let mut metadata = meta(Some("longhorn-system"), name);
    add_labels(&mut metadata, &[("longhornvolume", volume)]);
    LonghornReplica {
        metadata,
        spec: LonghornReplicaSpec {
            node_id: node.into(),
            volume_name: volume.into(),
            failed_at: String::new(),
            healthy_at: Some("2026-01-01T00:00:00Z".into()),
        },
    }
}

pub fn longhorn_setting(name: &str, value: &str) -> LonghornSetting {
    LonghornSetting {
        metadata: meta(Some("longhorn-system"), name),
        value: value.into(),
    }
}

// ---------------------------------------------------------------- metrics

/// Node metrics as metrics-server reports them (`cpu` often in `n`).
pub fn node_metrics(node: &str, cpu: &str, memory: &str) -> NodeMetrics {
    NodeMetrics {
        metadata: meta(None, node),
        timestamp: Some("2026-01-01T00:00:00Z".into()),
        window: Some("30s".into()),
        usage: ResourceUsage {
            cpu: Some(cpu.into()),
            memory: Some(memory.into()),
        },
    }
}

/// The parts of `state` that `spec` reads without declaring them: each part it does not
/// declare is withheld in turn ([`State::without`]), and a part whose withholding changes
/// the finding is read. Empty when the declaration is whole, as far as `state` can show.
pub fn undeclared_inputs(
    spec: &super::CheckSpec,
    env: &Environment,
    state: &State,
) -> Vec<crate::state::Input> {
    let finding = |state: &State| {
        let indexes = super::Indexes::new(state);
        serde_json::to_value(spec.evaluate(super::Context {
            env,
            state,
            indexes: &indexes,
            pause: &crate::pause::NEVER,
        }))
        .unwrap_or_default()
    };
    let whole = finding(state);
    crate::state::Input::ALL
        .into_iter()
        .filter(|input| !spec.inputs().contains(input))
        .filter(|input| finding(&state.without(*input)) != whole)
        .collect()
}
