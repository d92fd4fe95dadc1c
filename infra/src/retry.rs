//! Bounded retry with exponential backoff for idempotent reads.

use std::future::Future;
use std::time::Duration;

/// How often and how patiently a read is retried. Only errors the caller marks as
/// retryable are retried; the last error is returned unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts, including the first (at least 1).
    pub attempts: u32,
    /// Pause before the second attempt; doubled each time up to `max_backoff`.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 3,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(2),
        }
    }
}

impl RetryPolicy {
    /// A single attempt: for writes and for tests that want the first error.
    pub const NONE: RetryPolicy = RetryPolicy {
        attempts: 1,
        initial_backoff: Duration::ZERO,
        max_backoff: Duration::ZERO,
    };

    /// Runs `op` until it succeeds, fails with an error `retryable` rejects, or the
    /// attempts are used up.
    pub async fn run<T, E, F, Fut>(&self, retryable: impl Fn(&E) -> bool, mut op: F) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let attempts = self.attempts.max(1);
        let mut backoff = self.initial_backoff;
        let mut attempt = 1;
        loop {
            match op().await {
                Ok(v) => return Ok(v),
                Err(e) if attempt < attempts && retryable(&e) => {
                    tracing::debug!(attempt, ?backoff, "retrying read");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(self.max_backoff);
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[tokio::test]
    async fn retries_only_retryable_errors_and_stops_at_the_bound() {
        let policy = RetryPolicy {
            attempts: 3,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(2),
        };
        let calls = Cell::new(0);
        let r: Result<(), &str> = policy
            .run(
                |e| *e == "again",
                || {
                    calls.set(calls.get() + 1);
                    async { Err("again") }
                },
            )
            .await;
        assert_eq!(r, Err("again"));
        assert_eq!(calls.get(), 3);

        calls.set(0);
        let r: Result<(), &str> = policy
            .run(
                |e| *e == "again",
                || {
                    calls.set(calls.get() + 1);
                    async { Err("final") }
                },
            )
            .await;
        assert_eq!(r, Err("final"));
        assert_eq!(calls.get(), 1);

        calls.set(0);
        let r: Result<u32, &str> = policy
            .run(
                |e| *e == "again",
                || {
                    calls.set(calls.get() + 1);
                    let n = calls.get();
                    async move { if n < 2 { Err("again") } else { Ok(n) } }
                },
            )
            .await;
        assert_eq!(r, Ok(2));
    }
}
