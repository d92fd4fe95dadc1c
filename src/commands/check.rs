//! `gates check ENV`: the engine's check (`gates_engine::check`) with the terminal as its
//! reporter, then the report files and the metrics.

use gates_core::exit::ExitCode;
use std::io::Write;
use std::path::{Path, PathBuf};

use gates_engine::check::{self, CheckEvent, CheckOptions, Reporter};

use crate::cli::{CheckArgs, Color, Format};
use crate::config::Config;
use crate::error::AppError;
use crate::output::files::write_file;
use crate::output::libtest::Lines;
use crate::output::notes::{notes_by_file, say_source_down};
use crate::output::report::{self, Run};
use crate::streams::Streams;

/// Whether to colour terminal output, decided as for the libtest lines.
pub(crate) fn colour(setting: Color) -> bool {
    use std::io::IsTerminal;
    match setting {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => std::env::var_os("NO_COLOR").is_none() && std::io::stdout().is_terminal(),
    }
}

/// `gates check ENV`: plan, run the engine with the terminal as its reporter, write reports.
pub async fn run(
    config: &Config,
    config_dir: &Path,
    args: CheckArgs,
    streams: &mut Streams,
) -> Result<ExitCode, AppError> {
    let options = CheckOptions::from(&args);
    let plan = check::plan(config, &options)?;
    let lines = Lines {
        format: args.format,
        color: args.color,
        quiet: args.quiet,
    };
    if args.list {
        crate::output::libtest::list(lines, plan.names());
        return Ok(ExitCode::Passed);
    }
    let mut terminal = Terminal {
        lines,
        streams: &mut *streams,
    };
    let run = check::run(config, config_dir, &plan, &options, &mut terminal).await?;
    write_reports(&run, &args, plan.repo_root(), streams)?;
    if args.policy_report {
        write_policy_report(config, &run, streams).await?;
    }
    report::outputs::emit(
        &mut *streams.err,
        &(&args.metrics).into(),
        "check",
        &run.environment,
        &report::metrics::check(&run),
    )
    .await?;
    Ok(run.exit_code())
}

/// The terminal as the check's reporter: notes and unusable sources on `err` as they come,
/// then libtest's trial lines and the closing lines (or the JSON report) on `out`.
struct Terminal<'s> {
    lines: Lines,
    streams: &'s mut Streams,
}

impl Reporter for Terminal<'_> {
    fn event(&mut self, event: CheckEvent<'_>) {
        let streams = &mut *self.streams;
        match event {
            CheckEvent::RepositoryNotes(notes) => {
                for line in notes_by_file(notes).lines() {
                    streams.say(line);
                }
            }
            CheckEvent::SnapshotNote(note) => streams.say(format_args!("note: {note}")),
            CheckEvent::SourceDown {
                environment,
                source,
                reason,
            } => say_source_down(streams, environment, source, reason),
            // libtest prints the trials together, once all are evaluated.
            CheckEvent::TrialFinished(_) => {}
            CheckEvent::RunFinished(run) => {
                match self.lines.format {
                    Format::Json => streams.println(report::json::render(run)),
                    Format::Pretty | Format::Terse => {
                        // libtest writes the trial lines to the process's stdout itself.
                        streams.flush();
                        crate::output::libtest::print(self.lines, &run.trials);
                        let _ = std::io::stdout().flush();
                        streams.print(&report::closing_lines_in(run, colour(self.lines.color)));
                    }
                }
                streams.flush();
            }
        }
    }
}

/// `--policy-report`: the run's verdicts as the environment's ClusterPolicyReport.
pub(crate) async fn write_policy_report(
    config: &Config,
    run: &Run,
    streams: &mut Streams,
) -> Result<(), AppError> {
    let env = config.environment(&run.environment)?;
    let name = gates_engine::policy_report::apply(config, env, run).await?;
    streams.say(format_args!(
        "policy report: ClusterPolicyReport {name} in the cluster of {}",
        run.environment
    ));
    Ok(())
}

/// The timestamped reports, then the ones asked for by path (`--junit`, `--sarif`);
/// `repo_root` is the checkout the repository trials read, whose files SARIF locations name.
fn write_reports(
    run: &Run,
    args: &CheckArgs,
    repo_root: Option<&Path>,
    streams: &mut Streams,
) -> Result<(), AppError> {
    let timestamped = write_timestamped(run, &args.reports, streams)?;
    let mut written = Vec::new();
    if let Some(path) = &args.junit {
        // The JUnit text the timestamped copy holds, rendered once.
        write_file(path, &timestamped[0].1)?;
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

/// `DIR/ENV-STAMP.{xml,json,html}`, each said as written; the paths with the texts written,
/// in that order (so a copy elsewhere is not rendered again).
pub(crate) fn write_timestamped(
    run: &Run,
    dir: &Path,
    streams: &mut Streams,
) -> Result<Vec<(PathBuf, String)>, AppError> {
    let stem = gates_engine::record::default_stem(run, dir);
    let mut written = Vec::new();
    for (path, text) in [
        (stem.with_extension("xml"), report::junit::render(run)),
        (stem.with_extension("json"), report::json::render(run)),
        (
            stem.with_extension("html"),
            report::html::check::render(run),
        ),
    ] {
        write_file(&path, &text)?;
        streams.say(format_args!("report: {}", path.display()));
        written.push((path, text));
    }
    Ok(written)
}
