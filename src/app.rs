//! The top level: parse arguments, run a command, map every boundary's error to an exit code
//! (0 all pass, 1 a gate failed, 2 could not evaluate or bad input).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use chrono::Utc;
use clap::Parser;
use libtest_mimic::{Arguments, ColorSetting, FormatSetting};

use crate::cli::{CheckArgs, Cli, Color, Command, Format, SnapshotArgs};
use crate::collect;
use crate::config::{Config, ConfigErrors, Environment, EnvironmentSet};
use crate::report::{self, Run};
use crate::runner::{self, Tally};

/// Errors that stop a command before it can report verdicts.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    Config(#[from] ConfigErrors),
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Snapshot(#[from] collect::snapshot::SnapshotError),
    #[error("{path}: {message}")]
    Write { path: PathBuf, message: String },
    #[error("{0}")]
    Collect(String),
    #[error("{0}")]
    Chaos(#[from] crate::chaos::ChaosError),
}

impl AppError {
    pub fn exit_code(&self) -> u8 {
        match self {
            AppError::Config(_)
            | AppError::Usage(_)
            | AppError::Snapshot(_)
            | AppError::Write { .. }
            | AppError::Collect(_) => 2,
            AppError::Chaos(err) => err.exit_code(),
        }
    }
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(err.exit_code())
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

async fn run(cli: Cli) -> Result<u8, AppError> {
    // The lab and the demo write the environment files they use; load the rest afterwards.
    let cli = match cli.command {
        Command::Lab(args) => return crate::demo::lab(args).await,
        Command::Demo(args) => return crate::demo::demo(&cli.config, args).await,
        command => Cli { command, ..cli },
    };
    let config = Config::load(&cli.config, &cli.env_dirs)?;
    match cli.command {
        Command::List => {
            print!("{}", list(&config));
            Ok(0)
        }
        Command::Check(args) => check_env(&config, &cli.config, args).await,
        Command::Snapshot(args) => snapshot(&config, args).await,
        Command::Predict(args) => crate::predict::run(&config, args).await,
        Command::Chaos(args) => {
            let env = config.environment(&args.env).map_err(AppError::Usage)?;
            Ok(crate::chaos::run(&config, env, args).await?)
        }
        Command::Recover(args) => {
            let env = config.environment(&args.env).map_err(AppError::Usage)?;
            Ok(crate::chaos::recover(&config, env, args).await?)
        }
        Command::Lab(_) | Command::Demo(_) => {
            unreachable!("handled before loading the configuration")
        }
    }
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

fn libtest_args(args: &CheckArgs) -> Arguments {
    Arguments {
        filter: args.filter.clone(),
        exact: args.exact,
        skip: args.skip.clone(),
        list: args.list,
        quiet: args.quiet,
        // Trials are evaluated before printing; one thread keeps the output in gate order.
        test_threads: Some(1),
        format: Some(match args.format {
            Format::Terse => FormatSetting::Terse,
            Format::Pretty | Format::Json => FormatSetting::Pretty,
        }),
        color: Some(match args.color {
            Color::Auto if std::env::var_os("NO_COLOR").is_some() => ColorSetting::Never,
            Color::Auto => ColorSetting::Auto,
            Color::Always => ColorSetting::Always,
            Color::Never => ColorSetting::Never,
        }),
        ..Arguments::default()
    }
}

/// `gates check ENV`: collect once, evaluate, print, write reports.
pub async fn check_env(
    config: &Config,
    config_dir: &Path,
    args: CheckArgs,
) -> Result<u8, AppError> {
    let env = config.environment(&args.env).map_err(AppError::Usage)?;
    let specs = runner::trials(config, env);
    let largs = libtest_args(&args);
    if args.list {
        runner::list(&largs, &specs);
        return Ok(0);
    }
    let selected = runner::selected(&largs, &specs);
    let started_at = Utc::now();
    let collect_started = Instant::now();
    let state = if args.snapshot.is_empty() {
        collect::live(config, env).await
    } else {
        let snapshot = collect::snapshot::read(&args.snapshot, started_at)?;
        for note in &snapshot.notes {
            eprintln!("note: {note}");
        }
        snapshot.state
    };
    let mut state = state;
    collect::chaos_report(&mut state, env, &args.reports);
    let collect_time = collect_started.elapsed();
    let results = runner::evaluate(&selected, env, &state);
    let run = Run {
        environment: env.name.clone(),
        decision: decision_name(config, config_dir),
        started_at,
        source: state.source.clone(),
        collect_time,
        tally: Tally::of(&results),
        gates: runner::gate_statuses(config, env, &results),
        trials: results,
    };

    match args.format {
        Format::Json => println!("{}", report::json::render(&run)),
        Format::Pretty | Format::Terse => {
            runner::print(&largs, &run.trials);
            print!("{}", run.closing_lines());
        }
    }
    let _ = std::io::stdout().flush();
    write_reports(&run, &args)?;
    Ok(run.tally.exit_code())
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

fn write_reports(run: &Run, args: &CheckArgs) -> Result<(), AppError> {
    let junit = report::junit::render(run);
    let json = report::json::render(run);
    let stem = run.default_stem(&args.reports);
    let mut written = Vec::new();
    for (path, text) in [
        (stem.with_extension("xml"), &junit),
        (stem.with_extension("json"), &json),
    ] {
        write_file(&path, text)?;
        written.push(path);
    }
    if let Some(path) = &args.junit {
        write_file(path, &junit)?;
        written.push(path.clone());
    }
    for path in written {
        eprintln!("report: {}", path.display());
    }
    Ok(())
}

fn write_file(path: &Path, text: &str) -> Result<(), AppError> {
    let fail = |message: String| AppError::Write {
        path: path.to_path_buf(),
        message,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir)
            .map_err(|err| fail(format!("cannot create the directory: {err}")))?;
    }
    fs::write(path, text).map_err(|err| fail(format!("cannot write: {err}")))
}

async fn snapshot(config: &Config, args: SnapshotArgs) -> Result<u8, AppError> {
    let env: &Environment = config.environment(&args.env).map_err(AppError::Usage)?;
    let text = collect::snapshot_writer::write_live(config, env)
        .await
        .map_err(AppError::Collect)?;
    write_file(&args.output, &text)?;
    eprintln!("snapshot: {}", args.output.display());
    Ok(0)
}
