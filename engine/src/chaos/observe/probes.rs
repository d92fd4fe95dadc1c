//! The probes sampled through a run, each a cheap closure that answers one observation:
//! the API's `/readyz` through the VIP (a new connection every time, and a kept-alive one),
//! each ingress URL (Host header, expected status), the protected controllers' ready
//! replicas (through the API; unknown when the API does not answer) and etcd quorum over
//! the Talos API of the control-plane nodes that stay up (called directly, never via the VIP).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use gates_core::state::Pod;
use gates_infra::RetryPolicy;
use gates_infra::talos::{TalosClient, TalosConfigError, TalosOptions};
use kube::api::{Api, ListParams};

use crate::chaos::talos_pool::{TalosAskError, TalosPool};
use crate::chaos::timeline::Observation;
use crate::checks::replicated_controller::Params as Controller;
use crate::cluster::controllers_without_ready_replica;
use crate::collect::api::{ClusterAccess, readyz, readyz_client};
use crate::collect::kube::resolve;
use crate::config::{Budget, Environment, IngressUrl};
use crate::state::Unanswered;

/// Why the clients or the probes of a run could not be set up (the run then stops before the
/// fault), said as the reason of [`crate::chaos::ChaosError::Setup`].
#[derive(Debug, thiserror::Error)]
pub enum ProbeSetupError {
    #[error("the API probe needs `api.endpoint` (the VIP) in the environment file")]
    NoVip,
    #[error("the workloads probe needs a Kubernetes client")]
    NoKubeClient,
    /// The cluster access or the API probe's HTTPS client (what was said).
    #[error(transparent)]
    Api(#[from] Unanswered),
    /// The talosconfig of the etcd probe and the VIP watcher.
    #[error(transparent)]
    Talosconfig(#[from] TalosConfigError),
    #[error("{}: {source}", path.display())]
    CaFile {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    CaBundle {
        path: std::path::PathBuf,
        source: reqwest::Error,
    },
    #[error(
        "{url}: no ca_file and no system trust roots could be loaded{}",
        .first.as_deref().map(|e| format!(" ({e})")).unwrap_or_default()
    )]
    NoTrustRoots {
        url: String,
        /// The first error loading the system's roots, if any was said.
        first: Option<String>,
    },
    #[error("HTTP client: {0}")]
    HttpClient(reqwest::Error),
}

/// Why the pod list of the workloads probe is unknown.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the API did not answer: {0}")]
pub struct PodListError(Arc<kube::Error>);

pub type ProbeFuture = Pin<Box<dyn Future<Output = Observation> + Send>>;
/// The etcd leader (member id) each time the etcd probe saw it change.
pub type LeaderLog = Arc<std::sync::Mutex<Vec<(tokio::time::Instant, u64)>>>;
pub type ProbeFn = Arc<dyn Fn() -> ProbeFuture + Send + Sync>;

/// One probe: its trial name, what it watches, its budget and how to take one sample.
#[derive(Clone)]
pub struct Probe {
    /// Part of the trial name: `api-vip-new-connection`, `ingress::whoami.lab.internal`.
    pub name: String,
    pub what: String,
    pub budget: Budget,
    pub sample: ProbeFn,
}

/// Everything the probes need, built once before the fault.
pub struct ProbeInputs<'a> {
    pub env: &'a Environment,
    pub access: &'a ClusterAccess,
    pub kube: Option<kube::Client>,
    pub controllers: Vec<Controller>,
    /// The run's Talos connections, when the environment has a talos section.
    pub talos: Option<TalosPool>,
    /// Control-plane Talos endpoints whose nodes stay up.
    pub surviving_talos: Vec<String>,
    /// etcd members before the fault.
    pub etcd_members: usize,
    pub interval: Duration,
    pub timeout: Duration,
    pub leaders: LeaderLog,
}

