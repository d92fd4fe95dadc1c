//! Where a run tells what it does while it does it. Phases never print: they emit typed
//! [`RunEvent`]s to the reporters they are given (the command line's progress display, its
//! plain text and its results, the timeline, the journal), so each phase can be run and read
//! in a test.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::events::{Event, Events};
use super::report::{ChaosRecord, Timeline};

/// One probe's line: its name, what it sees now, and its outages against the budget.
#[derive(Debug, Clone)]
pub struct ProbeLine {
    pub name: String,
    pub state: &'static str,
    pub longest: Duration,
    pub total: Duration,
    pub budget_longest: Duration,
    pub budget_total: Duration,
}

impl std::fmt::Display for ProbeLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:<30} {:<7} down {:.1}s/{:.1}s",
            self.name,
            self.state,
            self.longest.as_secs_f64(),
            self.budget_longest.as_secs_f64(),
        )
    }
}

/// What a phase has to say.
#[derive(Debug, Clone, Copy)]
pub enum RunEvent<'a> {
    /// A part of the run begins (the plan, then the experiment at the timeline's zero); its
    /// progress is counted from this instant.
    Begin(Instant),
    /// A phase began (`baseline: sampling 5 probes`).
    Phase(&'a str),
    /// A line of the run's log (`journal: …`, `restoring: …`).
    Log(&'a str),
    /// What every probe sees now.
    Probes(&'a [ProbeLine]),
    /// Text for the reader before anything is touched: the plan, the dry-run note.
    Plan(&'a str),
    /// Something the harness or the cluster did, on the run's timeline.
    Timeline(&'a Event),
    /// The run ended so (the journal's last line).
    Finished(&'a str),
    /// The live display ends; the results follow.
    Quiet,
    /// A line for the reader once the live display has ended (how a run that touched nothing
    /// ended).
    Note(&'a str),
    /// The run's results: its record and timeline, the report files' claimed name (without
    /// extension) and the extra JUnit file asked for. Printing them and writing the files is
    /// the reporters' work.
    Record {
        record: &'a ChaosRecord,
        timeline: &'a Timeline,
        stem: &'a Path,
        junit: Option<&'a Path>,
    },
}

/// Something that listens to a run.
pub trait Reporter: Send + Sync {
    fn report(&self, event: &RunEvent<'_>);
}

/// The reporters a phase is given; every event goes to each of them.
#[derive(Clone, Default)]
pub struct Reporters<'r> {
    list: Vec<Arc<dyn Reporter + 'r>>,
}

impl<'r> Reporters<'r> {
    pub fn new() -> Reporters<'r> {
        Reporters::default()
    }

    /// These reporters and one more.
    pub fn with(&self, reporter: Arc<dyn Reporter + 'r>) -> Reporters<'r> {
        let mut list = self.list.clone();
        list.push(reporter);
        Reporters { list }
    }

    pub fn emit(&self, event: RunEvent<'_>) {
        for reporter in &self.list {
            reporter.report(&event);
        }
    }
}

impl Reporter for Events {
    fn report(&self, event: &RunEvent<'_>) {
        match event {
            RunEvent::Timeline(e) => self.push(e.at, &e.kind, &e.subject, e.detail.clone()),
            RunEvent::Begin(_)
            | RunEvent::Phase(_)
            | RunEvent::Log(_)
            | RunEvent::Probes(_)
            | RunEvent::Plan(_)
            | RunEvent::Finished(_)
            | RunEvent::Quiet
            | RunEvent::Note(_)
            | RunEvent::Record { .. } => {}
        }
    }
}

/// Every event as one line of text, for tests of a phase.
#[derive(Debug, Default)]
pub struct Recorder {
    lines: Mutex<Vec<String>>,
}

impl Recorder {
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

impl Reporter for Recorder {
    fn report(&self, event: &RunEvent<'_>) {
        let line = match event {
            RunEvent::Begin(_) => "begin".to_string(),
            RunEvent::Phase(text) => format!("phase {text}"),
            RunEvent::Log(text) => format!("log {text}"),
            RunEvent::Probes(lines) => format!(
                "probes {}",
                lines
                    .iter()
                    .map(|l| format!("{}={}", l.name, l.state))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            RunEvent::Plan(text) => format!("plan {text}"),
            RunEvent::Timeline(e) => format!("event {} {} {}", e.kind, e.subject, e.detail),
            RunEvent::Finished(outcome) => format!("finished {outcome}"),
            RunEvent::Quiet => "quiet".to_string(),
            RunEvent::Note(text) => format!("note {text}"),
            RunEvent::Record { stem, .. } => format!("record {}", stem.display()),
        };
        if let Ok(mut lines) = self.lines.lock() {
            lines.push(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn every_reporter_hears_every_event_and_the_timeline_keeps_its_own() {
        let recorder = Arc::new(Recorder::default());
        let events = Events::default();
        let out = Reporters::new()
            .with(recorder.clone())
            .with(Arc::new(events.clone()));
        out.emit(RunEvent::Phase("baseline"));
        let stopped = Event {
            at: Duration::from_secs(3),
            kind: "vm-stop-requested".into(),
            subject: "talos-lab-cp-02".into(),
            detail: String::new(),
            lineage: None,
        };
        out.emit(RunEvent::Timeline(&stopped));
        assert_eq!(
            recorder.lines(),
            vec![
                "phase baseline".to_string(),
                "event vm-stop-requested talos-lab-cp-02 ".to_string()
            ]
        );
        assert_eq!(events.all(), vec![stopped]);
    }
}
