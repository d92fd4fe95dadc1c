//! The results of a run for the reader: the trials as libtest prints them and the closing
//! lines (or the JSON report) on stdout, and the report files.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::sync::Mutex;

use crate::output::Format;
use crate::output::report::chaos as report;
use crate::streams::Streams;
use crate::verdict::Verdict;
use gates_engine::chaos::report::{ChaosRecord, Timeline};
use gates_engine::chaos::reporters::{Reporter, RunEvent};

/// The run's reporter of its results: they are printed on the streams (as `format` asks) and
/// the report files written when the run hands its record over, and a run that ended before
/// touching anything says so on `err`.
pub struct Published<'s> {
    format: Format,
    streams: Mutex<&'s mut Streams>,
}

impl<'s> Published<'s> {
    pub fn new(format: Format, streams: &'s mut Streams) -> Published<'s> {
        Published {
            format,
            streams: Mutex::new(streams),
        }
    }
}

impl Reporter for Published<'_> {
    fn report(&self, event: &RunEvent<'_>) {
        let Ok(mut streams) = self.streams.lock() else {
            return;
        };
        match event {
            RunEvent::Note(text) => streams.say(text),
            RunEvent::Record {
                record,
                timeline,
                stem,
                junit,
            } => {
                print(self.format, record, &mut streams);
                write(record, timeline, stem, *junit, &mut streams);
            }
            RunEvent::Begin(_)
            | RunEvent::Phase(_)
            | RunEvent::Log(_)
            | RunEvent::Probes(_)
            | RunEvent::Plan(_)
            | RunEvent::Timeline(_)
            | RunEvent::Finished(_)
            | RunEvent::Quiet => {}
        }
    }
}

/// The results, on the streams' `out` (libtest's trial lines on the process's stdout).
pub fn print(format: Format, report: &ChaosRecord, streams: &mut Streams) {
    match format {
        Format::Json => {
            streams.println(serde_json::to_string_pretty(report).unwrap_or_default());
        }
        Format::Pretty | Format::Terse => {
            streams.flush();
            let lines = crate::output::libtest::Lines {
                format,
                color: crate::output::Color::Auto,
                quiet: false,
            };
            crate::output::libtest::print(lines, &report.trials);
            let _ = std::io::stdout().flush();
            streams.print(&closing_text(report));
        }
    }
    streams.flush();
}

/// The report files, each named on the streams' `err`; a failure to write is said, not
/// fatal.
pub fn write(
    report: &ChaosRecord,
    timeline: &Timeline,
    stem: &Path,
    junit: Option<&Path>,
    streams: &mut Streams,
) {
    match report::write(report, timeline, stem, junit) {
        Ok(paths) => {
            for path in paths {
                streams.say(format_args!("report: {}", path.display()));
            }
        }
        Err(err) => streams.say(format_args!("error: cannot write the reports: {err}")),
    }
}

/// The closing lines: host, VMs, what each probe saw, and whether everything came back.
pub fn closing_text(report: &ChaosRecord) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use gates_engine::chaos::report::Moments;

    fn lab_report() -> ChaosRecord {
        crate::output::report::chaos::tests::report(None)
    }

    fn empty_timeline(report: &ChaosRecord) -> Timeline {
        Timeline {
            environment: report.environment.clone(),
            host: report.host.clone(),
            started_at: report.started_at.clone(),
            moments: Moments::default(),
            probes: Default::default(),
            unknown: Default::default(),
            events: Vec::new(),
        }
    }

    #[test]
    fn the_json_report_goes_to_out_and_the_files_written_to_err() {
        let report = lab_report();
        let (mut streams, said) = Streams::captured();
        print(Format::Json, &report, &mut streams);
        let json: serde_json::Value = serde_json::from_str(&said.out()).expect("out is JSON");
        assert_eq!(json["environment"], "lab");
        let dir = tempfile::tempdir().unwrap();
        let stem = dir.path().join("chaos-lab-20261201T140155Z");
        write(&report, &empty_timeline(&report), &stem, None, &mut streams);
        let err = said.err();
        for ext in ["xml", "json", "timeline.json"] {
            let want = format!("report: {}\n", stem.with_extension(ext).display());
            assert!(err.contains(&want), "{want:?} missing from {err}");
        }
    }

    #[test]
    fn the_reporter_says_a_note_on_err_then_prints_and_writes_the_record_it_is_handed() {
        let report = lab_report();
        let timeline = empty_timeline(&report);
        let dir = tempfile::tempdir().unwrap();
        let stem = dir.path().join("chaos-lab-20261201T140155Z");
        let (mut streams, said) = Streams::captured();
        let published = Published::new(Format::Json, &mut streams);
        published.report(&RunEvent::Note(
            "interrupted by SIGINT before the fault; nothing was touched",
        ));
        published.report(&RunEvent::Record {
            record: &report,
            timeline: &timeline,
            stem: &stem,
            junit: None,
        });
        let json: serde_json::Value = serde_json::from_str(&said.out()).expect("out is JSON");
        assert_eq!(json["environment"], "lab");
        let err = said.err();
        assert!(
            err.starts_with(
                "interrupted by SIGINT before the fault; nothing was touched\nreport: "
            ),
            "{err}"
        );
        assert!(stem.with_extension("json").exists());
    }

    #[test]
    fn reports_that_cannot_be_written_are_said_on_err() {
        let report = lab_report();
        let (mut streams, said) = Streams::captured();
        let dir = tempfile::tempdir().unwrap();
        let blocked = dir.path().join("file");
        std::fs::write(&blocked, "").unwrap();
        let stem = blocked.join("chaos-lab");
        write(&report, &empty_timeline(&report), &stem, None, &mut streams);
        assert!(
            said.err().starts_with("error: cannot write the reports: "),
            "{}",
            said.err()
        );
        assert_eq!(said.out(), "");
    }
}
