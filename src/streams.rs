//! Where a command writes. What the user asked for (the trials' closing lines, JSON, a
//! table, a diff) goes to `out`; what the command says about its own work (notes, warnings,
//! the report files it wrote) goes to `err`. The command line hands a command the process's
//! stdout and stderr; tests hand it buffers and read back what it said.
//!
//! A closed stream does not stop a command half way (`gates list | head` must not leave a
//! report unwritten), so a write that fails is dropped: its reader wants nothing more.

use std::fmt::Display;
use std::io::Write;
use std::sync::{Arc, Mutex};

pub struct Streams {
    pub out: Box<dyn Write + Send>,
    pub err: Box<dyn Write + Send>,
}

impl Streams {
    /// The process's stdout and stderr.
    pub fn std() -> Streams {
        Streams {
            out: Box::new(std::io::stdout()),
            err: Box::new(std::io::stderr()),
        }
    }

    /// Two buffers, and the handle that reads them back.
    pub fn captured() -> (Streams, Captured) {
        let captured = Captured::default();
        let streams = Streams {
            out: Box::new(Buffer(captured.out.clone())),
            err: Box::new(Buffer(captured.err.clone())),
        };
        (streams, captured)
    }

    /// Text the user asked for, as it is.
    pub fn print(&mut self, text: &str) {
        let _ = self.out.write_all(text.as_bytes());
    }

    /// One line of what the user asked for.
    pub fn println(&mut self, line: impl Display) {
        let _ = writeln!(self.out, "{line}");
    }

    /// One line about the command's own work (a note, a warning, a file written).
    pub fn say(&mut self, line: impl Display) {
        let _ = writeln!(self.err, "{line}");
    }

    /// Before something else writes to the process's stdout itself (libtest's trial lines).
    pub fn flush(&mut self) {
        let _ = self.out.flush();
        let _ = self.err.flush();
    }
}

/// What a command wrote to captured streams.
#[derive(Clone, Default)]
pub struct Captured {
    out: Arc<Mutex<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
}

impl Captured {
    pub fn out(&self) -> String {
        text(&self.out)
    }

    pub fn err(&self) -> String {
        text(&self.err)
    }
}

fn text(buffer: &Mutex<Vec<u8>>) -> String {
    let bytes = buffer.lock().map(|b| b.clone()).unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        match self.0.lock() {
            Ok(mut buffer) => {
                buffer.extend_from_slice(data);
                Ok(data.len())
            }
            Err(_) => Err(std::io::Error::other(
                "a captured stream's lock is poisoned",
            )),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_streams_keep_what_was_asked_for_apart_from_what_was_said() {
        let (mut streams, captured) = Streams::captured();
        streams.print("gate 1: pass\n");
        streams.say(format_args!("report: {}", "reports/lab.json"));
        streams.println("done");
        assert_eq!(captured.out(), "gate 1: pass\ndone\n");
        assert_eq!(captured.err(), "report: reports/lab.json\n");
    }
}
