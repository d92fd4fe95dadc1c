//! A TLS endpoint of a simulated machine: it listens only while the machine is powered on.
//!
//! A powered-off Proxmox host or Talos node does not answer on its address: by default connects
//! hang and its open connections go silent, as packets to a dead machine are dropped
//! ([`crate::power`]); a scenario may make it refuse instead. The owner drives this with a
//! [`Power`] (true = on): the listener socket is closed when it goes false and bound again (same
//! address and port) when it goes true. Both the Proxmox and the Talos servers use this; it lives beside the PKI because
//! it is the TLS-serving half of it.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls::pki_types::CertificateDer;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::power::{BlackHole, DownMode, Power, frozen_until_up};

/// Who is on the other end of an accepted TLS connection.
#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    pub peer: SocketAddr,
    pub local: SocketAddr,
    /// The client's certificate chain (leaf first), when it presented one.
    pub peer_certs: Vec<CertificateDer<'static>>,
}

/// One request a lab server answered, for the lab's request log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// `proxmox` or `talos`.
    pub system: &'static str,
    /// Client socket address.
    pub client: SocketAddr,
    /// Server socket address (which host or node was addressed).
    pub server: SocketAddr,
    /// HTTP method (`GET`, `POST`; gRPC calls are `POST`).
    pub verb: String,
    /// Request path without query (`/api2/json/nodes`, `/machine.MachineService/Version`).
    pub path: String,
    /// HTTP status for Proxmox; the gRPC status code for Talos (0 = OK).
    pub status: u16,
    /// Whether the call only reads (a GET, or a read-only RPC); `gates check` must make only these.
    pub read_only: bool,
}

/// Receives every [`RequestRecord`]; the lab core plugs its request log in here.
pub type Recorder = Arc<dyn Fn(RequestRecord) + Send + Sync>;

/// Told of every TLS handshake that failed on a TLS error: client address, server address.
pub type Rejected = Arc<dyn Fn(SocketAddr, SocketAddr) + Send + Sync>;

/// A recorder that drops everything.
pub fn no_recorder() -> Recorder {
    Arc::new(|_| {})
}

