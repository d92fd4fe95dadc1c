//! Observe: the host stays down until the outage deadline, unless a probe breaks its budget
//! first (no point in hurting the cluster longer) or a signal arrives. Says why it ends.

use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

use super::observers::Observers;
use crate::chaos::act::signals::{Signals, signal_name};
use crate::chaos::context::Ctx;

/// Why the run restores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreReason {
    /// A stop (or the host's shutdown) failed: the outage is not observed at all.
    StopFailed(Vec<String>),
    /// The first signal of the run.
    Signal(i32),
    Deadline,
    /// This probe was over its budget (`why` says by how much when it was seen).
    OverBudget {
        probe: String,
        why: String,
    },
}

impl fmt::Display for RestoreReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RestoreReason::StopFailed(errors) => write!(f, "a stop failed: {}", errors.join("; ")),
            RestoreReason::Signal(sig) => write!(f, "{} received", signal_name(*sig)),
            RestoreReason::Deadline => f.write_str("the outage deadline was reached"),
            RestoreReason::OverBudget { why, .. } => write!(f, "a probe broke its budget: {why}"),
        }
    }
}

pub async fn observe(
    ctx: &Ctx<'_>,
    observers: &Observers<'_>,
    signals: &mut Signals,
    host: &str,
    (fault_at, outage): (Instant, Duration),
    interval: Duration,
    stop_errors: &[String],
) -> RestoreReason {
    if !stop_errors.is_empty() {
        return RestoreReason::StopFailed(stop_errors.to_vec());
    }
    let deadline = fault_at + outage;
    observers.show(
        ctx,
        Some(&format!(
            "outage: {host} down until the deadline ({:.0}s)",
            outage.as_secs_f64()
        )),
    );
    loop {
        let next = (ctx.clock.now() + interval).min(deadline);
        if let Some(sig) = signals.sleep_until(next).await {
            return RestoreReason::Signal(sig);
        }
        observers.show(ctx, None);
        if ctx.clock.now() >= deadline {
            return RestoreReason::Deadline;
        }
        if let Some((probe, why)) = observers.over_budget() {
            return RestoreReason::OverBudget { probe, why };
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::Utc;

    use super::*;
    use crate::chaos::clock::TestClock;
    use crate::chaos::events::Events;
    use crate::chaos::plan::timings::Timings;
    use crate::chaos::reporters::{Recorder, Reporters};
    use crate::chaos::test_support::{budget, environment, probe};
    use crate::chaos::timeline::Observation;

    async fn outage(
        answer: impl Fn(Duration) -> Observation + Send + Sync + 'static,
        stop_errors: &[String],
    ) -> (RestoreReason, Duration) {
        let env = environment("lab", "allowed: true");
        let clock = TestClock::starting_at(Utc::now());
        let origin = tokio::time::Instant::now();
        let ctx = Ctx {
            env: &env,
            clock: &clock,
            out: Reporters::new().with(Arc::new(Recorder::default())),
            origin,
        };
        let probes = vec![probe("api", budget(2, 3), origin, answer)];
        let timings = Timings::of(
            &gates_core::yaml::from_str("{sample_interval: 100ms}").unwrap(),
            false,
        );
        let observers = Observers::start(&ctx, &probes, &timings, None, None, &Events::default());
        let (mut signals, _sender) = Signals::manual();
        let reason = observe(
            &ctx,
            &observers,
            &mut signals,
            "pve2",
            (origin, Duration::from_secs(10)),
            timings.interval,
            stop_errors,
        )
        .await;
        let ended = ctx.at();
        observers.stop().await;
        (reason, ended)
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_outage_lasts_until_the_deadline() {
        let (reason, ended) = outage(|_| Observation::Up, &[]).await;
        assert_eq!(reason, RestoreReason::Deadline);
        assert_eq!(ended, Duration::from_secs(10));
        assert_eq!(reason.to_string(), "the outage deadline was reached");
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_over_its_budget_ends_the_outage_early() {
        let (reason, ended) = outage(|_| Observation::Down("refused".into()), &[]).await;
        assert!(
            matches!(&reason, RestoreReason::OverBudget { probe, .. } if probe == "api"),
            "{reason:?}"
        );
        assert!(ended < Duration::from_secs(4), "{ended:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_stop_restores_at_once() {
        let errors = vec!["stop 201 talos-lab-cp-02: refused".to_string()];
        let (reason, ended) = outage(|_| Observation::Up, &errors).await;
        assert_eq!(reason, RestoreReason::StopFailed(errors));
        assert_eq!(ended, Duration::ZERO);
    }
}
