//! Label and field selectors: the query-string syntax of the Kubernetes API
//! (`a=b,c!=d,e in (f,g),!h`) and the `LabelSelector` object (matchLabels/matchExpressions)
//! used by PDBs, Services and the Cilium L2 policy.

use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Eq(k, v) => labels.get(k) == Some(v),
            // As in Kubernetes, `!=` also matches objects without the key.
            Requirement::NotEq(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|x| vs.contains(x)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|x| !vs.contains(x)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

/// A parsed selector: all requirements must hold. Empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    pub reqs: Vec<Requirement>,
}

impl Selector {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.reqs.iter().all(|r| r.matches(labels))
    }

    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Parse the `labelSelector` query syntax.
    pub fn parse(text: &str) -> Result<Selector, String> {
        let mut reqs = Vec::new();
        for part in split_top_level(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            reqs.push(parse_requirement(part)?);
        }
        Ok(Selector { reqs })
    }

    /// Build from a LabelSelector object (`{matchLabels, matchExpressions}`). A JSON null
    /// is `None`: callers decide what a missing selector means (for a PDB: nothing).
    pub fn from_label_selector(v: &Value) -> Result<Option<Selector>, String> {
        if v.is_null() {
            return Ok(None);
        }
        let mut reqs = Vec::new();
        if let Some(ml) = v.get("matchLabels").and_then(|m| m.as_object()) {
            for (k, val) in ml {
                let val = val
                    .as_str()
                    .ok_or(format!("matchLabels.{k} is not a string"))?;
                reqs.push(Requirement::Eq(k.clone(), val.to_string()));
            }
        }
        if let Some(exprs) = v.get("matchExpressions").and_then(|m| m.as_array()) {
            for e in exprs {
                let key = e
                    .get("key")
                    .and_then(|k| k.as_str())
                    .ok_or("matchExpressions entry without key")?
                    .to_string();
                let op = e.get("operator").and_then(|k| k.as_str()).unwrap_or("");
                let values: Vec<String> = e
                    .get("values")
                    .and_then(|v| v.as_array())
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                reqs.push(match op {
                    "In" => Requirement::In(key, values),
                    "NotIn" => Requirement::NotIn(key, values),
                    "Exists" => Requirement::Exists(key),
                    "DoesNotExist" => Requirement::DoesNotExist(key),
                    other => return Err(format!("unknown operator {other:?}")),
                });
            }
        }
        Ok(Some(Selector { reqs }))
    }

    pub fn from_map(m: &BTreeMap<String, String>) -> Selector {
        Selector {
            reqs: m
                .iter()
                .map(|(k, v)| Requirement::Eq(k.clone(), v.clone()))
                .collect(),
        }
    }
}

/// Split on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    let bad = || format!("unable to parse requirement: {part:?}");
    if let Some(k) = part.strip_prefix('!') {
        let k = k.trim();
        return if valid_key(k) {
            Ok(Requirement::DoesNotExist(k.into()))
        } else {
            Err(bad())
        };
    }
    for (op, neg) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((k, v)) = part.split_once(op) {
            let (k, v) = (k.trim(), v.trim());
            if !valid_key(k) || v.contains(['=', '!', '(', ')', ' ']) {
                return Err(bad());
            }
            return Ok(if neg {
                Requirement::NotEq(k.into(), v.into())
            } else {
                Requirement::Eq(k.into(), v.into())
            });
        }
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let key = words[0].trim();
        let rest = words[1].trim();
        let (neg, list) = if let Some(r) = rest.strip_prefix("notin") {
            (true, r)
        } else if let Some(r) = rest.strip_prefix("in") {
            (false, r)
        } else {
            return Err(bad());
        };
        let list = list.trim();
        let inner = list
            .strip_prefix('(')
            .and_then(|l| l.strip_suffix(')'))
            .ok_or_else(bad)?;
        let values: Vec<String> = inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        if !valid_key(key) {
            return Err(bad());
        }
        return Ok(if neg {
            Requirement::NotIn(key.into(), values)
        } else {
            Requirement::In(key.into(), values)
        });
    }
    if valid_key(part) {
        Ok(Requirement::Exists(part.into()))
    } else {
        Err(bad())
    }
}

