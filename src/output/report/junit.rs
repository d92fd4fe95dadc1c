//! JUnit XML in the profile Jenkins' `junit-10.xsd` accepts: flat suites, dotted classnames
//! (`adr007.gate2`), `time` on every case, the whole evidence in the body of `<failure>`,
//! `<error>` for could-not-evaluate, `<skipped>` with the reason. The root carries only name,
//! tests, failures, errors and time, and testcases carry no properties, because that schema
//! allows nothing else there (quick-junit always writes more, so the document is written
//! with quick-xml directly). [`JunitWriter`] is shared by `gates check` and `gates chaos`.

use std::io::Cursor;

use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};

use super::Run;
use crate::runner::{Tally, TrialResult};
use crate::state::Source;
use crate::verdict::Verdict;
use gates_engine::record::{FleetRecord, MemberOutcome};

/// `gates check`: one suite per gate.
pub fn render(run: &Run) -> String {
    let mut junit = JunitWriter::new(
        &format!("gates {} {}", run.decision, run.environment),
        &run.tally,
        total_time(run),
    );
    suites(&mut junit, run, &run.decision.replace('-', ""));
    junit.finish()
}

/// A fleet run: one suite per environment and gate (`adr007.staging.gate2`), and for an
/// environment that could not be checked at all one suite with that error as its one case, so
/// a dashboard sees it beside the others.
pub fn render_fleet(fleet: &FleetRecord) -> String {
    let mut tally = Tally::default();
    let mut time = 0.0;
    let mut refused = Vec::new();
    for member in &fleet.environments {
        match &member.outcome {
            MemberOutcome::Judged { record } => {
                tally = tally.plus(&record.tally);
                time += total_time(record);
            }
            MemberOutcome::Refused { error } => {
                let case = refusal(&member.environment, error);
                tally = tally.plus(&Tally::of(std::slice::from_ref(&case)));
                refused.push(case);
            }
            MemberOutcome::NothingSelected { .. } => {}
        }
    }
    let mut junit = JunitWriter::new("gates fleet", &tally, time);
    let timestamp = fleet.started_at.format("%Y-%m-%dT%H:%M:%S").to_string();
    for member in &fleet.environments {
        match &member.outcome {
            MemberOutcome::Judged { record } => {
                let prefix = format!(
                    "{}.{}",
                    record.decision.replace('-', ""),
                    member.environment
                );
                suites(&mut junit, record, &prefix);
            }
            MemberOutcome::Refused { .. } => {
                let Some(case) = refused
                    .iter()
                    .find(|c| c.instance.as_deref() == Some(&member.environment))
                else {
                    continue;
                };
                let classname = format!("gates.{}", member.environment);
                junit.start_suite(
                    &classname,
                    &Tally::of(std::slice::from_ref(case)),
                    0.0,
                    &timestamp,
                );
                junit.properties(&[("environment", member.environment.as_str())]);
                junit.testcase(case, &classname);
                junit.end_suite();
            }
            MemberOutcome::NothingSelected { .. } => {}
        }
    }
    junit.finish()
}

/// The one case of an environment a fleet run could not check.
fn refusal(environment: &str, error: &str) -> TrialResult {
    TrialResult {
        name: format!("{environment}::check"),
        gate: 0,
        kind: "check".into(),
        instance: Some(environment.to_string()),
        finding: crate::verdict::Finding::error(format!(
            "{environment} could not be checked: {error}"
        )),
        duration: std::time::Duration::ZERO,
    }
}

fn total_time(run: &Run) -> f64 {
    run.collect_time.as_secs_f64()
        + run
            .trials
            .iter()
            .map(|t| t.duration.as_secs_f64())
            .sum::<f64>()
}

/// The suites of one run, one per gate, named `PREFIX.gateN`.
fn suites(junit: &mut JunitWriter, run: &Run, class_prefix: &str) {
    let source = match &run.source {
        Source::Live { context } => format!("live, kube context {context}"),
        Source::Snapshot { files } => format!("snapshot {}", files.join(", ")),
    };
    let timestamp = run.started_at.format("%Y-%m-%dT%H:%M:%S").to_string();
    // Gates of the environment, then gates only repository trials of other environments
    // reached (`--repo`: production's gate 5 on a staging run), so no trial is left out.
    let mut suites: Vec<(u32, String)> = run
        .gates
        .iter()
        .map(|g| (g.gate, g.title.clone()))
        .collect();
    let mut others: Vec<u32> = run
        .trials
        .iter()
        .map(|t| t.gate)
        .filter(|n| !run.gates.iter().any(|g| g.gate == *n))
        .collect();
    others.sort_unstable();
    others.dedup();
    suites.extend(others.into_iter().map(|n| {
        let title = format!("gate {n}, declared for the environments it applies to");
        (n, title)
    }));
    for (number, title) in &suites {
        let cases: Vec<TrialResult> = run
            .trials
            .iter()
            .filter(|t| t.gate == *number)
            .cloned()
            .collect();
        let classname = format!("{class_prefix}.gate{number}");
        let time = cases.iter().map(|c| c.duration.as_secs_f64()).sum();
        junit.start_suite(&classname, &Tally::of(&cases), time, &timestamp);
        let mut properties: Vec<(&str, String)> = vec![
            ("environment", run.environment.clone()),
            ("decision", run.decision.clone()),
            ("gate", title.clone()),
            ("source", source.clone()),
        ];
        properties.extend(run.provenance.iter().flat_map(|p| p.properties()));
        junit.properties(&properties);
        for case in &cases {
            junit.testcase(case, &classname);
        }
        junit.end_suite();
    }
}

