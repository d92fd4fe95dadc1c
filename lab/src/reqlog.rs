//! The request log: every request any lab server answers, so tests can prove that a
//! harness command only reads. Shared by the Kubernetes, Proxmox and Talos servers.

use serde::Serialize;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Which protocol a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Kube,
    Proxmox,
    Talos,
    Ingress,
}

#[derive(Debug, Clone, Serialize)]
pub struct RequestRecord {
    /// Real seconds since the lab started.
    pub real_seconds: f64,
    pub protocol: Protocol,
    /// The client's socket address.
    pub client: String,
    /// The server address the request arrived on.
    pub server: String,
    /// HTTP method (gRPC calls are `POST`).
    pub verb: String,
    /// Path (with query for the Kubernetes API) or the gRPC method (`/machine.MachineService/Version`).
    pub path: String,
    pub status: u16,
    /// The call cannot change state (an HTTP GET, or a read-only gRPC method).
    pub read_only: bool,
}

/// A cheap clonable recorder. Servers call [`RequestLog::record`] once per request.
#[derive(Debug, Clone, Default)]
pub struct RequestLog {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    start: Option<tokio::time::Instant>,
    records: Vec<RequestRecord>,
}

impl RequestLog {
    pub fn new() -> Self {
        let log = RequestLog::default();
        if let Ok(mut inner) = log.inner.lock() {
            inner.start = Some(tokio::time::Instant::now());
        }
        log
    }

    /// Record one HTTP request; GET/HEAD/OPTIONS count as reads.
    pub fn record(
        &self,
        protocol: Protocol,
        client: SocketAddr,
        server: SocketAddr,
        verb: &str,
        path: &str,
        status: u16,
    ) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let real_seconds = inner
            .start
            .map(|s| s.elapsed())
            .unwrap_or(Duration::ZERO)
            .as_secs_f64();
        inner.records.push(RequestRecord {
            real_seconds,
            protocol,
            client: client.to_string(),
            server: server.to_string(),
            verb: verb.to_string(),
            path: path.to_string(),
            status,
            read_only: matches!(verb, "GET" | "HEAD" | "OPTIONS"),
        });
    }

    /// A recorder for the Proxmox and Talos servers (they report in their own record type).
    pub fn recorder(&self) -> crate::pki::endpoint::Recorder {
        let log = self.clone();
        Arc::new(move |r: crate::pki::endpoint::RequestRecord| {
            let protocol = if r.system == "talos" {
                Protocol::Talos
            } else {
                Protocol::Proxmox
            };
            let Ok(mut inner) = log.inner.lock() else {
                return;
            };
            let real_seconds = inner
                .start
                .map(|s| s.elapsed())
                .unwrap_or(Duration::ZERO)
                .as_secs_f64();
            inner.records.push(RequestRecord {
                real_seconds,
                protocol,
                client: r.client.to_string(),
                server: r.server.to_string(),
                verb: r.verb,
                path: r.path,
                status: r.status,
                read_only: r.read_only,
            });
        })
    }

    pub fn snapshot(&self) -> Vec<RequestRecord> {
        self.inner
            .lock()
            .map(|i| i.records.clone())
            .unwrap_or_default()
    }

    pub fn len(&self) -> usize {
        self.inner.lock().map(|i| i.records.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
