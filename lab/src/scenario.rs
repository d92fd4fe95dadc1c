//! Scenario files (`fixtures/lab/*.yaml`): what a lab starts with. The format is documented
//! at the top of `fixtures/lab/adr-007.yaml`. A scenario may `extends:` another one and
//! `set:` a few values by path, which keeps the one-thing-broken variants small.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;
use serde_json::Value as Yaml;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// Scenarios built into the binary, so `gates demo` works from any directory.
pub const BUILTIN: &[(&str, &str)] = &[
    ("adr-007", include_str!("../../fixtures/lab/adr-007.yaml")),
    (
        "staging-today",
        include_str!("../../fixtures/lab/staging-today.yaml"),
    ),
    (
        "adr-007-shared-host",
        include_str!("../../fixtures/lab/adr-007-shared-host.yaml"),
    ),
    (
        "adr-007-l2-excludes-control-planes",
        include_str!("../../fixtures/lab/adr-007-l2-excludes-control-planes.yaml"),
    ),
    (
        "adr-007-single-replica",
        include_str!("../../fixtures/lab/adr-007-single-replica.yaml"),
    ),
    (
        "adr-007-pdb-selects-nothing",
        include_str!("../../fixtures/lab/adr-007-pdb-selects-nothing.yaml"),
    ),
    // Host-loss scenarios: `gates predict lab` names the host whose loss is not survivable.
    (
        "adr-007-full-survivors",
        include_str!("../../fixtures/lab/adr-007-full-survivors.yaml"),
    ),
    (
        "adr-007-sidecar-fills-survivors",
        include_str!("../../fixtures/lab/adr-007-sidecar-fills-survivors.yaml"),
    ),
    (
        "adr-007-anti-affinity-nowhere",
        include_str!("../../fixtures/lab/adr-007-anti-affinity-nowhere.yaml"),
    ),
    (
        "adr-007-last-replica",
        include_str!("../../fixtures/lab/adr-007-last-replica.yaml"),
    ),
    (
        "adr-007-l2-one-node",
        include_str!("../../fixtures/lab/adr-007-l2-one-node.yaml"),
    ),
    (
        "adr-007-one-zone",
        include_str!("../../fixtures/lab/adr-007-one-zone.yaml"),
    ),
    (
        "adr-007-rwo-deployment",
        include_str!("../../fixtures/lab/adr-007-rwo-deployment.yaml"),
    ),
    (
        "adr-007-shared-failure-domains",
        include_str!("../../fixtures/lab/adr-007-shared-failure-domains.yaml"),
    ),
];

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("unknown scenario {0:?}; built-in scenarios: {1}")]
    Unknown(String, String),
    #[error("cannot read scenario file {0}: {1}")]
    Read(String, std::io::Error),
    #[error("scenario {0}: {1}")]
    Parse(String, String),
    #[error("scenario {0}: {1}")]
    Invalid(String, String),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub timings: Timings,
    /// How an address behaves while its machine is down: `stall` (default: packets dropped,
    /// connects hang) or `refuse` (connection refused at once).
    #[serde(default)]
    pub unreachable: crate::power::DownMode,
    /// How many past events the Kubernetes API keeps for watches and exact-revision lists
    /// (etcd compaction, counted in events); older resourceVersions answer 410 Gone.
    #[serde(default = "default_watch_history")]
    pub watch_history: usize,
    pub hosts: Vec<HostSpec>,
    pub environments: Vec<EnvSpec>,
    /// Storages beside Proxmox's default `local` (dir) and `local-lvm` (lvmthin), as
    /// `/storage` lists them.
    #[serde(default)]
    pub storages: Vec<StorageSpec>,
}

/// A Proxmox storage of the scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageSpec {
    pub name: String,
    /// The storage type (`nfs`, `rbd`, `zfspool`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    /// `shared: 1` in `storage.cfg`; the types Proxmox always counts as shared are shared
    /// whatever this says.
    #[serde(default)]
    pub shared: bool,
}

