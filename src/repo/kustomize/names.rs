//! The last steps of a Kustomize build (`KustTarget.makeCustomizedResMap`): generated objects
//! get their content-hash name suffix (`HashTransformer`, `api/hasher`), then references to
//! the old names are rewritten (`FixBackReferences`, the `nameReference` field specs). gates
//! rewrites the pod-template references to ConfigMaps and Secrets (volumes, projected
//! volumes, `env[].valueFrom`, `envFrom`, `imagePullSecrets`) of Pods, PodTemplates,
//! Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs and CronJobs; any other reference
//! stays as written.

use super::generators::NEEDS_HASH;
use crate::repo::site::RepoError;
use crate::repo::yaml::{Node, Value};

/// One generated object that got its suffix.
struct Renamed {
    kind: String,
    namespace: String,
    from: String,
    to: String,
}

/// Suffix the names of the objects marked for it and rewrite the references to them.
pub fn add_hashes(objects: &mut [Node]) -> Result<(), RepoError> {
    let mut renamed = Vec::new();
    for object in objects.iter_mut() {
        if !take_mark(object) {
            continue;
        }
        let suffix = hash(object);
        let Some(name) = object
            .entry_mut("metadata")
            .and_then(|m| m.entry_mut("name"))
        else {
            continue;
        };
        let from = name.as_str().unwrap_or_default().to_string();
        let to = format!("{from}-{suffix}");
        *name = Node::str(&to, name.site.clone());
        renamed.push(Renamed {
            kind: object.get_str(&["kind"]).unwrap_or_default().to_string(),
            namespace: namespace(object).to_string(),
            from,
            to,
        });
    }
    if renamed.is_empty() {
        return Ok(());
    }
    for object in objects.iter_mut() {
        fix_references(object, &renamed);
    }
    Ok(())
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

fn namespace(object: &Node) -> &str {
    match object.get_str(&["metadata", "namespace"]) {
        None | Some("") => "default",
        Some(ns) => ns,
    }
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

/// Where a kind keeps its pod spec.
fn pod_spec_path(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "Pod" => &["spec"],
        "PodTemplate" => &["template", "spec"],
        "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet" | "Job" => {
            &["spec", "template", "spec"]
        }
        "CronJob" => &["spec", "jobTemplate", "spec", "template", "spec"],
        _ => return None,
    })
}

/// Rewrite the references of a workload in the renamed objects' namespace.
fn fix_references(object: &mut Node, renamed: &[Renamed]) {
    let Some(path) = pod_spec_path(object.get_str(&["kind"]).unwrap_or_default()) else {
        return;
    };
    let ns = namespace(object).to_string();
    let mut spec = Some(object);
    for key in path {
        spec = spec.and_then(|n| n.entry_mut(key));
    }
    let Some(spec) = spec else {
        return;
    };
    let rename = |kind: &str, node: &mut Node| {
        let Some(name) = node.as_str() else {
            return;
        };
        if let Some(r) = renamed
            .iter()
            .find(|r| r.kind == kind && r.namespace == ns && r.from == name)
        {
            *node = Node::str(&r.to, node.site.clone());
        }
    };
    for volume in items(spec, "volumes") {
        if let Some(n) = get_mut(volume, &["configMap", "name"]) {
            rename("ConfigMap", n);
        }
        if let Some(n) = get_mut(volume, &["secret", "secretName"]) {
            rename("Secret", n);
        }
        if let Some(sources) = get_mut(volume, &["projected"]) {
            for source in items(sources, "sources") {
                if let Some(n) = get_mut(source, &["configMap", "name"]) {
                    rename("ConfigMap", n);
                }
                if let Some(n) = get_mut(source, &["secret", "name"]) {
                    rename("Secret", n);
                }
            }
        }
    }
    for pull in items(spec, "imagePullSecrets") {
        if let Some(n) = pull.entry_mut("name") {
            rename("Secret", n);
        }
    }
    for key in ["containers", "initContainers"] {
        for container in items(spec, key) {
            for env in items(container, "env") {
                if let Some(n) = get_mut(env, &["valueFrom", "configMapKeyRef", "name"]) {
                    rename("ConfigMap", n);
                }
                if let Some(n) = get_mut(env, &["valueFrom", "secretKeyRef", "name"]) {
                    rename("Secret", n);
                }
            }
            for from in items(container, "envFrom") {
                if let Some(n) = get_mut(from, &["configMapRef", "name"]) {
                    rename("ConfigMap", n);
                }
                if let Some(n) = get_mut(from, &["secretRef", "name"]) {
                    rename("Secret", n);
                }
            }
        }
    }
}

fn get_mut<'a>(node: &'a mut Node, path: &[&str]) -> Option<&'a mut Node> {
    let mut node = node;
    for key in path {
        node = node.entry_mut(key)?;
    }
    Some(node)
}

/// The items of the list under `key`, none when it is absent or not a list.
fn items<'a>(node: &'a mut Node, key: &str) -> impl Iterator<Item = &'a mut Node> {
    let list = match node.entry_mut(key).map(|n| &mut n.value) {
        Some(Value::Seq(items)) => Some(items.iter_mut()),
        _ => None,
    };
    list.into_iter().flatten()
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
