//! Starting and stopping the processes of a real control plane, with readiness waits.
//!
//! Order: etcd (its `/health`), kube-apiserver (`/readyz` with the cluster CA and the admin
//! token), the RBAC objects the identities need, then kube-controller-manager, kube-scheduler
//! and kwok (each its `/healthz`). A component that exits or is not ready in time fails the
//! start with the end of its log.

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gates_lab::pki::{CaKind, CertificateAuthority};

use crate::support::root;

const ETCD_PORT: u16 = 2379;
const ETCD_PEER_PORT: u16 = 2380;
pub const API_PORT: u16 = 6443;
const KCM_PORT: u16 = 10257;
const SCHEDULER_PORT: u16 = 10259;
const KWOK_PORT: u16 = 10247;
/// The per-node kwoks listen from here on, one port per node name the plane has seen: clear
/// of every other component's port (from 10248 they reached the controller-manager's 10257
/// once a plane had served ten node names, and that node's kwok never ran).
const NODE_KWOK_PORTS: u16 = 20000;

/// The Stage objects kwok plays, relative to the repository.
const STAGES: &str = "tools/k8s/kwok-stages.yaml";

/// The annotation kwok manages nodes by: a node without it has no kubelet (its VM is off).
pub const KWOK_MANAGED: (&str, &str) = ("kwok.x-k8s.io/node", "fake");

/// How fast the node-lifecycle controller and kwok react; shortened for node-loss tests.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// kube-controller-manager `--node-monitor-grace-period`.
    pub node_monitor_grace: Duration,
    /// kube-apiserver `--default-{not-ready,unreachable}-toleration-seconds`.
    pub toleration: Duration,
    /// kwok `--node-lease-duration-seconds`.
    pub node_lease: Duration,
    /// How often a Ready node's conditions get a fresh heartbeat (the `node-reports` stage;
    /// 10 s, with up to 11 s of jitter, in `tools/k8s/kwok-stages.yaml`).
    pub node_heartbeat: Duration,
}

impl Default for Timing {
    /// The releases' defaults, as the lab models them.
    fn default() -> Self {
        Timing {
            node_monitor_grace: Duration::from_secs(50),
            toleration: Duration::from_secs(300),
            node_lease: Duration::from_secs(40),
            node_heartbeat: HEARTBEAT_IN_STAGES,
        }
    }
}

/// The `node-reports` delay as `tools/k8s/kwok-stages.yaml` writes it.
const HEARTBEAT_IN_STAGES: Duration = Duration::from_secs(10);
const HEARTBEAT_DELAY_IN_STAGES: &str =
    "durationMilliseconds: 10000\n    jitterDurationMilliseconds: 11000";

/// The Stage file kwok plays: the project's own, or (for a slower heartbeat) a copy in
/// `dir` whose `node-reports` delay is `heartbeat`, with as much jitter again.
fn stages_file(dir: &Path, heartbeat: Duration) -> Result<PathBuf, String> {
    let stages = root().join(STAGES);
    if heartbeat == HEARTBEAT_IN_STAGES {
        return Ok(stages);
    }
    let text =
        std::fs::read_to_string(&stages).map_err(|e| format!("{}: {e}", stages.display()))?;
    if !text.contains(HEARTBEAT_DELAY_IN_STAGES) {
        return Err(format!(
            "{}: the node-reports stage no longer has the delay the launcher replaces ({HEARTBEAT_DELAY_IN_STAGES:?})",
            stages.display()
        ));
    }
    let ms = heartbeat.as_millis();
    let text = text.replace(
        HEARTBEAT_DELAY_IN_STAGES,
        &format!("durationMilliseconds: {ms}\n    jitterDurationMilliseconds: {ms}"),
    );
    let copy = dir.join("kwok-stages.yaml");
    std::fs::write(&copy, text).map_err(|e| format!("{}: {e}", copy.display()))?;
    Ok(copy)
}

