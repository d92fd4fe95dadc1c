//! The two things `gates adr` may change in an ADR's text: the value of its Rollout field
//! (`0 of 5 gates`) and the `open`/`done` marker at the end of each line under "Rollout
//! gates". Everything else, line endings included, is kept byte for byte. The gate lines
//! must be the gate files' titles in gate order, so a reworded ADR or gate is refused rather
//! than mismatched.

use std::path::{Path, PathBuf};

/// Why an ADR's text cannot be updated; each names the file (and line) and the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AdrError {
    #[error(
        "{}: no Rollout field (`Rollout: N of M gates`, or a line `Rollout` followed by `N of M gates`); add one, then run again",
        file.display()
    )]
    NoRolloutField { file: PathBuf },
    #[error(
        "{}: no `Rollout gates` section listing the gates; add it, one gate per line ending in `open` or `done`",
        file.display()
    )]
    NoGatesSection { file: PathBuf },
    #[error("{}:{line}: the gate line `{item}` does not end in `open` or `done`", file.display())]
    UnmarkedGate {
        file: PathBuf,
        line: usize,
        item: String,
    },
    #[error(
        "{}: lists {listed} rollout gates, the gate files define {defined}; make them agree before updating",
        file.display()
    )]
    GateCount {
        file: PathBuf,
        listed: usize,
        defined: usize,
    },
    #[error(
        "{}:{line}: gate {number} reads `{here}` here but `{title}` in {gate_file}; the titles must match word for word (fix the ADR or the gate file), nothing was written",
        file.display()
    )]
    TitleMismatch {
        file: PathBuf,
        line: usize,
        number: u32,
        here: String,
        title: String,
        gate_file: String,
    },
}

/// Where the rollout field and the gate lines sit in the text.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    lines: Vec<String>,
    /// Line index of `N of M gates`.
    rollout: usize,
    pub gates: Vec<GateLine>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GateLine {
    /// Line index.
    pub line: usize,
    pub title: String,
    pub done: bool,
}

/// One changed line, 1-based, for the diff.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub line: usize,
    pub old: String,
    pub new: String,
}

impl Document {
    pub fn parse(file: &Path, text: &str) -> Result<Document, AdrError> {
        let lines: Vec<String> = text.split_inclusive('\n').map(str::to_string).collect();
        let rollout = find_rollout(&lines).ok_or_else(|| AdrError::NoRolloutField {
            file: file.to_path_buf(),
        })?;
        let heading = lines
            .iter()
            .position(|l| l.trim().trim_start_matches('#').trim() == "Rollout gates")
            .ok_or_else(|| AdrError::NoGatesSection {
                file: file.to_path_buf(),
            })?;
        let mut gates = Vec::new();
        for (index, line) in lines.iter().enumerate().skip(heading + 1) {
            let trimmed = line.trim();
            if trimmed.is_empty() {
                continue;
            }
            let Some(item) = bullet(trimmed) else {
                break;
            };
            let (title, done) = if let Some(title) = item.strip_suffix(" open") {
                (title, false)
            } else if let Some(title) = item.strip_suffix(" done") {
                (title, true)
            } else {
                return Err(AdrError::UnmarkedGate {
                    file: file.to_path_buf(),
                    line: index + 1,
                    item: item.to_string(),
                });
            };
            gates.push(GateLine {
                line: index,
                title: title.trim().to_string(),
                done,
            });
        }
        Ok(Document {
            lines,
            rollout,
            gates,
        })
    }

    /// Refuse unless the gate lines are exactly the gate files' titles, in gate order.
    pub fn check_titles(
        &self,
        file: &Path,
        expected: &[(u32, String, String)],
    ) -> Result<(), AdrError> {
        if self.gates.len() != expected.len() {
            return Err(AdrError::GateCount {
                file: file.to_path_buf(),
                listed: self.gates.len(),
                defined: expected.len(),
            });
        }
        for (line, (number, title, gate_file)) in self.gates.iter().zip(expected) {
            if line.title != *title {
                return Err(AdrError::TitleMismatch {
                    file: file.to_path_buf(),
                    line: line.line + 1,
                    number: *number,
                    here: line.title.clone(),
                    title: title.clone(),
                    gate_file: gate_file.clone(),
                });
            }
        }
        Ok(())
    }

