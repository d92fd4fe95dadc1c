//! What a machine that is off looks like from the network. A powered-off VM, a shut-down
//! Proxmox host or an API VIP nobody holds does not answer at all: packets to it are dropped,
//! so a client's connect hangs until its own timeout and an open connection goes silent. That
//! is the default here ([`DownMode::Stall`]), because it is what the harness's timeouts and the
//! chaos sampler must survive. [`DownMode::Refuse`] (connection refused at once, open
//! connections reset) remains a scenario option, for a host that is up but whose service is
//! stopped.
//!
//! On loopback nothing drops packets, so a stalled address keeps a listening socket with an
//! accept queue of one, filled by a connection of our own and never accepted: the kernel then
//! drops every further SYN, exactly as a dead host's network does.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;

/// How an address behaves while the machine behind it is down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DownMode {
    /// Connects time out and open connections go silent (packets dropped), as on real hardware.
    #[default]
    Stall,
    /// Connects are refused at once and open connections are reset.
    Refuse,
}

/// An address's up/down signal and how it looks while down.
#[derive(Debug, Clone)]
pub struct Power {
    pub up: watch::Receiver<bool>,
    pub down: DownMode,
}

impl Power {
    pub fn new(up: watch::Receiver<bool>, down: DownMode) -> Power {
        Power { up, down }
    }
}

/// A bare signal stalls while down, the default of the lab.
impl From<watch::Receiver<bool>> for Power {
    fn from(up: watch::Receiver<bool>) -> Power {
        Power {
            up,
            down: DownMode::Stall,
        }
    }
}

/// A bound address that never answers: its accept queue is full, so new SYNs are dropped.
#[derive(Debug)]
pub struct BlackHole {
    _listener: TcpListener,
    _filler: Option<TcpStream>,
}

impl BlackHole {
    /// Bind `addr` with an accept queue of one and fill it. Retries briefly when the port is
    /// still held by the listener that just closed.
    pub async fn open(addr: SocketAddr) -> io::Result<BlackHole> {
        let mut last = None;
        for _ in 0..50 {
            match Self::try_open(addr).await {
                Ok(hole) => return Ok(hole),
                Err(e) => {
                    last = Some(e);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("could not bind")))
    }

    async fn try_open(addr: SocketAddr) -> io::Result<BlackHole> {
        let sock = match addr {
            SocketAddr::V4(_) => TcpSocket::new_v4()?,
            SocketAddr::V6(_) => TcpSocket::new_v6()?,
        };
        sock.set_reuseaddr(true)?;
        sock.bind(addr)?;
        let listener = sock.listen(0)?;
        let local = listener.local_addr()?;
        // One completed connection fills a backlog-0 queue; after it every SYN is dropped.
        let filler = tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(local))
            .await
            .ok()
            .and_then(Result::ok);
        Ok(BlackHole {
            _listener: listener,
            _filler: filler,
        })
    }
}

/// Wait while a stalled connection stays silent: until the machine is up again (a rebooted or
/// new holder resets the old connection) or the server stops (`stopped` true or gone).
pub async fn frozen_until_up(
    up: &mut watch::Receiver<bool>,
    stopped: Option<watch::Receiver<bool>>,
) {
    let back = async {
        let _ = up.wait_for(|on| *on).await;
    };
    match stopped {
        Some(mut stop) => {
            tokio::select! {
                _ = back => {}
                _ = stop.wait_for(|s| *s) => {}
            }
        }
        None => back.await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_black_hole_lets_connects_time_out_instead_of_refusing() {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        let hole = BlackHole::open(addr).await.unwrap();
        let attempt =
            tokio::time::timeout(Duration::from_millis(300), TcpStream::connect(addr)).await;
        assert!(attempt.is_err(), "the connect must hang: {attempt:?}");
        drop(hole);
        let refused = TcpStream::connect(addr).await;
        assert_eq!(
            refused.err().map(|e| e.kind()),
            Some(io::ErrorKind::ConnectionRefused)
        );
    }
}
