//! The four verdicts a trial can reach, and the evidence that goes with them.

use serde::{Deserialize, Serialize};

/// What a check concluded. "Could not look" is `Error`, never `Pass` or `Fail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    Error,
    Skip,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Error => "error",
            Verdict::Skip => "skip",
        }
    }
}

/// A verdict with a one-line summary and the evidence an operator needs to act on it:
/// every line names the objects (`namespace/name`), nodes and physical hosts involved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub verdict: Verdict,
    #[serde(default)]
    pub summary: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
    /// Things worth knowing that do not change the verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Finding {
    fn new(verdict: Verdict, summary: impl Into<String>) -> Self {
        Finding {
            verdict,
            summary: summary.into(),
            evidence: Vec::new(),
            warnings: Vec::new(),
        }
    }

    pub fn pass(summary: impl Into<String>) -> Self {
        Self::new(Verdict::Pass, summary)
    }

    pub fn fail(summary: impl Into<String>) -> Self {
        Self::new(Verdict::Fail, summary)
    }

    pub fn error(summary: impl Into<String>) -> Self {
        Self::new(Verdict::Error, summary)
    }

    pub fn skip(summary: impl Into<String>) -> Self {
        Self::new(Verdict::Skip, summary)
    }

    pub fn with_evidence<I, S>(mut self, lines: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        // Each line once: two paths to the same fact (a value read for two controllers, a
        // file reached twice) say it once.
        for line in lines.into_iter().map(Into::into) {
            if !self.evidence.contains(&line) {
                self.evidence.push(line);
            }
        }
        self
    }

    pub fn with_warnings<I, S>(mut self, lines: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.warnings.extend(lines.into_iter().map(Into::into));
        self
    }

    /// The summary, evidence and warnings as the indented text block shown in terminals and
    /// in JUnit failure bodies.
    pub fn details(&self) -> String {
        let mut out = self.summary.clone();
        for line in &self.evidence {
            out.push_str("\n  ");
            out.push_str(line);
        }
        for line in &self.warnings {
            out.push_str("\n  warning: ");
            out.push_str(line);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_evidence_line_given_twice_is_kept_once_in_the_order_first_given() {
        let f = Finding::fail("x")
            .with_evidence(["a.yaml:1: a", "b.yaml:2: b"])
            .with_evidence(["a.yaml:1: a", "c.yaml:3: c"]);
        assert_eq!(
            f.evidence,
            vec!["a.yaml:1: a", "b.yaml:2: b", "c.yaml:3: c"]
        );
    }
}
