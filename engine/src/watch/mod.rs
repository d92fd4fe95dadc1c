//! `gates watch`'s engine: keep one environment's state current (every Kubernetes kind listed
//! then watched, the other sources polled), and re-evaluate, a short while after each change,
//! only the trials whose inputs changed. A source broken for longer than its deadline turns
//! the trials that read it into errors that say how old their state is, never a stale pass.
//! Each evaluation is published as a whole [`Published`]: the record a `check` would write,
//! and how current each source is.

pub mod feed;
pub mod policy_report;
pub mod poll;
pub mod shared;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::check::Judged;
use crate::checks::CheckSpec;
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
    // The slow trials run away from this loop, so a change that arrives meanwhile is
    // evaluated at once instead of waiting for the prediction of the change before.
    let mut background: Option<tokio::task::JoinHandle<SlowDone>> = None;
    let publish_now = |evaluator: &Evaluator, reevaluated: Vec<String>, took: Duration| {
        let record = Judged {
            collect_time: took,
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
        publish.send_replace(Some(Arc::new(Published {
            record,
            sources: shared.health(),
            ready: shared.ready(),
            evaluation,
            reevaluated,
            at: Utc::now(),
        })));
    };
    loop {
        tokio::select! {
            _ = shared.changed.notified() => tokio::time::sleep(options.debounce).await,
            done = async { background.as_mut().expect("guarded by the branch's condition").await },
                if background.is_some() => {
                background = None;
                let done = match done {
                    Ok(done) => done,
                    Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
                    Err(_) => continue,
                };
                let took = done.took;
                let names = evaluator.finish(done);
                publish_now(&evaluator, names, took);
                background = evaluator.start_slow().map(|job| tokio::task::spawn_blocking(move || job.run()));
                continue;
            }
            // Staleness comes with time alone.
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        let started = Instant::now();
        let Some(reevaluated) = evaluator.step(&shared, options.stale_after) else {
            continue;
        };
        publish_now(&evaluator, reevaluated, started.elapsed());
        if background.is_none() {
            background = evaluator
                .start_slow()
                .map(|job| tokio::task::spawn_blocking(move || job.run()));
        }
    }
}

/// The state kept current and the findings over it.
pub struct Evaluator<'a> {
    specs: &'a [TrialSpec],
    env: &'a crate::config::Environment,
    pub state: State,
    pub results: Vec<TrialResult>,
    stale: BTreeSet<Input>,
    first: bool,
    /// The slow trials whose inputs changed since their last evaluation began.
    slow_due: BTreeSet<usize>,
}

/// Slow trials to evaluate away from the watch's loop, over a copy of the state as it was
/// when they were due.
pub struct SlowJob {
    chosen: Vec<usize>,
    specs: Vec<TrialSpec>,
    env: crate::config::Environment,
    state: State,
}

impl SlowJob {
    /// Evaluate; blocking (the host-loss prediction takes most of a second at 5,000 nodes).
    pub fn run(self) -> SlowDone {
        let started = Instant::now();
        let specs: Vec<&TrialSpec> = self.specs.iter().collect();
        let results = runner::evaluate(&specs, &self.env, &self.state);
        SlowDone {
            chosen: self.chosen,
            results,
            took: started.elapsed(),
        }
    }
}

