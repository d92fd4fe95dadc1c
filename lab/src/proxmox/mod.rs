//! The Proxmox VE API server (`/api2/json` on port 8006 of every host address).
//!
//! One [`ProxmoxApi`] holds the cluster-wide state (backend, tokens, tasks); [`serve`] puts it on
//! one host's address. As in Proxmox, every host serves the whole cluster API: calls about
//! another host are "proxied" to it, and fail with HTTP 595 `No route to host` (empty body, after
//! a delay) when that host is down. A powered-off host's own address refuses connections.
//! Facts: `research/proxmox.md`.

mod auth;
mod backend;
pub mod memory;
mod params;
mod response;
mod routes;
mod tasks;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};

pub use crate::pki::endpoint::ServeError;
use crate::pki::endpoint::{ConnectionInfo, Recorder, RequestRecord, ServerHandle, serve_tls};
use crate::pki::tls::{ServerTls, server_config};

pub use auth::ApiToken;
pub use backend::{
    ActionError, HaInfo, HaState, HostCommand, HostInfo, ProxmoxBackend, StorageInfo, VmAction,
    VmConfig, VmInfo, VmStatus,
};
pub use tasks::Upid;

use response::Resp;

/// Tunables of the simulated API.
#[derive(Debug, Clone)]
pub struct ProxmoxOptions {
    /// Tokens that authenticate (`user@realm!tokenid` + secret), with the privileges a chaos
    /// tool needs (VM.Audit, VM.PowerMgmt, Sys.Audit, Sys.PowerMgmt).
    pub tokens: Vec<ApiToken>,
    /// Tokens that may only read (VM.Audit, Sys.Audit): power calls answer 403
    /// `Permission check failed (<path>, <privilege>)`, before any proxying.
    pub audit_tokens: Vec<ApiToken>,
    /// Delay before every 401 (Proxmox: 3 s).
    pub unauthorized_delay: Duration,
    /// Delay before a 595 for a call about a host that is down (Proxmox: ~3 s of ARP failure).
    pub unreachable_delay: Duration,
    /// How long a start or shutdown request task stays `running` before it ends (and its
    /// effect happens).
    pub task_duration: Duration,
    /// How long a hard stop task runs (QEMU is killed and cleaned up: a few seconds).
    pub stop_duration: Duration,
    /// `GET /version` `version`; `release` is its first two components.
    pub version: String,
    /// Idle keep-alive connections are closed after this long (pveproxy: 5 s).
    pub idle_timeout: Duration,
}

impl Default for ProxmoxOptions {
    fn default() -> Self {
        Self {
            tokens: Vec::new(),
            audit_tokens: Vec::new(),
            unauthorized_delay: Duration::from_secs(3),
            unreachable_delay: Duration::from_secs(3),
            task_duration: Duration::from_millis(1500),
            stop_duration: Duration::from_secs(3),
            version: "9.1.1".into(),
            idle_timeout: Duration::from_secs(5),
        }
    }
}

/// The cluster-wide API state shared by the servers on every host address.
pub struct ProxmoxApi {
    backend: Arc<dyn ProxmoxBackend>,
    options: ProxmoxOptions,
    recorder: Recorder,
    tasks: tasks::TaskTable,
    /// Host name → SHA-256 fingerprint of the certificate it serves (`/nodes` `ssl_fingerprint`).
    fingerprints: Mutex<HashMap<String, String>>,
    /// The fault switch: a stall of the whole API (see [`ProxmoxApi::stall_at_next_start`]).
    stall: Mutex<Stall>,
}

/// A stalled API holds every request (on every host's address) until `until`, then answers
/// it; `armed` starts such a stall when the next VM start request arrives.
#[derive(Debug, Default)]
struct Stall {
    armed: Option<Duration>,
    until: Option<tokio::time::Instant>,
}

