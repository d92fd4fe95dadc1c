//! `gates chaos ENV` and `gates recover ENV`: the chaos step (then its metrics, whatever it
//! ended in) and the restore of an interrupted one.

use std::sync::Arc;

use gates_core::exit::ExitCode;

use chrono::Utc;

use crate::cli::{ChaosArgs, RecoverArgs};
use crate::config::{Config, Environment};
use crate::error::AppError;
use crate::output::chaos::{plain::PlainText, publish::Published, terminal::Terminal};
use crate::output::report;
use crate::output::report::outputs::MetricsOptions;
use crate::streams::Streams;
use gates_engine::chaos::reporters::Reporters;
use gates_engine::chaos::{ChaosError, ChaosOptions, RecoverOptions};

/// The chaos step, then the metrics of the reports it wrote (also after a refusal or failure).
pub async fn run(
    config: &Config,
    args: ChaosArgs,
    streams: &mut Streams,
) -> Result<ExitCode, AppError> {
    let env = config.environment(&args.env)?;
    let (metrics, since) = (MetricsOptions::from(&args.metrics), Utc::now());
    let options = ChaosOptions::from(&args);
    let result = experiment(config, env, &args, streams).await;
    let emitted = report::outputs::after_chaos(
        &mut *streams.err,
        &metrics,
        &options.reports,
        &env.name,
        since,
    )
    .await;
    let code = result?;
    emitted?;
    Ok(code)
}

/// One chaos run with the command line's reporters: progress on stderr, the plan on stdout (on
/// stderr when stdout carries the JSON report), then the results printed on the streams and
/// the report files written.
pub async fn experiment(
    config: &Config,
    env: &Environment,
    args: &ChaosArgs,
    streams: &mut Streams,
) -> Result<ExitCode, ChaosError> {
    let reporters = Reporters::new()
        .with(Arc::new(Terminal::default()))
        .with(Arc::new(PlainText {
            format: args.format,
        }))
        .with(Arc::new(Published::new(args.format, streams)));
    gates_engine::chaos::run(config, env, &ChaosOptions::from(args), &reporters).await
}

/// Power back on what an interrupted chaos step stopped, from its journal.
pub async fn recover(
    config: &Config,
    args: RecoverArgs,
    streams: &mut Streams,
) -> Result<ExitCode, AppError> {
    let env = config.environment(&args.env)?;
    Ok(
        gates_engine::chaos::recover(config, env, &RecoverOptions::from(&args), &mut *streams.out)
            .await?,
    )
}
