//! Where a run tells what it does while it does it. Phases never print: they emit typed
//! [`RunEvent`]s to the reporters they are given (the terminal's progress display, plain
//! text on stdout, the timeline, the journal), so each phase can be run and read in a test.

pub mod plain;
pub mod terminal;

use std::sync::{Arc, Mutex};

use super::events::{Event, Events};
use terminal::{ProbeLine, Progress};

/// What a phase has to say.
#[derive(Debug, Clone, Copy)]
pub enum RunEvent<'a> {
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
}

/// Something that listens to a run.
pub trait Reporter: Send + Sync {
    fn report(&self, event: &RunEvent<'_>);
}

/// The reporters a phase is given; every event goes to each of them.
#[derive(Clone, Default)]
pub struct Reporters {
    list: Vec<Arc<dyn Reporter>>,
}

impl Reporters {
    pub fn new() -> Reporters {
        Reporters::default()
    }

    /// These reporters and one more.
    pub fn with(&self, reporter: Arc<dyn Reporter>) -> Reporters {
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

impl Reporter for Progress {
    fn report(&self, event: &RunEvent<'_>) {
        match event {
            RunEvent::Phase(text) => self.phase(text),
            RunEvent::Log(text) => self.line(text),
            RunEvent::Probes(lines) => self.probes(lines.to_vec()),
            RunEvent::Quiet => self.finish(),
            RunEvent::Plan(_) | RunEvent::Timeline(_) | RunEvent::Finished(_) => {}
        }
    }
}

impl Reporter for Events {
    fn report(&self, event: &RunEvent<'_>) {
        match event {
            RunEvent::Timeline(e) => self.push(e.at, &e.kind, &e.subject, e.detail.clone()),
            RunEvent::Phase(_)
            | RunEvent::Log(_)
            | RunEvent::Probes(_)
            | RunEvent::Plan(_)
            | RunEvent::Finished(_)
            | RunEvent::Quiet => {}
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
