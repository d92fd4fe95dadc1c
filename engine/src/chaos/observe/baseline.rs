//! Baseline: sample every probe before the fault. The fault is injected only when every probe
//! is up (or cannot tell) at the end of it; a signal ends it with nothing touched.

use super::observers::Observers;
use crate::chaos::act::signals::Signals;
use crate::chaos::context::Ctx;
use crate::chaos::plan::timings::Timings;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Baseline {
    /// Every probe is up or unknown: the fault may go ahead.
    Steady,
    /// A signal arrived; nothing was touched.
    Interrupted(i32),
    /// These probes are down (or took no sample); nothing was touched.
    Unsteady(Vec<String>),
}

pub async fn baseline(
    ctx: &Ctx<'_>,
    observers: &Observers<'_>,
    signals: &mut Signals,
    timings: &Timings,
) -> Baseline {
    ctx.phase(&format!(
        "baseline: sampling {} probes",
        observers.lines().len()
    ));
    let end = ctx.origin + timings.baseline;
    while ctx.clock.now() < end {
        let next = (ctx.clock.now() + timings.interval).min(end);
        if let Some(sig) = signals.sleep_until(next).await {
            return Baseline::Interrupted(sig);
        }
        observers.show(ctx, None);
    }
    let unsteady = observers.unsteady();
    if unsteady.is_empty() {
        Baseline::Steady
    } else {
        Baseline::Unsteady(unsteady)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use chrono::Utc;

    use super::*;
    use crate::chaos::clock::TestClock;
    use crate::chaos::events::Events;
    use crate::chaos::reporters::{Recorder, Reporters};
    use crate::chaos::test_support::{budget, environment, probe};
    use crate::chaos::timeline::Observation;

    fn timings() -> Timings {
        Timings::of(
            &gates_core::yaml::from_str("{sample_interval: 100ms}").unwrap(),
            false,
        )
    }

    async fn run_baseline(
        answer: impl Fn(Duration) -> Observation + Send + Sync + 'static,
        signal_at: Option<Duration>,
    ) -> (Baseline, Vec<String>) {
        let env = environment("lab", "allowed: true");
        let clock = TestClock::starting_at(Utc::now());
        let recorder = Arc::new(Recorder::default());
        let origin = tokio::time::Instant::now();
        let ctx = Ctx {
            env: &env,
            clock: &clock,
            out: Reporters::new().with(recorder.clone()),
            origin,
        };
        let probes = vec![probe("api", budget(5, 5), origin, answer)];
        let timings = timings();
        let observers = Observers::start(&ctx, &probes, &timings, None, None, &Events::default());
        let (mut signals, sender) = Signals::manual();
        if let Some(at) = signal_at {
            tokio::spawn(async move {
                tokio::time::sleep(at).await;
                sender.send(2);
            });
        }
        let got = baseline(&ctx, &observers, &mut signals, &timings).await;
        observers.stop().await;
        (got, recorder.lines())
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_up_throughout_is_the_steady_state() {
        let (got, lines) = run_baseline(|_| Observation::Up, None).await;
        assert_eq!(got, Baseline::Steady);
        assert_eq!(lines[0], "phase baseline: sampling 1 probes");
        assert!(lines.iter().any(|l| l == "probes api=up"), "{lines:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_down_at_the_end_of_the_baseline_is_not_steady() {
        let (got, _) = run_baseline(
            |at| {
                if at < Duration::from_millis(500) {
                    Observation::Up
                } else {
                    Observation::Down("refused".into())
                }
            },
            None,
        )
        .await;
        assert_eq!(got, Baseline::Unsteady(vec!["api is down: refused".into()]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_signal_ends_the_baseline_at_once() {
        let (got, _) = run_baseline(|_| Observation::Up, Some(Duration::from_millis(250))).await;
        assert_eq!(got, Baseline::Interrupted(2));
    }
}
