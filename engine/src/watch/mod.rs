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

use std::collections::{BTreeMap, BTreeSet};
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
    let mut evaluated_in: BTreeMap<String, u64> = BTreeMap::new();
    loop {
        tokio::select! {
            _ = shared.changed.notified() => tokio::time::sleep(options.debounce).await,
            // Staleness comes with time alone.
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
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
        let Some(reevaluated) = evaluator.step(&shared, options.stale_after, |e, quick| {
            publish_now(e, quick)
        }) else {
            continue;
        };
        publish_now(&evaluator, reevaluated);
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
        }
    }

    /// Take what changed and re-evaluate the trials that read it; the names of those
    /// trials, or `None` when nothing changed. The host-loss prediction reads every pod and
    /// takes most of a change's evaluation at scale (0.8 s at 5,000 nodes), so after the first
    /// evaluation the other trials are evaluated first and handed to `early` with their
    /// names, while the prediction still shows its verdict of the change before.
    pub fn step(
        &mut self,
        shared: &Shared,
        stale_after: Duration,
        early: impl FnOnce(&Self, Vec<String>),
    ) -> Option<Vec<String>> {
        let dirty = shared.apply(&mut self.state, &mut self.stale, stale_after);
        self.reevaluate(&dirty, early)
    }

    /// [`Evaluator::step`] once the state holds what changed (`dirty`).
    fn reevaluate(
        &mut self,
        dirty: &BTreeSet<Input>,
        early: impl FnOnce(&Self, Vec<String>),
    ) -> Option<Vec<String>> {
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
        let names = |chosen: &[usize]| -> Vec<String> {
            chosen.iter().map(|i| self.specs[*i].name.clone()).collect()
        };
        let all = names(&affected);
        if self.first {
            let chosen: Vec<&TrialSpec> = self.specs.iter().collect();
            self.results = runner::evaluate(&chosen, self.env, &self.state);
            self.first = false;
            return Some(all);
        }
        let (slow, quick): (Vec<usize>, Vec<usize>) = affected
            .iter()
            .partition(|i| matches!(self.specs[**i].check, CheckSpec::HostLoss(_)));
        self.evaluate(&quick);
        if !slow.is_empty() && !quick.is_empty() {
            early(self, names(&quick));
        }
        self.evaluate(&slow);
        Some(all)
    }

    /// Evaluate the trials at `chosen` (indices into the specs) over the state.
    fn evaluate(&mut self, chosen: &[usize]) {
        if chosen.is_empty() {
            return;
        }
        let specs: Vec<&TrialSpec> = chosen.iter().map(|i| &self.specs[*i]).collect();
        let fresh = runner::evaluate(&specs, self.env, &self.state);
        for (i, result) in chosen.iter().zip(fresh) {
            self.results[*i] = result;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_a_pod_changes_the_quick_trials_are_handed_over_before_the_host_loss_prediction() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let config = Config::load(&root.join("gates"), &[]).expect("the project's config");
        let env = config.environment("production").expect("production");
        let snapshot = crate::collect::snapshot::read(
            &[root.join("fixtures/snapshots/target-production.json")],
            Utc::now(),
        )
        .expect("the fixture reads");
        let specs = runner::trials(&config, env);
        let host_loss = specs
            .iter()
            .position(|s| matches!(s.check, CheckSpec::HostLoss(_)))
            .expect("production predicts a host loss");
        let mut evaluator = Evaluator::new(&specs, env);
        evaluator.state = snapshot.state;
        let first = evaluator
            .reevaluate(&BTreeSet::new(), |_, _| {
                panic!("the first evaluation is whole")
            })
            .expect("evaluated");
        assert_eq!(first.len(), specs.len());
        let before = evaluator.results[host_loss].finding.clone();

        let pods = BTreeSet::from([Input::Pods]);
        let mut handed = None;
        let all = evaluator
            .reevaluate(&pods, |e, quick| {
                // What is served meanwhile: the prediction of the change before.
                assert_eq!(e.results[host_loss].finding, before);
                handed = Some(quick);
            })
            .expect("re-evaluated");
        let quick = handed.expect("the quick trials were handed over first");
        assert!(
            quick.iter().any(|t| t.contains("capacity-headroom")),
            "{quick:?}"
        );
        assert!(!quick.iter().any(|t| t.contains("host-loss")), "{quick:?}");
        assert!(all.iter().any(|t| t.contains("host-loss")), "{all:?}");
        assert!(quick.iter().all(|t| all.contains(t)));
        assert!(all.len() > quick.len());
    }
}