/// Field selectors the lab supports: `metadata.name`, `metadata.namespace`, and for pods
/// `spec.nodeName` and `status.phase`, with `=`, `==` and `!=`.
#[derive(Debug, Clone, Default)]
pub struct FieldSelector {
    reqs: Vec<(String, String, bool)>,
}

impl FieldSelector {
    pub fn parse(text: &str, supported: &[&str]) -> Result<FieldSelector, String> {
        let mut reqs = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v, neg) = if let Some((k, v)) = part.split_once("!=") {
                (k, v, true)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, v, false)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, v, false)
            } else {
                return Err(format!(
                    "invalid selector: '{part}'; can't understand '{part}'"
                ));
            };
            let k = k.trim();
            if !supported.contains(&k) {
                return Err(format!("field label not supported: {k}"));
            }
            reqs.push((k.to_string(), v.trim().to_string(), neg));
        }
        Ok(FieldSelector { reqs })
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.reqs.iter().all(|(k, v, neg)| {
            let actual = match k.as_str() {
                "metadata.name" => obj.pointer("/metadata/name"),
                "metadata.namespace" => obj.pointer("/metadata/namespace"),
                "spec.nodeName" => obj.pointer("/spec/nodeName"),
                "status.phase" => obj.pointer("/status/phase"),
                _ => None,
            }
            .and_then(|x| x.as_str())
            .unwrap_or("");
            (actual == v) != *neg
        })
    }
}

/// The labels of a JSON object (`metadata.labels`).
pub fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(|l| l.as_object())
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn set_based_query_syntax() {
        let s = Selector::parse("app in (a, b),tier!=db,!legacy,env").expect("parses");
        assert!(s.matches(&labels(&[("app", "a"), ("env", "x")])));
        assert!(!s.matches(&labels(&[("app", "c"), ("env", "x")])));
        assert!(!s.matches(&labels(&[("app", "a"), ("env", "x"), ("legacy", "")])));
        assert!(!s.matches(&labels(&[("app", "a")])));
        let s = Selector::parse("app.kubernetes.io/name=traefik,x notin (y)").expect("parses");
        assert!(s.matches(&labels(&[("app.kubernetes.io/name", "traefik")])));
        assert!(Selector::parse("a in b").is_err());
        assert!(Selector::parse("=x").is_err());
    }

    #[test]
    fn label_selector_objects() {
        let v = serde_json::json!({"matchExpressions":[{"key":"node-role.kubernetes.io/control-plane","operator":"DoesNotExist"}]});
        let s = Selector::from_label_selector(&v)
            .expect("ok")
            .expect("some");
        assert!(!s.matches(&labels(&[("node-role.kubernetes.io/control-plane", "")])));
        assert!(s.matches(&labels(&[])));
        assert_eq!(
            Selector::from_label_selector(&Value::Null).expect("ok"),
            None
        );
        let empty = Selector::from_label_selector(&serde_json::json!({}))
            .expect("ok")
            .expect("some");
        assert!(empty.matches(&labels(&[("a", "b")])));
    }

    #[test]
    fn field_selectors() {
        let f = FieldSelector::parse(
            "spec.nodeName=n1,metadata.namespace!=x",
            &["spec.nodeName", "metadata.namespace"],
        )
        .expect("ok");
        assert!(
            f.matches(&serde_json::json!({"metadata":{"namespace":"y"},"spec":{"nodeName":"n1"}}))
        );
        assert!(
            !f.matches(&serde_json::json!({"metadata":{"namespace":"x"},"spec":{"nodeName":"n1"}}))
        );
        assert!(FieldSelector::parse("status.phase=Running", &["metadata.name"]).is_err());
    }
}
