//! Starting and stopping a whole lab: the world, its driver, every server, and the files
//! clients need. Used by the `gates-lab` binary, by tests, and by `gates demo`/`gates lab`.

use crate::addr::{
    APID_PORT, INGRESS_HTTP_PORT, INGRESS_HTTPS_PORT, KUBE_PORT, PROXMOX_PORT, Plan, SubnetChoice,
};
use crate::clock::SimClock;
use crate::files;
use crate::kube::{KubeApi, Tokens};
use crate::net::{self, serve_switched};
use crate::pki::tls::{ServerTls, server_config};
use crate::pki::{CaKind, CertificateAuthority};
use crate::power::Power;
use crate::reqlog::RequestLog;
use crate::scenario::Scenario;
use crate::truth::GroundTruth;
use crate::world::{Shared, World};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::task::JoinHandle;

#[derive(Debug, Clone)]
pub struct LabOptions {
    /// A built-in scenario name or a path to a scenario file.
    pub scenario: String,
    /// Instead of `scenario`, generate a scale scenario with this many nodes.
    pub generate_nodes: Option<usize>,
    /// With `generate_nodes`: pods per worker node (10 when `None`).
    pub pods_per_node: Option<usize>,
    /// The subnet byte S of 127.S.x.y asked for.
    pub subnet: u8,
    /// Whether the lab moves to the next free subnet when `subnet` is taken ([`Lab::plan`]
    /// says where it went).
    pub subnet_choice: SubnetChoice,
    /// Simulated seconds per real second.
    pub speed: f64,
    /// Where the kubeconfig, talosconfig, token and ground truth go.
    pub state_dir: PathBuf,
    /// Where environment files go (`None`: not written).
    pub env_dir: Option<PathBuf>,
}

