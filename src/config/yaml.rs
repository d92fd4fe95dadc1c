//! Turning serde_yaml_ng errors into [`ConfigError`]s with the exact key and a suggestion.
//!
//! serde reports unknown keys and variants as "unknown field `x`, expected one of `a`, `b`";
//! the expected names are parsed back out of that fixed wording to suggest the nearest one.
//! For internally tagged values (checks) the YAML position is that of the enclosing mapping,
//! so the key's own line is found by searching the source from there.

use std::path::Path;

use gates_core::config::{ConfigError, nearest};

pub fn from_str<T: serde::de::DeserializeOwned>(file: &Path, text: &str) -> Result<T, ConfigError> {
    serde_yaml_ng::from_str(text).map_err(|err| convert(file, text, &err))
}

fn convert(file: &Path, text: &str, err: &serde_yaml_ng::Error) -> ConfigError {
    let position = err.location().map(|l| (l.line(), l.column()));
    // serde_yaml_ng appends " at line L column C"; we print the position ourselves.
    let full = err.to_string();
    let message = match full.rfind(" at line ") {
        Some(i) => full[..i].to_string(),
        None => full,
    };
    let (path_prefix, body) = split_path(&message);

    for (marker, what) in [("unknown field `", "key"), ("unknown variant `", "value")] {
        if let Some(rest) = body.strip_prefix(marker) {
            let Some(end) = rest.find('`') else { break };
            let word = &rest[..end];
            let expected = expected_names(&rest[end + 1..]);
            let at = locate_word(text, position.map(|p| p.0).unwrap_or(1), word).or(position);
            let place = if path_prefix.is_empty() {
                String::new()
            } else {
                format!(" in {path_prefix}")
            };
            let mut error = ConfigError::new(file, format!("unknown {what} `{word}`{place}"))
                .at(at)
                .key(word);
            error = match nearest(word, expected.iter().map(String::as_str)) {
                Some(best) => error.hint(format!(
                    "did you mean `{best}`? (valid: {})",
                    expected.join(", ")
                )),
                None if !expected.is_empty() => {
                    error.hint(format!("valid: {}", expected.join(", ")))
                }
                None => error,
            };
            return error;
        }
    }
    let missing = body
        .strip_prefix("missing field `")
        .and_then(|r| r.split('`').next())
        .map(str::to_string);
    let mut error = ConfigError::new(file, message.clone()).at(position);
    if let Some(field) = missing {
        error = error.hint(format!("add the key `{field}`")).key(field);
    }
    error
}

/// Split "checks[0].selector: invalid type" into ("checks[0].selector", "invalid type").
fn split_path(message: &str) -> (&str, &str) {
    match message.find(": ") {
        Some(i) if !message[..i].contains(' ') => (&message[..i], &message[i + 2..]),
        _ => ("", message),
    }
}

/// The names in "..., expected one of `a`, `b`" or "..., expected `a`".
fn expected_names(rest: &str) -> Vec<String> {
    let Some(i) = rest.find("expected") else {
        return Vec::new();
    };
    rest[i..]
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The 1-based line and column of `word` used as a key or value, searching from `from_line`.
pub fn locate_word(text: &str, from_line: usize, word: &str) -> Option<(usize, usize)> {
    // An empty word matches everywhere and would never advance the search.
    if word.is_empty() {
        return None;
    }
    for (index, line) in text.lines().enumerate().skip(from_line.saturating_sub(1)) {
        let content = line.split(" #").next().unwrap_or(line);
        let mut start = 0;
        while let Some(found) = content[start..].find(word) {
            let col = start + found;
            let before = content[..col].chars().next_back();
            let after = content[col + word.len()..].chars().next();
            let bounded_before =
                before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '-'));
            let bounded_after =
                after.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '-'));
            if bounded_before && bounded_after {
                return Some((index + 1, col + 1));
            }
            start = col + word.len();
        }
    }
    None
}
