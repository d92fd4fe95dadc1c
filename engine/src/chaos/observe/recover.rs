//! Recover: after restore, check the cluster again and again until everything is back or the
//! recovery timeout passes. What "back" means is the caller's check (a fresh state read
//! against the recovery criteria); a signal ends the wait.

use std::future::Future;
use std::time::Duration;

use super::observers::Observers;
use crate::chaos::act::signals::Signals;
use crate::chaos::context::Ctx;
use crate::chaos::plan::timings::Timings;

#[derive(Debug, Clone, PartialEq)]
pub struct Recovery {
    /// What was not back at the last check; empty when everything is.
    pub outstanding: Vec<String>,
    /// When everything was back (seconds on the timeline).
    pub recovered: Option<f64>,
    /// From the start of the wait to its end.
    pub took: Duration,
    /// A signal that ended the wait.
    pub interrupted: Option<i32>,
    /// Whether any check ran at all (not when the VMs could not be started).
    pub checked: bool,
}

pub async fn recover<F, Fut>(
    ctx: &Ctx<'_>,
    observers: &Observers<'_>,
    signals: &mut Signals,
    timings: &Timings,
    restored: bool,
    mut check: F,
) -> Recovery
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Vec<String>>,
{
    let started = ctx.clock.now();
    let deadline = started + timings.recovery_timeout;
    let mut recovery = Recovery {
        outstanding: vec!["recovery was not checked".to_string()],
        recovered: None,
        took: Duration::ZERO,
        interrupted: None,
        checked: false,
    };
    if restored {
        observers.show(
            ctx,
            Some("recovery: waiting for nodes, etcd, volumes and controllers"),
        );
        loop {
            recovery.outstanding = check().await;
            recovery.checked = true;
            observers.show(ctx, None);
            if recovery.outstanding.is_empty() {
                recovery.recovered = Some(ctx.seconds());
                ctx.event("recovered", &ctx.env.name, "");
                break;
            }
            if ctx.clock.now() >= deadline {
                break;
            }
            let next = (ctx.clock.now() + timings.poll).min(deadline);
            if let Some(sig) = signals.sleep_until(next).await {
                recovery.interrupted = Some(sig);
                break;
            }
        }
    }
    recovery.took = ctx.clock.since(started);
    recovery
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use chrono::Utc;

    use super::*;
    use crate::chaos::clock::TestClock;
    use crate::chaos::events::Events;
    use crate::chaos::reporters::{Recorder, Reporters};
    use crate::chaos::test_support::environment;

    async fn wait(
        restored: bool,
        back_after: usize,
        signal: bool,
    ) -> (Recovery, usize, Vec<String>) {
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
        let timings = Timings::of(
            &gates_core::yaml::from_str("{sample_interval: 1s, recovery_timeout: 30s}").unwrap(),
            false,
        );
        let observers = Observers::start(&ctx, &[], &timings, None, None, &Events::default());
        let (mut signals, sender) = Signals::manual();
        if signal {
            sender.send(15);
        }
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let got = recover(&ctx, &observers, &mut signals, &timings, restored, || {
            let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                if n >= back_after {
                    Vec::new()
                } else {
                    vec!["nodes not Ready: talos-lab-cp-02".to_string()]
                }
            }
        })
        .await;
        observers.stop().await;
        (got, calls.load(Ordering::SeqCst), recorder.lines())
    }

    #[tokio::test(start_paused = true)]
    async fn recovery_is_timed_from_restore_to_the_first_check_that_finds_everything_back() {
        let (got, calls, lines) = wait(true, 3, false).await;
        assert_eq!(calls, 3);
        assert!(got.outstanding.is_empty());
        assert_eq!(got.took, Duration::from_secs(10), "two polls of 5s");
        assert_eq!(got.recovered, Some(10.0));
        assert!(
            lines.iter().any(|l| l == "event recovered lab "),
            "{lines:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn recovery_gives_up_at_the_timeout_with_what_is_still_missing() {
        let (got, _, _) = wait(true, usize::MAX, false).await;
        assert_eq!(got.took, Duration::from_secs(30));
        assert_eq!(got.recovered, None);
        assert_eq!(
            got.outstanding,
            vec!["nodes not Ready: talos-lab-cp-02".to_string()]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_checked_when_the_vms_could_not_be_started() {
        let (got, calls, _) = wait(false, 1, false).await;
        assert_eq!((calls, got.checked), (0, false));
        assert_eq!(
            got.outstanding,
            vec!["recovery was not checked".to_string()]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_signal_ends_the_wait_after_one_check() {
        let (got, calls, _) = wait(true, usize::MAX, true).await;
        assert_eq!((calls, got.interrupted), (1, Some(15)));
    }
}