pub fn build(inputs: ProbeInputs<'_>) -> Result<Vec<Probe>, ProbeSetupError> {
    let chaos = inputs.env.chaos.clone().unwrap_or_default();
    let budgets = chaos.budgets;
    let mut probes = Vec::new();
    let vip = inputs
        .env
        .api
        .as_ref()
        .map(|a| a.endpoint.clone())
        .ok_or(ProbeSetupError::NoVip)?;
    for (name, keep_alive) in [
        ("api-vip-new-connection", false),
        ("api-vip-kept-alive", true),
    ] {
        let client = readyz_client(inputs.access, inputs.timeout, keep_alive)?;
        let endpoint = vip.clone();
        probes.push(Probe {
            name: name.to_string(),
            what: format!(
                "GET {endpoint}/readyz ({})",
                if keep_alive {
                    "kept-alive connection"
                } else {
                    "new connection each time"
                }
            ),
            budget: budgets.api,
            sample: Arc::new(move || {
                let client = client.clone();
                let endpoint = endpoint.clone();
                Box::pin(async move {
                    match readyz(&client, &endpoint).await {
                        Ok(()) => Observation::Up,
                        Err(err) => Observation::Down(err.0),
                    }
                })
            }),
        });
    }
    for url in &inputs.env.ingress.urls {
        probes.push(ingress_probe(
            inputs.env,
            url,
            budgets.ingress,
            inputs.timeout,
        )?);
    }
    if !inputs.controllers.is_empty() {
        let client = inputs.kube.clone().ok_or(ProbeSetupError::NoKubeClient)?;
        // One LIST per sample for all controllers: the samplers tick together, the first
        // to ask lists and the others reuse that answer.
        let pods = SharedPods::new(client, inputs.interval / 2);
        // A hanging API (the VIP moving) makes the workloads unknown, never down: answer
        // before the sampler's own timeout would count the sample as down.
        let patience = inputs.timeout.mul_f64(0.75);
        for controller in &inputs.controllers {
            probes.push(workload_probe(
                controller,
                &pods,
                budgets.workloads,
                patience,
            ));
        }
    }
    if let Some(pool) = inputs.talos {
        let quorum = inputs.etcd_members / 2 + 1;
        let patience = inputs.timeout.mul_f64(0.75);
        let endpoints = Arc::new(inputs.surviving_talos.clone());
        let leaders = inputs.leaders.clone();
        probes.push(Probe {
            name: "etcd-quorum".to_string(),
            what: format!(
                "etcd status through the Talos API of {} (quorum {quorum} of {})",
                endpoints.join(", "),
                inputs.etcd_members
            ),
            budget: budgets.etcd,
            sample: Arc::new(move || {
                let pool = pool.clone();
                let endpoints = endpoints.clone();
                let leaders = leaders.clone();
                Box::pin(
                    async move { etcd_quorum(pool, &endpoints, quorum, leaders, patience).await },
                )
            }),
        });
    }
    Ok(probes)
}

/// A ready replica of one protected controller, sampled from the pod list all the
/// controllers' probes share.
fn workload_probe(
    controller: &Controller,
    pods: &SharedPods,
    budget: Budget,
    patience: Duration,
) -> Probe {
    let pods = pods.clone();
    let controller = Arc::new(controller.clone());
    Probe {
        name: format!("workloads::{}", controller.name),
        what: format!(
            "a ready replica of {} (pods with {}{})",
            controller.name,
            controller
                .selector
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(","),
            controller
                .namespace
                .as_deref()
                .map(|n| format!(" in {n}"))
                .unwrap_or_default()
        ),
        budget,
        sample: Arc::new(move || {
            let pods = pods.clone();
            let controller = controller.clone();
            Box::pin(async move { workload(&pods, &controller, patience).await })
        }),
    }
}

/// A Talos client for sampling (no retries: a sample that fails is an observation), or
/// `None` when the environment has no talos section.
pub fn talos_client(
    env: &Environment,
    timeout: Duration,
) -> Option<Result<TalosClient, TalosConfigError>> {
    let talos = env.talos.as_ref()?;
    let explicit = talos.talosconfig.as_ref().map(|p| resolve(&env.file, p));
    Some(
        gates_infra::talos::load_context(explicit.as_deref(), Some(&talos.context)).map(
            |context| {
                TalosClient::from_context(
                    &context,
                    TalosOptions {
                        connect_timeout: timeout,
                        call_timeout: timeout,
                        retry: RetryPolicy::NONE,
                    },
                )
            },
        ),
    )
}