impl Default for LabOptions {
    fn default() -> Self {
        LabOptions {
            scenario: "adr-007".into(),
            generate_nodes: None,
            pods_per_node: None,
            subnet: crate::addr::DEFAULT_SUBNET,
            subnet_choice: SubnetChoice::FirstFree,
            speed: 1.0,
            state_dir: PathBuf::from("target/lab"),
            env_dir: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error(transparent)]
    Scenario(#[from] crate::scenario::ScenarioError),
    #[error(transparent)]
    Build(#[from] crate::world::BuildError),
    #[error("certificates: {0}")]
    Pki(String),
    #[error("cannot listen on {0}: {1}")]
    Listen(SocketAddr, std::io::Error),
    #[error("cannot write {0}: {1}")]
    Write(PathBuf, std::io::Error),
    #[error("subnet must be 1..=254")]
    Subnet,
    #[error(
        "127.{0}.x.y is in use (another lab, or a test run, serves there): choose another --subnet, or leave it out to take the first free one"
    )]
    SubnetTaken(u8),
    #[error("no free subnet from 127.{0}.x.y on: every lab subnet is in use")]
    NoFreeSubnet(u8),
}

/// Paths of the files a lab wrote.
#[derive(Debug, Clone)]
pub struct LabFiles {
    pub kubeconfig: PathBuf,
    pub talosconfig: PathBuf,
    pub proxmox_token: PathBuf,
    /// Secret of the read-only Proxmox token [`PROXMOX_AUDIT_TOKEN_ID`].
    pub proxmox_audit_token: PathBuf,
    pub proxmox_ca: PathBuf,
    pub kube_ca: PathBuf,
    pub ground_truth: PathBuf,
    pub env_files: Vec<PathBuf>,
}

/// A running lab.
pub struct Lab {
    pub shared: Arc<Shared>,
    pub plan: Plan,
    pub log: RequestLog,
    pub files: LabFiles,
    /// The Proxmox API every host serves (its fault switches: `stall_for`, ...).
    pub proxmox: Arc<crate::proxmox::ProxmoxApi>,
    /// Per environment, in scenario order.
    tokens: Vec<Tokens>,
    /// Per environment, in scenario order.
    kube_ca_pems: Vec<String>,
    tasks: Tasks,
    /// Kept alive: dropping a server handle of the Proxmox/Talos servers stops it.
    handles: Vec<Box<dyn std::any::Any + Send>>,
}

impl std::fmt::Debug for Lab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lab")
            .field("plan", &self.plan)
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl Lab {
    /// Build the world and start every server; returns once all of them listen. The subnet
    /// is claimed first (its control address bound); with [`SubnetChoice::FirstFree`] a taken
    /// subnet, or one where any of the lab's addresses turns out to be taken, moves the lab
    /// to the next free one.
    pub async fn start(opts: LabOptions) -> Result<Lab, LabError> {
        if opts.subnet == 0 || opts.subnet == 255 {
            return Err(LabError::Subnet);
        }
        let mut from = opts.subnet;
        for _ in 0..254 {
            let claim = match crate::addr::claim(from, opts.subnet_choice) {
                Ok(claim) => claim,
                Err((_, e)) if e.kind() == std::io::ErrorKind::AddrInUse => {
                    return Err(match opts.subnet_choice {
                        SubnetChoice::Exactly => LabError::SubnetTaken(opts.subnet),
                        SubnetChoice::FirstFree => LabError::NoFreeSubnet(opts.subnet),
                    });
                }
                Err((addr, e)) => return Err(LabError::Listen(addr, e)),
            };
            let subnet = claim.subnet;
            match Lab::start_claimed(&opts, claim).await {
                Err(LabError::Listen(_, e))
                    if e.kind() == std::io::ErrorKind::AddrInUse
                        && opts.subnet_choice == SubnetChoice::FirstFree =>
                {
                    tracing::info!(subnet, "an address of 127.{subnet}.x.y is taken; moving on");
                    from = if subnet >= 254 { 1 } else { subnet + 1 };
                }
                Err(LabError::Listen(_, e)) if e.kind() == std::io::ErrorKind::AddrInUse => {
                    return Err(LabError::SubnetTaken(subnet));
                }
                other => return other,
            }
        }
        Err(LabError::NoFreeSubnet(opts.subnet))
    }

    /// Build the world on a claimed subnet and start everything: the world's driver, each
    /// environment's Kubernetes API (and ingress), Proxmox on every host, Talos apid on every
    /// addressed node, the control server; then write the files clients need.
    async fn start_claimed(opts: &LabOptions, claim: crate::addr::Claim) -> Result<Lab, LabError> {
        let scenario = match opts.generate_nodes {
            Some(n) => Scenario::generated(n, opts.pods_per_node.unwrap_or(10)),
            None => Scenario::load(&opts.scenario)?,
        };
        let plan = Plan::new(claim.subnet);
        let down = scenario.unreachable;
        let clock = SimClock::new(opts.speed);
        let world = World::build(&scenario, plan, clock)?;
        let shared = Shared::new(world);
        let log = RequestLog::new();
        // Aborted on drop, so a start that fails half-way leaves nothing listening.
        let mut tasks = Tasks(Vec::new());
        tasks.push(tokio::spawn(shared.clone().drive()));

        let (envs, nodes): (Vec<EnvListen>, Vec<NodeListen>) = shared.read(|w| {
            (
                w.envs
                    .iter()
                    .map(|e| {
                        (
                            e.name().to_string(),
                            e.nodes.clone(),
                            e.spec.ingress.as_ref().map(|i| i.hosts.clone()),
                        )
                    })
                    .collect(),
                w.nodes
                    .iter()
                    .map(|n| (n.index, n.is_control_plane(), n.addressed))
                    .collect(),
            )
        });
        let servers = Servers {
            reach: shared.subscribe_reachability(),
            shared: shared.clone(),
            log: log.clone(),
            plan,
            down,
            envs,
            nodes,
        };
        let (tokens, kube_ca_pems) = servers.serve_kube(&mut tasks).await?;
        let mut handles: Vec<Box<dyn std::any::Any + Send>> = Vec::new();
        let backend = Arc::new(crate::world::backends::LabBackend {
            shared: shared.clone(),
        });
        let recorder = log.recorder();
        let pve = servers
            .serve_proxmox(opts.speed, &backend, &recorder, &mut handles)
            .await?;
        let talosconfig = servers
            .serve_talos(&backend, &recorder, &mut handles)
            .await?;

        let control = plan.control_addr();
        let (server, _always_tx) = net::serve_claimed(
            claim.listener,
            crate::control::handler(shared.clone(), log.clone()),
        )
        .map_err(|e| LabError::Listen(control, e))?;
        tasks.push(server);
        // The sender must outlive the listener; park it in a task that ends with the lab.
        tasks.push(tokio::spawn(async move {
            let _keep = _always_tx;
            std::future::pending::<()>().await;
        }));

        let state_dir = absolute(&opts.state_dir);
        keep_ground_truth_current(&shared, state_dir.join("ground-truth.json"), &mut tasks);
        let mut lab = Lab {
            shared,
            plan,
            log,
            files: lab_files(&state_dir),
            proxmox: pve.api,
            tokens,
            kube_ca_pems,
            tasks,
            handles,
        };
        let w = |p: &PathBuf, s: &str| {
            files::write_private(p, s).map_err(|e| LabError::Write(p.clone(), e))
        };
        w(&lab.files.talosconfig, &talosconfig)?;
        w(&lab.files.proxmox_token, &format!("{}\n", pve.secret))?;
        w(&lab.files.proxmox_ca, &pve.ca.cert_pem())?;
        w(
            &lab.files.proxmox_audit_token,
            &format!("{}\n", pve.audit_secret),
        )?;
        lab.write_files(opts.env_dir.as_deref().map(absolute))?;
        Ok(lab)
    }

    fn write_files(&mut self, env_dir: Option<PathBuf>) -> Result<(), LabError> {
        let w = |p: &PathBuf, s: &str| {
            files::write_private(p, s).map_err(|e| LabError::Write(p.clone(), e))
        };
        let credentials: Vec<files::KubeCredentials> = self
            .tokens
            .iter()
            .zip(&self.kube_ca_pems)
            .map(|(t, ca)| files::KubeCredentials {
                ca_pem: ca,
                admin: &t.admin,
                read_only: &t.read_only,
            })
            .collect();
        let kubeconfig = self
            .shared
            .read(|world| files::kubeconfig(world, self.plan, &credentials));
        w(&self.files.kubeconfig, &kubeconfig)?;
        w(&self.files.kube_ca, self.kube_ca_pem())?;
        if let Some(dir) = env_dir {
            let paths = files::EnvFilePaths {
                kubeconfig: self.files.kubeconfig.clone(),
                talosconfig: self.files.talosconfig.clone(),
                proxmox_token: self.files.proxmox_token.clone(),
                proxmox_ca: self.files.proxmox_ca.clone(),
            };
            let docs: Vec<(String, String)> = self.shared.read(|world| {
                (0..world.envs.len())
                    .map(|k| {
                        (
                            world.envs[k].name().to_string(),
                            files::env_file(world, self.plan, k, &paths, PROXMOX_TOKEN_ID),
                        )
                    })
                    .collect()
            });
            // Files an earlier lab wrote for environments this scenario does not have would
            // point at servers that are not running: remove them (only files we wrote).
            let current: Vec<String> = docs.iter().map(|(n, _)| format!("{n}.yaml")).collect();
            if let Ok(entries) = std::fs::read_dir(&dir) {
                for entry in entries.flatten() {
                    let fname = entry.file_name().to_string_lossy().to_string();
                    if !fname.ends_with(".yaml") || current.contains(&fname) {
                        continue;
                    }
                    let ours = std::fs::read_to_string(entry.path())
                        .is_ok_and(|t| t.starts_with(files::ENV_FILE_MARKER));
                    if ours {
                        let _ = std::fs::remove_file(entry.path());
                    }
                }
            }
            for (name, doc) in docs {
                let p = dir.join(format!("{name}.yaml"));
                w(&p, &doc)?;
                self.files.env_files.push(p);
            }
        }
        Ok(())
    }

    /// The Kubernetes API VIP of environment `k` (0-based).
    pub fn api_url(&self, k: usize) -> String {
        format!("https://{}:{KUBE_PORT}", self.plan.vip_ip(k))
    }

    /// The Kubernetes API on node `j`'s own address (control planes only answer).
    pub fn node_api_url(&self, j: usize) -> String {
        format!("https://{}:{KUBE_PORT}", self.plan.node_ip(j))
    }

    /// The ingress address of environment `k`, plain HTTP.
    pub fn ingress_url(&self, k: usize) -> String {
        format!("http://{}:{INGRESS_HTTP_PORT}/", self.plan.ingress_ip(k))
    }

    /// The Proxmox VE API of host `i` (0-based).
    pub fn proxmox_url(&self, i: usize) -> String {
        format!("https://{}:{PROXMOX_PORT}", self.plan.host_ip(i))
    }

    /// Talos apid of node `j` (0-based).
    pub fn apid_addr(&self, j: usize) -> SocketAddr {
        SocketAddr::from((self.plan.node_ip(j), APID_PORT))
    }

    /// The control endpoint (GET /events, /requests, /health).
    pub fn control_url(&self) -> String {
        format!("http://{}", self.plan.control_addr())
    }

    /// The bearer token with full rights on the first environment (for tests; never print it).
    pub fn admin_token(&self) -> &str {
        self.admin_token_of(0)
    }

    /// The read-only bearer token of the first environment.
    pub fn read_only_token(&self) -> &str {
        self.read_only_token_of(0)
    }

    /// The Kubernetes CA of the first environment.
    pub fn kube_ca_pem(&self) -> &str {
        self.kube_ca_pem_of(0)
    }

    /// The admin bearer token of environment `k` (empty when there is no such environment).
    pub fn admin_token_of(&self, k: usize) -> &str {
        self.tokens.get(k).map(|t| t.admin.as_str()).unwrap_or("")
    }

    /// The read-only bearer token of environment `k`.
    pub fn read_only_token_of(&self, k: usize) -> &str {
        self.tokens
            .get(k)
            .map(|t| t.read_only.as_str())
            .unwrap_or("")
    }

    /// The Kubernetes CA of environment `k` (PEM).
    pub fn kube_ca_pem_of(&self, k: usize) -> &str {
        self.kube_ca_pems.get(k).map(String::as_str).unwrap_or("")
    }

    pub fn ground_truth(&self) -> GroundTruth {
        self.shared.read(|w| w.truth.clone())
    }

    /// Write the ground truth JSON into the state dir.
    pub fn save_ground_truth(&self) -> Result<(), LabError> {
        let text = serde_json::to_string_pretty(&self.ground_truth()).unwrap_or_default();
        files::write_private(&self.files.ground_truth, &text)
            .map_err(|e| LabError::Write(self.files.ground_truth.clone(), e))
    }

    /// Keep a server handle (from the Proxmox or Talos servers) alive as long as the lab.
    pub fn keep(&mut self, handle: Box<dyn std::any::Any + Send>) {
        self.handles.push(handle);
    }

    /// Take every address down, stop all tasks and save the ground truth.
    pub async fn stop(mut self) {
        self.shared.shutdown();
        let _ = self.save_ground_truth();
        // Give listeners a moment to see the shutdown and close their sockets.
        tokio::task::yield_now().await;
        for t in self.tasks.0.drain(..) {
            t.abort();
            let _ = t.await;
        }
        self.handles.clear();
    }
}

/// A certificate that could not be made, as the lab reports it.
fn pki_error(e: crate::pki::PkiError) -> LabError {
    LabError::Pki(e.to_string())
}

/// The system gave no randomness for a secret.
fn no_randomness(_: ring::error::Unspecified) -> LabError {
    LabError::Pki("no system randomness".into())
}

/// Where the lab's files go in the state directory.
fn lab_files(state_dir: &std::path::Path) -> LabFiles {
    LabFiles {
        kubeconfig: state_dir.join("kubeconfig"),
        talosconfig: state_dir.join("talosconfig"),
        proxmox_token: state_dir.join("proxmox-token"),
        proxmox_audit_token: state_dir.join("proxmox-audit-token"),
        proxmox_ca: state_dir.join("proxmox-ca.pem"),
        kube_ca: state_dir.join("kube-ca.pem"),
        ground_truth: state_dir.join("ground-truth.json"),
        env_files: Vec::new(),
    }
}

/// Keep the ground-truth file current while the lab runs (once a real second, when events
/// were added).
fn keep_ground_truth_current(shared: &Arc<Shared>, path: PathBuf, tasks: &mut Tasks) {
    let shared = shared.clone();
    tasks.push(tokio::spawn(async move {
        let mut written = usize::MAX;
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        loop {
            tick.tick().await;
            let (n, text) = shared.read(|w| {
                (
                    w.truth.events.len(),
                    serde_json::to_string_pretty(&w.truth).unwrap_or_default(),
                )
            });
            if n != written && files::write_private(&path, &text).is_ok() {
                written = n;
            }
        }
    }));
}

/// Proxmox VE as started: its API (shared by every host), its CA, and the two tokens'
/// secrets.
struct ProxmoxServed {
    api: Arc<crate::proxmox::ProxmoxApi>,
    ca: CertificateAuthority,
    secret: String,
    audit_secret: String,
}

/// What starting the servers needs: the world and request log, the address plan, the
/// reachability each address follows and how it behaves while unreachable, and the
/// environments and nodes to serve.
struct Servers {
    shared: Arc<Shared>,
    log: RequestLog,
    plan: Plan,
    reach: tokio::sync::watch::Receiver<crate::world::Reachability>,
    down: crate::power::DownMode,
    envs: Vec<EnvListen>,
    nodes: Vec<NodeListen>,
}

impl Servers {
    /// Whether node `j` serves the Kubernetes API on its own address (an addressed control
    /// plane).
    fn serves_api(&self, j: usize) -> bool {
        self.nodes[j].1 && self.nodes[j].2
    }

