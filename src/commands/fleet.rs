//! `gates check --all` and `gates check --envs FILE`: the engine's fleet run
//! (`gates_engine::fleet`), each environment's block printed in order as it finishes, its own
//! reports written as a check of it alone writes them, then the environment × gate table and
//! the fleet's JUnit, JSON, HTML and metrics. The exit code is the worst environment's.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;

use futures::StreamExt;
use gates_core::exit::ExitCode;
use gates_engine::check::{self, CheckError, CheckOptions};
use gates_engine::fleet::{self, Members};
use gates_engine::record::{FleetMember, FleetRecord, MemberOutcome};

use crate::cli::{CheckArgs, Format};
use crate::commands::check::{colour, write_policy_report, write_timestamped};
use crate::config::Config;
use crate::error::AppError;
use crate::output::files::write_file;
use crate::output::fleet::{Held, table};
use crate::output::libtest::Lines;
use crate::output::report;
use crate::streams::Streams;

/// Run the fleet `args` asks for (`--all` or `--envs`).
pub async fn run(
    config: &Config,
    config_dir: &std::path::Path,
    args: CheckArgs,
    streams: &mut Streams,
) -> Result<ExitCode, AppError> {
    let (members, filter) = target(&args)?;
    let names = fleet::members(config, &members)?;
    let template = CheckOptions {
        filter,
        ..CheckOptions::from(&args)
    };
    let lines = Lines {
        format: args.format,
        color: args.color,
        quiet: args.quiet,
    };
    if args.list {
        return list(config, &template, &names, lines);
    }
    let started_at = chrono::Utc::now();
    let runs = fleet::run(
        config,
        config_dir,
        &template,
        &names,
        usize::from(args.jobs),
        |_| Held::default(),
    );
    let mut runs = std::pin::pin!(runs);
    let mut environments = Vec::new();
    let mut pages = BTreeMap::new();
    let mut unwritten = false;
    while let Some(finished) = runs.next().await {
        print_block(&finished.member, &finished.reporter, lines, streams);
        if let Some(record) = finished.member.record() {
            let written = write_timestamped(record, &args.reports, streams)?;
            // One cluster refusing its report does not stop the others'.
            if args.policy_report
                && let Err(err) = write_policy_report(config, record, streams).await
            {
                streams.say(format_args!("error: {err}"));
                unwritten = true;
            }
            if let Some((page, _)) = written
                .iter()
                .find(|(p, _)| p.extension().is_some_and(|e| e == "html"))
            {
                let name = page.file_name().map(|n| n.to_string_lossy().into_owned());
                pages.insert(
                    finished.member.environment.clone(),
                    name.unwrap_or_default(),
                );
            }
        }
        environments.push(finished.member);
    }
    refuse_if_nothing_selected(environments.iter().map(|m| match &m.outcome {
        MemberOutcome::NothingSelected { reason } => Some(reason.as_str()),
        MemberOutcome::Judged { .. } | MemberOutcome::Refused { .. } => None,
    }))?;
    let fleet = FleetRecord {
        schema_version: gates_core::schema::SCHEMA_VERSION,
        started_at,
        environments,
    };
    match args.format {
        Format::Json => streams.println(render_json(&fleet)?),
        Format::Pretty | Format::Terse => {
            streams.println(format_args!(
                "\n== fleet: {} environments",
                fleet.environments.len()
            ));
            streams.print(&table(&fleet.matrix()));
            streams.println(format_args!(
                "fleet exit code: {}",
                fleet.exit_code().code()
            ));
        }
    }
    write_fleet_reports(&fleet, &pages, &args, streams)?;
    report::outputs::emit_fleet(&mut *streams.err, &(&args.metrics).into(), &fleet).await?;
    let asked_not_done = if unwritten {
        ExitCode::CannotTell
    } else {
        ExitCode::Passed
    };
    Ok(fleet.exit_code().worst(asked_not_done))
}

