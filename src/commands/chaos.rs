//! `gates chaos ENV` and `gates recover ENV`: the chaos step (then its metrics, whatever it
//! ended in) and the restore of an interrupted one.

use gates_core::exit::ExitCode;

use chrono::Utc;

use crate::chaos::{ChaosOptions, RecoverOptions};
use crate::cli::{ChaosArgs, RecoverArgs};
use crate::config::Config;
use crate::error::AppError;
use crate::report;
use crate::report::outputs::MetricsOptions;
use crate::streams::Streams;

/// The chaos step, then the metrics of the reports it wrote (also after a refusal or failure).
pub async fn run(
    config: &Config,
    args: ChaosArgs,
    streams: &mut Streams,
) -> Result<ExitCode, AppError> {
    let env = config.environment(&args.env)?;
    let (metrics, since) = (MetricsOptions::from(&args.metrics), Utc::now());
    let options = ChaosOptions::from(&args);
    let result = crate::chaos::run(config, env, &options, streams).await;
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

/// Power back on what an interrupted chaos step stopped, from its journal.
pub async fn recover(
    config: &Config,
    args: RecoverArgs,
    streams: &mut Streams,
) -> Result<ExitCode, AppError> {
    let env = config.environment(&args.env)?;
    Ok(crate::chaos::recover(config, env, &RecoverOptions::from(&args), &mut *streams.out).await?)
}