    /// Each environment's Kubernetes API (and ingress): its tokens and CA certificate, in
    /// scenario order. Each environment is its own cluster: its own Kubernetes CA and
    /// tokens, and (in `serve_talos`) its own Talos CA and client certificate, as real
    /// clusters never share them.
    async fn serve_kube(&self, tasks: &mut Tasks) -> Result<(Vec<Tokens>, Vec<String>), LabError> {
        let mut tokens = Vec::with_capacity(self.envs.len());
        let mut kube_ca_pems = Vec::with_capacity(self.envs.len());
        for k in 0..self.envs.len() {
            let (env_tokens, pem) = self.serve_kube_env(k, tasks).await?;
            kube_ca_pems.push(pem);
            tokens.push(env_tokens);
        }
        Ok((tokens, kube_ca_pems))
    }

    /// Environment `k`'s API server on each addressed control plane and on the VIP, with a
    /// certificate for all of them, and its ingress if it has one.
    async fn serve_kube_env(
        &self,
        k: usize,
        tasks: &mut Tasks,
    ) -> Result<(Tokens, String), LabError> {
        let plan = self.plan;
        let (name, env_nodes, ingress_hosts) = &self.envs[k];
        let env_tokens = Tokens {
            admin: crate::ids::secret_hex(24).map_err(no_randomness)?,
            read_only: crate::ids::secret_hex(24).map_err(no_randomness)?,
        };
        let kube_ca = CertificateAuthority::new(CaKind::Kubernetes).map_err(pki_error)?;
        let mut ips: Vec<IpAddr> = vec![IpAddr::V4(plan.vip_ip(k))];
        ips.extend(
            env_nodes
                .iter()
                .filter(|&&j| self.serves_api(j))
                .map(|&j| IpAddr::V4(plan.node_ip(j))),
        );
        ips.push(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
        let leaf = kube_ca
            .server_cert(
                &ips,
                &[
                    "kubernetes",
                    "kubernetes.default",
                    "kubernetes.default.svc",
                    "kubernetes.default.svc.cluster.local",
                    "localhost",
                ],
            )
            .map_err(pki_error)?;
        let tls = server_config(&ServerTls::from_leaf(&leaf), &[b"h2", b"http/1.1"])
            .map_err(|e| LabError::Pki(e.to_string()))?;
        let api = Arc::new(KubeApi {
            shared: self.shared.clone(),
            env: k,
            tokens: env_tokens.clone(),
            log: self.log.clone(),
        });
        let handler = api.handler();
        for &j in env_nodes.iter().filter(|&&j| self.serves_api(j)) {
            let up = net::follow(self.reach.clone(), move |r: &crate::world::Reachability| {
                r.node_api.get(j).copied().unwrap_or(false)
            });
            let addr = SocketAddr::from((plan.node_ip(j), KUBE_PORT));
            tasks.push(self.serve_api(addr, up, &tls, &handler).await?);
        }
        let up = net::follow(self.reach.clone(), move |r: &crate::world::Reachability| {
            r.vip.get(k).copied().unwrap_or(false)
        });
        let addr = SocketAddr::from((plan.vip_ip(k), KUBE_PORT));
        tasks.push(self.serve_api(addr, up, &tls, &handler).await?);
        if let Some(hosts) = ingress_hosts {
            self.serve_ingress(k, name, hosts, &kube_ca, tasks).await?;
        }
        Ok((env_tokens, kube_ca.cert_pem()))
    }

    /// One address of an environment's Kubernetes API (a control plane's own, or the VIP),
    /// listening while `up` says the address is reachable.
    async fn serve_api(
        &self,
        addr: SocketAddr,
        up: tokio::sync::watch::Receiver<bool>,
        tls: &Arc<rustls::ServerConfig>,
        handler: &net::Handler,
    ) -> Result<tokio::task::JoinHandle<()>, LabError> {
        let power = Power::new(up, self.down);
        serve_switched(addr, Some(tls.clone()), power, handler.clone())
            .await
            .map_err(|e| LabError::Listen(addr, e))
    }

    /// Environment `k`'s ingress on its LoadBalancer address, HTTP and HTTPS (a certificate
    /// for its hosts from the environment's CA).
    async fn serve_ingress(
        &self,
        k: usize,
        name: &str,
        hosts: &[String],
        kube_ca: &CertificateAuthority,
        tasks: &mut Tasks,
    ) -> Result<(), LabError> {
        let (plan, down) = (self.plan, self.down);
        let h = crate::ingress::handler(name.to_string(), hosts.to_vec(), self.log.clone());
        let addr = SocketAddr::from((plan.ingress_ip(k), INGRESS_HTTP_PORT));
        let up = net::follow(self.reach.clone(), move |r: &crate::world::Reachability| {
            r.ingress.get(k).copied().unwrap_or(false)
        });
        tasks.push(
            serve_switched(addr, None, Power::new(up.clone(), down), h.clone())
                .await
                .map_err(|e| LabError::Listen(addr, e))?,
        );
        let host_refs: Vec<&str> = hosts.iter().map(String::as_str).collect();
        let leaf = kube_ca
            .server_cert(&[IpAddr::V4(plan.ingress_ip(k))], &host_refs)
            .map_err(pki_error)?;
        let tls = server_config(&ServerTls::from_leaf(&leaf), &[b"h2", b"http/1.1"])
            .map_err(|e| LabError::Pki(e.to_string()))?;
        let addr = SocketAddr::from((plan.ingress_ip(k), INGRESS_HTTPS_PORT));
        tasks.push(
            serve_switched(addr, Some(tls), Power::new(up, down), h)
                .await
                .map_err(|e| LabError::Listen(addr, e))?,
        );
        Ok(())
    }

    /// Proxmox VE on every host: one API with the full and the audit token, each host's
    /// server with its own certificate from the Proxmox CA.
    async fn serve_proxmox(
        &self,
        speed: f64,
        backend: &Arc<crate::world::backends::LabBackend>,
        recorder: &crate::pki::endpoint::Recorder,
        handles: &mut Vec<Box<dyn std::any::Any + Send>>,
    ) -> Result<ProxmoxServed, LabError> {
        let (plan, down) = (self.plan, self.down);
        let pve_ca = CertificateAuthority::new(CaKind::Proxmox).map_err(pki_error)?;
        let pve_secret = uuid_secret().map_err(no_randomness)?;
        let pve_audit_secret = uuid_secret().map_err(no_randomness)?;
        let pve_api = crate::proxmox::ProxmoxApi::new(
            backend.clone(),
            pve_options(
                speed,
                crate::proxmox::ApiToken {
                    id: PROXMOX_TOKEN_ID.into(),
                    secret: pve_secret.clone(),
                },
                crate::proxmox::ApiToken {
                    id: PROXMOX_AUDIT_TOKEN_ID.into(),
                    secret: pve_audit_secret.clone(),
                },
            ),
            recorder.clone(),
        );
        let host_names: Vec<String> = self
            .shared
            .read(|w| w.hosts.iter().map(|h| h.name.clone()).collect());
        for (i, name) in host_names.iter().enumerate() {
            let addr = SocketAddr::from((plan.host_ip(i), PROXMOX_PORT));
            let leaf = pve_ca
                .proxmox_node_cert(name, IpAddr::V4(plan.host_ip(i)))
                .map_err(pki_error)?;
            let up = net::follow(self.reach.clone(), move |r: &crate::world::Reachability| {
                r.hosts.get(i).copied().unwrap_or(false)
            });
            let h = crate::proxmox::serve(
                pve_api.clone(),
                name,
                addr,
                &ServerTls::from_leaf(&leaf),
                Power::new(up, down),
            )
            .await
            .map_err(|e| LabError::Pki(format!("Proxmox server on {addr}: {e}")))?;
            handles.push(Box::new(h));
        }
        Ok(ProxmoxServed {
            api: pve_api,
            ca: pve_ca,
            secret: pve_secret,
            audit_secret: pve_audit_secret,
        })
    }

    /// Talos apid on every addressed node, each environment with its own CA; the
    /// talosconfig with one context per environment.
    async fn serve_talos(
        &self,
        backend: &Arc<crate::world::backends::LabBackend>,
        recorder: &crate::pki::endpoint::Recorder,
        handles: &mut Vec<Box<dyn std::any::Any + Send>>,
    ) -> Result<String, LabError> {
        let (plan, down) = (self.plan, self.down);
        let mut talos_pki = Vec::with_capacity(self.envs.len());
        for _ in &self.envs {
            let ca = CertificateAuthority::new(CaKind::Talos).map_err(pki_error)?;
            let admin = ca.talos_admin_cert().map_err(pki_error)?;
            talos_pki.push((ca, admin));
        }
        let node_names: Vec<String> = self
            .shared
            .read(|w| w.nodes.iter().map(|n| n.name.clone()).collect());
        let mut env_of_node = vec![0usize; self.nodes.len()];
        for (k, (_, env_nodes, _)) in self.envs.iter().enumerate() {
            for &j in env_nodes {
                if let Some(slot) = env_of_node.get_mut(j) {
                    *slot = k;
                }
            }
        }
        for &(j, _, addressed) in self.nodes.iter() {
            if !addressed {
                continue;
            }
            let Some((talos_ca, _)) = talos_pki.get(env_of_node[j]) else {
                continue;
            };
            let addr = SocketAddr::from((plan.node_ip(j), APID_PORT));
            let leaf = talos_ca
                .talos_server_cert(&node_names[j], &[IpAddr::V4(plan.node_ip(j))])
                .map_err(pki_error)?;
            let up = net::follow(self.reach.clone(), move |r: &crate::world::Reachability| {
                r.apid.get(j).copied().unwrap_or(false)
            });
            let h = crate::talos::serve(
                backend.clone(),
                &node_names[j],
                addr,
                &ServerTls::from_leaf(&leaf),
                talos_ca.cert_der(),
                Power::new(up, down),
                recorder.clone(),
            )
            .await
            .map_err(|e| LabError::Pki(format!("Talos apid on {addr}: {e}")))?;
            handles.push(Box::new(h));
        }
        let talos_contexts: Vec<crate::pki::talosconfig::TalosContext> = self
            .envs
            .iter()
            .zip(&talos_pki)
            .map(|((name, env_nodes, _), (talos_ca, talos_admin))| {
                let endpoints = env_nodes
                    .iter()
                    .filter(|&&j| self.serves_api(j))
                    .map(|&j| plan.node_ip(j).to_string())
                    .collect();
                crate::pki::talosconfig::TalosContext::new(name, endpoints, talos_ca, talos_admin)
            })
            .collect();
        let first = self.envs.first().map(|e| e.0.clone()).unwrap_or_default();
        crate::pki::talosconfig::talosconfig_yaml(&first, &talos_contexts)
            .map_err(|e| LabError::Pki(e.to_string()))
    }
}

/// Name, node indices and ingress host names of an environment.
type EnvListen = (String, Vec<usize>, Option<Vec<String>>);
/// Index, control plane, addressed.
type NodeListen = (usize, bool, bool);

impl Drop for Lab {
    /// A lab dropped without `stop` still takes its addresses down.
    fn drop(&mut self) {
        self.shared.shutdown();
    }
}

/// Background tasks of a lab; dropping the set aborts them.
struct Tasks(Vec<JoinHandle<()>>);

impl Tasks {
    fn push(&mut self, t: JoinHandle<()>) {
        self.0.push(t);
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

pub const PROXMOX_TOKEN_ID: &str = "gates@pve!lab";
/// A Proxmox token that may only read (VM.Audit, Sys.Audit); its secret is in
/// `proxmox-audit-token` beside `proxmox-token`.
pub const PROXMOX_AUDIT_TOKEN_ID: &str = "gates@pve!lab-audit";

/// Proxmox delays that stand for world time (a power task running, ARP timing out towards a
/// dead host) run `speed` times faster, like the rest of the world. The delayed 401 is a
/// security measure of pveproxy, not world time, and stays as it is.
fn pve_options(
    speed: f64,
    token: crate::proxmox::ApiToken,
    audit: crate::proxmox::ApiToken,
) -> crate::proxmox::ProxmoxOptions {
    let d = crate::proxmox::ProxmoxOptions::default();
    let speed = if speed.is_finite() && speed > 0.001 {
        speed
    } else {
        1.0
    };
    let scale = |x: std::time::Duration| x.div_f64(speed).max(std::time::Duration::from_millis(10));
    crate::proxmox::ProxmoxOptions {
        tokens: vec![token],
        audit_tokens: vec![audit],
        unreachable_delay: scale(d.unreachable_delay),
        task_duration: scale(d.task_duration),
        stop_duration: scale(d.stop_duration),
        ..d
    }
}

/// A Proxmox token secret: a random UUID, as `pveum user token add` prints.
fn uuid_secret() -> Result<String, ring::error::Unspecified> {
    let h = crate::ids::secret_hex(16)?;
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ))
}

fn absolute(p: &std::path::Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}