/// How nodes get their simulated kubelet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kubelets {
    /// One kwok for every node carrying [`KWOK_MANAGED`].
    Shared,
    /// One kwok per node (`--manage-single-node`), started when the loader creates the node
    /// and killed when its VM goes off: the heartbeat stops with the process that sends it,
    /// as a real kubelet's does, and the node carries nothing of the tests' own.
    PerNode,
}

/// The per-node kwok processes, shared with the task that follows the lab's VMs.
#[derive(Clone)]
pub struct NodeKubelets {
    inner: std::sync::Arc<std::sync::Mutex<NodeKubeletsInner>>,
}

struct NodeKubeletsInner {
    bin: PathBuf,
    dir: PathBuf,
    ip: Ipv4Addr,
    node_lease: Duration,
    stages: PathBuf,
    running: std::collections::BTreeMap<String, Process>,
    ports: std::collections::BTreeMap<String, u16>,
}

impl NodeKubelets {
    /// Start the kubelet of `node` (a no-op when it runs).
    pub fn start(&self, node: &str) -> Result<(), String> {
        let mut inner = self.inner.lock().expect("kubelets lock");
        if inner.running.contains_key(node) {
            return Ok(());
        }
        let next = NODE_KWOK_PORTS + inner.ports.len() as u16;
        let port = *inner.ports.entry(node.to_string()).or_insert(next);
        let log = inner.dir.join("logs").join(format!("kwok-{node}.log"));
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let admin = inner
            .dir
            .join(format!("{}.kubeconfig", Identity::Admin.user()));
        let child = Command::new(inner.bin.join("kwok"))
            .args(kwok_args(
                &admin,
                &inner.stages,
                inner.ip,
                port,
                inner.node_lease,
                &format!("--manage-single-node={node}"),
            ))
            .current_dir(&inner.dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start kwok for {node}: {e}"))?;
        inner.running.insert(
            node.to_string(),
            Process {
                name: "kwok",
                child,
                log,
            },
        );
        Ok(())
    }

    /// Kill the kubelet of `node`, as a power loss does.
    pub fn stop(&self, node: &str) {
        let mut inner = self.inner.lock().expect("kubelets lock");
        if let Some(mut p) = inner.running.remove(node) {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
    }

    /// Kill every per-node kubelet.
    pub fn stop_all(&self) {
        let names: Vec<String> = {
            let inner = self.inner.lock().expect("kubelets lock");
            inner.running.keys().cloned().collect()
        };
        for name in names {
            self.stop(&name);
        }
    }
}

fn kwok_args(
    admin: &Path,
    stages: &Path,
    ip: Ipv4Addr,
    port: u16,
    node_lease: Duration,
    manage: &str,
) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", admin.display()),
        // What kwok does for a kubelet: the project's Stage objects (kwok has none built in).
        format!("--config={}", stages.display()),
        manage.to_string(),
        // Always an address on the plane's loopback IP: without one, kwok listens on all.
        format!("--server-address={ip}:{port}"),
        format!("--node-ip={ip}"),
        "--cidr=10.244.0.0/16".into(),
        format!(
            "--node-lease-duration-seconds={}",
            node_lease.as_secs().max(1)
        ),
    ]
}

/// Who a kubeconfig context acts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// `system:masters`: the controllers, kwok and the loader.
    Admin,
    /// Bound to `deploy/rbac/gates-reader.yaml`.
    Reader,
    /// Bound to the reader role without (core) `nodes`.
    Narrow,
}

impl Identity {
    pub fn user(self) -> &'static str {
        match self {
            Identity::Admin => "gates-admin",
            Identity::Reader => "gates-reader",
            Identity::Narrow => "gates-narrow",
        }
    }
}

