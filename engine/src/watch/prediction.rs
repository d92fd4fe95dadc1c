//! The host-loss prediction of `gates watch`, beside the evaluation of changes. At 5,000
//! nodes the prediction takes most of a second; run in the evaluation's loop, a change that
//! arrived meanwhile waited for it. It now runs on a thread of its own over a copy of the
//! state (a copy shares every pod), and the loop holds it at its next pause point while it
//! evaluates a change, then lets it go on where it stood: on two cores, sharing them with
//! the prediction slowed the changed pod's trials more than waiting did.
//!
//! A prediction in progress is not restarted by a change: under steady churn it would never
//! finish. The changes it did not see are predicted by the next one, started as soon as it
//! is done; until then the prediction of the state before is served.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use gates_core::pause::Pause;

use crate::config::Environment;
use crate::runner::{self, TrialResult, TrialSpec};
use crate::state::State;
use crate::verdict::Finding;

/// What the loop holds while it evaluates a change: the prediction's threads wait at their
/// next pause point until it lets go. Not held, a pause point reads one flag.
#[derive(Debug, Default)]
pub struct Gate {
    held: AtomicBool,
    shut: Mutex<bool>,
    open: Condvar,
    /// Threads waiting at a pause point now.
    waiting: AtomicUsize,
}

impl Pause for Gate {
    fn point(&self) {
        if !self.held.load(Ordering::Acquire) {
            return;
        }
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let mut shut = lock(&self.shut);
        while *shut {
            shut = self.open.wait(shut).unwrap_or_else(|e| e.into_inner());
        }
        drop(shut);
        self.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

fn lock(m: &Mutex<bool>) -> MutexGuard<'_, bool> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Gate {
    /// Holds the prediction at its next pause point until the returned guard is dropped.
    pub fn hold(&self) -> Held<'_> {
        *lock(&self.shut) = true;
        self.held.store(true, Ordering::Release);
        Held(self)
    }

    /// Threads waiting at a pause point now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }
}

/// The gate held; dropped, the prediction goes on.
#[derive(Debug)]
pub struct Held<'g>(&'g Gate);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let gate = self.0;
        gate.held.store(false, Ordering::Release);
        *lock(&gate.shut) = false;
        gate.open.notify_all();
    }
}

/// A prediction to run: its trials (their indices among the watch's and the specs), the
/// environment, and the state it predicts from.
#[derive(Debug)]
pub struct Job {
    /// How many whole evaluations came before it.
    pub after_whole: u64,
    pub indices: Vec<usize>,
    pub specs: Vec<TrialSpec>,
    pub env: Environment,
    pub state: State,
}

/// A prediction's results, for the trials at `indices`.
#[derive(Debug)]
pub struct Predicted {
    /// How many whole evaluations came before the prediction started.
    pub after_whole: u64,
    pub indices: Vec<usize>,
    pub results: Vec<TrialResult>,
}

/// A prediction running on its own thread.
#[derive(Debug)]
pub struct Running {
    after_whole: u64,
    indices: Vec<usize>,
    specs: Vec<TrialSpec>,
    done: tokio::sync::oneshot::Receiver<Vec<TrialResult>>,
}

impl Job {
    /// Starts the prediction on a thread of its own, held at its pause points while `gate`
    /// is. The state and the prediction's model are dropped on that thread too.
    pub fn start(self, gate: Arc<Gate>) -> Running {
        let (tx, done) = tokio::sync::oneshot::channel();
        let specs = self.specs.clone();
        let (indices, after_whole) = (self.indices.clone(), self.after_whole);
        let spawned = std::thread::Builder::new()
            .name("gates-host-loss".into())
            .spawn(move || {
                let chosen: Vec<&TrialSpec> = self.specs.iter().collect();
                let results = runner::evaluate_pausing(&chosen, &self.env, &self.state, &*gate);
                let _ = tx.send(results);
            });
        if let Err(err) = spawned {
            tracing::warn!("the host-loss prediction could not start a thread: {err}");
        }
        Running {
            after_whole,
            indices,
            specs,
            done,
        }
    }
}

impl Running {
    /// The prediction's results, with the indices of its trials, once it is done. A
    /// prediction that ended without results (its thread could not start, or panicked)
    /// gives each trial an error that says so.
    pub async fn finished(&mut self) -> Predicted {
        let results = match (&mut self.done).await {
            Ok(results) => results,
            Err(_) => self
                .specs
                .iter()
                .map(|spec| {
                    let finding = Finding::error(
                        "the host-loss prediction ended without a verdict (its thread stopped; \
                         the log says why): restart gates watch",
                    );
                    runner::result_of(spec, finding, std::time::Duration::ZERO)
                })
                .collect(),
        };
        Predicted {
            after_whole: self.after_whole,
            indices: self.indices.clone(),
            results,
        }
    }
}

/// Waits for the running prediction, if any (forever when none runs), and takes it.
pub async fn finished(running: &mut Option<Running>) -> Predicted {
    match running.as_mut() {
        Some(r) => {
            let done = r.finished().await;
            *running = None;
            done
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[tokio::test]
    async fn a_held_prediction_waits_at_a_pause_point_and_once_let_go_gives_the_same_verdict() {
        let (config, state) = super::super::tests::production();
        let env = config
            .environment("production")
            .expect("production")
            .clone();
        let specs: Vec<TrialSpec> = runner::trials(&config, &env)
            .into_iter()
            .filter(|s| matches!(s.check, crate::checks::CheckSpec::HostLoss(_)))
            .collect();
        assert_eq!(specs.len(), 1);
        let chosen: Vec<&TrialSpec> = specs.iter().collect();
        let direct = runner::evaluate(&chosen, &env, &state);

        let gate = Arc::new(Gate::default());
        let held = gate.hold();
        let mut running = Job {
            after_whole: 3,
            indices: vec![7],
            specs: specs.clone(),
            env: env.clone(),
            state,
        }
        .start(gate.clone());
        let waited = Instant::now();
        while gate.waiting() == 0 {
            assert!(
                waited.elapsed() < Duration::from_secs(30),
                "the prediction never reached a pause point"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            running.done.try_recv().is_err(),
            "no verdict while it is held"
        );
        drop(held);
        let done = running.finished().await;
        assert_eq!((done.after_whole, done.indices), (3, vec![7]));
        assert_eq!(done.results.len(), 1);
        assert_eq!(done.results[0].finding, direct[0].finding);
        assert_eq!(gate.waiting(), 0);
    }
}
