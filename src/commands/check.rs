//! `gates check ENV`: select the trials, read the repository, collect the state once (live, or
//! from snapshots), evaluate, judge promotion, print, and write the reports and metrics.

use gates_core::exit::ExitCode;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use chrono::Utc;

use crate::cli::{CheckArgs, Color, Format};
use crate::collect;
use crate::config::Config;
use crate::error::AppError;
use crate::output::files::write_file;
use crate::output::notes::{notes_by_file, say_sources_down};
use crate::report::{self, Run};
use crate::runner::{self, Tally};
use crate::streams::Streams;

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
pub async fn run(
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
        &(&args.metrics).into(),
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