/// What a [`SlowJob`] found.
pub struct SlowDone {
    chosen: Vec<usize>,
    results: Vec<TrialResult>,
    took: Duration,
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
            slow_due: BTreeSet::new(),
        }
    }

    /// Take what changed and re-evaluate the quick trials that read it; their names, or
    /// `None` when nothing changed. The host-loss prediction reads every pod and takes most
    /// of a change's evaluation at scale (0.8 s at 5,000 nodes), so after the first
    /// evaluation it is only marked due here, for [`Evaluator::start_slow`], and keeps its
    /// verdict of the change before until its own evaluation is in.
    pub fn step(&mut self, shared: &Shared, stale_after: Duration) -> Option<Vec<String>> {
        let dirty = shared.apply(&mut self.state, &mut self.stale, stale_after);
        self.reevaluate(&dirty)
    }

    /// [`Evaluator::step`] once the state holds what changed (`dirty`).
    fn reevaluate(&mut self, dirty: &BTreeSet<Input>) -> Option<Vec<String>> {
        if dirty.is_empty() && !self.first {
            return None;
        }
        if self.first {
            let chosen: Vec<&TrialSpec> = self.specs.iter().collect();
            self.results = runner::evaluate(&chosen, self.env, &self.state);
            self.first = false;
            return Some(self.names(0..self.specs.len()));
        }
        let affected = (0..self.specs.len()).filter(|i| {
            self.specs[*i]
                .check
                .inputs()
                .iter()
                .any(|input| dirty.contains(input))
        });
        let (slow, quick): (Vec<usize>, Vec<usize>) =
            affected.partition(|i| matches!(self.specs[*i].check, CheckSpec::HostLoss(_)));
        self.slow_due.extend(slow);
        let specs: Vec<&TrialSpec> = quick.iter().map(|i| &self.specs[*i]).collect();
        let fresh = runner::evaluate(&specs, self.env, &self.state);
        for (i, result) in quick.iter().zip(fresh) {
            self.results[*i] = result;
        }
        Some(self.names(quick))
    }

    /// The slow trials that are due, to evaluate over a copy of the state as it is now;
    /// `None` when none is. Called when no other job runs, so their findings come in the
    /// order of the states they read.
    pub fn start_slow(&mut self) -> Option<SlowJob> {
        if self.slow_due.is_empty() {
            return None;
        }
        let chosen: Vec<usize> = std::mem::take(&mut self.slow_due).into_iter().collect();
        Some(SlowJob {
            specs: chosen.iter().map(|i| self.specs[*i].clone()).collect(),
            chosen,
            env: self.env.clone(),
            state: self.state.clone(),
        })
    }

    /// Take a slow job's findings; the names of its trials.
    pub fn finish(&mut self, done: SlowDone) -> Vec<String> {
        let names = self.names(done.chosen.iter().copied());
        for (i, result) in done.chosen.into_iter().zip(done.results) {
            self.results[i] = result;
        }
        names
    }

    fn names(&self, chosen: impl IntoIterator<Item = usize>) -> Vec<String> {
        chosen
            .into_iter()
            .map(|i| self.specs[i].name.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn production<'a>(config: &'a Config, specs: &'a [TrialSpec]) -> (Evaluator<'a>, usize) {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let env = config.environment("production").expect("production");
        let snapshot = crate::collect::snapshot::read(
            &[root.join("fixtures/snapshots/target-production.json")],
            Utc::now(),
        )
        .expect("the fixture reads");
        let host_loss = specs
            .iter()
            .position(|s| matches!(s.check, CheckSpec::HostLoss(_)))
            .expect("production predicts a host loss");
        let mut evaluator = Evaluator::new(specs, env);
        evaluator.state = snapshot.state;
        (evaluator, host_loss)
    }

    fn project_config() -> Config {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        Config::load(&root.join("gates"), &[]).expect("the project's config")
    }

    #[test]
    fn after_a_pod_changes_the_quick_trials_are_evaluated_and_the_host_loss_prediction_is_left_due()
    {
        let config = project_config();
        let specs = runner::trials(&config, config.environment("production").unwrap());
        let (mut evaluator, host_loss) = production(&config, &specs);
        let first = evaluator.reevaluate(&BTreeSet::new()).expect("evaluated");
        assert_eq!(first.len(), specs.len(), "the first evaluation is whole");
        assert!(evaluator.start_slow().is_none(), "nothing is due after it");
        let before = evaluator.results[host_loss].finding.clone();

        let pods = BTreeSet::from([Input::Pods]);
        let quick = evaluator.reevaluate(&pods).expect("re-evaluated");
        assert!(
            quick.iter().any(|t| t.contains("capacity-headroom")),
            "{quick:?}"
        );
        assert!(!quick.iter().any(|t| t.contains("host-loss")), "{quick:?}");
        // What is served meanwhile: the prediction of the change before.
        assert_eq!(evaluator.results[host_loss].finding, before);
        let job = evaluator.start_slow().expect("the prediction is due");
        assert_eq!(job.chosen, vec![host_loss]);
    }

    #[test]
    fn a_change_while_the_prediction_runs_is_evaluated_at_once_and_the_prediction_runs_again_after()
    {
        let config = project_config();
        let specs = runner::trials(&config, config.environment("production").unwrap());
        let (mut evaluator, host_loss) = production(&config, &specs);
        evaluator.reevaluate(&BTreeSet::new()).expect("evaluated");
        let pods = BTreeSet::from([Input::Pods]);
        evaluator.reevaluate(&pods).expect("re-evaluated");
        let job = evaluator.start_slow().expect("the prediction is due");

        // The job holds its own state: one node going away now changes the next prediction,
        // not this one.
        let nodes = evaluator.state.nodes.present().expect("nodes").len();
        if let crate::state::Collected::Present(n) = &mut evaluator.state.nodes {
            n.pop();
        }
        let quick = evaluator
            .reevaluate(&BTreeSet::from([Input::Nodes]))
            .expect("evaluated while the job runs");
        assert!(!quick.is_empty(), "the quick trials reading nodes ran");

        let done = job.run();
        let expected = {
            let mut fresh = Evaluator::new(&specs, config.environment("production").unwrap());
            fresh.state = production(&config, &specs).0.state;
            fresh.reevaluate(&BTreeSet::new()).unwrap();
            fresh.results[host_loss].finding.clone()
        };
        let names = evaluator.finish(done);
        assert_eq!(names, vec![specs[host_loss].name.clone()]);
        assert_eq!(
            evaluator.results[host_loss].finding, expected,
            "the prediction of the state the job copied, with all {nodes} nodes"
        );
        let again = evaluator
            .start_slow()
            .expect("the nodes changed under the job: the prediction is due again");
        assert_eq!(again.state.nodes.present().unwrap().len(), nodes - 1);
        evaluator.finish(again.run());
        assert!(evaluator.start_slow().is_none(), "nothing is due after it");
    }
}
