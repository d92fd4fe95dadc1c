//! `gates watch`'s engine: keep one environment's state current (every Kubernetes kind listed
//! then watched, the other sources polled), and re-evaluate, a short while after each change,
//! only the trials whose inputs changed. A source broken for longer than its deadline turns
//! the trials that read it into errors that say how old their state is, never a stale pass.
//! Each evaluation is published as a whole [`Published`]: the record a `check` would write,
//! and how current each source is.

pub mod feed;
pub mod policy_report;
pub mod poll;
pub mod prediction;
pub mod shared;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::check::Judged;
use crate::checks::indexes::Kept;
use crate::checks::{CheckSpec, Indexes};
use crate::collect::kinds::Kind;
use crate::config::{Config, UnknownEnvironment};
use crate::record::CheckRecord;
use crate::runner::{self, TrialResult, TrialSpec};
use crate::state::{Input, State};
pub use shared::{Health, Shared, SourceHealth};

/// What one watch is asked to do (the command line fills it from `gates watch`'s flags).
#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub env: String,
    /// Where the chaos reports are: gate 4 judges the newest of the environment.
    pub reports: PathBuf,
    /// Between reads of the sources that cannot be watched.
    pub interval: Duration,
    /// How long a source may be unreadable before the trials that read it are errors.
    pub stale_after: Duration,
    /// How long to let changes gather before evaluating them.
    pub debounce: Duration,
}

/// One evaluation, as served.
#[derive(Debug, Clone)]
pub struct Published {
    pub record: CheckRecord,
    pub sources: Vec<SourceHealth>,
    /// Every source's first whole read is in.
    pub ready: bool,
    /// How many evaluations came before this one.
    pub evaluation: u64,
    /// The trials this evaluation re-evaluated (the others kept their findings).
    pub reevaluated: Vec<String>,
    /// Each trial's name → the evaluation that last re-evaluated it. A reader of the
    /// published channel sees only the newest evaluation; this says whether a trial was
    /// evaluated since a given one, though the evaluation that did it was not seen.
    pub evaluated_in: BTreeMap<String, u64>,
    pub at: DateTime<Utc>,
}