fn ingress_probe(
    env: &Environment,
    url: &IngressUrl,
    budget: Budget,
    timeout: Duration,
) -> Result<Probe, ProbeSetupError> {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .timeout(timeout)
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        // Each sample opens a new connection, as a client does after the address moved.
        .pool_max_idle_per_host(0);
    if let Some(file) = &url.ca_file {
        let path = resolve(&env.file, file);
        let pem = match std::fs::read(&path) {
            Ok(pem) => pem,
            Err(source) => return Err(ProbeSetupError::CaFile { path, source }),
        };
        builder = builder.tls_built_in_root_certs(false);
        let certs = match reqwest::Certificate::from_pem_bundle(&pem) {
            Ok(certs) => certs,
            Err(source) => return Err(ProbeSetupError::CaBundle { path, source }),
        };
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    } else if url.url.starts_with("https://") {
        // No ca_file: the system's trust store, as the environment file documents.
        let native = rustls_native_certs::load_native_certs();
        if native.certs.is_empty() {
            return Err(ProbeSetupError::NoTrustRoots {
                url: url.url.clone(),
                first: native.errors.first().map(|e| e.to_string()),
            });
        }
        for der in native.certs {
            if let Ok(cert) = reqwest::Certificate::from_der(&der) {
                builder = builder.add_root_certificate(cert);
            }
        }
    }
    let client = builder.build().map_err(ProbeSetupError::HttpClient)?;
    let target = url.url.clone();
    let host = url.host.clone();
    let expect = url.expect_status;
    let shown = host.clone().unwrap_or_else(|| target.clone());
    Ok(Probe {
        name: format!("ingress::{shown}"),
        what: format!(
            "GET {target}{} expecting {expect}",
            host.as_deref()
                .map(|h| format!(" (Host: {h})"))
                .unwrap_or_default()
        ),
        budget,
        sample: Arc::new(move || {
            let mut request = client.get(&target);
            if let Some(h) = &host {
                request = request.header(reqwest::header::HOST, h);
            }
            Box::pin(async move {
                match request.send().await {
                    Ok(r) if r.status().as_u16() == expect => Observation::Up,
                    Ok(r) => {
                        Observation::Down(format!("answered {} (expected {expect})", r.status()))
                    }
                    Err(err) => Observation::Down(crate::collect::kube::chain(&err)),
                }
            })
        }),
    })
}

/// One pod list in flight or done, shared by every sample that asks while it is fresh.
type PodFetch = futures::future::Shared<
    Pin<Box<dyn Future<Output = Result<Arc<Vec<Pod>>, PodListError>> + Send>>,
>;

/// The pod list, asked for at most once per `fresh_for` however many probes ask. A list that
/// hangs holds no lock: once it is older than `fresh_for` the next sample asks anew, so an
/// API that recovers is seen at once, not after a request sent before the recovery gives up.
#[derive(Clone)]
struct SharedPods {
    client: kube::Client,
    fresh_for: Duration,
    last: Arc<std::sync::Mutex<Option<(tokio::time::Instant, PodFetch)>>>,
}

impl SharedPods {
    fn new(client: kube::Client, fresh_for: Duration) -> SharedPods {
        SharedPods {
            client,
            fresh_for,
            last: Arc::default(),
        }
    }

    async fn get(&self) -> Result<Arc<Vec<Pod>>, PodListError> {
        use futures::FutureExt;
        let fetch = {
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            match last.as_ref() {
                Some((at, fetch)) if at.elapsed() < self.fresh_for => fetch.clone(),
                _ => {
                    let api: Api<Pod> = Api::all(self.client.clone());
                    let fetch: Pin<Box<dyn Future<Output = _> + Send>> = Box::pin(async move {
                        api.list(&ListParams::default())
                            .await
                            .map(|list| Arc::new(list.items))
                            .map_err(|err| PodListError(Arc::new(err)))
                    });
                    let fetch = fetch.shared();
                    *last = Some((tokio::time::Instant::now(), fetch.clone()));
                    fetch
                }
            }
        };
        fetch.await
    }
}

async fn workload(pods: &SharedPods, controller: &Controller, patience: Duration) -> Observation {
    let answer = match tokio::time::timeout(patience, pods.get()).await {
        Ok(answer) => answer,
        Err(_) => {
            return Observation::Unknown(format!(
                "the API did not answer within {:.1}s",
                patience.as_secs_f64()
            ));
        }
    };
    match answer {
        Ok(pods) => {
            let missing =
                controllers_without_ready_replica(std::slice::from_ref(controller), &pods);
            if missing.is_empty() {
                Observation::Up
            } else {
                Observation::Down(format!("no ready replica of {}", controller.name))
            }
        }
        Err(err) => Observation::Unknown(err.to_string()),
    }
}

