//! The one clock of a chaos run. Every phase reads time through it, so a test can run the
//! phases on tokio's paused time and a fixed wall clock and get the same timeline each time.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

/// Monotonic time for deadlines and the timeline, wall time for the reports and the journal.
pub trait Clock: Send + Sync {
    /// Now on the monotonic clock the timeline is measured on.
    fn now(&self) -> Instant;
    /// Now on the wall clock.
    fn utc(&self) -> DateTime<Utc>;
    /// Time since `since` on the monotonic clock.
    fn since(&self, since: Instant) -> Duration {
        self.now().saturating_duration_since(since)
    }
}

/// The machine's clocks.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn utc(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A wall clock that moves only with tokio's (paused, in tests) monotonic time, from a fixed
/// start: the same run gives the same stamps.
#[derive(Debug, Clone, Copy)]
pub struct TestClock {
    origin: Instant,
    wall: DateTime<Utc>,
}

impl TestClock {
    pub fn starting_at(wall: DateTime<Utc>) -> TestClock {
        TestClock {
            origin: Instant::now(),
            wall,
        }
    }
}

impl Clock for TestClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn utc(&self) -> DateTime<Utc> {
        let elapsed = Instant::now().saturating_duration_since(self.origin);
        self.wall + chrono::Duration::from_std(elapsed).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_test_clocks_wall_time_follows_paused_monotonic_time() {
        let start = DateTime::parse_from_rfc3339("2026-11-29T20:15:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let clock = TestClock::starting_at(start);
        let origin = clock.now();
        tokio::time::sleep(Duration::from_secs(90)).await;
        assert_eq!(clock.since(origin), Duration::from_secs(90));
        assert_eq!(clock.utc(), start + chrono::Duration::seconds(90));
    }
}
