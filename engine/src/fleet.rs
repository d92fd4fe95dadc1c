//! Fleet runs: one `check` over many environments (every environment of the configuration, or
//! those an environment list file names), a bounded number at a time, each with its own
//! credentials and reporter. One environment that cannot be checked (its cluster unreachable,
//! its repository section broken) is an error for that environment only; the others are judged
//! as they would be alone.

use std::path::{Path, PathBuf};

use futures::stream::{self, Stream, StreamExt};

use crate::check::{self, CheckError, CheckOptions, Reporter};
use crate::config::Config;
use crate::record::{FleetMember, MemberOutcome};

/// Which environments a fleet run checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Members {
    /// Every environment of the configuration, in name order.
    All,
    /// The environments an environment list file names, in its order.
    ListFile(PathBuf),
}

/// A problem with an environment list file: the file, the line and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}: {message}", file.display())]
pub struct ListProblem {
    pub file: PathBuf,
    pub line: usize,
    pub message: String,
}

/// Why a fleet run cannot start: every problem of the list at once.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("{}: cannot read the environment list: {source}", file.display())]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    List(Vec<ListProblem>),
    #[error("{}", match .0 {
        Some(file) => format!("{}: the environment list names no environment", file.display()),
        None => "the configuration has no environment to check".to_string(),
    })]
    Empty(Option<PathBuf>),
}

/// The environments of the fleet, in the order they are reported.
pub fn members(config: &Config, members: &Members) -> Result<Vec<String>, FleetError> {
    let names: Vec<String> = match members {
        Members::All => config.environments.keys().cloned().collect(),
        Members::ListFile(file) => {
            let text = std::fs::read_to_string(file).map_err(|source| FleetError::Read {
                file: file.clone(),
                source,
            })?;
            let known: Vec<&str> = config.environments.keys().map(String::as_str).collect();
            parse_list(file, &text, &known).map_err(FleetError::List)?
        }
    };
    if names.is_empty() {
        return Err(FleetError::Empty(match members {
            Members::All => None,
            Members::ListFile(file) => Some(file.clone()),
        }));
    }
    Ok(names)
}

/// An environment list: one environment name per line; blank lines and `#` comments (whole
/// lines or after a name) are ignored. A name the configuration does not know, a line with
/// more than one word and a name listed twice are each a problem naming the line, all at once.
pub fn parse_list(
    file: &Path,
    text: &str,
    known: &[&str],
) -> Result<Vec<String>, Vec<ListProblem>> {
    let mut names: Vec<(String, usize)> = Vec::new();
    let mut problems = Vec::new();
    let mut problem = |line: usize, message: String| {
        problems.push(ListProblem {
            file: file.to_path_buf(),
            line,
            message,
        })
    };
    // A byte-order mark (an editor's, on Windows) is not part of the first name.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let content = raw.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let mut words = content.split_whitespace();
        let name = words.next().unwrap_or(content);
        if words.next().is_some() {
            problem(line, format!("`{content}`: one environment name per line"));
            continue;
        }
        if !known.contains(&name) {
            let nearest = crate::selection::nearest_names(name, known, 1);
            problem(
                line,
                match nearest.first() {
                    Some(near) => format!("no environment `{name}`; did you mean `{near}`?"),
                    None => format!("no environment `{name}`"),
                },
            );
            continue;
        }
        match names.iter().find(|(n, _)| n == name) {
            Some((_, first)) => problem(
                line,
                format!("`{name}` is listed twice (first on line {first})"),
            ),
            None => names.push((name.to_string(), line)),
        }
    }
    if problems.is_empty() {
        Ok(names.into_iter().map(|(name, _)| name).collect())
    } else {
        Err(problems)
    }
}

/// One environment's run: the reporter it was told through, and how it ended.
pub struct Finished<R> {
    pub reporter: R,
    pub member: FleetMember,
}

/// Check each environment of `names`, at most `jobs` at once, each reported to its own
/// reporter from `reporter_for`; the runs come back in the order of `names`, each as soon as it
/// and the ones before it are done. `template` holds the options every run shares (its `env`
/// is replaced by each name).
pub fn run<'a, R: Reporter + 'a>(
    config: &'a Config,
    config_dir: &'a Path,
    template: &'a CheckOptions,
    names: &'a [String],
    jobs: usize,
    reporter_for: impl Fn(&str) -> R + 'a,
) -> impl Stream<Item = Finished<R>> + 'a {
    let reporter_for = std::rc::Rc::new(reporter_for);
    stream::iter(names)
        .map(move |name| {
            let reporter_for = reporter_for.clone();
            async move {
                let mut reporter = reporter_for(name);
                let options = CheckOptions {
                    env: name.clone(),
                    long_lived: true,
                    ..template.clone()
                };
                let outcome = one(config, config_dir, &options, &mut reporter).await;
                Finished {
                    reporter,
                    member: FleetMember {
                        environment: name.clone(),
                        outcome,
                    },
                }
            }
        })
        .buffered(jobs.max(1))
}

async fn one(
    config: &Config,
    config_dir: &Path,
    options: &CheckOptions,
    reporter: &mut dyn Reporter,
) -> MemberOutcome {
    let plan = match check::plan(config, options) {
        Ok(plan) => plan,
        Err(CheckError::NothingSelected(reason)) => {
            return MemberOutcome::NothingSelected { reason };
        }
        Err(err) => {
            return MemberOutcome::Refused {
                error: err.to_string(),
            };
        }
    };
    match check::run(config, config_dir, &plan, options, reporter).await {
        Ok(record) => MemberOutcome::Judged {
            record: Box::new(record),
        },
        Err(err) => MemberOutcome::Refused {
            error: err.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: &[&str] = &["lab-production", "lab-staging", "production", "staging"];

    fn parse(text: &str) -> Result<Vec<String>, Vec<String>> {
        parse_list(Path::new("fleet.txt"), text, KNOWN)
            .map_err(|problems| problems.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn a_list_keeps_its_order_and_ignores_blank_lines_and_comments() {
        let text =
            "# the nightly fleet\nstaging\n\n  production   # after the night\nlab-staging\n";
        assert_eq!(
            parse(text).unwrap(),
            ["staging", "production", "lab-staging"]
        );
    }

    #[test]
    fn every_problem_of_a_list_is_named_with_its_line_at_once() {
        let text = "staging\nprodution\nstaging\nlab-staging lab-production\n";
        assert_eq!(
            parse(text).unwrap_err(),
            [
                "fleet.txt:2: no environment `prodution`; did you mean `production`?",
                "fleet.txt:3: `staging` is listed twice (first on line 1)",
                "fleet.txt:4: `lab-staging lab-production`: one environment name per line",
            ]
        );
    }

    #[test]
    fn a_byte_order_mark_and_windows_line_ends_are_not_part_of_a_name() {
        assert_eq!(
            parse("\u{feff}staging\r\nproduction\r\n").unwrap(),
            ["staging", "production"]
        );
    }

    #[test]
    fn a_list_of_only_comments_names_no_environment() {
        assert_eq!(parse("# nobody\n\n").unwrap(), Vec::<String>::new());
    }
}