/// Timings of the world rules, in simulated time. Defaults follow the research files.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timings {
    /// kube-controller-manager node-monitor-grace-period: 50 s since 1.32 (40 s before), the
    /// default of the release the lab says it runs and of the real control plane of the tests.
    #[serde(with = "humantime_serde_compat")]
    pub node_monitor_grace: Duration,
    /// Default not-ready/unreachable toleration of pods (DefaultTolerationSeconds).
    #[serde(with = "humantime_serde_compat")]
    pub toleration: Duration,
    /// Cilium L2 lease duration: a dead holder's lease is taken over after this.
    #[serde(with = "humantime_serde_compat")]
    pub lease_duration: Duration,
    /// Cilium L2 lease renew interval (how often renewTime moves).
    #[serde(with = "humantime_serde_compat")]
    pub lease_renew: Duration,
    /// Talos VIP failover after an ungraceful loss of its holder (etcd session TTL).
    #[serde(with = "humantime_serde_compat")]
    pub vip_failover: Duration,
    /// Talos VIP failover after a graceful shutdown of its holder (it resigns).
    #[serde(with = "humantime_serde_compat")]
    pub vip_graceful_failover: Duration,
    /// From VM start until Talos, the kubelet and etcd are up.
    #[serde(with = "humantime_serde_compat")]
    pub boot: Duration,
    /// From an ACPI shutdown request until the VM is off.
    #[serde(with = "humantime_serde_compat")]
    pub shutdown: Duration,
    /// From pod creation until it is Ready.
    #[serde(with = "humantime_serde_compat")]
    pub pod_start: Duration,
    /// From a node's return until Longhorn replicas on it are rebuilt.
    #[serde(with = "humantime_serde_compat")]
    pub longhorn_rebuild: Duration,
    /// From wake-on-LAN until a Proxmox host is online.
    #[serde(with = "humantime_serde_compat")]
    pub host_boot: Duration,
    /// Without etcd quorum, how long the API server blocks before a resource request answers
    /// 500 `etcdserver: request timed out` (etcd's request timeout).
    #[serde(with = "humantime_serde_compat")]
    pub etcd_request_timeout: Duration,
    /// Without etcd quorum, how long `/readyz` blocks before its etcd check fails
    /// (kube-apiserver `--etcd-healthcheck-timeout`).
    #[serde(with = "humantime_serde_compat")]
    pub etcd_healthcheck_timeout: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            node_monitor_grace: Duration::from_secs(50),
            toleration: Duration::from_secs(300),
            lease_duration: Duration::from_secs(15),
            lease_renew: Duration::from_secs(5),
            vip_failover: Duration::from_secs(60),
            vip_graceful_failover: Duration::from_secs(1),
            boot: Duration::from_secs(45),
            shutdown: Duration::from_secs(10),
            pod_start: Duration::from_secs(5),
            longhorn_rebuild: Duration::from_secs(30),
            host_boot: Duration::from_secs(90),
            etcd_request_timeout: Duration::from_secs(5),
            etcd_healthcheck_timeout: Duration::from_secs(2),
        }
    }
}

fn default_watch_history() -> usize {
    crate::world::store::HISTORY
}

/// humantime strings ("40s", "5m") for durations.
mod humantime_serde_compat {
    use serde::{Deserialize, Deserializer};
    use std::time::Duration;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        humantime::parse_duration(&s).map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    pub name: String,
    #[serde(default = "default_host_cpus")]
    pub cpus: u32,
    #[serde(default = "default_host_memory")]
    pub memory: String,
    /// Whether the host's node config carries a wake-on-LAN MAC (so it can be woken after a
    /// shutdown).
    #[serde(default = "default_wakeonlan")]
    pub wakeonlan: bool,
    /// The switch and power feed the environment file declares for the host
    /// (`proxmox.hosts`); Proxmox does not know them.
    #[serde(default)]
    pub switch: Option<String>,
    #[serde(default)]
    pub power: Option<String>,
}

fn default_wakeonlan() -> bool {
    true
}