/// Why a watch cannot start.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(transparent)]
    UnknownEnvironment(#[from] UnknownEnvironment),
    /// No client can be built (no kubeconfig, an unusable context): said once, with the fix.
    #[error("{0}")]
    Kube(#[from] crate::collect::kube::KubeError),
}

/// Watch until the task is dropped, publishing each evaluation on `publish`.
pub async fn run(
    config: Config,
    config_dir: PathBuf,
    options: WatchOptions,
    publish: tokio::sync::watch::Sender<Option<Arc<Published>>>,
) -> Result<(), WatchError> {
    let env = config.environment(&options.env)?.clone();
    let client = crate::collect::kube::client(&env).await?;
    // A watch is quiet while nothing changes, but the API server sends a bookmark to each
    // watcher that asks about once a minute: one silent for longer is dead (a connection a
    // partition left hanging), ended and resumed.
    let watch_client =
        crate::collect::kube::client_reading(&env, Some(feed::SILENT_AT_MOST)).await?;
    let shared = Arc::new(Shared::new(options.interval));
    // Held while the watch runs: dropped with it, the feeds and polls stop.
    let _sources = start_sources(&config, &env, &options, client, watch_client, &shared);
    let specs = runner::trials(&config, &env);
    let judged = Judged {
        config: &config,
        config_dir: &config_dir,
        env: &env,
        started_at: Utc::now(),
        collect_time: Duration::ZERO,
        require_all: false,
    };
    let mut evaluator = Evaluator::new(&specs, &env);
    let mut evaluated_in: BTreeMap<String, u64> = BTreeMap::new();
    let gate = Arc::new(prediction::Gate::default());
    let mut predicting: Option<prediction::Running> = None;
    loop {
        let predicted = tokio::select! {
            _ = shared.changed.notified() => {
                tokio::time::sleep(options.debounce).await;
                None
            }
            done = prediction::finished(&mut predicting) => Some(done),
            // Staleness comes with time alone.
            _ = tokio::time::sleep(Duration::from_secs(1)) => None,
        };
        let started = Instant::now();
        let mut publish_now = |evaluator: &Evaluator, reevaluated: Vec<String>| {
            let record = Judged {
                collect_time: started.elapsed(),
                ..judged
            }
            .record(
                crate::state::provenance::Provenance::of(
                    &env,
                    &evaluator.state,
                    evaluator.state.collected_at,
                ),
                evaluator.state.source.clone(),
                evaluator.results.clone(),
                &[],
            );
            let evaluation = publish.borrow().as_ref().map_or(0, |p| p.evaluation + 1);
            for name in &reevaluated {
                evaluated_in.insert(name.clone(), evaluation);
            }
            publish.send_replace(Some(Arc::new(Published {
                record,
                sources: shared.health(),
                ready: shared.ready(),
                evaluation,
                reevaluated,
                evaluated_in: evaluated_in.clone(),
                at: Utc::now(),
            })));
        };
        if let Some(done) = predicted {
            let names = evaluator.predicted(done);
            if !names.is_empty() {
                publish_now(&evaluator, names);
            }
        }
        // The prediction waits while a change is taken and evaluated.
        let held = gate.hold();
        if let Some(reevaluated) = evaluator.step(&shared, options.stale_after) {
            publish_now(&evaluator, reevaluated);
        }
        drop(held);
        if predicting.is_none()
            && let Some(job) = evaluator.prediction()
        {
            predicting = Some(job.start(gate.clone()));
        }
    }
}

/// One feed per Kubernetes kind and the poll of what cannot be watched, handing what they
/// read to `shared`.
fn start_sources(
    config: &Config,
    env: &crate::config::Environment,
    options: &WatchOptions,
    client: kube::Client,
    watch_client: kube::Client,
    shared: &Arc<Shared>,
) -> tokio::task::JoinSet<()> {
    let timing = feed::Timing {
        interval: options.interval,
        backoff: Duration::from_millis(500),
        backoff_max: options.stale_after.min(Duration::from_secs(30)),
    };
    let mut tasks = tokio::task::JoinSet::new();
    for kind in Kind::ALL {
        tasks.spawn(feed::run(
            kind,
            watch_client.clone(),
            env.kube.page_size,
            timing,
            shared.clone(),
        ));
    }
    tasks.spawn(poll::run(
        config.clone(),
        env.clone(),
        Some(client),
        options.reports.clone(),
        options.interval,
        shared.clone(),
    ));
    tasks
}

/// The state kept current and the findings over it.
pub struct Evaluator<'a> {
    specs: &'a [TrialSpec],
    env: &'a crate::config::Environment,
    pub state: State,
    pub results: Vec<TrialResult>,
    stale: BTreeSet<Input>,
    /// The next evaluation is whole, the prediction in it: the first, and the first once
    /// every source's first read is in (so what is served as ready is whole).
    first: bool,
    /// That evaluation once every source was read has been made.
    whole_once_read: bool,
    /// Whole evaluations so far: a prediction started before the last one is older than
    /// its verdict and set aside.
    wholes: u64,
    /// The slow trials (the host-loss prediction) whose inputs changed since their last
    /// prediction started: the next one predicts them.
    wanted: BTreeSet<usize>,
    /// The pods carrying each controller's selector, kept from one evaluation to the next
    /// and edited for the pods a change replaced (at 100,000 pods a read of every pod's
    /// labels was most of a change's evaluation).
    kept: Kept,
}

