//! The results of a run for the reader: the trials as libtest prints them and the closing
//! lines (or the JSON report) on stdout, and the report files.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use libtest_mimic::{Arguments, ColorSetting, FormatSetting};

use super::report::{self, ChaosReport, Timeline};
use crate::cli::Format;
use crate::runner;
use crate::verdict::Verdict;

/// The results on stdout.
pub fn print(format: Format, report: &ChaosReport) {
    match format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(report).unwrap_or_default()
        ),
        Format::Pretty | Format::Terse => {
            runner::print(&libtest_args(format), &report.trials);
            print!("{}", closing_text(report));
        }
    }
    let _ = std::io::stdout().flush();
}

/// The report files, each named on stderr; a failure to write is said, not fatal.
pub fn write(report: &ChaosReport, timeline: &Timeline, stem: &Path, junit: Option<&Path>) {
    match report::write(report, timeline, stem, junit) {
        Ok(paths) => {
            for path in paths {
                eprintln!("report: {}", path.display());
            }
        }
        Err(err) => eprintln!("error: cannot write the reports: {err}"),
    }
}

fn libtest_args(format: Format) -> Arguments {
    Arguments {
        test_threads: Some(1),
        format: Some(match format {
            Format::Terse => FormatSetting::Terse,
            Format::Pretty | Format::Json => FormatSetting::Pretty,
        }),
        color: Some(if std::env::var_os("NO_COLOR").is_some() {
            ColorSetting::Never
        } else {
            ColorSetting::Auto
        }),
        ..Arguments::default()
    }
}

/// The closing lines: host, VMs, what each probe saw, and whether everything came back.
pub fn closing_text(report: &ChaosReport) -> String {
    let mut out = String::new();
    let t = &report.tally;
    let _ = writeln!(
        out,
        "{} passed, {} failed, {} errors, {} skipped",
        t.passed, t.failed, t.errors, t.skipped
    );
    let vms: Vec<String> = report
        .vms
        .iter()
        .map(|v| format!("{} {}", v.vmid, v.name))
        .collect();
    let _ = writeln!(
        out,
        "Chaos on {}: {} went down ({}); {}",
        report.environment,
        report.host,
        vms.join(", "),
        report.outcome
    );
    let width = report
        .probes
        .iter()
        .map(|p| p.probe.len())
        .max()
        .unwrap_or(0);
    for probe in &report.probes {
        let unknown = if probe.unknown.is_empty() {
            String::new()
        } else {
            format!(
                "unknown {} time(s), longest {:.1}s, total {:.1}s",
                probe.unknown.len(),
                probe.unknown_longest.as_secs_f64(),
                probe.unknown_total.as_secs_f64()
            )
        };
        let state = match (probe.outages.is_empty(), unknown.is_empty()) {
            (true, true) => "available throughout".to_string(),
            (true, false) => format!("no outage seen; {unknown}"),
            (false, _) => format!(
                "down {} time(s), longest {:.1}s, total {:.1}s{}",
                probe.outages.len(),
                probe.longest.as_secs_f64(),
                probe.total.as_secs_f64(),
                if unknown.is_empty() {
                    String::new()
                } else {
                    format!("; {unknown}")
                }
            ),
        };
        let _ = writeln!(
            out,
            "  {:<width$} {state} (budget {:.1}s / {:.1}s)",
            probe.probe,
            probe.budget_longest.as_secs_f64(),
            probe.budget_total.as_secs_f64()
        );
    }
    if !report.handovers.is_empty() {
        let _ = writeln!(out, "  handovers (seconds after the start):");
        for e in &report.handovers {
            let what = match e.kind.as_str() {
                "api-vip-holder-changed" => "API VIP".to_string(),
                "etcd-leader-changed" => "etcd leader".to_string(),
                _ => e.subject.clone(),
            };
            let _ = writeln!(out, "    {:>6.1}s {what}: {}", e.at.as_secs_f64(), e.detail);
        }
    }
    let word = match report.verdict {
        Verdict::Pass => "pass",
        Verdict::Fail => "FAIL",
        Verdict::Error => "ERROR",
        Verdict::Skip => "skip",
    };
    let _ = writeln!(out, "  gate 4 {word}  {}", report.gate_title);
    out
}
