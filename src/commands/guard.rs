//! `gates guard ENV`: wait, between the steps of a rolling change (`talosctl upgrade` one
//! control plane at a time), until the cluster is steady again, as ADR 007 asks: read it
//! live every `--interval`, judge the picture ([`gates_core::guard`]), say what is still not
//! steady whenever that changes, and exit 0 once nothing is, 1 at `--timeout` naming what
//! still was, 2 when the environment file lacks what the judgement needs.

use std::time::{Duration, Instant};

use gates_core::exit::ExitCode;
use gates_core::guard::{self, Readiness};

use crate::cli::GuardArgs;
use crate::collect;
use crate::config::Config;
use crate::error::AppError;
use crate::streams::Streams;

pub async fn run(
    config: &Config,
    args: GuardArgs,
    streams: &mut Streams,
) -> Result<ExitCode, AppError> {
    let env = config.environment(&args.env)?;
    let started = Instant::now();
    let mut last: Option<Readiness> = None;
    loop {
        let state = collect::live(config, env).await;
        let now = guard::judge(env, &state);
        let waited = started.elapsed();
        if !now.cannot.is_empty() {
            for line in &now.cannot {
                streams.say(format_args!("error: cannot judge {}: {line}", env.name));
            }
            return Ok(ExitCode::CannotTell);
        }
        if now.ready() {
            streams.println(format_args!(
                "{} is steady after {}: etcd has the expected members, no alarm and one leader, every node is Ready, the API VIP answers",
                env.name,
                seconds(waited)
            ));
            return Ok(ExitCode::Passed);
        }
        if last.as_ref() != Some(&now) {
            streams.println(format_args!(
                "{} waiting for {}:",
                seconds(waited),
                env.name
            ));
            for line in &now.waiting {
                streams.println(format_args!("  {line}"));
            }
        }
        if waited + args.interval > args.timeout {
            streams.println(format_args!(
                "{} is not steady after {} (--timeout {}); still:",
                env.name,
                seconds(waited),
                humantime::format_duration(args.timeout)
            ));
            for line in &now.waiting {
                streams.println(format_args!("  {line}"));
            }
            return Ok(ExitCode::Failed);
        }
        last = Some(now);
        tokio::time::sleep(args.interval).await;
    }
}

fn seconds(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}