impl<'a> Evaluator<'a> {
    pub fn new(specs: &'a [TrialSpec], env: &'a crate::config::Environment) -> Evaluator<'a> {
        let mut state = State::empty(crate::collect::kube::source(env), Utc::now());
        for input in Input::ALL {
            state.make_absent(input, "not read yet (gates watch is still reading it)");
        }
        Evaluator {
            specs,
            env,
            state,
            results: Vec::new(),
            stale: BTreeSet::new(),
            first: true,
            whole_once_read: false,
            wholes: 0,
            wanted: BTreeSet::new(),
            kept: Kept::new(specs.iter().filter_map(|s| s.check.pods_asked())),
        }
    }

    /// `chosen` evaluated over the state, with the pairs' index kept from the evaluation
    /// before brought up to it.
    fn evaluate(&mut self, chosen: &[&TrialSpec]) -> Vec<TrialResult> {
        let indexes = Indexes::new(&self.state)
            .expecting(chosen.iter().filter_map(|s| s.check.pods_asked()))
            .kept(&mut self.kept);
        runner::evaluate_indexed(
            chosen,
            self.env,
            &self.state,
            &indexes,
            &gates_core::pause::NEVER,
        )
    }

    /// Take what changed and re-evaluate the quick trials that read it; the names of those
    /// trials, or `None` when nothing changed. The host-loss prediction reads every pod and
    /// takes most of a second at 5,000 nodes: after the first evaluation (which is whole) it
    /// is only marked wanted, for [`Evaluator::prediction`] to hand over, and its verdict of
    /// the state before is served meanwhile.
    pub fn step(&mut self, shared: &Shared, stale_after: Duration) -> Option<Vec<String>> {
        // Read before the apply: every first read is then in what it takes.
        if !self.whole_once_read && shared.ready() {
            self.whole_once_read = true;
            self.first = true;
        }
        let dirty = shared.apply(&mut self.state, &mut self.stale, stale_after);
        self.reevaluate(&dirty)
    }

    /// [`Evaluator::step`] once the state holds what changed (`dirty`).
    fn reevaluate(&mut self, dirty: &BTreeSet<Input>) -> Option<Vec<String>> {
        if dirty.is_empty() && !self.first {
            return None;
        }
        let affected: Vec<usize> = (0..self.specs.len())
            .filter(|i| {
                self.first
                    || self.specs[*i]
                        .check
                        .inputs()
                        .iter()
                        .any(|input| dirty.contains(input))
            })
            .collect();
        let specs = self.specs;
        if self.first {
            let chosen: Vec<&TrialSpec> = specs.iter().collect();
            self.results = self.evaluate(&chosen);
            self.first = false;
            // What a prediction running now gives is older than this: set aside.
            self.wholes += 1;
            self.wanted.clear();
            return Some(self.names(&affected));
        }
        let (slow, quick): (Vec<usize>, Vec<usize>) =
            affected.iter().partition(|i| self.is_slow(**i));
        self.wanted.extend(slow);
        if quick.is_empty() {
            return None;
        }
        let chosen: Vec<&TrialSpec> = quick.iter().map(|i| &specs[*i]).collect();
        let fresh = self.evaluate(&chosen);
        for (i, result) in quick.iter().zip(fresh) {
            self.results[*i] = result;
        }
        Some(self.names(&quick))
    }

    fn is_slow(&self, i: usize) -> bool {
        matches!(self.specs[i].check, CheckSpec::HostLoss(_))
    }

    fn names(&self, chosen: &[usize]) -> Vec<String> {
        chosen.iter().map(|i| self.specs[*i].name.clone()).collect()
    }

    /// The prediction wanted since the last one started, over a copy of the state as it is
    /// now; `None` when none is wanted.
    pub fn prediction(&mut self) -> Option<prediction::Job> {
        if self.wanted.is_empty() {
            return None;
        }
        let indices: Vec<usize> = std::mem::take(&mut self.wanted).into_iter().collect();
        Some(prediction::Job {
            after_whole: self.wholes,
            specs: indices.iter().map(|i| self.specs[*i].clone()).collect(),
            indices,
            env: self.env.clone(),
            state: self.state.clone(),
        })
    }

    /// A prediction's results, kept; the names of its trials (none when it started before
    /// the last whole evaluation, whose verdicts are newer).
    pub fn predicted(&mut self, done: prediction::Predicted) -> Vec<String> {
        if done.after_whole < self.wholes {
            return Vec::new();
        }
        for (i, result) in done.indices.iter().zip(done.results) {
            self.results[*i] = result;
        }
        self.names(&done.indices)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The project's configuration and production's fixture snapshot.
    pub(super) fn production() -> (Config, State) {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let config = Config::load(&root.join("gates"), &[]).expect("the project's config");
        let snapshot = crate::collect::snapshot::read(
            &[root.join("fixtures/snapshots/target-production.json")],
            Utc::now(),
        )
        .expect("the fixture reads");
        (config, snapshot.state)
    }

    fn host_loss(specs: &[TrialSpec]) -> usize {
        specs
            .iter()
            .position(|s| matches!(s.check, CheckSpec::HostLoss(_)))
            .expect("production predicts a host loss")
    }

    /// The prediction `job` hands over, run on this thread.
    fn predicted_here(job: prediction::Job) -> prediction::Predicted {
        let chosen: Vec<&TrialSpec> = job.specs.iter().collect();
        let results = runner::evaluate(&chosen, &job.env, &job.state);
        prediction::Predicted {
            after_whole: job.after_whole,
            indices: job.indices,
            results,
        }
    }

    #[test]
    fn after_a_pod_changes_the_quick_trials_are_evaluated_at_once_and_the_prediction_handed_over() {
        let (config, state) = production();
        let env = config.environment("production").expect("production");
        let specs = runner::trials(&config, env);
        let host_loss = host_loss(&specs);
        let mut evaluator = Evaluator::new(&specs, env);
        evaluator.state = state;
        let first = evaluator
            .reevaluate(&BTreeSet::new())
            .expect("the first evaluation is whole");
        assert_eq!(first.len(), specs.len());
        assert!(evaluator.prediction().is_none(), "the first is whole");
        let before = evaluator.results[host_loss].clone();

        let quick = evaluator
            .reevaluate(&BTreeSet::from([Input::Pods]))
            .expect("re-evaluated");
        assert!(
            quick.iter().any(|t| t.contains("capacity-headroom")),
            "{quick:?}"
        );
        assert!(!quick.iter().any(|t| t.contains("host-loss")), "{quick:?}");
        // What is served meanwhile: the prediction of the state before.
        assert_eq!(evaluator.results[host_loss].finding, before.finding);

        let job = evaluator.prediction().expect("the prediction is wanted");
        assert_eq!(job.indices, vec![host_loss]);
        assert!(evaluator.prediction().is_none(), "handed over once");
        let names = evaluator.predicted(predicted_here(job));
        assert_eq!(names, vec![specs[host_loss].name.clone()]);
        assert_eq!(evaluator.results[host_loss].finding, before.finding);
    }

    #[test]
    fn a_prediction_started_before_a_whole_evaluation_is_set_aside_as_older() {
        let (config, state) = production();
        let env = config.environment("production").expect("production");
        let specs = runner::trials(&config, env);
        let host_loss = host_loss(&specs);
        let mut evaluator = Evaluator::new(&specs, env);
        // Before anything is read: the prediction cannot tell.
        evaluator.reevaluate(&BTreeSet::new()).expect("whole");
        evaluator.reevaluate(&BTreeSet::from([Input::Pods]));
        let early = evaluator.prediction().expect("wanted");
        // Every source read: the whole evaluation predicts over all of it.
        evaluator.state = state;
        evaluator.first = true;
        evaluator.reevaluate(&BTreeSet::new()).expect("whole");
        let whole = evaluator.results[host_loss].finding.clone();

        let done = predicted_here(early);
        assert_ne!(
            done.results[0].finding, whole,
            "the early one saw nothing read"
        );
        let names = evaluator.predicted(done);
        assert!(names.is_empty());
        assert_eq!(evaluator.results[host_loss].finding, whole);
    }
}
