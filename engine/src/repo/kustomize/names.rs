//! What changes names in a Kustomize build: `namePrefix` and `nameSuffix` in each layer
//! (`PrefixTransformer`, `SuffixTransformer`), and, as the last steps of a build
//! (`KustTarget.makeCustomizedResMap`), the content-hash suffix of generated objects
//! (`HashTransformer`, `api/hasher`) and then the rewriting of every reference to an old name
//! ([`back_references`]).

use super::back_references;
use super::generators::NEEDS_HASH;
use crate::repo::site::RepoError;
use crate::repo::yaml::{Node, Value};

/// The kinds `namePrefix` and `nameSuffix` leave alone (the transformers' skip lists), with
/// the group each is limited to, if any.
const KEEP_NAMES: [(&str, &str); 3] = [
    ("CustomResourceDefinition", ""),
    ("APIService", "apiregistration.k8s.io"),
    ("Namespace", ""),
];

/// End a build: hash suffixes, then references to renamed objects, then no build marks.
pub fn finish(objects: &mut [Node]) -> Result<(), RepoError> {
    add_hashes(objects);
    back_references::fix(objects)
}

/// `namePrefix` and `nameSuffix` of one layer, in Kustomize's order (prefix, then suffix).
/// Each must be a string.
pub fn affix(
    objects: &mut [Node],
    prefix: Option<&Node>,
    suffix: Option<&Node>,
) -> Result<(), RepoError> {
    for (value, is_prefix) in [(prefix, true), (suffix, false)] {
        let Some(value) = value else {
            continue;
        };
        let text = match &value.value {
            Value::Scalar(text, _) => text.clone(),
            Value::Null => String::new(),
            _ => {
                return Err(RepoError::new(
                    value.site.clone(),
                    format!(
                        "`{}` must be a string",
                        if is_prefix {
                            "namePrefix"
                        } else {
                            "nameSuffix"
                        }
                    ),
                ));
            }
        };
        for object in objects.iter_mut() {
            let kind = object.get_str(&["kind"]).unwrap_or_default();
            let group = object
                .get_str(&["apiVersion"])
                .and_then(|api| api.rsplit_once('/'))
                .map_or("", |(g, _)| g);
            if KEEP_NAMES
                .iter()
                .any(|(k, g)| *k == kind && (g.is_empty() || *g == group))
            {
                continue;
            }
            back_references::record_affix(object, is_prefix, &text);
            if text.is_empty() {
                continue;
            }
            rename(object, Some(&value.site), |old| match is_prefix {
                true => format!("{text}{old}"),
                false => format!("{old}{text}"),
            });
        }
    }
    Ok(())
}

/// Suffix the names of the objects marked for it.
fn add_hashes(objects: &mut [Node]) {
    for object in objects.iter_mut() {
        if !take_mark(object) {
            continue;
        }
        let suffix = hash(object);
        rename(object, None, |old| format!("{old}-{suffix}"));
    }
}

/// Give an object a new name made from its old one, remembering the old for the references
/// to it; the name keeps its line unless `site` says who set it now.
fn rename(
    object: &mut Node,
    site: Option<&crate::repo::site::Site>,
    new: impl FnOnce(&str) -> String,
) {
    back_references::store_previous_id(object);
    if let Some(name) = object
        .entry_mut("metadata")
        .and_then(|m| m.entry_mut("name"))
    {
        let site = site.unwrap_or(&name.site).clone();
        *name = Node::str(new(name.as_str().unwrap_or_default()), site);
    }
}

/// Remove the needs-hash annotation (and the annotations, when it was the only one).
fn take_mark(object: &mut Node) -> bool {
    let Some(meta) = object.entry_mut("metadata") else {
        return false;
    };
    let Some(Value::Map(annotations)) = meta.entry_mut("annotations").map(|a| &mut a.value) else {
        return false;
    };
    let before = annotations.len();
    annotations.retain(|(k, _)| k != NEEDS_HASH);
    let marked = annotations.len() != before;
    if marked
        && annotations.is_empty()
        && let Value::Map(entries) = &mut meta.value
    {
        entries.retain(|(k, _)| k != "annotations");
    }
    marked
}

/// Kustomize's hash of a ConfigMap or Secret (`hasher.Hasher.Hash`): the SHA-256 of the JSON
/// of kind, "name" and data (a Secret also its type; `binaryData` and `stringData` when they
/// are maps), the first ten hex digits with 0, 1, 3, a and e swapped for g, h, k, m and t.
/// The name is always empty: the hasher looks up `metadata/name` as one key, which no object
/// has (Kustomize's `hasher_test.go` expects `"name":""`), so two generators with the same
/// data get the same suffix.
pub fn hash(object: &Node) -> String {
    let kind = object.get_str(&["kind"]).unwrap_or_default();
    let field = |path: &[&str]| match object.get(path) {
        None => serde_json::Value::String(String::new()),
        Some(node) => node.to_json(),
    };
    let mut fields = serde_json::Map::new();
    fields.insert("kind".into(), kind.into());
    fields.insert("name".into(), "".into());
    fields.insert("data".into(), field(&["data"]));
    let extra = if kind == "Secret" {
        fields.insert("type".into(), field(&["type"]));
        "stringData"
    } else {
        "binaryData"
    };
    if object.get(&[extra]).is_some_and(|n| n.as_map().is_some()) {
        fields.insert(extra.into(), field(&[extra]));
    }
    let mut json = String::new();
    go_json(&serde_json::Value::Object(fields), &mut json);
    let digest = ring::digest::digest(&ring::digest::SHA256, json.as_bytes());
    digest.as_ref()[..5]
        .iter()
        .flat_map(|b| [b >> 4, b & 0xf])
        .map(|nibble| match nibble {
            0x0 => 'g',
            0x1 => 'h',
            0x3 => 'k',
            0xa => 'm',
            0xe => 't',
            n => char::from_digit(u32::from(n), 16).unwrap_or('?'),
        })
        .collect()
}

/// JSON as Go's `json.Marshal` writes it: map keys sorted, `<`, `>`, `&`, U+2028 and U+2029
/// escaped, control characters as `\b \f \n \r \t` or `\u00XX`.
fn go_json(value: &serde_json::Value, out: &mut String) {
    match value {
        serde_json::Value::Null => out.push_str("null"),
        serde_json::Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => out.push_str(&i.to_string()),
            (None, Some(f)) if f.fract() == 0.0 && f.abs() < 1e21 => {
                out.push_str(&format!("{f:.0}"))
            }
            _ => out.push_str(&n.to_string()),
        },
        serde_json::Value::String(s) => go_string(s, out),
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json(item, out);
            }
            out.push(']');
        }
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_string(key, out);
                out.push(':');
                go_json(&map[key], out);
            }
            out.push('}');
        }
    }
}

fn go_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)))
            }
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_json_sorts_keys_and_escapes_as_go_does() {
        let value = serde_json::json!({"name": "a<b>&c", "data": {"z": "1\n\u{1}", "a": ""}});
        let mut out = String::new();
        go_json(&value, &mut out);
        assert_eq!(
            out,
            r#"{"data":{"a":"","z":"1\n\u0001"},"name":"a\u003cb\u003e\u0026c"}"#
        );
    }
}
