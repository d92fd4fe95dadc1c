//! SIGINT and SIGTERM, caught from just before the journal is written: from then on a signal
//! ends the outage and the run restores before it exits.

use tokio::sync::watch;
use tokio::time::Instant;

pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        2 => "SIGINT",
        15 => "SIGTERM",
        _ => "a signal",
    }
}

/// The first signal a run received, if any; later ones are swallowed so restore can finish.
pub struct Signals {
    rx: watch::Receiver<Option<i32>>,
    /// Kept by [`Signals::manual`] so a test's receiver stays open.
    _tx: Option<watch::Sender<Option<i32>>>,
}

/// A signal the run must answer (by restoring first) cannot be caught.
#[derive(Debug, thiserror::Error)]
#[error("cannot catch {signal}: {source}; without it an interrupted run could leave VMs stopped")]
pub struct SignalError {
    pub signal: &'static str,
    #[source]
    pub source: std::io::Error,
}

impl Signals {
    pub fn install() -> Result<Signals, SignalError> {
        use tokio::signal::unix::{SignalKind, signal};
        let catch = |kind: SignalKind, name: &'static str| {
            signal(kind).map_err(|source| SignalError {
                signal: name,
                source,
            })
        };
        let mut interrupt = catch(SignalKind::interrupt(), "SIGINT")?;
        let mut terminate = catch(SignalKind::terminate(), "SIGTERM")?;
        let (tx, rx) = watch::channel(None);
        tokio::spawn(async move {
            loop {
                let got = tokio::select! {
                    _ = interrupt.recv() => 2,
                    _ = terminate.recv() => 15,
                };
                first_only(&tx, got);
            }
        });
        Ok(Signals { rx, _tx: None })
    }

    /// Signals a test sends by hand through the returned sender.
    pub fn manual() -> (Signals, Sender) {
        let (tx, rx) = watch::channel(None);
        (
            Signals {
                rx,
                _tx: Some(tx.clone()),
            },
            Sender(tx),
        )
    }

    pub fn received(&self) -> Option<i32> {
        *self.rx.borrow()
    }

    /// Sleep until `until`, or return early with the signal.
    pub async fn sleep_until(&mut self, until: Instant) -> Option<i32> {
        if let Some(sig) = self.received() {
            return Some(sig);
        }
        tokio::select! {
            _ = tokio::time::sleep_until(until) => self.received(),
            _ = self.rx.changed() => self.received(),
        }
    }
}

/// Sends a signal to [`Signals::manual`].
#[derive(Clone)]
pub struct Sender(watch::Sender<Option<i32>>);

impl Sender {
    pub fn send(&self, signal: i32) {
        first_only(&self.0, signal);
    }
}

fn first_only(tx: &watch::Sender<Option<i32>>, got: i32) {
    tx.send_if_modified(|current| {
        if current.is_none() {
            *current = Some(got);
            true
        } else {
            false
        }
    });
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_signal_ends_a_sleep_early_and_only_the_first_counts() {
        let (mut signals, sender) = Signals::manual();
        let start = Instant::now();
        assert_eq!(
            signals.sleep_until(start + Duration::from_secs(1)).await,
            None
        );
        let later = sender.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            later.send(15);
            later.send(2);
        });
        let got = signals.sleep_until(start + Duration::from_secs(60)).await;
        assert_eq!(got, Some(15));
        assert!(start.elapsed() < Duration::from_secs(5));
        assert_eq!(signal_name(15), "SIGTERM");
    }
}