impl std::fmt::Debug for ProxmoxApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxmoxApi")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl ProxmoxApi {
    /// Cluster API state over `backend`; `recorder` receives one record per request.
    pub fn new(
        backend: Arc<dyn ProxmoxBackend>,
        options: ProxmoxOptions,
        recorder: Recorder,
    ) -> Arc<Self> {
        Arc::new(Self {
            backend,
            options,
            recorder,
            tasks: tasks::TaskTable::default(),
            fingerprints: Mutex::new(HashMap::new()),
            stall: Mutex::default(),
        })
    }

    /// Fault switch (tests): every request stalls for `duration` from now, on every host's
    /// address, then is answered as usual (pveproxy hung on a busy or overloaded node).
    /// `Duration::ZERO` ends a stall for the requests that arrive from now on.
    pub fn stall_for(&self, duration: Duration) {
        if let Ok(mut stall) = self.stall.lock() {
            stall.until = Some(tokio::time::Instant::now() + duration);
        }
    }

    /// Fault switch (tests): the next `POST .../status/start` starts a stall of `duration`
    /// (itself included), so a restore meets a stalled API exactly when it begins.
    pub fn stall_at_next_start(&self, duration: Duration) {
        if let Ok(mut stall) = self.stall.lock() {
            stall.armed = Some(duration);
        }
    }

    /// How long this request waits before it is answered.
    fn stalled(&self, method: &Method, path: &str) -> Option<Duration> {
        let mut stall = self.stall.lock().ok()?;
        let now = tokio::time::Instant::now();
        if method == Method::POST
            && path.ends_with("/status/start")
            && let Some(duration) = stall.armed.take()
        {
            stall.until = Some(now + duration);
        }
        stall
            .until
            .filter(|until| *until > now)
            .map(|until| until - now)
    }

    fn fingerprint(&self, host: &str) -> Option<String> {
        self.fingerprints.lock().ok()?.get(host).cloned()
    }

    /// Answers one request arriving at `host`'s address.
    async fn handle(
        self: &Arc<Self>,
        req: Request<Incoming>,
        host: &str,
        conn: &ConnectionInfo,
    ) -> Resp {
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or("").to_string();
        let headers = req.headers().clone();
        let body = match Limited::new(req.into_body(), 1 << 20).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => Bytes::new(),
        };
        if let Some(wait) = self.stalled(&method, &path) {
            tokio::time::sleep(wait).await;
        }
        let resp = routes::dispatch(
            self,
            routes::Incoming {
                host,
                method: &method,
                path: &path,
                query: &query,
                headers: &headers,
                body: &body,
            },
        )
        .await;
        (self.recorder)(RequestRecord {
            system: "proxmox",
            client: conn.peer,
            server: conn.local,
            verb: method.to_string(),
            path,
            status: resp.status().as_u16(),
            read_only: method == Method::GET,
        });
        resp
    }
}

/// pveproxy serves at most 100 requests per connection.
const MAX_REQUESTS_PER_CONNECTION: u32 = 100;

/// Serves the cluster API as host `host` on `addr` (HTTPS, HTTP/1.1) while `power` is true.
/// Returns once listening; the handle stops it.
pub async fn serve(
    api: Arc<ProxmoxApi>,
    host: &str,
    addr: SocketAddr,
    tls: &ServerTls,
    power: impl Into<crate::power::Power>,
) -> Result<ServerHandle, ServeError> {
    if let (Some(fp), Ok(mut map)) = (tls.leaf_fingerprint(), api.fingerprints.lock()) {
        map.insert(host.to_string(), fp);
    }
    let config = server_config(tls, &[b"http/1.1"])?;
    let idle_timeout = api.options.idle_timeout;
    let host: Arc<str> = Arc::from(host);
    let handle = serve_tls(addr, config, power, None, move |stream, info| {
        let api = api.clone();
        let host = host.clone();
        async move {
            let info = Arc::new(info);
            let served = Arc::new(std::sync::atomic::AtomicU32::new(0));
            let service = service_fn(move |req| {
                let api = api.clone();
                let host = host.clone();
                let info = info.clone();
                let served = served.clone();
                async move {
                    let mut resp = api.handle(req, &host, &info).await;
                    let n = served.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    if n >= MAX_REQUESTS_PER_CONNECTION {
                        resp.headers_mut().insert(
                            http::header::CONNECTION,
                            http::HeaderValue::from_static("close"),
                        );
                    }
                    Ok::<_, Infallible>(resp)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                // hyper starts this timer whenever it waits for a request head, so it also
                // closes idle keep-alive connections, as pveproxy does.
                .header_read_timeout(idle_timeout)
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
    })
    .await?;
    Ok(handle)
}
