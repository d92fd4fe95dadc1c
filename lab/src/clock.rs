//! Simulated time. The lab runs `speed` times faster than the wall clock: one real second is
//! `speed` simulated seconds. Built on tokio's clock so tests may also pause time.

use chrono::{DateTime, Utc};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug, Clone)]
pub struct SimClock {
    start_real: Instant,
    start_wall: DateTime<Utc>,
    speed: f64,
}

impl SimClock {
    /// `speed` below a tiny positive value is clamped, so a bad option cannot stop time.
    pub fn new(speed: f64) -> Self {
        let speed = if speed.is_finite() && speed > 0.001 {
            speed
        } else {
            1.0
        };
        SimClock {
            start_real: Instant::now(),
            start_wall: Utc::now(),
            speed,
        }
    }

    pub fn speed(&self) -> f64 {
        self.speed
    }

    /// Simulated time elapsed since the lab started.
    pub fn now(&self) -> Duration {
        self.start_real.elapsed().mul_f64(self.speed)
    }

    /// Real time elapsed since the lab started.
    pub fn real_elapsed(&self) -> Duration {
        self.start_real.elapsed()
    }

    /// Real seconds since start that correspond to simulated offset `sim`.
    pub fn real_of(&self, sim: Duration) -> Duration {
        sim.div_f64(self.speed)
    }

    /// The tokio instant at which simulated offset `sim` is reached.
    pub fn instant_of(&self, sim: Duration) -> Instant {
        self.start_real + self.real_of(sim)
    }

    /// Wall-clock time of the simulated offset (used for object timestamps).
    pub fn wall_of(&self, sim: Duration) -> DateTime<Utc> {
        self.start_wall
            + chrono::Duration::from_std(sim).unwrap_or_else(|_| chrono::Duration::zero())
    }

    pub fn wall_now(&self) -> DateTime<Utc> {
        self.wall_of(self.now())
    }

    /// The wall-clock time at which the lab started (the scenario's "now" at load).
    pub fn start_wall(&self) -> DateTime<Utc> {
        self.start_wall
    }
}
