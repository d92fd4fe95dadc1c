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
    loop {
        tokio::select! {
            _ = shared.changed.notified() => tokio::time::sleep(options.debounce).await,
            // Staleness comes with time alone.
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        let started = Instant::now();
        let Some(reevaluated) = evaluator.step(&shared, options.stale_after) else {
            continue;
        };
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
        publish.send_replace(Some(Arc::new(Published {
            record,
            sources: shared.health(),
            ready: shared.ready(),
            evaluation,
            reevaluated,
            at: Utc::now(),
        })));
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
    /// trials, or `None` when nothing changed.
    pub fn step(&mut self, shared: &Shared, stale_after: Duration) -> Option<Vec<String>> {
        let dirty = shared.apply(&mut self.state, &mut self.stale, stale_after);
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
        let chosen: Vec<&TrialSpec> = affected.iter().map(|i| &self.specs[*i]).collect();
        let fresh = runner::evaluate(&chosen, self.env, &self.state);
        if self.first {
            self.results = fresh;
        } else {
            for (i, result) in affected.iter().zip(fresh) {
                self.results[*i] = result;
            }
        }
        self.first = false;
        Some(chosen.iter().map(|s| s.name.clone()).collect())
    }
}