struct Process {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

/// A running control plane; stopped (children killed) on drop. Its directory is removed
/// after a passing test and kept, with the logs, when the test panicked.
pub struct ControlPlane {
    pub ip: Ipv4Addr,
    pub dir: PathBuf,
    pub bin: PathBuf,
    pub ca_pem: String,
    tokens: [(Identity, String); 3],
    processes: Vec<Process>,
    pub kubelets: Kubelets,
    pub node_kubelets: NodeKubelets,
    /// Keep the directory and logs on drop (a failed start).
    keep: bool,
    /// The subnet held for this plane, so no lab (or a second test run) serves on it.
    _claim: gates_lab::addr::Claim,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("ip", &self.ip)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl ControlPlane {
    /// Start every component on `127.<S>.9.1`, S the first free subnet from `subnet` on
    /// (claimed as a lab claims one), state under `target/k8s-run/<S>`.
    pub async fn start(
        bin: &Path,
        subnet: u8,
        timing: Timing,
        kubelets: Kubelets,
    ) -> Result<ControlPlane, String> {
        let claim = gates_lab::addr::claim(subnet, gates_lab::addr::SubnetChoice::FirstFree)
            .map_err(|(addr, e)| format!("no free subnet from 127.{subnet} on ({addr}: {e})"))?;
        let subnet = claim.subnet;
        let ip = Ipv4Addr::new(127, subnet, 9, 1);
        let dir = root().join("target/k8s-run").join(subnet.to_string());
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("logs")).map_err(|e| format!("{}: {e}", dir.display()))?;
        let ca = CertificateAuthority::new(CaKind::Kubernetes).map_err(|e| e.to_string())?;
        let leaf = ca
            .server_cert(
                &[ip.into()],
                &[
                    "kubernetes",
                    "kubernetes.default",
                    "kubernetes.default.svc",
                    "localhost",
                ],
            )
            .map_err(|e| e.to_string())?;
        let service_accounts = ca
            .server_cert(&[ip.into()], &["service-accounts"])
            .map_err(|e| e.to_string())?;
        let secret = || gates_lab::ids::secret_hex(24).map_err(|_| "no randomness".to_string());
        let tokens = [
            (Identity::Admin, secret()?),
            (Identity::Reader, secret()?),
            (Identity::Narrow, secret()?),
        ];
        let stages = stages_file(&dir, timing.node_heartbeat)?;
        let mut plane = ControlPlane {
            ip,
            dir: dir.clone(),
            bin: bin.to_path_buf(),
            ca_pem: ca.cert_pem(),
            tokens,
            processes: Vec::new(),
            kubelets,
            keep: false,
            _claim: claim,
            node_kubelets: NodeKubelets {
                inner: std::sync::Arc::new(std::sync::Mutex::new(NodeKubeletsInner {
                    bin: bin.to_path_buf(),
                    dir: dir.clone(),
                    ip,
                    node_lease: timing.node_lease,
                    stages: stages.clone(),
                    running: Default::default(),
                    ports: Default::default(),
                })),
            },
        };
        let mut token_file = String::new();
        for (identity, token) in &plane.tokens {
            let groups = match identity {
                Identity::Admin => "system:masters",
                Identity::Reader | Identity::Narrow => "gates-users",
            };
            let _ = writeln!(token_file, "{token},{0},{0},\"{groups}\"", identity.user());
        }
        plane.write("ca.pem", &plane.ca_pem.clone())?;
        plane.write("apiserver.pem", &leaf.cert_pem())?;
        plane.write("apiserver-key.pem", &leaf.key_pem())?;
        plane.write("sa-key.pem", &service_accounts.key_pem())?;
        // kube-apiserver verifies tokens with public keys only; the certificate carries it.
        plane.write("sa-pub.pem", &service_accounts.cert_pem())?;
        plane.write("tokens.csv", &token_file)?;
        for identity in [Identity::Admin, Identity::Reader, Identity::Narrow] {
            let text = plane.kubeconfig_text(identity, "real");
            plane.write(&format!("{}.kubeconfig", identity.user()), &text)?;
        }

        let started = async {
            plane.start_etcd().await?;
            plane.start_apiserver(timing).await?;
            super::load::apply_rbac(&plane).await?;
            plane.start_controllers(timing).await
        }
        .await;
        match started {
            Ok(()) => Ok(plane),
            Err(err) => {
                plane.keep = true;
                Err(format!(
                    "{err}\n(logs kept in {})",
                    plane.dir.join("logs").display()
                ))
            }
        }
    }

