//! The top level: parse arguments, run a command, map every boundary's error to an exit code
//! (0 all pass, 1 a gate failed, 2 could not evaluate or bad input).

use gates_core::exit::ExitCode;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use chrono::Utc;
use clap::Parser;

use crate::cli::{CheckArgs, Cli, Color, Command, Format, SnapshotArgs};
use crate::collect;
use crate::config::{Config, ConfigErrors, Environment, EnvironmentSet};
use crate::report::{self, Run};
use crate::runner::{self, Tally};
use crate::streams::Streams;

/// Errors that stop a command before it can report verdicts: one variant per boundary, each
/// keeping its cause as the source. [`AppError::exit_code`] is the one place they become exit
/// codes.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    Config(#[from] ConfigErrors),
    #[error(transparent)]
    UnknownEnvironment(#[from] crate::config::UnknownEnvironment),
    /// The command line asks for something that cannot be done (a filter that leaves nothing).
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Snapshot(#[from] collect::snapshot::SnapshotError),
    #[error(transparent)]
    ForeignSnapshot(#[from] collect::origin::ForeignSnapshot),
    #[error(transparent)]
    SnapshotWrite(#[from] collect::snapshot_writer::SnapshotWriteError),
    /// The environment's repository section could not be prepared.
    #[error("{0}")]
    Repository(#[from] crate::repo::RepoError),
    #[error(transparent)]
    Reports(#[from] report::history::ReportsDirUnreadable),
    #[error(transparent)]
    Outputs(#[from] report::outputs::OutputError),
    #[error(transparent)]
    Adr(#[from] crate::adr::document::AdrError),
    /// A file the command reads or writes itself (a report, the ADR, stdout).
    #[error("{}: cannot {doing}: {source}", path.display())]
    File {
        path: PathBuf,
        doing: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Chaos(#[from] crate::chaos::ChaosError),
    /// The built-in lab of `gates demo` did not start.
    #[error("cannot start the lab: {source}")]
    Lab {
        #[source]
        source: gates_lab::LabError,
    },
    #[error("cannot encode {what}: {source}")]
    Encode {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

impl AppError {
    pub fn exit_code(&self) -> ExitCode {
        match self {
            AppError::Config(_)
            | AppError::UnknownEnvironment(_)
            | AppError::Usage(_)
            | AppError::Snapshot(_)
            | AppError::ForeignSnapshot(_)
            | AppError::SnapshotWrite(_)
            | AppError::Repository(_)
            | AppError::Reports(_)
            | AppError::Outputs(_)
            | AppError::Adr(_)
            | AppError::File { .. }
            | AppError::Lab { .. }
            | AppError::Encode { .. } => ExitCode::CannotTell,
            AppError::Chaos(err) => err.exit_code(),
        }
    }

    /// An error for `path` that could not be read or written.
    pub fn file(path: &Path, doing: &'static str) -> impl FnOnce(std::io::Error) -> AppError {
        let path = path.to_path_buf();
        move |source| AppError::File {
            path,
            doing,
            source,
        }
    }
}

pub fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    init_logging();
    let mut streams = Streams::std();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            streams.say(format_args!("error: cannot start the async runtime: {err}"));
            return ExitCode::CannotTell.into();
        }
    };
    match runtime.block_on(run(cli, &mut streams)) {
        Ok(code) => code.into(),
        Err(err) => {
            streams.say(format_args!("error: {err}"));
            err.exit_code().into()
        }
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("GATES_LOG")
        // kube-client logs every failed request at error level; the collectors and the chaos
        // probes already report those failures where they matter.
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,kube_client=off"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

/// The command `cli` asks for, writing to `streams`.
pub async fn run(cli: Cli, streams: &mut Streams) -> Result<ExitCode, AppError> {
    // The lab and the demo write the environment files they use; load the rest afterwards.
    let cli = match cli.command {
        Command::Lab(args) => return crate::demo::lab(args).await,
        Command::Demo(args) => return crate::demo::demo(&cli.config, args, streams).await,
        Command::Completions(args) => return Ok(print_completions(args.shell)),
        Command::Man => return print_man(),
        command => Cli { command, ..cli },
    };
    let mut config = Config::load(&cli.config, &cli.env_dirs)?;
    override_kube(&mut config, &cli)?;
    match cli.command {
        Command::List => {
            streams.print(&list(&config));
            Ok(ExitCode::Passed)
        }
        Command::Check(args) => check_env(&config, &cli.config, args, streams).await,
        Command::Snapshot(args) => snapshot(&config, args, streams).await,
        Command::Predict(args) => crate::predict::run(&config, args, streams).await,
        Command::Guard(args) => crate::guard::run(&config, args, streams).await,
        Command::Chaos(args) => {
            let env = config.environment(&args.env)?;
            let (metrics, reports, since) =
                (args.metrics.clone(), args.reports.clone(), Utc::now());
            let result = crate::chaos::run(&config, env, args, streams).await;
            let emitted = report::outputs::after_chaos(
                &mut *streams.err,
                &metrics,
                &reports,
                &env.name,
                since,
            )
            .await;
            let code = result?;
            emitted?;
            Ok(code)
        }
        Command::History(args) => history(args, streams),
        Command::Adr(args) => crate::adr::run(&config, args, streams),
        Command::Validate => {
            let (text, ok) = crate::validate::run(&config);
            streams.print(&text);
            Ok(if ok {
                ExitCode::Passed
            } else {
                ExitCode::CannotTell
            })
        }
        Command::Recover(args) => {
            let env = config.environment(&args.env)?;
            Ok(crate::chaos::recover(&config, env, args, &mut *streams.out).await?)
        }
        Command::Lab(_) | Command::Demo(_) | Command::Completions(_) | Command::Man => {
            unreachable!("handled before loading the configuration")
        }
    }
}

/// `--kubeconfig` and `--context` replace the environment files' `kube` keys (a relative
/// path is relative to the working directory, as on any command line).
fn override_kube(config: &mut Config, cli: &Cli) -> Result<(), AppError> {
    let kubeconfig = match &cli.kubeconfig {
        Some(path) if path.is_relative() => Some(
            std::env::current_dir()
                .map_err(AppError::file(
                    Path::new("."),
                    "resolve --kubeconfig against the working directory",
                ))?
                .join(path),
        ),
        other => other.clone(),
    };
    for env in config.environments.values_mut() {
        if let Some(path) = &kubeconfig {
            env.kube.kubeconfig = Some(path.clone());
        }
        if let Some(context) = &cli.context {
            env.kube.context = Some(context.clone());
        }
    }
    Ok(())
}

fn print_completions(shell: clap_complete::Shell) -> ExitCode {
    let mut command = <Cli as clap::CommandFactory>::command();
    clap_complete::generate(shell, &mut command, "gates", &mut std::io::stdout());
    ExitCode::Passed
}

fn print_man() -> Result<ExitCode, AppError> {
    let command = <Cli as clap::CommandFactory>::command();
    let mut out = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut out)
        .map_err(AppError::file(Path::new("man page"), "render"))?;
    std::io::stdout()
        .write_all(&out)
        .map_err(AppError::file(Path::new("stdout"), "print the man page"))?;
    Ok(ExitCode::Passed)
}

/// `gates history ENV`: the last results per gate and per chaos host, with trends.
fn history(args: crate::cli::HistoryArgs, streams: &mut Streams) -> Result<ExitCode, AppError> {
    let found = report::history::read(&args.reports, &args.env)?;
    for err in &found.unreadable {
        streams.say(format_args!("error: {err}"));
    }
    let history = report::history::History::of(&args.env, &found, args.last.max(1));
    match args.format {
        Format::Json => streams.println(history.render_json()),
        Format::Pretty | Format::Terse => streams.print(&history.render_text()),
    }
    Ok(if found.unreadable.is_empty() {
        ExitCode::Passed
    } else {
        ExitCode::CannotTell
    })
}

fn list(config: &Config) -> String {
    let mut out = String::from("Gates:\n");
    for gate in &config.gates {
        let applies = match &gate.environments {
            EnvironmentSet::All => "every environment".to_string(),
            EnvironmentSet::Only(names) => names.join(", "),
        };
        out.push_str(&format!(
            "  gate {}: {}\n    applies to: {applies}\n",
            gate.number, gate.title
        ));
        for check in &gate.checks {
            match check.instance() {
                Some(instance) => out.push_str(&format!("    - {} ({instance})\n", check.kind())),
                None => out.push_str(&format!("    - {}\n", check.kind())),
            }
        }
    }
    out.push_str("Environments:\n");
    for env in config.environments.values() {
        let like = env
            .like
            .as_deref()
            .map(|l| format!(" (checked like {l})"))
            .unwrap_or_default();
        out.push_str(&format!("  {}{like}: {}\n", env.name, env.description));
    }
    out.push_str("Check kinds:\n");
    for (kind, about) in crate::checks::KINDS {
        out.push_str(&format!("  {kind}: {about}\n"));
    }
    out
}

/// Whether to colour terminal output, decided as for the libtest lines.
fn colour(setting: Color) -> bool {
    use std::io::IsTerminal;
    match setting {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => std::env::var_os("NO_COLOR").is_none() && std::io::stdout().is_terminal(),
    }
}

/// `gates check ENV`: collect once, evaluate, print, write reports.
pub async fn check_env(
    config: &Config,
    config_dir: &Path,
    args: CheckArgs,
    streams: &mut Streams,
) -> Result<ExitCode, AppError> {
    let env = config.environment(&args.env)?;
    let specs = runner::trials(config, env);
    let lines = crate::output::libtest::Lines {
        format: args.format,
        color: args.color,
        quiet: args.quiet,
    };
    let repo = crate::repo::prepare(config, env, args.repo.as_deref())?;
    // A filter that leaves nothing is an error, counting the repository trials too.
    let mut names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    names.extend(
        repo.iter()
            .flat_map(|r| r.trials.iter().map(|t| t.name.as_str())),
    );
    let asked = crate::selection::Asked {
        filter: args.filter.as_deref(),
        exact: args.exact,
        skip: &args.skip,
    };
    let picked = runner::selected(&asked, &specs).len()
        + repo.as_ref().map_or(0, |r| r.selected(&asked).len());
    if let Some(message) = crate::selection::nothing_left(&env.name, &asked, &names, picked) {
        return Err(AppError::Usage(message));
    }
    let selected = runner::selected(&asked, &specs);
    let repo_selected = repo
        .as_ref()
        .map(|r| r.selected(&asked))
        .unwrap_or_default();
    if args.list {
        let names = selected.iter().map(|s| s.name.as_str());
        crate::output::libtest::list(
            lines,
            names.chain(repo_selected.iter().map(|t| t.name.as_str())),
        );
        return Ok(ExitCode::Passed);
    }
    let notes: Vec<String> = repo.iter().flat_map(|r| r.notes()).collect();
    for line in notes_by_file(&notes).lines() {
        streams.say(line);
    }
    let started_at = Utc::now();
    let collect_started = Instant::now();
    // Repository trials alone (a pull request with no cluster access) read no cluster.
    let cluster_unneeded = selected.is_empty() && !repo_selected.iter().any(|t| t.drift);
    // Snapshot files that record no origin: judged, but never promoted on.
    let mut unproven: Vec<String> = Vec::new();
    let state =
        if let (Some(repo), true, true) = (&repo, cluster_unneeded, args.snapshot.is_empty()) {
            let files = vec![format!("repository {}", repo.root.display())];
            crate::state::State::empty(crate::state::Source::Snapshot { files }, started_at)
        } else if args.snapshot.is_empty() {
            collect::live(config, env).await
        } else {
            let snapshot = collect::snapshot::read(&args.snapshot, started_at)?;
            let origin = collect::origin::admit(
                &env.name,
                &collect::identity::offline(env),
                &args.snapshot,
                &snapshot.provenance,
            )?;
            for note in snapshot.notes.iter().chain(&origin) {
                streams.say(format_args!("note: {note}"));
            }
            unproven = args
                .snapshot
                .iter()
                .filter(|f| !snapshot.provenance.iter().any(|(p, _)| p == *f))
                .map(|f| f.display().to_string())
                .collect();
            snapshot.state
        };
    let mut state = state;
    say_sources_down(&state, &env.name, streams);
    collect::chaos_report(&mut state, env, &args.reports);
    let collect_time = collect_started.elapsed();
    let mut results = runner::evaluate(&selected, env, &state);
    if let Some(repo) = &repo {
        results.extend(repo.evaluate(&repo_selected, config, env, &state));
    }
    let collected_at = state
        .recorded
        .as_ref()
        .map_or(started_at, |r| r.collected_at);
    let provenance = crate::state::provenance::Provenance::of(env, &state, collected_at);
    let source = state.source.clone();
    // A large cluster's objects are freed with the process, not one by one (an eighth of
    // a large offline check was spent freeing them).
    std::mem::forget(state);
    let run = Run {
        provenance,
        environment: env.name.clone(),
        decision: decision_name(config, config_dir),
        started_at,
        source,
        collect_time,
        tally: Tally::of(&results),
        gates: runner::gate_statuses(config, env, &results),
        trials: results,
        promotion: None,
    };
    let run = Run {
        promotion: args.require_all.then(|| {
            let gates: Vec<(u32, String)> = config
                .gates_for(env)
                .map(|g| (g.number, g.title.clone()))
                .collect();
            crate::promotion::judge(&gates, &run.gates, &run.trials, &unproven)
        }),
        ..run
    };

    match args.format {
        Format::Json => streams.println(report::json::render(&run)),
        Format::Pretty | Format::Terse => {
            // libtest writes the trial lines to the process's stdout itself.
            streams.flush();
            crate::output::libtest::print(lines, &run.trials);
            let _ = std::io::stdout().flush();
            streams.print(&run.closing_lines_in(colour(args.color)));
        }
    }
    streams.flush();
    write_reports(
        &run,
        &args,
        repo.as_ref().map(|r| r.root.as_path()),
        streams,
    )?;
    report::outputs::emit(
        &mut *streams.err,
        &args.metrics,
        "check",
        &run.environment,
        &report::metrics::check(&run),
    )
    .await?;
    Ok(run.exit_code())
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

/// The timestamped reports, then the ones asked for by path (`--junit`, `--sarif`);
/// `repo_root` is the checkout the repository trials read, whose files SARIF locations name.
fn write_reports(
    run: &Run,
    args: &CheckArgs,
    repo_root: Option<&Path>,
    streams: &mut Streams,
) -> Result<(), AppError> {
    let junit = report::junit::render(run);
    let json = report::json::render(run);
    let stem = run.default_stem(&args.reports);
    let mut written = Vec::new();
    for (path, text) in [
        (stem.with_extension("xml"), &junit),
        (stem.with_extension("json"), &json),
        (
            stem.with_extension("html"),
            &report::html::check::render(run),
        ),
    ] {
        write_file(&path, text)?;
        written.push(path);
    }
    if let Some(path) = &args.junit {
        write_file(path, &junit)?;
        written.push(path.clone());
    }
    if let Some(path) = &args.sarif {
        write_file(path, &report::sarif::render(run, repo_root))?;
        written.push(path.clone());
    }
    for path in written {
        streams.say(format_args!("report: {}", path.display()));
    }
    Ok(())
}

fn write_file(path: &Path, text: &str) -> Result<(), AppError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(AppError::file(dir, "create the directory"))?;
    }
    fs::write(path, text).map_err(AppError::file(path, "write"))
}

async fn snapshot(
    config: &Config,
    args: SnapshotArgs,
    streams: &mut Streams,
) -> Result<ExitCode, AppError> {
    let env: &Environment = config.environment(&args.env)?;
    let text = collect::snapshot_writer::write_live(config, env, args.allow_incomplete).await?;
    write_file(&args.output, &text)?;
    streams.say(format_args!("snapshot: {}", args.output.display()));
    Ok(ExitCode::Passed)
}

#[cfg(test)]
#[path = "app_tests.rs"]
mod tests;

/// Each source the run could not use at all, once and before any trial, with the whole
/// reason: the trials that need it then name it in a few words.
pub fn say_sources_down(state: &crate::state::State, env: &str, streams: &mut Streams) {
    for down in &state.sources_down {
        streams.say(format_args!(
            "error: {} of {env} cannot be used: {}",
            down.source, down.reason
        ));
        streams.say(format_args!(
            "  every trial that reads it is an error that refers to this"
        ));
    }
}

/// The repository's notes of a run (each construct read and left out, each value not read),
/// those of one file together under it as `gates validate` groups its problems, each then
/// naming only its line.
fn notes_by_file(notes: &[String]) -> String {
    let mut out = String::new();
    for (file, notes) in crate::repo::site::by_file(notes) {
        let Some(file) = file else {
            for note in notes {
                out.push_str(&format!("note: {note}\n"));
            }
            continue;
        };
        out.push_str(&format!("notes on {file}:\n"));
        for note in notes {
            out.push_str(&format!("  {}\n", within(file, note)));
        }
    }
    out
}

/// A note under its file's heading: `FILE:12: text` as `line 12: text`, `FILE: text` as `text`.
fn within(file: &str, note: &str) -> String {
    let Some(at) = note.find(file) else {
        return note.to_string();
    };
    let (before, after) = (&note[..at], &note[at + file.len()..]);
    match after.strip_prefix(':') {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit()) => {
            format!("{before}line {rest}")
        }
        Some(rest) => format!("{before}{}", rest.trim_start()),
        None => note.to_string(),
    }
}

#[cfg(test)]
mod notes_tests {
    use super::*;

    #[test]
    fn notes_are_grouped_under_their_file_and_each_names_only_its_line() {
        let notes: Vec<String> = [
            "the repository has no environment `x`; evaluating its `main` for it",
            "k/apps.yaml:54: the patch targets HelmRelease/*, which none of the resources is",
            "talos/c/eGPU.yaml: not read: the name says neither a role nor a declared node",
            "not read: k/secret.yaml:3: ExternalSecret s: Flux postBuild substitution",
            "k/apps.yaml:87: the patch targets Kustomization/*",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            notes_by_file(&notes),
            "note: the repository has no environment `x`; evaluating its `main` for it\n\
             notes on k/apps.yaml:\n  line 54: the patch targets HelmRelease/*, which none of the resources is\n  line 87: the patch targets Kustomization/*\n\
             notes on talos/c/eGPU.yaml:\n  not read: the name says neither a role nor a declared node\n\
             notes on k/secret.yaml:\n  not read: line 3: ExternalSecret s: Flux postBuild substitution\n"
        );
    }
}