    /// Set each gate's marker (`None` keeps it) and the rollout count to match.
    pub fn update(&self, done: &[Option<bool>]) -> (String, Vec<Change>) {
        let mut lines = self.lines.clone();
        let mut changes = Vec::new();
        let mut count = 0;
        for (gate, wanted) in self.gates.iter().zip(done) {
            let now = wanted.unwrap_or(gate.done);
            count += usize::from(now);
            if now != gate.done {
                let old = &self.lines[gate.line];
                let (from, to) = if now {
                    (" open", " done")
                } else {
                    (" done", " open")
                };
                lines[gate.line] = replace_last(old, from, to);
            }
        }
        lines[self.rollout] = set_count(&self.lines[self.rollout], count, self.gates.len());
        for (index, (old, new)) in self.lines.iter().zip(&lines).enumerate() {
            if old != new {
                changes.push(Change {
                    line: index + 1,
                    old: old.trim_end_matches(['\n', '\r']).to_string(),
                    new: new.trim_end_matches(['\n', '\r']).to_string(),
                });
            }
        }
        (lines.concat(), changes)
    }

    /// The count the Rollout field states now.
    pub fn rollout_line(&self) -> &str {
        self.lines[self.rollout].trim()
    }
}

/// The item text of a bullet line (`•`, `-` or `*`), or none.
fn bullet(line: &str) -> Option<&str> {
    ["•", "-", "*"]
        .iter()
        .find_map(|b| line.strip_prefix(b))
        .map(str::trim)
}

/// `N of M gates` in a line: the span of `N of M`.
fn count_span(line: &str) -> Option<(usize, usize)> {
    let end_word = line.find(" gates")?;
    let head = &line[..end_word];
    let of = head.rfind(" of ")?;
    let total = &head[of + 4..];
    let before = &head[..of];
    let start = before
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_ascii_digit())
        .last()
        .map(|(i, _)| i)?;
    let valid = !total.is_empty() && total.bytes().all(|b| b.is_ascii_digit());
    valid.then_some((start, end_word))
}

fn find_rollout(lines: &[String]) -> Option<usize> {
    for (index, line) in lines.iter().enumerate() {
        let trimmed = line.trim().trim_matches(['*', '_', '|', '#', ' ']);
        if trimmed.starts_with("Rollout") && !trimmed.starts_with("Rollout gates") {
            if count_span(line).is_some() {
                return Some(index);
            }
            // A field label on its own line, its value on the next non-empty one.
            if trimmed == "Rollout" || trimmed == "Rollout:" {
                let next = lines[index + 1..]
                    .iter()
                    .position(|l| !l.trim().is_empty())
                    .map(|p| index + 1 + p)?;
                return count_span(&lines[next]).map(|_| next);
            }
        }
    }
    None
}

fn set_count(line: &str, done: usize, total: usize) -> String {
    match count_span(line) {
        Some((start, end)) => format!("{}{done} of {total}{}", &line[..start], &line[end..]),
        None => line.to_string(),
    }
}

fn replace_last(line: &str, from: &str, to: &str) -> String {
    match line.rfind(from) {
        Some(at) => format!("{}{to}{}", &line[..at], &line[at + from.len()..]),
        None => line.to_string(),
    }
}