    /// Stop kube-apiserver and start it again (etcd and the controllers keep running): its
    /// watch cache starts over from etcd, as after a rollout of the API server.
    pub async fn restart_apiserver(&mut self, timing: Timing) -> Result<(), String> {
        if let Some(at) = self
            .processes
            .iter()
            .position(|p| p.name == "kube-apiserver")
        {
            let mut p = self.processes.remove(at);
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
        self.start_apiserver(timing).await
    }

    /// Write a key of gates' own straight to etcd (through its JSON gateway) and compact etcd
    /// to the revision that makes: every revision a client saw before is gone, as after the
    /// API server's periodic compaction when a watcher fell behind.
    pub async fn compact_etcd(&self) -> Result<i64, String> {
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let base = format!("http://{}:{ETCD_PORT}/v3", self.ip);
        let http = plain_client()?;
        let put: serde_json::Value = http
            .post(format!("{base}/kv/put"))
            .json(&serde_json::json!({"key": b64("/gates-test/compaction"), "value": b64("now")}))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        let revision: i64 = put["header"]["revision"]
            .as_str()
            .and_then(|r| r.parse().ok())
            .ok_or_else(|| format!("etcd put answered {put}"))?;
        let compacted = http
            .post(format!("{base}/kv/compaction"))
            .json(&serde_json::json!({"revision": revision.to_string(), "physical": true}))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !compacted.status().is_success() {
            return Err(format!("etcd compaction answered {}", compacted.status()));
        }
        Ok(revision)
    }

    pub fn url(&self) -> String {
        format!("https://{}:{API_PORT}", self.ip)
    }

    pub fn token(&self, identity: Identity) -> &str {
        &self
            .tokens
            .iter()
            .find(|(i, _)| *i == identity)
            .expect("every identity has a token")
            .1
    }

    /// The kubeconfig file of one identity (context `real`).
    pub fn kubeconfig(&self, identity: Identity) -> PathBuf {
        self.dir.join(format!("{}.kubeconfig", identity.user()))
    }

    /// A kubeconfig for `identity` whose only context is called `context`.
    pub fn kubeconfig_text(&self, identity: Identity, context: &str) -> String {
        use base64::Engine;
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {context}\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    token: {token}\ncontexts:\n- name: {context}\n  context:\n    cluster: {context}\n    user: {user}\ncurrent-context: {context}\n",
            self.url(),
            user = identity.user(),
            token = self.token(identity),
        )
    }

