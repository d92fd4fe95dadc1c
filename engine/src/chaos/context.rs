//! What every phase of a run is given: the environment, the one clock, the reporters, and
//! the timeline's zero.

use std::time::Duration;

use tokio::time::Instant;

use super::clock::Clock;
use super::events::Event;
use super::reporters::{Reporters, RunEvent};
use crate::config::Environment;

pub struct Ctx<'a> {
    pub env: &'a Environment,
    pub clock: &'a dyn Clock,
    pub out: Reporters<'a>,
    /// The timeline's zero.
    pub origin: Instant,
}

impl Ctx<'_> {
    /// Time since the start of the run.
    pub fn at(&self) -> Duration {
        self.clock.since(self.origin)
    }

    /// Time since the start of the run, in seconds to the millisecond, for the report.
    pub fn seconds(&self) -> f64 {
        gates_core::record::seconds::rounded(self.at())
    }

    pub fn phase(&self, text: &str) {
        self.out.emit(RunEvent::Phase(text));
    }

    pub fn log(&self, text: &str) {
        self.out.emit(RunEvent::Log(text));
    }

    /// An event on the run's timeline, stamped now.
    pub fn event(&self, kind: &str, subject: &str, detail: impl Into<String>) {
        let event = Event {
            at: self.at(),
            kind: kind.to_string(),
            subject: subject.to_string(),
            detail: detail.into(),
            lineage: None,
        };
        self.out.emit(RunEvent::Timeline(&event));
    }
}
