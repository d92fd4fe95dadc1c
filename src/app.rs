//! The top level: parse arguments, load the configuration, dispatch to the command (one file
//! each under `commands/`), and turn its result into the process's exit code.

use gates_core::exit::ExitCode;
use std::path::Path;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::commands;
use crate::config::Config;
use crate::error::AppError;
use crate::streams::Streams;

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
        #[cfg(feature = "lab")]
        Command::Lab(args) => return commands::demo::lab(args).await,
        #[cfg(feature = "lab")]
        Command::Demo(args) => return commands::demo::demo(&cli.config, args, streams).await,
        Command::Completions(args) => return Ok(commands::completions::completions(args.shell)),
        Command::Man => return commands::completions::man(),
        Command::ChartValues(args) => return Ok(commands::chart_values::run(&args.files, streams)),
        command => Cli { command, ..cli },
    };
    let mut config = Config::load(&cli.config, &cli.env_dirs)?;
    override_kube(&mut config, &cli)?;
    match cli.command {
        Command::List => {
            streams.print(&commands::list::list(&config));
            Ok(ExitCode::Passed)
        }
        // `--all` and `--envs` make a fleet run, which runs `check` once per environment.
        Command::Check(args) if args.all || args.envs.is_some() => {
            commands::fleet::run(&config, &cli.config, args, streams).await
        }
        Command::Check(args) => commands::check::run(&config, &cli.config, args, streams).await,
        Command::Snapshot(args) => commands::snapshot::run(&config, args, streams).await,
        Command::Watch(args) => commands::watch::run(&config, &cli.config, args, streams).await,
        Command::Predict(args) => commands::predict::run(&config, args, streams).await,
        Command::Guard(args) => commands::guard::run(&config, args, streams).await,
        Command::Chaos(args) => commands::chaos::run(&config, args, streams).await,
        Command::History(args) => commands::history::run(args, streams),
        Command::Adr(args) => commands::adr::run(&config, args, streams),
        Command::Validate => Ok(commands::validate::command(&config, streams)),
        Command::Recover(args) => commands::chaos::recover(&config, args, streams).await,
        #[cfg(feature = "lab")]
        Command::Lab(_) | Command::Demo(_) => {
            unreachable!("handled before loading the configuration")
        }
        Command::Completions(_) | Command::Man | Command::ChartValues(_) => {
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

#[cfg(test)]
#[path = "app_tests.rs"]
mod tests;