fn default_host_cpus() -> u32 {
    32
}
fn default_host_memory() -> String {
    "128Gi".into()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    ControlPlane,
    Worker,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvSpec {
    pub name: String,
    /// `staging` or `production`: which real environment this one stands in for.
    pub like: String,
    /// Proxmox tag of this environment's VMs (defaults to `like`).
    #[serde(default)]
    pub tag: Option<String>,
    #[serde(default = "default_kube_version")]
    pub kubernetes_version: String,
    #[serde(default = "default_talos_version")]
    pub talos_version: String,
    /// Talos `cluster.allowSchedulingOnControlPlanes`: without it control planes are tainted.
    #[serde(default)]
    pub allow_scheduling_on_control_planes: bool,
    /// Node labels the machine configuration removes with a `$patch: delete` patch, such as
    /// `node.kubernetes.io/exclude-from-external-load-balancers`, which Talos's config
    /// generation puts on every control plane since 1.8 and its documentation tells clusters
    /// that run workloads there to remove.
    #[serde(default)]
    pub delete_node_labels: Vec<String>,
    pub nodes: Vec<NodeSpec>,
    #[serde(default)]
    pub l2_policies: Vec<L2PolicySpec>,
    #[serde(default)]
    pub ingress: Option<IngressSpec>,
    #[serde(default)]
    pub workloads: Vec<WorkloadSpec>,
    #[serde(default)]
    pub services: Vec<ServiceSpec>,
    #[serde(default)]
    pub pdbs: Vec<PdbSpec>,
    #[serde(default)]
    pub longhorn: Option<LonghornSpec>,
    /// Serve metrics.k8s.io (metrics-server installed).
    #[serde(default = "yes")]
    pub metrics: bool,
}

fn yes() -> bool {
    true
}
fn default_kube_version() -> String {
    "v1.34.1".into()
}
fn default_talos_version() -> String {
    "v1.11.5".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Node name = VM name = Talos hostname.
    pub name: String,
    /// Proxmox host (name) the VM runs on.
    pub host: String,
    pub role: Role,
    #[serde(default)]
    pub vmid: Option<u32>,
    #[serde(default = "default_node_cpu")]
    pub cpu: String,
    #[serde(default = "default_node_memory")]
    pub memory: String,
    /// Extra node labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// SMBIOS uuid (generated from the name when absent).
    #[serde(default)]
    pub uuid: Option<String>,
    /// Proxmox HA resource for the VM.
    #[serde(default)]
    pub ha: bool,
    /// The storage of the VM's disk (`scsi0`); `local-lvm` when absent.
    #[serde(default)]
    pub storage: Option<String>,
}

fn default_node_cpu() -> String {
    "4".into()
}
fn default_node_memory() -> String {
    "8Gi".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct L2PolicySpec {
    pub name: String,
    /// A Kubernetes LabelSelector (matchLabels/matchExpressions); absent = all nodes.
    #[serde(default)]
    pub node_selector: Option<serde_json::Value>,
    #[serde(default)]
    pub service_selector: Option<serde_json::Value>,
    #[serde(default = "yes")]
    pub load_balancer_ips: bool,
}

/// The Traefik LoadBalancer Service and the host names the ingress answers for.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngressSpec {
    pub namespace: String,
    pub service: String,
    /// Pod selector of the Service (the Traefik pods).
    pub selector: BTreeMap<String, String>,
    /// Labels of the Service object itself.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default = "default_etp")]
    pub external_traffic_policy: String,
    pub hosts: Vec<String>,
}

fn default_etp() -> String {
    "Cluster".into()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum WorkloadKind {
    Deployment,
    DaemonSet,
    StatefulSet,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AntiAffinity {
    /// requiredDuringScheduling on kubernetes.io/hostname.
    Required,
    /// preferredDuringScheduling on kubernetes.io/hostname.
    #[default]
    Preferred,
    None,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    pub kind: WorkloadKind,
    pub namespace: String,
    pub name: String,
    /// Selector labels (also on the pods and the workload object).
    pub labels: BTreeMap<String, String>,
    /// Extra labels on the pods only.
    #[serde(default)]
    pub pod_labels: BTreeMap<String, String>,
    #[serde(default = "one")]
    pub replicas: i32,
    #[serde(default)]
    pub requests: Resources,
    /// A native sidecar beside the app container: an init container with
    /// `restartPolicy: Always` requesting this. It runs as long as the pod, so the scheduler
    /// counts its request with the app container's (and so does the lab's placement).
    #[serde(default)]
    pub sidecar: Option<Resources>,
    /// Measured usage per pod (metrics.k8s.io); defaults to half the requests.
    #[serde(default)]
    pub usage: Option<Resources>,
    #[serde(default)]
    pub anti_affinity: AntiAffinity,
    /// Tolerate the control-plane NoSchedule taint.
    #[serde(default)]
    pub tolerate_control_plane: bool,
    /// Tolerate every taint (`{operator: Exists}`), as the Cilium chart's operator does by
    /// default: never evicted from a dead node, so never replaced while it is down.
    #[serde(default)]
    pub tolerate_all: bool,
    /// Pods only on nodes with these labels.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default)]
    pub pdb: Option<PdbRule>,
    #[serde(default)]
    pub image: Option<String>,
}

fn one() -> i32 {
    1
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    #[serde(default = "default_cpu")]
    pub cpu: String,
    #[serde(default = "default_memory")]
    pub memory: String,
}

impl Default for Resources {
    fn default() -> Self {
        Resources {
            cpu: default_cpu(),
            memory: default_memory(),
        }
    }
}

fn default_cpu() -> String {
    "100m".into()
}
fn default_memory() -> String {
    "128Mi".into()
}

/// A PDB that belongs to a workload; its selector defaults to the workload's labels.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PdbRule {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub min_available: Option<IntOrString>,
    #[serde(default)]
    pub max_unavailable: Option<IntOrString>,
    #[serde(default)]
    pub selector: Option<BTreeMap<String, String>>,
}

/// A standalone PDB. `selector: null` is a PDB that selects nothing.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PdbSpec {
    pub namespace: String,
    pub name: String,
    #[serde(default)]
    pub selector: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub min_available: Option<IntOrString>,
    #[serde(default)]
    pub max_unavailable: Option<IntOrString>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceSpec {
    pub namespace: String,
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    pub selector: BTreeMap<String, String>,
    /// Ports as `53/UDP`, `9153` (TCP by default).
    #[serde(default)]
    pub ports: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LonghornSpec {
    /// Nodes with a default disk; absent = every node that runs workloads.
    #[serde(default)]
    pub disk_nodes: Option<Vec<String>>,
    #[serde(default = "default_disk_size")]
    pub disk_size: String,
    #[serde(default)]
    pub volumes: Vec<VolumeSpec>,
    /// Settings overriding Longhorn's defaults.
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
}

fn default_disk_size() -> String {
    "200Gi".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeSpec {
    pub name: String,
    #[serde(default = "default_volume_size")]
    pub size: String,
    #[serde(default = "default_replica_count")]
    pub replicas: usize,
    /// Node the volume is attached to (absent: detached).
    #[serde(default)]
    pub attached_to: Option<String>,
    /// The PVC behind it, as `namespace/name`.
    #[serde(default)]
    pub pvc: Option<String>,
    /// The workload (by name, in the PVC's namespace) whose pods mount it: Longhorn lists
    /// them in the volume's `status.kubernetesStatus.workloadsStatus`.
    #[serde(default)]
    pub used_by: Option<String>,
}

fn default_volume_size() -> String {
    "10Gi".into()
}
fn default_replica_count() -> usize {
    3
}

impl Scenario {
    /// Load by built-in name, or by path when `name` ends in `.yaml`/`.yml` or holds a `/`.
    pub fn load(name: &str) -> Result<Scenario, ScenarioError> {
        let text = source_of(name)?;
        let value = resolve(name, &text, 0)?;
        let scenario: Scenario = serde_json::from_value(value)
            .map_err(|e| ScenarioError::Parse(name.into(), e.to_string()))?;
        scenario.validate()?;
        Ok(scenario)
    }

    /// Parse scenario text directly (tests).
    pub fn from_yaml(label: &str, text: &str) -> Result<Scenario, ScenarioError> {
        let value = resolve(label, text, 0)?;
        let scenario: Scenario = serde_json::from_value(value)
            .map_err(|e| ScenarioError::Parse(label.into(), e.to_string()))?;
        scenario.validate()?;
        Ok(scenario)
    }

    fn validate(&self) -> Result<(), ScenarioError> {
        let bad = |m: String| Err(ScenarioError::Invalid(self.name.clone(), m));
        if self.hosts.is_empty() {
            return bad("no hosts".into());
        }
        if self.hosts.len() > crate::addr::MAX_ADDRESSED {
            return bad(format!("at most {} hosts", crate::addr::MAX_ADDRESSED));
        }
        if self.environments.is_empty() || self.environments.len() > crate::addr::MAX_ADDRESSED {
            return bad("between 1 and 254 environments".into());
        }
        let mut names = std::collections::BTreeSet::new();
        for env in &self.environments {
            if !names.insert(format!("env/{}", env.name)) {
                return bad(format!("environment {} appears twice", env.name));
            }
            if !env.nodes.iter().any(|n| n.role == Role::ControlPlane) {
                return bad(format!(
                    "environment {} has no control-plane node",
                    env.name
                ));
            }
            for n in &env.nodes {
                if !self.hosts.iter().any(|h| h.name == n.host) {
                    return bad(format!("node {} is on unknown host {}", n.name, n.host));
                }
                if !names.insert(format!("node/{}", n.name)) {
                    return bad(format!("node {} appears twice", n.name));
                }
            }
        }
        Ok(())
    }

    /// A scale scenario: one environment with three control planes and `nodes - 3` workers
    /// spread over five hosts, `pods_per_node` pods per node. Only the first 254 nodes get
    /// addresses (apid/API listeners); the rest exist as Kubernetes objects.
    pub fn generated(nodes: usize, pods_per_node: usize) -> Scenario {
        let nodes = nodes.max(3);
        let hosts: Vec<HostSpec> = (1..=5)
            .map(|i| HostSpec {
                name: format!("pve{i}"),
                cpus: 512,
                memory: "4096Gi".into(),
                wakeonlan: true,
                switch: None,
                power: None,
            })
            .collect();
        let mut node_specs = Vec::with_capacity(nodes);
        for j in 0..nodes {
            let (name, role) = if j < 3 {
                (format!("talos-gen-cp-{:02}", j + 1), Role::ControlPlane)
            } else {
                (format!("talos-gen-worker-{:05}", j - 2), Role::Worker)
            };
            node_specs.push(NodeSpec {
                name,
                host: format!("pve{}", j % 5 + 1),
                role,
                vmid: None,
                cpu: "16".into(),
                memory: "64Gi".into(),
                labels: BTreeMap::new(),
                uuid: None,
                ha: false,
                storage: None,
            });
        }
        let workers = nodes.saturating_sub(3).max(1);
        let deployments = (workers * pods_per_node).div_ceil(10).max(1);
        let workloads = (0..deployments)
            .map(|d| WorkloadSpec {
                kind: WorkloadKind::Deployment,
                namespace: format!("team-{:03}", d % 100),
                name: format!("app-{d:05}"),
                labels: BTreeMap::from([(
                    "app.kubernetes.io/name".to_string(),
                    format!("app-{d:05}"),
                )]),
                pod_labels: BTreeMap::new(),
                replicas: 10,
                requests: Resources {
                    cpu: "10m".into(),
                    memory: "16Mi".into(),
                },
                sidecar: None,
                usage: None,
                anti_affinity: AntiAffinity::None,
                tolerate_control_plane: false,
                tolerate_all: false,
                node_selector: BTreeMap::new(),
                pdb: None,
                image: None,
            })
            .collect();
        Scenario {
            name: format!("generated-{nodes}"),
            description: format!(
                "Generated scale scenario: {nodes} nodes, about {pods_per_node} pods per worker."
            ),
            timings: Timings::default(),
            unreachable: crate::power::DownMode::default(),
            watch_history: crate::world::store::HISTORY,
            storages: Vec::new(),
            hosts,
            environments: vec![EnvSpec {
                name: "lab".into(),
                like: "staging".into(),
                tag: None,
                kubernetes_version: default_kube_version(),
                talos_version: default_talos_version(),
                allow_scheduling_on_control_planes: false,
                delete_node_labels: vec![],
                nodes: node_specs,
                l2_policies: vec![],
                ingress: None,
                workloads,
                services: vec![],
                pdbs: vec![],
                longhorn: None,
                metrics: true,
            }],
        }
    }
}

fn source_of(name: &str) -> Result<String, ScenarioError> {
    if name.ends_with(".yaml") || name.ends_with(".yml") || name.contains('/') {
        return std::fs::read_to_string(Path::new(name))
            .map_err(|e| ScenarioError::Read(name.into(), e));
    }
    BUILTIN
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| t.to_string())
        .ok_or_else(|| {
            ScenarioError::Unknown(
                name.into(),
                BUILTIN
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        })
}

/// Resolve `extends:` and `set:` into one YAML document.
fn resolve(label: &str, text: &str, depth: usize) -> Result<Yaml, ScenarioError> {
    let parse = |m: String| ScenarioError::Parse(label.into(), m);
    if depth > 4 {
        return Err(parse("`extends` nests too deeply".into()));
    }
    // Merge keys (`<<: *base`) are resolved as the text is read.
    let mut doc: Yaml = crate::yaml::from_str(text).map_err(|e| parse(e.to_string()))?;
    let Some(map) = doc.as_object_mut() else {
        return Err(parse("a scenario is a mapping".into()));
    };
    let extends = map.remove("extends");
    let sets = map.remove("set");
    let Some(base_name) = extends else {
        if sets.is_some() {
            return Err(parse("`set` needs `extends`".into()));
        }
        return Ok(doc);
    };
    let base_name = base_name
        .as_str()
        .ok_or_else(|| parse("`extends` names a scenario".into()))?
        .to_string();
    let mut base = resolve(&base_name, &source_of(&base_name)?, depth + 1)?;
    let own = doc.as_object().cloned().unwrap_or_default();
    if let Some(bm) = base.as_object_mut() {
        for (k, v) in own {
            bm.insert(k, v);
        }
    }
    if let Some(sets) = sets {
        let sets = sets
            .as_object()
            .ok_or_else(|| parse("`set` is a mapping of path: value".into()))?;
        // A key written as a number or a bool is read as its text, and then names no path.
        for (path, value) in sets {
            set_path(&mut base, path, value.clone())
                .map_err(|m| parse(format!("set {path}: {m}")))?;
        }
    }
    Ok(base)
}

/// Set a value at a path like `environments[name=lab].workloads[name=coredns].replicas`.
/// `[name=X]` picks the list entry whose `name` is X; `[3]` picks by index.
fn set_path(doc: &mut Yaml, path: &str, value: Yaml) -> Result<(), String> {
    let mut segments = Vec::new();
    for part in path.split('.') {
        let (key, filters) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            segments.push(Seg::Key(key.to_string()));
        }
        let mut rest = filters;
        while let Some(stripped) = rest.strip_prefix('[') {
            let end = stripped.find(']').ok_or("unclosed [")?;
            let inner = &stripped[..end];
            segments.push(match inner.split_once('=') {
                Some((k, v)) => Seg::Find(k.to_string(), v.to_string()),
                None => Seg::Index(inner.parse().map_err(|_| format!("bad index {inner}"))?),
            });
            rest = &stripped[end + 1..];
        }
    }
    let Some((last, init)) = segments.split_last() else {
        return Err("empty path".into());
    };
    let mut cur = doc;
    for seg in init {
        cur = step(cur, seg)?;
    }
    match last {
        Seg::Key(k) => {
            let m = cur
                .as_object_mut()
                .ok_or(format!("{k}: parent is not a mapping"))?;
            m.insert(k.clone(), value);
        }
        other => *step(cur, other)? = value,
    }
    Ok(())
}

enum Seg {
    Key(String),
    Index(usize),
    Find(String, String),
}

fn step<'a>(cur: &'a mut Yaml, seg: &Seg) -> Result<&'a mut Yaml, String> {
    match seg {
        Seg::Key(k) => cur.get_mut(k.as_str()).ok_or(format!("no key {k}")),
        Seg::Index(i) => cur.get_mut(*i).ok_or(format!("no index {i}")),
        Seg::Find(k, v) => cur
            .as_array_mut()
            .ok_or(format!("[{k}={v}]: not a list"))?
            .iter_mut()
            .find(|e| e.get(k.as_str()).and_then(|x| x.as_str()) == Some(v.as_str()))
            .ok_or(format!("no entry with {k}={v}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_scenario_loads() {
        for (name, _) in BUILTIN {
            let s = Scenario::load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!s.environments.is_empty());
        }
    }

    #[test]
    fn set_changes_one_value() {
        let s = Scenario::load("adr-007-single-replica").expect("loads");
        let lab = &s.environments[0];
        let coredns = lab
            .workloads
            .iter()
            .find(|w| w.name == "coredns")
            .expect("coredns");
        assert_eq!(coredns.replicas, 1);
        let base = Scenario::load("adr-007").expect("loads");
        let coredns = base.environments[0]
            .workloads
            .iter()
            .find(|w| w.name == "coredns")
            .expect("coredns");
        assert_eq!(coredns.replicas, 2);
    }

    #[test]
    fn unknown_key_is_an_error_not_a_panic() {
        let err = Scenario::from_yaml("t", "name: x\nhosts: []\nenvironments: []\nbogus: 1\n")
            .unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
        let err = Scenario::load("no-such-scenario").unwrap_err();
        assert!(err.to_string().contains("adr-007"), "{err}");
    }
}