/// Writes one JUnit document: root, then suites with properties and testcases.
pub struct JunitWriter {
    writer: Writer<Cursor<Vec<u8>>>,
}

impl JunitWriter {
    /// The declaration and the root `<testsuites>` element.
    pub fn new(name: &str, tally: &Tally, time: f64) -> Self {
        let mut junit = JunitWriter {
            writer: Writer::new_with_indent(Cursor::new(Vec::new()), b' ', 2),
        };
        junit.emit(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));
        let mut root = BytesStart::new("testsuites");
        root.push_attribute(("name", clean(name).as_str()));
        push_counts(&mut root, tally);
        root.push_attribute(("time", seconds(time).as_str()));
        junit.emit(Event::Start(root));
        junit
    }

    // Writing to memory cannot fail; the io::Result of each event is ignored.
    fn emit(&mut self, event: Event<'_>) {
        let _ = self.writer.write_event(event);
    }

    pub fn start_suite(&mut self, name: &str, tally: &Tally, time: f64, timestamp: &str) {
        let mut suite = BytesStart::new("testsuite");
        suite.push_attribute(("name", name));
        push_counts(&mut suite, tally);
        suite.push_attribute(("skipped", tally.skipped.to_string().as_str()));
        suite.push_attribute(("time", seconds(time).as_str()));
        suite.push_attribute(("timestamp", timestamp));
        self.emit(Event::Start(suite));
    }

    pub fn properties<K: AsRef<str>, V: AsRef<str>>(&mut self, properties: &[(K, V)]) {
        self.emit(Event::Start(BytesStart::new("properties")));
        for (name, value) in properties {
            let mut property = BytesStart::new("property");
            property.push_attribute(("name", clean(name.as_ref()).as_str()));
            property.push_attribute(("value", clean(value.as_ref()).as_str()));
            self.emit(Event::Empty(property));
        }
        self.emit(Event::End(BytesEnd::new("properties")));
    }

    /// One testcase: passes carry their evidence in `<system-out>` when they have any.
    pub fn testcase(&mut self, case: &TrialResult, classname: &str) {
        let mut testcase = BytesStart::new("testcase");
        testcase.push_attribute(("name", case.name.as_str()));
        testcase.push_attribute(("classname", classname));
        testcase.push_attribute(("time", seconds(case.duration.as_secs_f64()).as_str()));
        let finding = &case.finding;
        let child = match finding.verdict {
            Verdict::Pass => None,
            Verdict::Fail => Some(("failure", "GateViolation")),
            Verdict::Error => Some(("error", "CouldNotEvaluate")),
            Verdict::Skip => Some(("skipped", "Skipped")),
        };
        match child {
            None if finding.evidence.is_empty() && finding.warnings.is_empty() => {
                self.emit(Event::Empty(testcase));
            }
            None => {
                self.emit(Event::Start(testcase));
                self.emit(Event::Start(BytesStart::new("system-out")));
                self.emit(Event::Text(BytesText::new(&clean(&finding.details()))));
                self.emit(Event::End(BytesEnd::new("system-out")));
                self.emit(Event::End(BytesEnd::new("testcase")));
            }
            Some((element, kind)) => {
                self.emit(Event::Start(testcase));
                let mut start = BytesStart::new(element);
                start.push_attribute(("message", clean(&finding.summary).as_str()));
                start.push_attribute(("type", kind));
                self.emit(Event::Start(start));
                self.emit(Event::Text(BytesText::new(&clean(&finding.details()))));
                self.emit(Event::End(BytesEnd::new(element)));
                self.emit(Event::End(BytesEnd::new("testcase")));
            }
        }
    }

    pub fn end_suite(&mut self) {
        self.emit(Event::End(BytesEnd::new("testsuite")));
    }

    /// Close the root and return the document.
    pub fn finish(mut self) -> String {
        self.emit(Event::End(BytesEnd::new("testsuites")));
        let mut text = String::from_utf8_lossy(&self.writer.into_inner().into_inner()).into_owned();
        text.push('\n');
        text
    }
}

fn push_counts(start: &mut BytesStart<'_>, tally: &Tally) {
    let tests = tally.passed + tally.failed + tally.errors + tally.skipped;
    start.push_attribute(("tests", tests.to_string().as_str()));
    start.push_attribute(("failures", tally.failed.to_string().as_str()));
    start.push_attribute(("errors", tally.errors.to_string().as_str()));
}

fn seconds(seconds: f64) -> String {
    format!("{seconds:.6}")
}

/// XML 1.0 cannot carry most control characters or terminal escapes; drop them.
fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // Skip an ANSI escape sequence: ESC [ ... final byte.
            if chars.peek() == Some(&'[') {
                chars.next();
                for next in chars.by_ref() {
                    if ('@'..='~').contains(&next) {
                        break;
                    }
                }
            }
            continue;
        }
        if c == '\n' || c == '\t' || c == '\r' || !c.is_control() {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::clean;

    #[test]
    fn terminal_escapes_and_control_characters_are_dropped() {
        assert_eq!(clean("\u{1b}[31mred\u{1b}[0m\u{7}\tok\n"), "red\tok\n");
    }
}
