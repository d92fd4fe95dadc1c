//! The report files of a chaos run: `reports/chaos-ENV-<UTC ts>.json` (everything, and what
//! `gates check` reads back for gate 4), `.xml` (JUnit, gate 4's testcases, in the Jenkins
//! junit-10.xsd profile), `.timeline.json` (every probe sample and event on one timeline)
//! and `.html` (the page, drawn from the record in hand).

use std::fs;
use std::path::{Path, PathBuf};

use chrono::DateTime;

use crate::output::report::junit::JunitWriter;
use gates_core::record::chaos::ChaosRecord;
use gates_core::record::timeline::Timeline;

/// Write the three files (and `--junit` when given) and the page; returns the paths written.
pub fn write(
    report: &ChaosRecord,
    timeline: &Timeline,
    stem: &Path,
    junit: Option<&Path>,
) -> Result<Vec<PathBuf>, String> {
    let xml = render_junit(report);
    let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    let timeline_json = serde_json::to_string_pretty(timeline).map_err(|e| e.to_string())?;
    let mut files = vec![
        (stem.with_extension("xml"), xml.clone()),
        (stem.with_extension("json"), json),
        (stem.with_extension("timeline.json"), timeline_json),
    ];
    if let Some(path) = junit {
        files.push((path.to_path_buf(), xml));
    }
    let mut written = Vec::new();
    for (path, text) in files {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        written.push(path);
    }
    // The page from the record in hand: what the files just written would redraw.
    written.push(crate::output::report::html::chaos::write(
        report, timeline, stem,
    )?);
    Ok(written)
}

