//! Plain text for the reader: the plan before anything is touched goes to stdout, or to
//! stderr when stdout carries the JSON report.

use std::io::Write as _;

use crate::output::Format;
use gates_engine::chaos::reporters::{Reporter, RunEvent};

pub struct PlainText {
    pub format: Format,
}

impl Reporter for PlainText {
    fn report(&self, event: &RunEvent<'_>) {
        match event {
            RunEvent::Plan(text) => {
                if self.format == Format::Json {
                    eprint!("{text}");
                } else {
                    print!("{text}");
                    let _ = std::io::stdout().flush();
                }
            }
            RunEvent::Begin(_)
            | RunEvent::Phase(_)
            | RunEvent::Log(_)
            | RunEvent::Probes(_)
            | RunEvent::Timeline(_)
            | RunEvent::Finished(_)
            | RunEvent::Quiet
            | RunEvent::Note(_)
            | RunEvent::Record { .. } => {}
        }
    }
}
