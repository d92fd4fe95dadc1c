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
    /// HTTP method, or for gRPC the full method path's verb `POST`.
    pub verb: String,
    /// Path with query (HTTP) or the gRPC method (`/machine.MachineService/Version`).
    pub path: String,
    pub status: u16,
}

impl RequestRecord {
    /// True for requests that cannot change state (HTTP GET/HEAD and watch, gRPC reads are
    /// recorded with verb "GET" by convention).
    pub fn is_read(&self) -> bool {
        matches!(self.verb.as_str(), "GET" | "HEAD" | "OPTIONS")
    }
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

    /// Record one request. `verb` is an HTTP method (gRPC servers pass "GET" for reads and
    /// "POST" for calls that change state).
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
        });
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