    fn write(&self, name: &str, text: &str) -> Result<(), String> {
        let path = self.dir.join(name);
        gates_lab::files::write_private(&path, text).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn spawn(&mut self, name: &'static str, args: Vec<String>) -> Result<(), String> {
        let log = self.dir.join("logs").join(format!("{name}.log"));
        let out = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(self.bin.join(name))
            .args(&args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {name}: {e}"))?;
        self.processes.push(Process { name, child, log });
        Ok(())
    }

    async fn start_etcd(&mut self) -> Result<(), String> {
        let ip = self.ip;
        let client = format!("http://{ip}:{ETCD_PORT}");
        let peer = format!("http://{ip}:{ETCD_PEER_PORT}");
        let args = vec![
            "--name=gates".into(),
            format!("--data-dir={}", self.dir.join("etcd").display()),
            format!("--listen-client-urls={client}"),
            format!("--advertise-client-urls={client}"),
            format!("--listen-peer-urls={peer}"),
            format!("--initial-advertise-peer-urls={peer}"),
            format!("--initial-cluster=gates={peer}"),
            "--unsafe-no-fsync".into(),
            "--log-level=warn".into(),
        ];
        self.spawn("etcd", args)?;
        let http = plain_client()?;
        self.wait("etcd", Duration::from_secs(30), || {
            let http = http.clone();
            let url = format!("{client}/health");
            async move {
                let body = http.get(url).send().await.ok()?.text().await.ok()?;
                body.contains("\"true\"").then_some(())
            }
        })
        .await
    }

    async fn start_apiserver(&mut self, timing: Timing) -> Result<(), String> {
        let ip = self.ip;
        let dir = self.dir.display().to_string();
        let toleration = timing.toleration.as_secs().to_string();
        let args = vec![
            format!("--etcd-servers=http://{ip}:{ETCD_PORT}"),
            format!("--bind-address={ip}"),
            format!("--advertise-address={ip}"),
            format!("--secure-port={API_PORT}"),
            format!("--cert-dir={dir}/apiserver-certs"),
            format!("--tls-cert-file={dir}/apiserver.pem"),
            format!("--tls-private-key-file={dir}/apiserver-key.pem"),
            "--service-cluster-ip-range=10.96.0.0/16".into(),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            format!("--service-account-key-file={dir}/sa-pub.pem"),
            format!("--service-account-signing-key-file={dir}/sa-key.pem"),
            "--authorization-mode=RBAC".into(),
            format!("--token-auth-file={dir}/tokens.csv"),
            "--endpoint-reconciler-type=none".into(),
            // Pods are created as the lab renders them; no kubelet mounts a token.
            "--disable-admission-plugins=ServiceAccount".into(),
            format!("--default-not-ready-toleration-seconds={toleration}"),
            format!("--default-unreachable-toleration-seconds={toleration}"),
            "--enable-priority-and-fairness=false".into(),
            "--profiling=false".into(),
        ];
        self.spawn("kube-apiserver", args)?;
        let http = self.api_client()?;
        let url = format!("{}/readyz", self.url());
        let token = self.token(Identity::Admin).to_string();
        self.wait("kube-apiserver", Duration::from_secs(90), || {
            let request = http.get(&url).bearer_auth(&token);
            async move {
                request
                    .send()
                    .await
                    .ok()?
                    .status()
                    .is_success()
                    .then_some(())
            }
        })
        .await
    }

    async fn start_controllers(&mut self, timing: Timing) -> Result<(), String> {
        let ip = self.ip;
        let dir = self.dir.display().to_string();
        let admin = self.kubeconfig(Identity::Admin).display().to_string();
        let grace = format!("{}s", timing.node_monitor_grace.as_secs().max(1));
        self.spawn(
            "kube-controller-manager",
            vec![
                format!("--kubeconfig={admin}"),
                format!("--authentication-kubeconfig={admin}"),
                format!("--authorization-kubeconfig={admin}"),
                "--leader-elect=false".into(),
                format!("--bind-address={ip}"),
                format!("--secure-port={KCM_PORT}"),
                format!("--cert-dir={dir}/kcm-certs"),
                format!("--service-account-private-key-file={dir}/sa-key.pem"),
                format!("--root-ca-file={dir}/ca.pem"),
                "--node-monitor-period=1s".into(),
                format!("--node-monitor-grace-period={grace}"),
                "--profiling=false".into(),
            ],
        )?;
        self.spawn(
            "kube-scheduler",
            vec![
                format!("--kubeconfig={admin}"),
                format!("--authentication-kubeconfig={admin}"),
                format!("--authorization-kubeconfig={admin}"),
                "--leader-elect=false".into(),
                format!("--bind-address={ip}"),
                format!("--secure-port={SCHEDULER_PORT}"),
                format!("--cert-dir={dir}/scheduler-certs"),
                "--profiling=false".into(),
            ],
        )?;
        let admin = self.kubeconfig(Identity::Admin);
        // The stages `start` chose (and wrote, for a slower heartbeat) for every kwok.
        let stages = self
            .node_kubelets
            .inner
            .lock()
            .expect("kubelets lock")
            .stages
            .clone();
        self.spawn(
            "kwok",
            kwok_args(
                &admin,
                &stages,
                ip,
                KWOK_PORT,
                timing.node_lease,
                &format!(
                    "--manage-nodes-with-annotation-selector={}={}",
                    KWOK_MANAGED.0, KWOK_MANAGED.1
                ),
            ),
        )?;
        let insecure = insecure_client()?;
        for (name, url) in [
            (
                "kube-controller-manager",
                format!("https://{ip}:{KCM_PORT}/healthz"),
            ),
            (
                "kube-scheduler",
                format!("https://{ip}:{SCHEDULER_PORT}/healthz"),
            ),
            ("kwok", format!("http://{ip}:{KWOK_PORT}/healthz")),
        ] {
            let http = insecure.clone();
            self.wait(name, Duration::from_secs(60), || {
                let request = http.get(&url);
                async move {
                    request
                        .send()
                        .await
                        .ok()?
                        .status()
                        .is_success()
                        .then_some(())
                }
            })
            .await?;
        }
        Ok(())
    }

    /// Poll `ready` every 200 ms until it answers, the component exits, or `limit` passes.
    async fn wait<F, Fut>(&mut self, name: &str, limit: Duration, ready: F) -> Result<(), String>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Option<()>>,
    {
        let start = Instant::now();
        loop {
            if ready().await.is_some() {
                return Ok(());
            }
            let process = self
                .processes
                .iter_mut()
                .find(|p| p.name == name)
                .expect("waiting on a started component");
            if let Ok(Some(status)) = process.child.try_wait() {
                return Err(format!(
                    "{name} exited ({status}) before it was ready; its log ends:\n{}",
                    tail(&process.log)
                ));
            }
            if start.elapsed() > limit {
                return Err(format!(
                    "{name} was not ready after {limit:?}; its log ends:\n{}",
                    tail(&process.log)
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// An HTTPS client that trusts only this plane's CA.
    pub fn api_client(&self) -> Result<reqwest::Client, String> {
        let ca =
            reqwest::Certificate::from_pem(self.ca_pem.as_bytes()).map_err(|e| e.to_string())?;
        reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(ca)
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| e.to_string())
    }

    /// A kube-rs client acting as `identity`.
    pub async fn client(&self, identity: Identity) -> Result<kube::Client, String> {
        let kubeconfig = kube::config::Kubeconfig::read_from(self.kubeconfig(identity))
            .map_err(|e| e.to_string())?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .map_err(|e| e.to_string())?;
        kube::Client::try_from(config).map_err(|e| e.to_string())
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.node_kubelets.stop_all();
        for p in self.processes.iter_mut().rev() {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
        if self.keep || std::thread::panicking() {
            eprintln!(
                "the real control plane's files and logs are kept in {}",
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn plain_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| e.to_string())
}

/// For the controllers' `/healthz` on loopback, whose certificates they make up at start.
fn insecure_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .use_rustls_tls()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| e.to_string())
}

/// The last 40 lines of a log.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

#[cfg(test)]
mod stages_tests {
    #[test]
    fn the_default_heartbeat_plays_the_projects_own_stages() {
        let dir = tempfile::tempdir().unwrap();
        let file = super::stages_file(dir.path(), super::Timing::default().node_heartbeat).unwrap();
        assert_eq!(file, super::root().join(super::STAGES));
    }

    #[test]
    fn a_slower_heartbeat_plays_a_copy_with_that_delay_and_nothing_else_changed() {
        let dir = tempfile::tempdir().unwrap();
        let file = super::stages_file(dir.path(), std::time::Duration::from_secs(1800)).unwrap();
        assert_eq!(file, dir.path().join("kwok-stages.yaml"));
        let copy = std::fs::read_to_string(&file).unwrap();
        let original = std::fs::read_to_string(super::root().join(super::STAGES)).unwrap();
        assert!(
            copy.contains("durationMilliseconds: 1800000\n    jitterDurationMilliseconds: 1800000")
        );
        assert!(!copy.contains("durationMilliseconds: 10000"));
        assert_eq!(
            copy.replace("1800000", "X"),
            original.replace("10000", "X").replace("11000", "X")
        );
    }
}
