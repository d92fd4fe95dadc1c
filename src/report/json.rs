//! The JSON report: the run as one document, stable keys, for machines.

use super::Run;

pub fn render(run: &Run) -> String {
    // Serializing plain data with string keys cannot fail.
    serde_json::to_string_pretty(run).unwrap_or_else(|err| format!("{{\"error\": \"{err}\"}}"))
}
