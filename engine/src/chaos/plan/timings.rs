//! How long each part of a run lasts, from the environment's chaos settings: one place, so
//! the plan's deadline and the phases agree.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::config::ChaosSpec;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// Between two samples of a probe.
    pub interval: Duration,
    /// The host stays down this long at most.
    pub outage: Duration,
    /// Recovery may take this long after restore.
    pub recovery_timeout: Duration,
    /// Sampling before the fault, to prove steady state.
    pub baseline: Duration,
    /// One probe sample may take this long.
    pub timeout: Duration,
    /// Between two recovery checks.
    pub poll: Duration,
    /// A woken host boots before its VMs can start (whole-host mode only).
    pub boot: Duration,
}

impl Timings {
    pub fn of(spec: &ChaosSpec, whole_host: bool) -> Timings {
        let interval: Duration = spec.sample_interval.into();
        let recovery_timeout: Duration = spec.recovery_timeout.into();
        Timings {
            interval,
            outage: spec.outage.into(),
            recovery_timeout,
            baseline: (interval * 10).clamp(Duration::from_secs(1), Duration::from_secs(10)),
            timeout: (interval * 4).clamp(Duration::from_secs(1), Duration::from_secs(5)),
            poll: (interval * 5).clamp(Duration::from_millis(500), Duration::from_secs(5)),
            boot: if whole_host {
                recovery_timeout
            } else {
                Duration::ZERO
            },
        }
    }

    /// When every VM must be running again: baseline, outage, a host's boot and five minutes.
    pub fn restore_by(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        now + chrono::Duration::from_std(
            self.baseline + self.outage + self.boot + Duration::from_secs(300),
        )
        .unwrap_or_else(|_| chrono::Duration::hours(1))
    }

    /// How often a power action's state is polled.
    pub fn power_poll(&self) -> Duration {
        self.interval
            .clamp(Duration::from_millis(100), Duration::from_secs(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> ChaosSpec {
        gates_core::yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn the_baseline_is_ten_samples_between_one_and_ten_seconds() {
        let fast = Timings::of(&spec("{sample_interval: 50ms}"), false);
        assert_eq!(fast.baseline, Duration::from_secs(1));
        let slow = Timings::of(&spec("{sample_interval: 5s}"), false);
        assert_eq!(slow.baseline, Duration::from_secs(10));
        assert_eq!(slow.timeout, Duration::from_secs(5));
    }

    #[test]
    fn a_whole_host_deadline_allows_for_the_hosts_boot() {
        let now = Utc::now();
        let settings = spec("{sample_interval: 1s, outage: 60s, recovery_timeout: 120s}");
        let vms = Timings::of(&settings, false).restore_by(now);
        let host = Timings::of(&settings, true).restore_by(now);
        assert_eq!(vms, now + chrono::Duration::seconds(10 + 60 + 300));
        assert_eq!(host - vms, chrono::Duration::seconds(120));
    }
}