async fn etcd_quorum(
    pool: TalosPool,
    endpoints: &[String],
    quorum: usize,
    leaders: LeaderLog,
    patience: Duration,
) -> Observation {
    let answers = futures::future::join_all(endpoints.iter().map(|endpoint| {
        pool.ask(endpoint, patience, move |node| async move {
            let status = node.etcd_status().await?;
            if status.leader == 0 {
                Err(TalosAskError::NoLeader {
                    endpoint: endpoint.clone(),
                })
            } else {
                Ok(status.leader)
            }
        })
    }))
    .await;
    let with_leader = answers.iter().filter(|a| a.is_ok()).count();
    if let Some(leader) = answers.iter().find_map(|a| a.as_ref().ok().copied())
        && let Ok(mut log) = leaders.lock()
        && log.last().map(|(_, l)| *l) != Some(leader)
    {
        log.push((tokio::time::Instant::now(), leader));
    }
    if with_leader >= quorum {
        Observation::Up
    } else {
        let why: Vec<String> = answers
            .into_iter()
            .filter_map(|a| a.err().map(|e| e.to_string()))
            .collect();
        Observation::Down(format!(
            "{with_leader} of the needed {quorum} members follow a leader: {}",
            why.join("; ")
        ))
    }
}

/// The Talos endpoints of the control-plane nodes that are not in `stopped_nodes`, from the
/// preflight views (each endpoint's own member names its node).
pub fn surviving_endpoints(
    talos: &crate::state::TalosState,
    stopped_nodes: &[String],
) -> (Vec<String>, usize) {
    let mut members = std::collections::BTreeSet::new();
    let mut surviving = Vec::new();
    for endpoint in &talos.endpoints {
        let Ok(view) = &endpoint.view else {
            continue;
        };
        for m in &view.members {
            members.insert(m.id.clone());
        }
        let own = view
            .members
            .iter()
            .find(|m| m.id == view.member_id)
            .map(|m| m.hostname.as_str());
        if !own.is_some_and(|h| stopped_nodes.iter().any(|n| n == h)) {
            surviving.push(endpoint.endpoint.clone());
        }
    }
    (surviving, members.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hanging_api_makes_a_workload_unknown_not_down() {
        // Accepts connections and never answers, like a VIP whose holder just died.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let holder = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let pods = SharedPods::new(client, Duration::from_millis(50));
        let coredns: Controller =
            gates_core::yaml::from_str("{name: coredns, selector: {k8s-app: kube-dns}}").unwrap();
        let started = tokio::time::Instant::now();
        let observation = workload(&pods, &coredns, Duration::from_millis(300)).await;
        assert!(
            matches!(&observation, Observation::Unknown(why) if why.contains("did not answer within 0.3s")),
            "{observation:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(2));
        holder.abort();
    }

    #[tokio::test]
    async fn a_sample_after_recovery_is_answered_while_a_list_sent_before_it_still_hangs() {
        // The first connection is never answered (sent while the API was down); later ones
        // get an empty pod list, as an API that has recovered.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut held = Vec::new();
            let mut first = true;
            while let Ok((mut socket, _)) = listener.accept().await {
                if std::mem::take(&mut first) {
                    held.push(socket);
                    continue;
                }
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let mut got = Vec::new();
                    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                        let Ok(n) = socket.read(&mut buf).await else {
                            return;
                        };
                        if n == 0 {
                            return;
                        }
                        got.extend_from_slice(&buf[..n]);
                    }
                    let body = r#"{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}"#;
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                        body.len()
                    );
                    let _ = socket.write_all(head.as_bytes()).await;
                    let _ = socket.write_all(body.as_bytes()).await;
                    let _ = socket.flush().await;
                    tokio::time::sleep(Duration::from_secs(5)).await;
                });
            }
        });
        let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let pods = SharedPods::new(client, Duration::from_millis(50));
        let coredns: Controller =
            gates_core::yaml::from_str("{name: coredns, selector: {k8s-app: kube-dns}}").unwrap();
        let before = {
            let (pods, coredns) = (pods.clone(), coredns.clone());
            tokio::spawn(async move { workload(&pods, &coredns, Duration::from_secs(3)).await })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        let started = tokio::time::Instant::now();
        let after = workload(&pods, &coredns, Duration::from_secs(3)).await;
        assert_eq!(
            after,
            Observation::Down("no ready replica of coredns".into()),
            "the sample after recovery reads the answer"
        );
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        assert!(matches!(before.await.unwrap(), Observation::Unknown(_)));
        server.abort();
    }

    #[tokio::test]
    async fn a_refused_api_makes_a_workload_unknown() {
        // Bind then drop: nothing listens on the port any more.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let pods = SharedPods::new(client, Duration::from_millis(50));
        let coredns: Controller =
            gates_core::yaml::from_str("{name: coredns, selector: {k8s-app: kube-dns}}").unwrap();
        let observation = workload(&pods, &coredns, Duration::from_secs(5)).await;
        assert!(
            matches!(&observation, Observation::Unknown(why) if why.contains("the API did not answer")),
            "{observation:?}"
        );
    }
}
