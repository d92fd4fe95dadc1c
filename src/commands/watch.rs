//! `gates watch ENV`: the engine's watch (`gates_engine::watch`) serving its evaluations over
//! HTTP (`output::served`), with a line on stderr for each verdict that changes, until
//! SIGTERM or Ctrl-C stops it cleanly. With `--policy-report`, a task beside it keeps the
//! environment's ClusterPolicyReport current (`gates_engine::watch::policy_report`), and the
//! terminal hears when its writes start failing and when they succeed again.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use gates_core::exit::ExitCode;
use gates_engine::watch::policy_report::{WriteEvent, WriteStatus};
use gates_engine::watch::{Published, WatchOptions};

use crate::cli::WatchArgs;
use crate::config::Config;
use crate::error::AppError;
use crate::streams::Streams;
use crate::verdict::Verdict;

pub async fn run(
    config: &Config,
    config_dir: &Path,
    args: WatchArgs,
    streams: &mut Streams,
) -> Result<ExitCode, AppError> {
    let env = config.environment(&args.env)?.clone();
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|source| AppError::Listen {
            addr: args.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| AppError::Listen {
        addr: args.listen,
        source,
    })?;
    let (publish, mut newest) = tokio::sync::watch::channel(None);
    let options = WatchOptions {
        env: args.env.clone(),
        reports: args.reports.clone(),
        interval: args.interval,
        stale_after: args.stale_after,
        debounce: args.debounce,
    };
    let mut engine = tokio::spawn(gates_engine::watch::run(
        config.clone(),
        config_dir.to_path_buf(),
        options,
        publish,
    ));
    // The report's writer reads the published evaluations as the server does: the engine
    // never waits for it.
    let (status, write_status) = tokio::sync::watch::channel(WriteStatus::default());
    let (events, mut write_events) = tokio::sync::mpsc::unbounded_channel();
    let writer = args.policy_report.then(|| {
        tokio::spawn(gates_engine::watch::policy_report::run(
            config.clone(),
            env,
            newest.clone(),
            args.interval,
            status,
            events,
        ))
    });
    let server = tokio::spawn(crate::output::served::serve(
        listener,
        newest.clone(),
        args.policy_report.then_some(write_status),
    ));
    streams.say(format_args!(
        "watching {}: serving http://{addr}/ (/metrics, /healthz, /readyz)",
        args.env
    ));
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|source| AppError::Listen {
        addr: args.listen,
        source,
    })?;
    let mut lines = Lines::default();
    let outcome = loop {
        tokio::select! {
            _ = terminate.recv() => break Ok("SIGTERM"),
            _ = tokio::signal::ctrl_c() => break Ok("Ctrl-C"),
            ended = &mut engine => break match ended {
                Ok(Err(err)) => Err(AppError::Watch(err)),
                // The engine runs until it is dropped; ending otherwise is a bug, said as one.
                Ok(Ok(())) | Err(_) => Err(AppError::Usage("the watch ended by itself".into())),
            },
            changed = newest.changed() => {
                if changed.is_err() {
                    continue;
                }
                let published = newest.borrow_and_update().clone();
                if let Some(published) = published {
                    lines.say(&published, streams);
                }
            }
            Some(event) = write_events.recv(), if writer.is_some() => {
                say_write(&event, &args.env, args.interval, streams);
            }
        }
    };
    engine.abort();
    server.abort();
    if let Some(writer) = writer {
        writer.abort();
    }
    let stopped_by = outcome?;
    streams.say(format_args!("stopped by {stopped_by}"));
    Ok(ExitCode::Passed)
}

/// What the terminal was last told: each trial's verdict, and readiness.
#[derive(Default)]
struct Lines {
    verdicts: BTreeMap<String, Verdict>,
    ready: bool,
}

impl Lines {
    /// A line for each trial whose verdict changed, and one when the watch becomes ready.
    fn say(&mut self, published: &Arc<Published>, streams: &mut Streams) {
        let at = published.at.format("%H:%M:%SZ");
        for trial in &published.record.trials {
            let now = trial.finding.verdict;
            let before = self.verdicts.insert(trial.name.clone(), now);
            if before != Some(now) && self.ready {
                let was = before.map_or("-", Verdict::as_str);
                let now = now.as_str();
                streams.say(format_args!(
                    "{at} {}: {was} -> {now}: {}",
                    trial.name, trial.finding.summary
                ));
            }
        }
        if published.ready && !self.ready {
            let tally = &published.record.tally;
            streams.say(format_args!(
                "{at} ready: every source read; {} passed, {} failed, {} errors, {} skipped",
                tally.passed, tally.failed, tally.errors, tally.skipped
            ));
        }
        self.ready = published.ready;
    }
}

/// How the report's writes go, said only when that changes (never once per write).
fn say_write(event: &WriteEvent, env: &str, retry: std::time::Duration, streams: &mut Streams) {
    let at = chrono::Utc::now().format("%H:%M:%SZ");
    match event {
        WriteEvent::Written {
            name,
            recovered: false,
        } => streams.say(format_args!(
            "{at} policy report: ClusterPolicyReport {name} in the cluster of {env}, written again when a verdict or message changes"
        )),
        WriteEvent::Written {
            name,
            recovered: true,
        } => streams.say(format_args!(
            "{at} policy report: ClusterPolicyReport {name} written again in the cluster of {env}"
        )),
        WriteEvent::Failing(err) => streams.say(format_args!(
            "{at} policy report: {err} (the watch goes on; tried again every {} and after each change)",
            humantime::format_duration(retry)
        )),
    }
}
