//! One environment: a cluster and its surroundings, read from `gates/environments/NAME.yaml`.
//! The shipped `staging.yaml` documents every key.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::duration::Duration;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    /// The file name without `.yaml`; set by the loader.
    #[serde(skip)]
    pub name: String,
    /// The file it came from; set by the loader.
    #[serde(skip)]
    pub file: PathBuf,
    #[serde(default)]
    pub description: String,
    /// Take the gates of another environment (the lab's `lab` is checked like `staging`).
    #[serde(default)]
    pub like: Option<String>,
    #[serde(default)]
    pub kube: KubeAccess,
    #[serde(default)]
    pub nodes: NodesSpec,
    #[serde(default)]
    pub ingress: IngressSpec,
    #[serde(default)]
    pub capacity: CapacitySpec,
    #[serde(default)]
    pub api: Option<ApiSpec>,
    #[serde(default)]
    pub talos: Option<TalosAccess>,
    #[serde(default)]
    pub proxmox: Option<ProxmoxAccess>,
    #[serde(default)]
    pub chaos: Option<ChaosSpec>,
    /// The GitOps repository that declares this environment (repository trials).
    #[serde(default)]
    pub repo: Option<super::repo::RepoSpec>,
    /// The longest each network phase of `check` and `snapshot` may take in total
    /// (Kubernetes lists, Talos API, API endpoint, Proxmox).
    #[serde(default = "default_deadline")]
    pub deadline: Duration,
}

fn default_deadline() -> Duration {
    Duration::from_secs(120)
}

