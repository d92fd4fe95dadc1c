//! Label selectors written as one string, the way Kustomize patch targets take them
//! (`labelSelector: "app=traefik,tier in (edge, web),!canary"`). The string is read into a
//! `LabelSelector` and compiled by the project's one selector implementation, so a patch
//! target selects exactly what a PodDisruptionBudget or an L2 policy with the same
//! requirements would.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use crate::selector::Selector;

crate::sentence_error! {
    /// Why a label query (`app=web,tier in (a,b)`) is refused: the requirement that is malformed.
    pub struct SelectorError;
}

/// Parse and compile; the error says which requirement is malformed.
pub fn parse(text: &str) -> Result<Selector, SelectorError> {
    let mut expressions = Vec::new();
    for part in split(text)? {
        let part = part.trim();
        if part.is_empty() {
            return Err(SelectorError(format!("`{text}` has an empty requirement")));
        }
        expressions.push(requirement(part)?);
    }
    let selector = LabelSelector {
        match_expressions: Some(expressions),
        match_labels: None,
    };
    Selector::from_label_selector(&selector).map_err(|e| SelectorError(format!("`{text}`: {e}")))
}

/// Split at the commas outside parentheses.
fn split(text: &str) -> Result<Vec<&str>, SelectorError> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.checked_sub(1).ok_or_else(|| {
                    SelectorError(format!("`{text}` closes a parenthesis it never opened"))
                })?
            }
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(SelectorError(format!("`{text}` leaves a parenthesis open")));
    }
    if !text.trim().is_empty() {
        parts.push(&text[start..]);
    }
    Ok(parts)
}

fn requirement(part: &str) -> Result<LabelSelectorRequirement, SelectorError> {
    let make = |key: &str, operator: &str, values: Option<Vec<String>>| {
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(SelectorError(format!(
                "`{part}`: `{key}` is not a label key"
            )));
        }
        Ok(LabelSelectorRequirement {
            key: key.to_string(),
            operator: operator.to_string(),
            values,
        })
    };
    if let Some(open) = part.find('(') {
        let Some(inner) = part[open + 1..].strip_suffix(')') else {
            return Err(SelectorError(format!("`{part}`: a set must end with `)`")));
        };
        let head: Vec<&str> = part[..open].split_whitespace().collect();
        let operator = match head.as_slice() {
            [_, "in"] => "In",
            [_, "notin"] => "NotIn",
            _ => {
                return Err(SelectorError(format!(
                    "`{part}`: expected `KEY in (...)` or `KEY notin (...)`"
                )));
            }
        };
        let values = inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        return make(head[0], operator, Some(values));
    }
    if let Some(key) = part.strip_prefix('!') {
        return make(key, "DoesNotExist", None);
    }
    if let Some((key, value)) = part.split_once("!=") {
        return make(key, "NotIn", Some(vec![value.trim().to_string()]));
    }
    if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return make(key, "In", Some(vec![value.trim().to_string()]));
    }
    make(part, "Exists", None)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn equality_set_and_existence_requirements_all_must_hold() {
        let s = parse("app=traefik, tier in (edge, web),!canary,zone").unwrap();
        let mut pod = labels(&[("app", "traefik"), ("tier", "edge"), ("zone", "pve1")]);
        assert!(s.matches(&pod));
        pod.insert("canary".into(), "yes".into());
        assert!(!s.matches(&pod));
        let s = parse("app==traefik,tier notin (batch),env!=prod").unwrap();
        assert!(s.matches(&labels(&[("app", "traefik"), ("env", "staging")])));
        assert!(!s.matches(&labels(&[("app", "traefik"), ("env", "prod")])));
        assert!(!s.matches(&labels(&[("app", "traefik"), ("tier", "batch")])));
    }

    #[test]
    fn malformed_selectors_are_errors_that_quote_the_requirement() {
        for bad in [
            "app in (a",
            "app)",
            "app in a, b)",
            "a b",
            "app=x,,tier=y",
            "app between (a)",
            "=x",
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.0.contains('`'), "{bad}: {err}");
        }
        assert!(
            parse("app in ()")
                .unwrap_err()
                .0
                .contains("needs at least one value")
        );
    }
}
