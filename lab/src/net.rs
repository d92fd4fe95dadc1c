//! Listeners that follow the world: a server address accepts connections only while the
//! machine behind it is up. When it goes down it stalls (connects hang, open connections go
//! silent) or refuses, as the scenario's [`DownMode`] says; see [`crate::power`].

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::power::{BlackHole, DownMode, Power};

pub type BodyError = Box<dyn std::error::Error + Send + Sync>;
pub type Body = BoxBody<Bytes, BodyError>;

/// Who is talking to whom, for handlers and the request log.
#[derive(Debug, Clone, Copy)]
pub struct ConnInfo {
    pub client: SocketAddr,
    pub server: SocketAddr,
}

pub type Handler = Arc<
    dyn Fn(Request<Incoming>, ConnInfo) -> Pin<Box<dyn Future<Output = Response<Body>> + Send>>
        + Send
        + Sync,
>;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// A streaming body fed by a channel (watch responses).
pub fn channel_body(rx: mpsc::Receiver<Bytes>) -> Body {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, BodyError>(Frame::data(b)), rx))
    });
    BodyExt::boxed(StreamBody::new(stream))
}

fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let sock = TcpSocket::new_v4()?;
    // Rebinding right after a close must work (TIME_WAIT from dropped connections).
    sock.set_reuseaddr(true)?;
    sock.bind(addr)?;
    sock.listen(1024)
}

/// Map the world's reachability to one address's up/down signal.
pub fn follow<T, F>(mut src: watch::Receiver<T>, f: F) -> watch::Receiver<bool>
where
    T: Send + Sync + 'static,
    F: Fn(&T) -> bool + Send + Sync + 'static,
{
    let (tx, rx) = watch::channel(f(&src.borrow()));
    tokio::spawn(async move {
        while src.changed().await.is_ok() {
            let v = f(&src.borrow_and_update());
            tx.send_if_modified(|cur| {
                if *cur != v {
                    *cur = v;
                    true
                } else {
                    false
                }
            });
            if tx.is_closed() {
                break;
            }
        }
    });
    rx
}

/// Serve `handler` on `addr` (TLS when `tls` is given) while `power` is up; while down the
/// address stalls or refuses as `power.down` says. Binds before returning when initially up,
/// so address errors surface to the caller.
pub async fn serve_switched(
    addr: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
    power: impl Into<Power>,
    handler: Handler,
) -> std::io::Result<JoinHandle<()>> {
    let Power { mut up, down: mode } = power.into();
    let listener = if *up.borrow_and_update() {
        Some(bind(addr)?)
    } else {
        None
    };
    Ok(switched(addr, listener, tls, Power::new(up, mode), handler))
}

/// Serve `handler` on a listener bound already (a subnet's [`crate::addr::Claim`]), always up.
pub fn serve_claimed(
    listener: std::net::TcpListener,
    handler: Handler,
) -> std::io::Result<(JoinHandle<()>, watch::Sender<bool>)> {
    let addr = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(listener)?;
    let (always, up) = watch::channel(true);
    let task = switched(
        addr,
        Some(listener),
        None,
        Power::new(up, DownMode::Refuse),
        handler,
    );
    Ok((task, always))
}

fn switched(
    addr: SocketAddr,
    mut listener: Option<TcpListener>,
    tls: Option<Arc<rustls::ServerConfig>>,
    power: Power,
    handler: Handler,
) -> JoinHandle<()> {
    let Power { mut up, down: mode } = power;
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    tokio::spawn(async move {
        // Held while the address is down and stalls; dropped before the listener comes back.
        let mut _hole = None;
        if listener.is_none() && mode == DownMode::Stall {
            _hole = BlackHole::open(addr).await.ok();
        }
        loop {
            match &listener {
                Some(l) => {
                    tokio::select! {
                        accepted = l.accept() => {
                            let Ok((stream, client)) = accepted else { continue };
                            let info = ConnInfo { client, server: addr };
                            tokio::spawn(serve_conn(stream, info, acceptor.clone(), Power::new(up.clone(), mode), handler.clone()));
                        }
                        changed = up.changed() => {
                            if changed.is_err() { return; }
                            if !*up.borrow_and_update() {
                                listener = None;
                                if mode == DownMode::Stall {
                                    _hole = BlackHole::open(addr).await.ok();
                                }
                            }
                        }
                    }
                }
                None => {
                    if up.changed().await.is_err() {
                        return;
                    }
                    if *up.borrow_and_update() {
                        _hole = None;
                        // The port was ours a moment ago; retry briefly if the kernel lags.
                        for _ in 0..50 {
                            match bind(addr) {
                                Ok(l) => {
                                    listener = Some(l);
                                    break;
                                }
                                Err(e) => {
                                    tracing::debug!(%addr, error = %e, "rebind failed, retrying");
                                    tokio::time::sleep(Duration::from_millis(20)).await;
                                }
                            }
                        }
                    }
                }
            }
        }
    })
}

async fn serve_conn(
    stream: tokio::net::TcpStream,
    info: ConnInfo,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    power: Power,
    handler: Handler,
) {
    let _ = stream.set_nodelay(true);
    let service = hyper::service::service_fn(move |req| {
        let h = handler.clone();
        async move { Ok::<_, std::convert::Infallible>(h(req, info).await) }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let Power { up, down: mode } = power;
    let mut down_signal = up.clone();
    let down = async move {
        let _ = down_signal.wait_for(|v| !*v).await;
    };
    // While the machine is down a stalled connection is kept but never polled: the client's
    // requests go unanswered until the machine is back, which then resets it.
    let freeze = |mode: DownMode, mut up: watch::Receiver<bool>| async move {
        if mode == DownMode::Stall {
            crate::power::frozen_until_up(&mut up, None).await;
        }
    };
    match acceptor {
        Some(acc) => {
            let tls = tokio::select! {
                r = acc.accept(stream) => r,
                _ = tokio::time::sleep(Duration::from_secs(10)) => return,
            };
            let Ok(tls) = tls else { return };
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = down => {}
            }
            freeze(mode, up.clone()).await;
        }
        None => {
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = down => {}
            }
            freeze(mode, up.clone()).await;
        }
    }
}