/// A unified diff with no context, one hunk per changed line.
pub fn unified_diff(file: &str, changes: &[Change]) -> String {
    if changes.is_empty() {
        return String::new();
    }
    // A relative path gets git's a/ and b/ prefixes (`git apply`, `patch -p1`); an absolute
    // one is shown as it is.
    let mut out = if file.starts_with('/') {
        format!("--- {file}\n+++ {file}\n")
    } else {
        format!("--- a/{file}\n+++ b/{file}\n")
    };
    for c in changes {
        out.push_str(&format!(
            "@@ -{0},1 +{0},1 @@\n-{1}\n+{2}\n",
            c.line, c.old, c.new
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADR: &str = "ADR 9\r\n\r\nStatus\r\nAccepted\r\nRollout\r\n0 of 2 gates\r\n\r\nRollout gates\r\n\r\n  • First gate. open\r\n  • Second gate, with words. open\r\n\r\nfooter open\r\n";

    fn titles() -> Vec<(u32, String, String)> {
        vec![
            (1, "First gate.".into(), "g/1.yaml".into()),
            (2, "Second gate, with words.".into(), "g/2.yaml".into()),
        ]
    }

    fn parse(text: &str) -> Result<Document, AdrError> {
        Document::parse(Path::new("adr.txt"), text)
    }

    #[test]
    fn the_rollout_field_and_gate_lines_are_found() {
        let doc = parse(ADR).unwrap();
        assert_eq!(doc.rollout_line(), "0 of 2 gates");
        assert_eq!(doc.gates.len(), 2);
        assert_eq!(doc.gates[1].title, "Second gate, with words.");
        assert!(!doc.gates[1].done);
    }

    #[test]
    fn only_the_markers_and_the_count_change_and_line_endings_stay() {
        let doc = parse(ADR).unwrap();
        let (text, changes) = doc.update(&[Some(true), None]);
        assert_eq!(
            text,
            ADR.replace("0 of 2", "1 of 2")
                .replace("First gate. open", "First gate. done")
        );
        assert_eq!(changes.len(), 2);
        assert_eq!(changes[0].line, 6);
        assert_eq!(changes[0].new, "1 of 2 gates");
    }

    #[test]
    fn a_gate_no_environment_decides_keeps_its_marker_and_counts() {
        let text = ADR.replace("First gate. open", "First gate. done");
        let doc = parse(&text).unwrap();
        let (out, changes) = doc.update(&[None, Some(false)]);
        assert!(out.contains("1 of 2 gates"));
        assert_eq!(changes.len(), 1, "{changes:?}");
    }

    #[test]
    fn a_done_gate_that_fails_again_is_reopened() {
        let text = ADR
            .replace("0 of 2", "2 of 2")
            .replace(" open\r\n  •", " done\r\n  •")
            .replace("words. open", "words. done");
        let (out, _) = parse(&text).unwrap().update(&[Some(false), Some(true)]);
        assert!(out.contains("  • First gate. open\r\n"));
        assert!(out.contains("1 of 2 gates"));
    }

    #[test]
    fn a_markdown_rollout_line_is_updated_in_place() {
        let text = "**Rollout:** 0 of 1 gates\n\n## Rollout gates\n\n- First gate. open\n";
        let doc = parse(text).unwrap();
        let (out, _) = doc.update(&[Some(true)]);
        assert_eq!(
            out,
            "**Rollout:** 1 of 1 gates\n\n## Rollout gates\n\n- First gate. done\n"
        );
    }

    #[test]
    fn a_reworded_gate_is_refused_naming_the_line_and_the_gate_file() {
        let doc = parse(&ADR.replace("First gate.", "First gate, reworded.")).unwrap();
        let err = doc
            .check_titles(Path::new("adr.txt"), &titles())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("adr.txt:10: gate 1 reads `First gate, reworded.`"),
            "{err}"
        );
        assert!(err.contains("g/1.yaml"), "{err}");
        let fewer = &titles()[..1];
        assert!(
            doc.check_titles(Path::new("adr.txt"), fewer)
                .unwrap_err()
                .to_string()
                .contains("lists 2 rollout gates")
        );
    }

    #[test]
    fn text_without_a_rollout_field_is_refused() {
        let err = parse("Rollout gates\n\n- A. open\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("no Rollout field"), "{err}");
        let err = parse("Rollout: 0 of 1 gates\n- A. open\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("no `Rollout gates` section"), "{err}");
        let err = parse("Rollout: 0 of 1 gates\nRollout gates\n- A. maybe\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("adr.txt:3:"), "{err}");
    }

    #[test]
    fn the_diff_has_one_hunk_per_changed_line() {
        let diff = unified_diff(
            "adr.txt",
            &[Change {
                line: 6,
                old: "0 of 2 gates".into(),
                new: "1 of 2 gates".into(),
            }],
        );
        assert_eq!(
            diff,
            "--- a/adr.txt\n+++ b/adr.txt\n@@ -6,1 +6,1 @@\n-0 of 2 gates\n+1 of 2 gates\n"
        );
        assert_eq!(unified_diff("adr.txt", &[]), "");
    }
}
