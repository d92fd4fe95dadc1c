//! `check`'s engine: select an environment's trials, read its repository, collect its state once
//! (live, or from snapshot files), evaluate, judge promotion, and hand back the run's record.
//! What happens on the way goes to the [`Reporter`] it is given as typed [`CheckEvent`]s; the
//! engine itself prints nothing, so the command line, a test or a long-running exporter can each
//! report the same run their own way.

use std::path::{Path, PathBuf};
use std::time::Instant;

use chrono::Utc;

use crate::collect;
use crate::config::{Config, Environment, UnknownEnvironment};
use crate::record::CheckRecord;
use crate::repo::trials::RepoTrial;
use crate::repo::{RepoError, RepoRun};
use crate::runner::{self, Tally, TrialResult, TrialSpec};
use crate::selection::{self, Asked};
use crate::state::{Source, State};

/// What one `check` is asked to do (the command line fills it from `gates check`'s flags).
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// The environment checked.
    pub env: String,
    /// Trials whose names hold this (the whole name with `exact`).
    pub filter: Option<String>,
    pub exact: bool,
    /// Trials whose names hold any of these are left out.
    pub skip: Vec<String>,
    /// Snapshot files to judge instead of reading the cluster.
    pub snapshots: Vec<PathBuf>,
    /// The repository to read, instead of (or where there is none) the environment's `repo`.
    pub repo: Option<PathBuf>,
    /// Where the chaos reports are: gate 4 judges the newest of the environment.
    pub reports: PathBuf,
    /// Judge promotion: anything short of every gate passing blocks it.
    pub require_all: bool,
    /// The process goes on after the run (a fleet, an exporter): the collected state is freed
    /// rather than left to the process's exit.
    pub long_lived: bool,
}

impl CheckOptions {
    fn asked(&self) -> Asked<'_> {
        Asked {
            filter: self.filter.as_deref(),
            exact: self.exact,
            skip: &self.skip,
        }
    }
}

/// What happens during a check, in the order it happens.
#[derive(Debug, Clone, Copy)]
pub enum CheckEvent<'a> {
    /// What the repository read and deliberately left out, before anything is collected.
    RepositoryNotes(&'a [String]),
    /// A note on the snapshot files read (what they hold, where they come from).
    SnapshotNote(&'a str),
    /// A whole source the run could not use: every trial that reads it is an error.
    SourceDown {
        environment: &'a str,
        source: &'a str,
        reason: &'a str,
    },
    /// One trial's verdict, in gate order once all are evaluated.
    TrialFinished(&'a TrialResult),
    /// The run's record, as every report tells it.
    RunFinished(&'a CheckRecord),
}

/// Whoever is told about a check as it happens: the terminal, a recording in tests.
pub trait Reporter {
    fn event(&mut self, event: CheckEvent<'_>);
}

/// Why a check cannot report verdicts at all.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    UnknownEnvironment(#[from] UnknownEnvironment),
    /// The selection leaves no trial (a typo in a filter): refused, never a green run of nothing.
    #[error("{0}")]
    NothingSelected(String),
    /// The environment's repository section could not be prepared.
    #[error("{0}")]
    Repository(#[from] RepoError),
    #[error("{0}")]
    Snapshot(#[from] collect::snapshot::SnapshotError),
    #[error(transparent)]
    ForeignSnapshot(#[from] collect::origin::ForeignSnapshot),
}

/// The trials a check will evaluate, chosen before anything is collected (what `--list`
/// shows).
pub struct Plan<'c> {
    env: &'c Environment,
    selected: Vec<TrialSpec>,
    repo: Option<RepoRun>,
    repo_selected: Vec<RepoTrial>,
}

impl Plan<'_> {
    /// The selected trials' names: the live trials in gate order, then the repository's.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        let live = self.selected.iter().map(|s| s.name.as_str());
        live.chain(self.repo_selected.iter().map(|t| t.name.as_str()))
    }

    /// The checkout the repository trials read, whose files SARIF locations name.
    pub fn repo_root(&self) -> Option<&Path> {
        self.repo.as_ref().map(|r| r.root.as_path())
    }
}

/// Select the environment's trials and read its repository; a selection that leaves no trial
/// is refused with the nearest names.
pub fn plan<'c>(config: &'c Config, options: &CheckOptions) -> Result<Plan<'c>, CheckError> {
    let env = config.environment(&options.env)?;
    let specs = runner::trials(config, env);
    let repo = crate::repo::prepare(config, env, options.repo.as_deref())?;
    let asked = options.asked();
    let selected: Vec<TrialSpec> = runner::selected(&asked, &specs)
        .into_iter()
        .cloned()
        .collect();
    let repo_selected: Vec<RepoTrial> = repo
        .as_ref()
        .map(|r| r.selected(&asked).into_iter().cloned().collect())
        .unwrap_or_default();
    // A filter that leaves nothing is an error, counting the repository trials too.
    let mut names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    names.extend(
        repo.iter()
            .flat_map(|r| r.trials.iter().map(|t| t.name.as_str())),
    );
    let picked = selected.len() + repo_selected.len();
    if let Some(message) = selection::nothing_left(&env.name, &asked, &names, picked) {
        return Err(CheckError::NothingSelected(message));
    }
    Ok(Plan {
        env,
        selected,
        repo,
        repo_selected,
    })
}

/// Collect once, evaluate the plan's trials, judge promotion; the record also goes to
/// `reporter` as the last event.
pub async fn run(
    config: &Config,
    config_dir: &Path,
    plan: &Plan<'_>,
    options: &CheckOptions,
    reporter: &mut dyn Reporter,
) -> Result<CheckRecord, CheckError> {
    let env = plan.env;
    let notes: Vec<String> = plan.repo.iter().flat_map(|r| r.notes()).collect();
    if !notes.is_empty() {
        reporter.event(CheckEvent::RepositoryNotes(&notes));
    }
    let started_at = Utc::now();
    let collect_started = Instant::now();
    let (mut state, unproven) = collect(config, plan, options, started_at, reporter).await?;
    for down in &state.sources_down {
        reporter.event(CheckEvent::SourceDown {
            environment: &env.name,
            source: &down.source,
            reason: &down.reason,
        });
    }
    collect::chaos_report(&mut state, env, &options.reports);
    let collect_time = collect_started.elapsed();
    let selected: Vec<&TrialSpec> = plan.selected.iter().collect();
    let mut results = runner::evaluate(&selected, env, &state);
    if let Some(repo) = &plan.repo {
        let repo_selected: Vec<&RepoTrial> = plan.repo_selected.iter().collect();
        results.extend(repo.evaluate(&repo_selected, config, env, &state));
    }
    for result in &results {
        reporter.event(CheckEvent::TrialFinished(result));
    }
    let collected_at = state
        .recorded
        .as_ref()
        .map_or(started_at, |r| r.collected_at);
    let provenance = crate::state::provenance::Provenance::of(env, &state, collected_at);
    let source = state.source.clone();
    // A large cluster's objects are freed with the process, not one by one (an eighth of
    // a large offline check was spent freeing them), unless the process goes on.
    if options.long_lived {
        drop(state);
    } else {
        std::mem::forget(state);
    }
    let judged = Judged {
        config,
        config_dir,
        env,
        started_at,
        collect_time,
        require_all: options.require_all,
    };
    let record = judged.record(provenance, source, results, &unproven);
    reporter.event(CheckEvent::RunFinished(&record));
    Ok(record)
}

/// What a record says beside the trials: the run it closes.
pub struct Judged<'a> {
    pub config: &'a Config,
    pub config_dir: &'a Path,
    pub env: &'a Environment,
    pub started_at: chrono::DateTime<Utc>,
    pub collect_time: std::time::Duration,
    /// Judge promotion: anything short of every gate passing blocks it.
    pub require_all: bool,
}

