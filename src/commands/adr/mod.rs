//! `gates adr ENV... --update FILE`: keep the ADR's own account of its rollout true. Each
//! gate is done when, for every environment it must hold in, the newest check report of the
//! given environment standing for it (itself, or one checked `like` it) says it passes; open
//! when one says otherwise or has no report; a gate needing an environment that was not given
//! keeps its marker. The Rollout field then counts the done gates.
//! Only those words change; the diff is printed, and in CI (or with `--dry-run`) nothing is
//! written unless `--write` is given.

pub mod document;

use gates_core::exit::ExitCode;
use gates_core::record::check::CheckRecord;
use std::path::Path;

use crate::cli::AdrArgs;
use crate::config::{Config, EnvironmentSet, Gate};
use crate::error::AppError;
use crate::output::report::history;
use crate::streams::Streams;
use document::{Document, unified_diff};

/// Whether a gate is done, with the reason, for one gate.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub gate: u32,
    /// `None`: no given environment decides this gate.
    pub done: Option<bool>,
    pub why: String,
}

/// The environments a gate must be shown in: those its file names, and for `all`, every
/// environment any gate of the decision names (for ADR 007: staging and production).
fn required(config: &Config, gate: &Gate) -> Vec<String> {
    let mut names: Vec<String> = match &gate.environments {
        EnvironmentSet::Only(names) => names.clone(),
        EnvironmentSet::All => config
            .gates
            .iter()
            .flat_map(|g| match &g.environments {
                EnvironmentSet::Only(names) => names.clone(),
                EnvironmentSet::All => Vec::new(),
            })
            .collect(),
    };
    names.sort();
    names.dedup();
    names
}

/// Per gate: done when every environment it must be shown in has a given environment (itself
/// or one checked `like` it) whose newest check report passes the gate; open when one of
/// them does not pass or has no report; undecided (marker kept) when one is not given.
pub fn decide(config: &Config, newest: &[(String, Option<CheckRecord>)]) -> Vec<Decision> {
    config
        .gates
        .iter()
        .map(|gate| {
            let mut reasons = Vec::new();
            let mut missing = Vec::new();
            let mut all_pass = true;
            for name in required(config, gate) {
                let covering: Vec<_> = newest
                    .iter()
                    .filter(|(env, _)| config.environment(env).is_ok_and(|e| e.gate_name() == name))
                    .collect();
                if covering.is_empty() {
                    missing.push(name);
                    continue;
                }
                for (env, report) in covering {
                    let verdict = report.as_ref().map(|r| {
                        let v = r
                            .gates
                            .iter()
                            .find(|g| g.gate == gate.number)
                            .map_or("absent", |g| g.verdict.as_str());
                        (v.to_string(), history::started_at(r))
                    });
                    all_pass &= matches!(&verdict, Some((v, _)) if v == "pass");
                    reasons.push(match verdict {
                        Some((v, at)) => format!("{env} {v} ({at})"),
                        None => format!("{env} has no check report"),
                    });
                }
            }
            let (done, why) = if missing.is_empty() {
                (Some(all_pass), reasons.join(", "))
            } else {
                (None, format!("no report given for {}", missing.join(", ")))
            };
            Decision {
                gate: gate.number,
                done,
                why,
            }
        })
        .collect()
}

fn is_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

pub fn run(config: &Config, args: AdrArgs, streams: &mut Streams) -> Result<ExitCode, AppError> {
    let mut newest = Vec::new();
    for name in &args.envs {
        config.environment(name)?;
        let found = history::read(&args.reports, name)?;
        for err in &found.unreadable {
            streams.say(format_args!("warning: {err}"));
        }
        newest.push((name.clone(), found.checks.last().map(|(_, c)| c.clone())));
    }
    let file = &args.update;
    let text = std::fs::read_to_string(file).map_err(AppError::file(file, "read"))?;
    let doc = Document::parse(file, &text)?;
    let expected: Vec<(u32, String, String)> = config
        .gates
        .iter()
        .map(|g| (g.number, g.title.clone(), g.file.display().to_string()))
        .collect();
    doc.check_titles(file, &expected)?;

    let decisions = decide(config, &newest);
    for d in &decisions {
        let word = match d.done {
            Some(true) => "done",
            Some(false) => "open",
            None => "kept",
        };
        streams.say(format_args!("gate {} {word}: {}", d.gate, d.why));
    }
    let wanted: Vec<Option<bool>> = decisions.iter().map(|d| d.done).collect();
    let (updated, changes) = doc.update(&wanted);
    streams.print(&unified_diff(&display(file), &changes));
    let dry = args.dry_run || (is_ci() && !args.write);
    if changes.is_empty() {
        streams.say(format_args!("{}: already up to date", file.display()));
    } else if dry {
        streams.say(format_args!(
            "{}: dry run, not written{}",
            file.display(),
            if args.dry_run {
                ""
            } else {
                " (CI is set; pass --write to write)"
            }
        ));
    } else {
        std::fs::write(file, updated).map_err(AppError::file(file, "write"))?;
        streams.say(format_args!("{}: updated", file.display()));
    }
    Ok(ExitCode::Passed)
}

fn display(path: &Path) -> String {
    path.display().to_string()
}