/// A running endpoint. Dropping it stops the endpoint too; [`ServerHandle::stop`] also waits.
#[derive(Debug)]
pub struct ServerHandle {
    local_addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl ServerHandle {
    /// The address the endpoint serves on (the real port when 0 was requested).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops listening, closes open connections and waits for the accept loop to end.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Errors starting a lab server.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    #[error("listen: {0}")]
    Io(#[from] io::Error),
}

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause before retrying a bind that failed (e.g. the port is briefly still in use).
const REBIND_PAUSE: Duration = Duration::from_millis(50);

/// Listens on `addr` while `power` is true, accepts TLS with `config` and hands each connection
/// to `handler`. Returns once the first bind happened (or, when powered off at start, once the
/// port is known: with port 0 it binds briefly to learn one). When `power`'s sender is dropped,
/// the last state stays.
pub async fn serve_tls<H, F>(
    addr: SocketAddr,
    config: Arc<ServerConfig>,
    power: impl Into<Power>,
    rejected: Option<Rejected>,
    handler: H,
) -> io::Result<ServerHandle>
where
    H: Fn(TlsStream<TcpStream>, ConnectionInfo) -> F + Send + Sync + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let Power {
        up: mut power,
        down: mode,
    } = power.into();
    let first = TcpListener::bind(addr).await?;
    let local_addr = first.local_addr()?;
    let mut listener = if *power.borrow_and_update() {
        Some(first)
    } else {
        drop(first);
        None
    };
    let (stop_tx, mut stop_rx) = watch::channel(false);
    // Bumped whenever open connections must die (power off, stop).
    let (epoch_tx, epoch_rx) = watch::channel(0u64);
    let conns = Arc::new(Conns {
        acceptor: TlsAcceptor::from(config),
        handler,
        rejected,
        local_addr,
        mode,
    });

    let task = tokio::spawn(async move {
        let mut power_open = true;
        // Held while the machine is off and its address stalls.
        let mut hole = None;
        loop {
            let on = *power.borrow();
            if !on && listener.is_some() {
                listener = None;
                epoch_tx.send_modify(|e| *e += 1);
            }
            if !on && hole.is_none() && mode == DownMode::Stall {
                hole = BlackHole::open(local_addr).await.ok();
            }
            let needs_bind = on && listener.is_none();
            if needs_bind {
                hole = None;
                match TcpListener::bind(local_addr).await {
                    Ok(l) => listener = Some(l),
                    Err(e) => tracing::warn!(%local_addr, error = %e, "rebind failed; retrying"),
                }
            }
            tokio::select! {
                _ = stop_rx.changed() => break,
                changed = power.changed(), if power_open => {
                    if changed.is_err() {
                        power_open = false;
                    }
                }
                _ = tokio::time::sleep(REBIND_PAUSE), if on && listener.is_none() => {}
                accepted = accept(listener.as_ref()), if listener.is_some() => {
                    let Ok((tcp, peer)) = accepted else { continue };
                    // Without it each small answer waits for the client's delayed ACK (40 ms).
                    let _ = tcp.set_nodelay(true);
                    let mut epoch = epoch_rx.clone();
                    let start = *epoch.borrow_and_update();
                    let (up, stopped) = (power.clone(), stop_rx.clone());
                    tokio::spawn(serve_connection(
                        conns.clone(),
                        tcp,
                        peer,
                        epoch,
                        start,
                        up,
                        stopped,
                    ));
                }
            }
        }
        drop(listener);
        epoch_tx.send_modify(|e| *e += 1);
    });

    Ok(ServerHandle {
        local_addr,
        stop: stop_tx,
        task: Some(task),
    })
}

/// What every connection a server accepts shares: the TLS acceptor, the handler, who hears
/// of rejected clients, the server's address and how it behaves while down.
struct Conns<H> {
    acceptor: TlsAcceptor,
    handler: H,
    rejected: Option<Rejected>,
    local_addr: SocketAddr,
    mode: DownMode,
}

/// One accepted connection: the TLS handshake (a client rejected for its certificate is
/// reported), then the handler, until the power epoch moves on from `start`. Off, a stalled
/// connection stays open but silent until the machine is back (or the server stops), then
/// it is reset.
async fn serve_connection<H, F>(
    conns: Arc<Conns<H>>,
    tcp: TcpStream,
    peer: SocketAddr,
    mut epoch: watch::Receiver<u64>,
    start: u64,
    mut up: watch::Receiver<bool>,
    stopped: watch::Receiver<bool>,
) where
    H: Fn(TlsStream<TcpStream>, ConnectionInfo) -> F + Send + Sync + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let local_addr = conns.local_addr;
    let work = async {
        let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, conns.acceptor.accept(tcp)).await {
            Ok(Ok(tls)) => tls,
            // A TLS error (not a client that just went away): an unknown
            // client certificate, or a client that does not trust ours.
            Ok(Err(e)) if e.kind() == io::ErrorKind::InvalidData => {
                if let Some(rejected) = &conns.rejected {
                    rejected(peer, local_addr);
                }
                return;
            }
            _ => return,
        };
        let peer_certs = tls
            .get_ref()
            .1
            .peer_certificates()
            .map(|c| c.iter().map(|c| c.clone().into_owned()).collect())
            .unwrap_or_default();
        let info = ConnectionInfo {
            peer,
            local: local_addr,
            peer_certs,
        };
        (conns.handler)(tls, info).await;
    };
    tokio::pin!(work);
    tokio::select! {
        _ = work.as_mut() => return,
        _ = epoch.wait_for(|e| *e != start) => {}
    }
    if conns.mode == DownMode::Stall {
        frozen_until_up(&mut up, Some(stopped)).await;
    }
}

async fn accept(listener: Option<&TcpListener>) -> io::Result<(TcpStream, SocketAddr)> {
    match listener {
        Some(l) => l.accept().await,
        None => std::future::pending().await,
    }
}