/// Which environments, and the filter: with `--all` or `--envs` the one word given is the
/// filter. What a fleet cannot do is refused by name.
fn target(args: &CheckArgs) -> Result<(Members, Option<String>), AppError> {
    let members = match (&args.envs, args.all) {
        (Some(file), _) => Members::ListFile(file.clone()),
        (None, true) => Members::All,
        (None, false) => {
            return Err(AppError::Usage(
                "a fleet run needs --all or --envs FILE".to_string(),
            ));
        }
    };
    let filter = match (&args.env, &args.filter) {
        (Some(_), Some(_)) => {
            return Err(AppError::Usage(
                "with --all or --envs, give at most one word, the filter (the environments come from the configuration or the list)".to_string(),
            ));
        }
        (word, None) => word.clone(),
        (None, filter) => filter.clone(),
    };
    for (given, flag, why) in [
        (
            !args.snapshot.is_empty(),
            "--snapshot",
            "a snapshot is of one cluster",
        ),
        (
            args.repo.is_some(),
            "--repo",
            "each environment reads its own `repo`",
        ),
        (
            args.sarif.is_some(),
            "--sarif",
            "SARIF names one repository's files",
        ),
    ] {
        if given {
            return Err(AppError::Usage(format!(
                "{flag} cannot be used with a fleet run: {why}; check that environment alone"
            )));
        }
    }
    Ok((members, filter))
}

/// `--list`: every environment's selected trials, as libtest lists them.
fn list(
    config: &Config,
    template: &CheckOptions,
    names: &[String],
    lines: Lines,
) -> Result<ExitCode, AppError> {
    let mut all = Vec::new();
    let mut unselected: Vec<Option<String>> = Vec::new();
    for name in names {
        let options = CheckOptions {
            env: name.clone(),
            ..template.clone()
        };
        match check::plan(config, &options) {
            Ok(plan) => {
                all.extend(plan.names().map(str::to_string));
                unselected.push(None);
            }
            Err(CheckError::NothingSelected(reason)) => unselected.push(Some(reason)),
            Err(err) => return Err(err.into()),
        }
    }
    refuse_if_nothing_selected(unselected.iter().map(Option::as_deref))?;
    crate::output::libtest::list(lines, all.iter().map(String::as_str));
    Ok(ExitCode::Passed)
}

/// One environment's block: its header, what it said on the way, its trial lines and its
/// closing lines (nothing on stdout with `--format json`, which prints the fleet at the end).
fn print_block(member: &FleetMember, held: &Held, lines: Lines, streams: &mut Streams) {
    let json = matches!(lines.format, Format::Json);
    if !json {
        streams.println(format_args!("\n== gates check {}", member.environment));
    }
    for line in &held.lines {
        streams.say(line);
    }
    match &member.outcome {
        MemberOutcome::Judged { record } if !json => {
            streams.flush();
            crate::output::libtest::print(lines, &record.trials);
            let _ = std::io::stdout().flush();
            streams.print(&report::closing_lines_in(record, colour(lines.color)));
        }
        MemberOutcome::Judged { .. } => {}
        MemberOutcome::NothingSelected { reason } => {
            streams.say(format_args!("note: {}: {reason}", member.environment));
        }
        MemberOutcome::Refused { error } => {
            streams.say(format_args!(
                "error: {} could not be checked: {error}",
                member.environment
            ));
        }
    }
    streams.flush();
}

/// A filter that leaves no trial in any environment is a typo, refused as a single check's is.
/// `unselected` holds, per environment, why nothing was selected there (`None`: something was).
fn refuse_if_nothing_selected<'a>(
    unselected: impl IntoIterator<Item = Option<&'a str>>,
) -> Result<(), AppError> {
    let reasons: Vec<&str> = unselected
        .into_iter()
        .collect::<Option<_>>()
        .unwrap_or_default();
    match reasons.first() {
        Some(first) => Err(AppError::Usage(format!(
            "the selection leaves no trial in any environment of the fleet; the first: {first}"
        ))),
        None => Ok(()),
    }
}

fn render_json(fleet: &FleetRecord) -> Result<String, AppError> {
    serde_json::to_string_pretty(fleet).map_err(|source| AppError::Encode {
        what: "the fleet report",
        source,
    })
}

/// `gates-fleet-STAMP.{xml,json,html}` beside the environments' own reports, and the JUnit
/// where `--junit` asks.
fn write_fleet_reports(
    fleet: &FleetRecord,
    pages: &BTreeMap<String, String>,
    args: &CheckArgs,
    streams: &mut Streams,
) -> Result<(), AppError> {
    let junit = report::junit::render_fleet(fleet);
    let stem = fleet.default_stem(&args.reports);
    let mut written: Vec<PathBuf> = Vec::new();
    for (path, text) in [
        (stem.with_extension("xml"), junit.clone()),
        (stem.with_extension("json"), render_json(fleet)?),
        (
            stem.with_extension("html"),
            report::html::fleet::render(fleet, pages),
        ),
    ] {
        write_file(&path, &text)?;
        written.push(path);
    }
    if let Some(path) = &args.junit {
        write_file(path, &junit)?;
        written.push(path.clone());
    }
    for path in written {
        streams.say(format_args!("report: {}", path.display()));
    }
    Ok(())
}