impl Environment {
    /// The name gate files match on: `like` when set, else the environment's own name.
    pub fn gate_name(&self) -> &str {
        self.like.as_deref().unwrap_or(&self.name)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeAccess {
    /// Context in the kubeconfig; the current context when left out.
    #[serde(default)]
    pub context: Option<String>,
    /// A kubeconfig file; `$KUBECONFIG`, else `~/.kube/config`, when left out.
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// Per-request timeout.
    #[serde(default = "default_kube_timeout")]
    pub timeout: Duration,
    /// Objects per page of a list: fewer round trips with more, smaller answers with fewer.
    /// The default, 2,000, reads 100,000 pods in 50 round trips instead of kubectl's 200 (each
    /// one a read of etcd, and with it the chance that the list's continue token expires
    /// before the last page), while one answer stays a few tens of megabytes.
    #[serde(default = "default_page_size")]
    pub page_size: u32,
}

impl Default for KubeAccess {
    fn default() -> Self {
        KubeAccess {
            context: None,
            kubeconfig: None,
            timeout: default_kube_timeout(),
            page_size: default_page_size(),
        }
    }
}

fn default_page_size() -> u32 {
    2000
}

fn default_kube_timeout() -> Duration {
    Duration::from_secs(10)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodesSpec {
    #[serde(default = "default_control_planes")]
    pub control_planes: usize,
    #[serde(default = "default_host_label")]
    pub host_label: String,
}

impl Default for NodesSpec {
    fn default() -> Self {
        NodesSpec {
            control_planes: default_control_planes(),
            host_label: default_host_label(),
        }
    }
}

fn default_control_planes() -> usize {
    3
}

fn default_host_label() -> String {
    "topology.kubernetes.io/zone".to_string()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngressSpec {
    #[serde(default = "default_services")]
    pub services: Vec<ServiceRef>,
    #[serde(default)]
    pub urls: Vec<IngressUrl>,
}

impl Default for IngressSpec {
    fn default() -> Self {
        IngressSpec {
            services: default_services(),
            urls: Vec::new(),
        }
    }
}

fn default_services() -> Vec<ServiceRef> {
    vec![ServiceRef {
        namespace: None,
        selector: BTreeMap::from([("app.kubernetes.io/name".to_string(), "traefik".to_string())]),
    }]
}

/// A LoadBalancer Service found by labels, optionally within one namespace.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceRef {
    #[serde(default)]
    pub namespace: Option<String>,
    pub selector: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngressUrl {
    pub url: String,
    /// Host header to send when the URL names an address.
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default = "default_expect_status")]
    pub expect_status: u16,
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

fn default_expect_status() -> u16 {
    200
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacitySpec {
    /// Fraction of allocatable CPU and memory each node must keep free.
    #[serde(default = "default_margin")]
    pub margin: f64,
    #[serde(default)]
    pub basis: CapacityBasis,
    /// Fraction of allocatable CPU and memory kept for Longhorn rebuild traffic after a host
    /// loss (`gates predict`); 0 keeps none.
    #[serde(default)]
    pub rebuild_margin: f64,
    /// Where `basis: prometheus` reads the load over a window.
    #[serde(default)]
    pub prometheus: Option<PrometheusLoad>,
}

impl Default for CapacitySpec {
    fn default() -> Self {
        CapacitySpec {
            margin: default_margin(),
            basis: CapacityBasis::default(),
            rebuild_margin: 0.0,
            prometheus: None,
        }
    }
}

fn default_margin() -> f64 {
    1.0 / 3.0
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CapacityBasis {
    /// max(sum of requests, measured usage): needs the metrics API.
    #[default]
    Usage,
    /// Sum of requests only.
    Requests,
    /// max(sum of requests, a quantile of the load over a window read from Prometheus):
    /// needs `capacity.prometheus`.
    Prometheus,
}

/// `capacity.prometheus`: each node's CPU (cores) and memory (bytes) over a window, read
/// with `/api/v1/query_range`; the defaults read kubelet's cAdvisor series as
/// kube-prometheus-stack labels them (`docs/reality.md`, "Prometheus").
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrometheusLoad {
    /// The server, e.g. `http://prometheus-operated.monitoring:9090`.
    pub url: String,
    /// How far back from the collection the load is read.
    #[serde(default = "default_load_window")]
    pub window: Duration,
    /// What stands for a node's load over the window: a quantile (0.95) or `max`.
    #[serde(default)]
    pub quantile: LoadStatistic,
    /// The resolution of the range query: one value per step.
    #[serde(default = "default_load_step")]
    pub step: Duration,
    /// The share of steps a node may lack in either series before its load counts as unknown.
    #[serde(default = "default_max_gap_share")]
    pub max_gap_share: f64,
    /// The label of each query's result that holds the Kubernetes node name.
    #[serde(default = "default_node_label")]
    pub node_label: String,
    #[serde(default)]
    pub queries: LoadQueries,
    /// A CA bundle (PEM) to trust for an `https` URL; the system's roots are not used.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Basic auth: the user name; the password is read from `password_file`.
    #[serde(default)]
    pub username: Option<String>,
    /// The basic-auth password, in a file of its own (never in this file, never printed).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// A bearer token, in a file of its own (never in this file, never printed).
    #[serde(default)]
    pub bearer_token_file: Option<PathBuf>,
    /// Per-request timeout.
    #[serde(default = "default_prometheus_timeout")]
    pub timeout: Duration,
}

/// The PromQL expressions, one series per node carrying `node_label`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadQueries {
    /// CPU in cores.
    #[serde(default = "default_cpu_query")]
    pub cpu: String,
    /// Memory in bytes.
    #[serde(default = "default_memory_query")]
    pub memory: String,
}

impl Default for LoadQueries {
    fn default() -> Self {
        LoadQueries {
            cpu: default_cpu_query(),
            memory: default_memory_query(),
        }
    }
}

/// The default CPU query: the containers' CPU from kubelet's cAdvisor endpoint, per node.
pub const DEFAULT_CPU_QUERY: &str =
    r#"sum by (node) (rate(container_cpu_usage_seconds_total{container!="", image!=""}[5m]))"#;
/// The default memory query: the containers' working set, as metrics-server counts memory.
pub const DEFAULT_MEMORY_QUERY: &str =
    r#"sum by (node) (container_memory_working_set_bytes{container!="", image!=""})"#;

fn default_cpu_query() -> String {
    DEFAULT_CPU_QUERY.to_string()
}

fn default_memory_query() -> String {
    DEFAULT_MEMORY_QUERY.to_string()
}

fn default_load_window() -> Duration {
    Duration::from_secs(7 * 24 * 3600)
}

fn default_load_step() -> Duration {
    Duration::from_secs(5 * 60)
}

fn default_max_gap_share() -> f64 {
    0.05
}

fn default_node_label() -> String {
    "node".to_string()
}

fn default_prometheus_timeout() -> Duration {
    Duration::from_secs(30)
}

/// A quantile of the values over the window (as PromQL's `quantile_over_time` computes it),
/// or their maximum. Written `0.95` or `max`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LoadStatistic {
    Quantile(f64),
    Max,
}

impl Default for LoadStatistic {
    fn default() -> Self {
        LoadStatistic::Quantile(0.95)
    }
}

impl std::fmt::Display for LoadStatistic {
    /// `p95`, `p99.9`, `max`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadStatistic::Max => f.write_str("max"),
            LoadStatistic::Quantile(q) => write!(f, "p{}", (q * 1000.0).round() / 10.0),
        }
    }
}

impl<'de> Deserialize<'de> for LoadStatistic {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StatisticVisitor;
        impl serde::de::Visitor<'_> for StatisticVisitor {
            type Value = LoadStatistic;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a quantile from 0 to 1 such as 0.95, or `max`")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<LoadStatistic, E> {
                Ok(LoadStatistic::Quantile(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<LoadStatistic, E> {
                Ok(LoadStatistic::Quantile(v as f64))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<LoadStatistic, E> {
                Ok(LoadStatistic::Quantile(v as f64))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<LoadStatistic, E> {
                if v == "max" {
                    Ok(LoadStatistic::Max)
                } else {
                    Err(E::custom(format!(
                        "invalid quantile {v:?} (write a fraction such as 0.95, or max)"
                    )))
                }
            }
        }
        deserializer.deserialize_any(StatisticVisitor)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiSpec {
    /// The Kubernetes API endpoint through the virtual IP, e.g. `https://10.0.50.10:6443`.
    pub endpoint: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TalosAccess {
    pub context: String,
    #[serde(default)]
    pub talosconfig: Option<PathBuf>,
    /// Control-plane node addresses, called directly on port 50000.
    pub endpoints: Vec<String>,
    #[serde(default = "default_talos_timeout")]
    pub timeout: Duration,
}

fn default_talos_timeout() -> Duration {
    Duration::from_secs(10)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxmoxAccess {
    pub url: String,
    /// Other hosts' API addresses (same token and TLS trust). `--whole-host` needs one that
    /// is not on the host it shuts down, to wake that host again.
    #[serde(default)]
    pub fallback_urls: Vec<String>,
    /// `USER@REALM!TOKENID`.
    pub token_id: String,
    #[serde(default)]
    pub token_secret_env: Option<String>,
    #[serde(default)]
    pub token_secret_file: Option<PathBuf>,
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    #[serde(default)]
    pub fingerprint: Option<String>,
    #[serde(default)]
    pub insecure_tls: bool,
    #[serde(default)]
    pub vms: VmScope,
    /// Map nodes to VMs by name when a VM has no SMBIOS uuid.
    #[serde(default)]
    pub match_by_name: bool,
    #[serde(default = "default_proxmox_timeout")]
    pub timeout: Duration,
    /// VM configs read at once (over kept-alive connections).
    #[serde(default = "default_proxmox_concurrency")]
    pub concurrency: usize,
    /// What Proxmox cannot tell about each host: the switch and power feed it hangs on
    /// (`hosts: {pve1: {switch: sw-a, power: pdu-1}}`), failure domains beyond the host.
    #[serde(default)]
    pub hosts: std::collections::BTreeMap<String, HostDomains>,
}

/// The failure domains of one Proxmox host the environment file declares.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostDomains {
    #[serde(default)]
    pub switch: Option<String>,
    #[serde(default)]
    pub power: Option<String>,
}

fn default_proxmox_concurrency() -> usize {
    16
}

fn default_proxmox_timeout() -> Duration {
    Duration::from_secs(35)
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmScope {
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub name_pattern: Option<String>,
}

/// The chaos step (gate 4). Refused unless `allowed: true`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChaosSpec {
    #[serde(default)]
    pub allowed: bool,
    /// How often each probe samples.
    #[serde(default = "default_sample_interval")]
    pub sample_interval: Duration,
    /// How long the host stays down before restore, at most.
    #[serde(default = "default_outage")]
    pub outage: Duration,
    /// How long recovery may take after restore.
    #[serde(default = "default_recovery_timeout")]
    pub recovery_timeout: Duration,
    /// How old the newest chaos report may be for `gates check` to count it for gate 4.
    #[serde(default = "default_report_max_age")]
    pub report_max_age: Duration,
    /// Where the run's Lease (`gates-chaos-ENV`) is taken, so one run at a time, anywhere.
    #[serde(default = "default_lease_namespace")]
    pub lease_namespace: String,
    #[serde(default)]
    pub budgets: Budgets,
}

impl Default for ChaosSpec {
    fn default() -> Self {
        ChaosSpec {
            allowed: false,
            sample_interval: default_sample_interval(),
            outage: default_outage(),
            recovery_timeout: default_recovery_timeout(),
            report_max_age: default_report_max_age(),
            lease_namespace: default_lease_namespace(),
            budgets: Budgets::default(),
        }
    }
}

fn default_sample_interval() -> Duration {
    Duration(std::time::Duration::from_millis(500))
}

fn default_outage() -> Duration {
    Duration::from_secs(6 * 60)
}

fn default_recovery_timeout() -> Duration {
    Duration::from_secs(15 * 60)
}

fn default_lease_namespace() -> String {
    "kube-system".to_string()
}

fn default_report_max_age() -> Duration {
    Duration::from_secs(7 * 24 * 3600)
}

/// Downtime each probe may see during a chaos run.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    /// The API through the VIP: Talos moves the VIP within about a minute.
    #[serde(default = "default_api_budget")]
    pub api: Budget,
    /// Each ingress URL: Cilium moves an L2 lease in 10 to 20 s with default timings.
    #[serde(default = "default_ingress_budget")]
    pub ingress: Budget,
    /// Each protected controller must keep a ready replica throughout.
    #[serde(default)]
    pub workloads: Budget,
    /// etcd must keep quorum throughout.
    #[serde(default)]
    pub etcd: Budget,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            api: default_api_budget(),
            ingress: default_ingress_budget(),
            workloads: Budget::default(),
            etcd: Budget::default(),
        }
    }
}

fn default_api_budget() -> Budget {
    Budget {
        longest: Duration::from_secs(60),
        total: Duration::from_secs(90),
    }
}

fn default_ingress_budget() -> Budget {
    Budget {
        longest: Duration::from_secs(25),
        total: Duration::from_secs(40),
    }
}

/// The longest single outage and the sum of all outages allowed; zero means none.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    #[serde(default = "zero")]
    pub longest: Duration,
    #[serde(default = "zero")]
    pub total: Duration,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            longest: zero(),
            total: zero(),
        }
    }
}

fn zero() -> Duration {
    Duration(std::time::Duration::ZERO)
}
