//! JUnit XML in the profile Jenkins' `junit-10.xsd` accepts: flat suites (one per gate),
//! dotted classnames (`adr007.gate2`), `time` on every case, the whole evidence in the body
//! of `<failure>`, `<error>` for could-not-evaluate, `<skipped>` with the reason. The root
//! carries only name, tests, failures, errors and time, and testcases carry no properties,
//! because that schema allows nothing else there (quick-junit always writes more, so the
//! document is written with quick-xml directly).

use std::io::Cursor;

use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};

use super::Run;
use crate::runner::{Tally, TrialResult};
use crate::state::Source;
use crate::verdict::Verdict;

pub fn render(run: &Run) -> String {
    let mut writer = Writer::new_with_indent(Cursor::new(Vec::new()), b' ', 2);
    // Writing to memory cannot fail; ignore the io::Result of each event.
    let mut emit = |event: Event<'_>| {
        let _ = writer.write_event(event);
    };
    emit(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));

    let total: f64 = run.collect_time.as_secs_f64()
        + run
            .trials
            .iter()
            .map(|t| t.duration.as_secs_f64())
            .sum::<f64>();
    let mut root = BytesStart::new("testsuites");
    root.push_attribute((
        "name",
        format!("gates {} {}", run.decision, run.environment).as_str(),
    ));
    push_counts(&mut root, &run.tally);
    root.push_attribute(("time", time(total).as_str()));
    emit(Event::Start(root));

    let class_prefix = run.decision.replace('-', "");
    for gate in &run.gates {
        let cases: Vec<&TrialResult> = run.trials.iter().filter(|t| t.gate == gate.gate).collect();
        let owned: Vec<TrialResult> = cases.iter().map(|c| (*c).clone()).collect();
        let tally = Tally::of(&owned);
        let classname = format!("{class_prefix}.gate{}", gate.gate);
        let mut suite = BytesStart::new("testsuite");
        suite.push_attribute(("name", classname.as_str()));
        push_counts(&mut suite, &tally);
        suite.push_attribute(("skipped", tally.skipped.to_string().as_str()));
        suite.push_attribute((
            "time",
            time(cases.iter().map(|c| c.duration.as_secs_f64()).sum()).as_str(),
        ));
        suite.push_attribute((
            "timestamp",
            run.started_at
                .format("%Y-%m-%dT%H:%M:%S")
                .to_string()
                .as_str(),
        ));
        emit(Event::Start(suite));

        emit(Event::Start(BytesStart::new("properties")));
        let source = match &run.source {
            Source::Live { context } => format!("live, kube context {context}"),
            Source::Snapshot { files } => format!("snapshot {}", files.join(", ")),
        };
        for (name, value) in [
            ("environment", run.environment.as_str()),
            ("decision", run.decision.as_str()),
            ("gate", gate.title.as_str()),
            ("source", source.as_str()),
        ] {
            let mut property = BytesStart::new("property");
            property.push_attribute(("name", name));
            property.push_attribute(("value", value));
            emit(Event::Empty(property));
        }
        emit(Event::End(BytesEnd::new("properties")));

        for case in cases {
            let mut testcase = BytesStart::new("testcase");
            testcase.push_attribute(("name", case.name.as_str()));
            testcase.push_attribute(("classname", classname.as_str()));
            testcase.push_attribute(("time", time(case.duration.as_secs_f64()).as_str()));
            let finding = &case.finding;
            let child = match finding.verdict {
                Verdict::Pass => None,
                Verdict::Fail => Some(("failure", "GateViolation")),
                Verdict::Error => Some(("error", "CouldNotEvaluate")),
                Verdict::Skip => Some(("skipped", "Skipped")),
            };
            match child {
                None if finding.warnings.is_empty() => emit(Event::Empty(testcase)),
                None => {
                    emit(Event::Start(testcase));
                    emit(Event::Start(BytesStart::new("system-out")));
                    emit(Event::Text(BytesText::new(&clean(&finding.details()))));
                    emit(Event::End(BytesEnd::new("system-out")));
                    emit(Event::End(BytesEnd::new("testcase")));
                }
                Some((element, kind)) => {
                    emit(Event::Start(testcase));
                    let mut start = BytesStart::new(element);
                    start.push_attribute(("message", clean(&finding.summary).as_str()));
                    start.push_attribute(("type", kind));
                    emit(Event::Start(start));
                    emit(Event::Text(BytesText::new(&clean(&finding.details()))));
                    emit(Event::End(BytesEnd::new(element)));
                    emit(Event::End(BytesEnd::new("testcase")));
                }
            }
        }
        emit(Event::End(BytesEnd::new("testsuite")));
    }
    emit(Event::End(BytesEnd::new("testsuites")));
    let mut text = String::from_utf8_lossy(&writer.into_inner().into_inner()).into_owned();
    text.push('\n');
    text
}

fn push_counts(start: &mut BytesStart<'_>, tally: &Tally) {
    let tests = tally.passed + tally.failed + tally.errors + tally.skipped;
    start.push_attribute(("tests", tests.to_string().as_str()));
    start.push_attribute(("failures", tally.failed.to_string().as_str()));
    start.push_attribute(("errors", tally.errors.to_string().as_str()));
}

fn time(seconds: f64) -> String {
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