impl Judged<'_> {
    /// The record of `results`, judged over a state of `source` whose provenance is
    /// `provenance`; `unproven` are the snapshot files among it that record no origin.
    pub fn record(
        &self,
        provenance: crate::state::provenance::Provenance,
        source: Source,
        results: Vec<TrialResult>,
        unproven: &[String],
    ) -> CheckRecord {
        let (config, env) = (self.config, self.env);
        let gates = runner::gate_statuses(config, env, &results);
        let promotion = self.require_all.then(|| {
            let titles: Vec<(u32, String)> = config
                .gates_for(env)
                .map(|g| (g.number, g.title.clone()))
                .collect();
            crate::promotion::judge(&titles, &gates, &results, unproven)
        });
        CheckRecord {
            schema_version: gates_core::schema::SCHEMA_VERSION,
            provenance: Some(provenance),
            environment: env.name.clone(),
            decision: decision_name(config, self.config_dir),
            started_at: self.started_at,
            source,
            collect_time: self.collect_time,
            tally: Tally::of(&results),
            gates,
            trials: results,
            promotion,
        }
    }
}

/// The state the plan's trials read, and the snapshot files among it that record no origin
/// (judged, but never promoted on).
async fn collect(
    config: &Config,
    plan: &Plan<'_>,
    options: &CheckOptions,
    started_at: chrono::DateTime<Utc>,
    reporter: &mut dyn Reporter,
) -> Result<(State, Vec<String>), CheckError> {
    let env = plan.env;
    // Repository trials alone (a pull request with no cluster access) read no cluster.
    let cluster_unneeded = plan.selected.is_empty() && !plan.repo_selected.iter().any(|t| t.drift);
    let snapshots = &options.snapshots;
    if let (Some(repo), true, true) = (&plan.repo, cluster_unneeded, snapshots.is_empty()) {
        let files = vec![format!("repository {}", repo.root.display())];
        return Ok((
            State::empty(Source::Snapshot { files }, started_at),
            Vec::new(),
        ));
    }
    if snapshots.is_empty() {
        return Ok((collect::live(config, env).await, Vec::new()));
    }
    let snapshot = collect::snapshot::read(snapshots, started_at)?;
    let origin = collect::origin::admit(
        &env.name,
        &collect::identity::offline(env),
        snapshots,
        &snapshot.provenance,
    )?;
    for note in snapshot.notes.iter().chain(&origin) {
        reporter.event(CheckEvent::SnapshotNote(note));
    }
    let unproven = snapshots
        .iter()
        .filter(|f| !snapshot.provenance.iter().any(|(p, _)| p == *f))
        .map(|f| f.display().to_string())
        .collect();
    Ok((snapshot.state, unproven))
}

/// The decision the gates come from: the one gate directory's name, e.g. `adr-007`.
fn decision_name(config: &Config, config_dir: &Path) -> String {
    config
        .gates
        .first()
        .and_then(|g| g.file.parent())
        .and_then(|dir| dir.strip_prefix(config_dir).ok().or(Some(dir)))
        .and_then(|dir| dir.file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "gates".to_string())
}
