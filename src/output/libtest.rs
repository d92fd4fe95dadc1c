//! The terminal's trial lines, printed by libtest-mimic so that they look like `cargo test`'s
//! and `--list`, `--format terse` and `--quiet` behave as users expect. Selection is the
//! engine's ([`crate::selection::Asked`]); by the time these print, every trial was evaluated.

use libtest_mimic::{Arguments, ColorSetting, Completion, Failed, FormatSetting, Trial};

use super::{Color, Format};
use crate::runner::TrialResult;
use crate::verdict::{Finding, Verdict};

/// How the lines are printed: what `check` and `chaos` are asked for on the command line.
#[derive(Debug, Clone, Copy)]
pub struct Lines {
    pub format: Format,
    pub color: Color,
    pub quiet: bool,
}

impl Lines {
    /// libtest's arguments for these lines. No filter: the trials printed are the ones the
    /// engine selected and evaluated.
    fn arguments(self, list: bool) -> Arguments {
        Arguments {
            list,
            quiet: self.quiet,
            // Trials are evaluated before printing; one thread keeps the output in gate order.
            test_threads: Some(1),
            format: Some(match self.format {
                Format::Terse => FormatSetting::Terse,
                Format::Pretty | Format::Json => FormatSetting::Pretty,
            }),
            color: Some(match self.color {
                Color::Auto if std::env::var_os("NO_COLOR").is_some() => ColorSetting::Never,
                Color::Auto => ColorSetting::Auto,
                Color::Always => ColorSetting::Always,
                Color::Never => ColorSetting::Never,
            }),
            ..Arguments::default()
        }
    }
}

/// Print the results libtest-style; the trials replay what was already evaluated.
pub fn print(lines: Lines, results: &[TrialResult]) {
    let trials = results
        .iter()
        .map(|result| {
            let finding = result.finding.clone();
            match finding.verdict {
                Verdict::Skip => Trial::ignorable_test(result.name.clone(), move || {
                    Ok(Completion::ignored_with(finding.summary))
                }),
                _ => Trial::test(result.name.clone(), move || outcome(&finding)),
            }
        })
        .collect();
    // The exit code comes from our verdicts (fail vs could-not-evaluate), not libtest's.
    let _conclusion = libtest_mimic::run(&lines.arguments(false), trials);
}

/// `--list`: the names of the selected trials, as libtest lists tests, without evaluating.
pub fn list<'a>(lines: Lines, names: impl IntoIterator<Item = &'a str>) {
    let trials = names
        .into_iter()
        .map(|name| Trial::test(name, || Ok(())))
        .collect();
    let _conclusion = libtest_mimic::run(&lines.arguments(true), trials);
}

fn outcome(finding: &Finding) -> Result<(), Failed> {
    match finding.verdict {
        Verdict::Pass | Verdict::Skip => Ok(()),
        Verdict::Fail => Err(finding.details().into()),
        Verdict::Error => Err(format!("could not evaluate: {}", finding.details()).into()),
    }
}