/// JUnit for gate 4: one suite `adr007.gate4`, host, VMs and measured outages as suite
/// properties (the schema allows none on testcases), the intervals in failure bodies.
pub fn render_junit(report: &ChaosRecord) -> String {
    // The suite took the run's wall time; each case carries what it measured.
    let total = wall_time(report);
    let classname = format!("{}.gate4", report.decision.replace('-', ""));
    let mut junit = JunitWriter::new(
        &format!("gates chaos {} {}", report.decision, report.environment),
        &report.tally,
        total,
    );
    let stamp = report.started_at.get(..19).unwrap_or(&report.started_at);
    junit.start_suite(&classname, &report.tally, total, stamp);
    let vms = report
        .vms
        .iter()
        .map(|v| format!("{} {} (node {})", v.vmid, v.name, v.node))
        .collect::<Vec<_>>()
        .join(", ");
    let mut properties: Vec<(String, String)> = vec![
        ("environment".into(), report.environment.clone()),
        ("decision".into(), report.decision.clone()),
        ("gate".into(), report.gate_title.clone()),
        ("host".into(), report.host.clone()),
        ("host-choice".into(), report.host_choice.clone()),
        ("mode".into(), report.mode.as_str().to_string()),
        ("vms".into(), vms),
        (
            "untouched".into(),
            if report.untouched.is_empty() {
                "none".into()
            } else {
                report.untouched.join(", ")
            },
        ),
        ("started-at".into(), report.started_at.clone()),
        ("outcome".into(), report.outcome.clone()),
    ];
    if let Some(signal) = &report.interrupted {
        properties.push(("interrupted".into(), signal.clone()));
    }
    for probe in &report.probes {
        properties.push((
            format!("outage.{}", probe.probe),
            format!(
                "longest {:.3}s, total {:.3}s, {} interval(s); budget longest {:.3}s, total {:.3}s",
                probe.longest.as_secs_f64(),
                probe.total.as_secs_f64(),
                probe.outages.len(),
                probe.budget_longest.as_secs_f64(),
                probe.budget_total.as_secs_f64()
            ),
        ));
    }
    for probe in report.probes.iter().filter(|p| !p.unknown.is_empty()) {
        properties.push((
            format!("unknown.{}", probe.probe),
            format!(
                "longest {:.3}s, total {:.3}s, {} interval(s): {}",
                probe.unknown_longest.as_secs_f64(),
                probe.unknown_total.as_secs_f64(),
                probe.unknown.len(),
                probe
                    .unknown
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    if !report.handovers.is_empty() {
        let handovers: Vec<String> = report
            .handovers
            .iter()
            .map(|e| {
                format!(
                    "{:.1}s {} {}: {}",
                    e.at.as_secs_f64(),
                    e.kind,
                    e.subject,
                    e.detail
                )
            })
            .collect();
        properties.push(("handovers".into(), handovers.join("; ")));
    }
    junit.properties(&properties);
    for case in &report.trials {
        junit.testcase(case, &classname);
    }
    junit.end_suite();
    junit.finish()
}

/// Seconds from `started_at` to `finished_at` (0 when either cannot be read).
fn wall_time(report: &ChaosRecord) -> f64 {
    let at = |s: &str| DateTime::parse_from_rfc3339(s).ok();
    match (at(&report.started_at), at(&report.finished_at)) {
        (Some(start), Some(end)) => ((end - start).num_milliseconds().max(0) as f64) / 1000.0,
        _ => 0.0,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::runner::{Tally, TrialResult};
    use crate::verdict::{Finding, Verdict};
    use gates_core::record::chaos::{Mode, Moments};
    use gates_engine::chaos::events::Event;
    use gates_engine::chaos::timeline::{Observation, Sample};
    use serde_json::Value;
    use std::time::Duration;

    fn trial(name: &str, finding: Finding, secs: f64) -> TrialResult {
        TrialResult {
            name: format!("gate4::lab::chaos::{name}"),
            gate: 4,
            kind: "chaos-probe".into(),
            instance: Some(name.into()),
            finding,
            duration: Duration::from_secs_f64(secs),
        }
    }

    /// A 12.9 s run whose three trials measured 11.5 s, 6.2 s and nothing.
    pub(crate) fn report(interrupted: Option<&str>) -> ChaosRecord {
        let trials = vec![
            trial("api", Finding::pass("api: available throughout"), 11.5),
            trial("recovery", Finding::pass("everything is back"), 6.2),
            trial("no-manual-work", Finding::pass("exactly the plan"), 0.0),
        ];
        ChaosRecord {
            schema_version: Some(gates_core::schema::SCHEMA_VERSION),
            environment: "lab".into(),
            decision: "adr-007".into(),
            gate_title: "A host failure leaves the cluster available.".into(),
            host: "pve1".into(),
            host_choice: "named".into(),
            mode: Mode::EnvironmentVms,
            vms: Vec::new(),
            untouched: Vec::new(),
            started_at: "2026-11-29T20:15:00.000Z".into(),
            finished_at: "2026-11-29T20:15:12.900Z".into(),
            sample_interval: 0.1,
            moments: Moments::default(),
            outcome: "completed; restored because the outage deadline was reached".into(),
            interrupted: interrupted.map(str::to_string),
            verdict: Verdict::Pass,
            tally: Tally::of(&trials),
            trials,
            probes: Vec::new(),
            power_actions: Vec::new(),
            handovers: Vec::new(),
            timeline_file: String::new(),
            provenance: None,
            prediction: None,
            split_brain: None,
        }
    }

    #[test]
    fn the_suite_takes_the_wall_time_and_each_case_what_it_measured() {
        let xml = render_junit(&report(None));
        assert!(xml.contains("time=\"12.900000\""), "{xml}");
        assert!(
            !xml.contains("time=\"17.700000\""),
            "not the sum of the cases: {xml}"
        );
        assert!(
            xml.contains("time=\"11.500000\"") && xml.contains("time=\"6.200000\""),
            "{xml}"
        );
        assert!(!xml.contains("name=\"interrupted\""), "{xml}");
    }

    #[test]
    fn a_probe_that_could_not_observe_has_its_unknown_intervals_in_the_junit() {
        let mut blind = report(None);
        let samples: Vec<gates_engine::chaos::timeline::Sample> = [true, false, false, true]
            .iter()
            .enumerate()
            .map(|(i, up)| gates_engine::chaos::timeline::Sample {
                at: Duration::from_secs(i as u64),
                observation: if *up {
                    gates_engine::chaos::timeline::Observation::Up
                } else {
                    gates_engine::chaos::timeline::Observation::Unknown(
                        "the API did not answer".into(),
                    )
                },
            })
            .collect();
        blind.probes = vec![gates_engine::chaos::budget::judge(
            "workloads::coredns",
            &samples,
            gates_engine::chaos::test_support::budget(5, 5),
        )];
        let xml = render_junit(&blind);
        assert!(
            xml.contains(
                "name=\"unknown.workloads::coredns\" value=\"longest 2.000s, total 2.000s, 1 interval(s): [1.0s, 3.0s) 2.0s\""
            ),
            "{xml}"
        );
    }

    #[test]
    fn an_interrupted_run_says_so_in_the_junit_and_the_json() {
        let interrupted = report(Some("SIGINT"));
        let xml = render_junit(&interrupted);
        assert!(
            xml.contains("name=\"interrupted\" value=\"SIGINT\""),
            "{xml}"
        );
        let json = serde_json::to_value(&interrupted).unwrap();
        assert_eq!(json["interrupted"], "SIGINT");
        assert_eq!(
            serde_json::to_value(report(None)).unwrap()["interrupted"],
            Value::Null
        );
    }

    /// A record and timeline as a run holds them: times to the nanosecond, not yet rounded
    /// to the millisecond the files hold. The handover at 1.0495 s is held as 1.05 s, which
    /// the page prints as 1.1 s where the unrounded time prints as 1.0 s.
    fn measured() -> (ChaosRecord, Timeline) {
        let mut record = report(None);
        let samples: Vec<Sample> = [true, false, false, true, true]
            .iter()
            .enumerate()
            .map(|(i, up)| Sample {
                at: Duration::from_nanos(1_000_000_000 * i as u64 + 123_456_789),
                observation: if *up {
                    Observation::Up
                } else {
                    Observation::Down("refused".into())
                },
            })
            .collect();
        record.probes = vec![gates_engine::chaos::budget::judge(
            "api",
            &samples,
            gates_engine::chaos::test_support::budget(1, 1),
        )];
        record.moments = Moments {
            fault: Some(0.5),
            restore: Some(2.25),
            running_again: Some(3.001),
            recovered: Some(4.5),
        };
        let handover = Event {
            at: Duration::from_nanos(1_049_500_000),
            kind: "api-vip-holder-changed".into(),
            subject: "api-vip".into(),
            detail: "cp-1 -> cp-2".into(),
            lineage: None,
        };
        record.handovers = vec![handover.clone()];
        let timeline = Timeline {
            environment: record.environment.clone(),
            host: record.host.clone(),
            started_at: record.started_at.clone(),
            moments: record.moments.clone(),
            probes: [("api".to_string(), samples)].into_iter().collect(),
            unknown: Default::default(),
            events: vec![handover],
        };
        (record, timeline)
    }

    #[test]
    fn the_page_drawn_from_the_run_in_hand_is_the_page_its_files_redraw() {
        let (record, timeline) = measured();
        let dir = tempfile::tempdir().unwrap();
        let stem = dir.path().join("chaos-lab-20261129T201500Z");
        write(&record, &timeline, &stem, None).unwrap();
        let drawn = fs::read_to_string(stem.with_extension("html")).unwrap();
        let (read, read_timeline) = crate::output::report::read_back::chaos(&stem).unwrap();
        let redrawn = crate::output::report::html::chaos::render(&read, &read_timeline);
        assert!(drawn.contains("data-probe=\"api\""), "{drawn}");
        assert!(drawn == redrawn, "the page differs from its redrawing");
    }
}
