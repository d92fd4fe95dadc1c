//! Reports of one run: JUnit XML for dashboards and CI, JSON for machines, SARIF for code
//! scanning on pull requests, and the closing lines of the terminal output.

pub mod chaos;
pub mod history;
pub mod html;
pub mod json;
pub mod junit;
pub mod metrics;
pub mod outputs;
pub mod pushgateway;
pub mod read_back;
pub mod sarif;
pub use gates_engine::report_files as unique;

use crate::verdict::Verdict;

pub use gates_engine::record::CheckRecord as Run;

/// The closing lines (counts and how the rollout stands), the verdict words coloured as libtest colours its lines (green
/// pass, red FAIL and ERROR, yellow skip) when `colour` is set.
pub fn closing_lines_in(run: &Run, colour: bool) -> String {
    let t = &run.tally;
    let mut out = format!(
        "{} passed, {} failed, {} errors, {} skipped\n",
        t.passed, t.failed, t.errors, t.skipped
    );
    let passing = run
        .gates
        .iter()
        .filter(|g| g.verdict == Verdict::Pass)
        .count();
    out.push_str(&format!(
        "Rollout: {passing} of {} gates pass for {}\n",
        run.gates.len(),
        run.environment
    ));
    for gate in &run.gates {
        let (word, ansi) = match gate.verdict {
            Verdict::Pass => ("pass ", "32"),
            Verdict::Fail => ("FAIL ", "31"),
            Verdict::Error => ("ERROR", "31"),
            Verdict::Skip => ("skip ", "33"),
        };
        let word = if colour {
            format!("\x1b[{ansi}m{word}\x1b[0m")
        } else {
            word.to_string()
        };
        out.push_str(&format!("  gate {} {word}  {}\n", gate.gate, gate.title));
    }
    if let Some(promotion) = &run.promotion {
        out.push_str(&promotion.lines());
    }
    out
}
