//! Bounds on what a snapshot file may cost to read. A snapshot comes from outside (a CI
//! artifact, a colleague's laptop); a 300 KB YAML alias bomb must not take gigabytes, and
//! nesting a hundred thousand levels deep must not take a minute. JSON is parsed by
//! serde_json (nesting capped at 128); YAML by serde-saphyr with the budget below; every file
//! is capped in size before it is read.

use serde_json::Value;

/// The largest snapshot file read, in bytes: a 5,000-node cluster's snapshot is a few
/// hundred megabytes of JSON.
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// Kubernetes objects nest about 15 levels; 64 leaves room and stops stack exhaustion.
const MAX_DEPTH: usize = 64;

/// YAML parse options for snapshots: aliases, depth and total work bounded.
pub fn yaml_options() -> serde_saphyr::Options {
    // The structs are non-exhaustive: start from the defaults and set the bounds.
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = MAX_DEPTH;
    budget.max_aliases = 10_000;
    // Large clusters have millions of YAML nodes; alias replays are bounded separately.
    budget.max_events = 200_000_000;
    budget.max_nodes = 100_000_000;
    budget.max_total_scalar_bytes = MAX_FILE_BYTES as usize;
    budget.max_documents = 100_000;
    let mut aliases = serde_saphyr::options::AliasLimits::default();
    // Snapshots written by gates or kubectl use no aliases; a small allowance keeps a hand-written
    // file working while a 600-byte bomb costs milliseconds, not seconds (found by fuzzing).
    aliases.max_total_replayed_events = 100_000;
    aliases.max_replay_stack_depth = MAX_DEPTH;
    aliases.max_alias_expansions_per_anchor = 10_000;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.alias_limits = aliases;
    options.with_snippet = false;
    options
}

/// The YAML documents of a file (null documents dropped), or the parser's reason.
pub fn yaml_documents(text: &str) -> Result<Vec<Value>, BoundsError> {
    yaml_documents_at(text).map_err(|(message, _)| BoundsError::NotYaml(message))
}

/// Why a snapshot file is refused before its objects are read: too large, or not YAML the
/// bounded parser accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BoundsError {
    #[error("the file is {len} bytes; snapshots larger than {max} bytes are refused")]
    TooLarge { len: u64, max: u64 },
    /// The parser's reason.
    #[error("{0}")]
    NotYaml(String),
}

/// Why a text is not YAML, and the 1-based line and column where the parser says.
pub type YamlError = (String, Option<(usize, usize)>);

/// [`yaml_documents`], with the error's 1-based line and column apart from its message
/// (which then says neither, nor how to configure the parser to accept it).
pub fn yaml_documents_at(text: &str) -> Result<Vec<Value>, YamlError> {
    serde_saphyr::from_multiple_with_options::<Value>(text, yaml_options())
        .map(|docs| docs.into_iter().filter(|d| !d.is_null()).collect())
        .map_err(|err| {
            let at = err
                .location()
                .map(|l| (l.line() as usize, l.column() as usize))
                .filter(|(line, _)| *line > 0);
            let mut message = err.to_string();
            if at.is_some()
                && let Some(i) = message.find(" at line ")
            {
                message.truncate(i);
            }
            if let Some(i) = message.find(", set DuplicateKeyPolicy") {
                message.truncate(i);
            }
            (message, at)
        })
}

/// Refuse a file larger than the cap before reading it.
pub fn check_size(len: u64, max: u64) -> Result<(), BoundsError> {
    if len > max {
        Err(BoundsError::TooLarge { len, max })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn an_alias_bomb_is_refused_quickly() {
        let mut text = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        let names: Vec<char> = "bcdefghijklmnop".chars().collect();
        let mut previous = 'a';
        for name in names {
            text.push_str(&format!(
                "{name}: &{name} [{}]\n",
                vec![format!("*{previous}"); 9].join(",")
            ));
            previous = name;
        }
        let started = Instant::now();
        let err = yaml_documents(&text).expect_err("the bomb is refused");
        // Unbounded, this expands to 9^16 nodes and never ends; the bound is generous so a
        // loaded machine does not fail it.
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{:?}",
            started.elapsed()
        );
        assert!(!err.to_string().is_empty());
    }

    #[test]
    fn a_wide_alias_bomb_is_refused_by_the_replayed_size_not_read() {
        // 300 KB: one object of 5,000 keys and 55,000 aliases of it, 275 million values once
        // expanded. The bound is on what the aliases replay, so it stops after 100,000.
        let mut text = format!(
            "apiVersion: v1\nkind: List\nitems:\n- &a {{apiVersion: v1, kind: ConfigMap, metadata: {{name: x}}, data: {{{}}}}}\n",
            (0..5000)
                .map(|i| format!("k{i}: v"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        while text.len() < 300_000 {
            text.push_str("- *a\n");
        }
        let (err, at) = yaml_documents_at(&text).expect_err("the bomb is refused");
        assert!(err.contains("alias replay limit exceeded"), "{err}");
        assert!(at.is_some_and(|(line, _)| line > 4), "{at:?}");
    }

    #[test]
    fn deep_nesting_is_refused_quickly() {
        let text = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let started = Instant::now();
        let err = yaml_documents(&text).expect_err("too deep").to_string();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert!(!err.to_string().is_empty());
    }

    #[test]
    fn an_ordinary_multi_document_file_reads() {
        let docs = yaml_documents("apiVersion: v1\nkind: Node\n---\n---\nkind: Pod\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1]["kind"], "Pod");
    }

    #[test]
    fn a_file_over_the_cap_is_refused_by_size() {
        assert!(check_size(10, 100).is_ok());
        let err = check_size(101, 100).unwrap_err();
        assert!(err.to_string().contains("101 bytes"), "{err}");
    }
}
