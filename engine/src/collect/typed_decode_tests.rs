//! The snapshot reader decodes each object straight from its text; before, it parsed every
//! file into JSON values and typed those. These tests read every snapshot fixture both ways
//! and require the same typed objects, so the faster reader changes no verdict.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::kinds::Kind;
use super::registry::Objects;
use super::snapshot;

/// The objects of each kind in `files`, typed from JSON values as the old reader did.
fn through_values(files: &[PathBuf]) -> BTreeMap<Kind, Value> {
    let mut lists: BTreeMap<Kind, Vec<Value>> = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(file).expect("a fixture");
        let value: Value = if text.trim_start().starts_with(['{', '[']) {
            serde_json::from_str(&text).expect("fixture JSON")
        } else {
            Value::Array(super::snapshot_bounds::yaml_documents(&text).expect("fixture YAML"))
        };
        let documents = match value {
            Value::Array(items) => items,
            other => vec![other],
        };
        for document in documents {
            flatten(document, None, &mut lists);
        }
    }
    lists
        .into_iter()
        .map(|(kind, values)| {
            let typed = Objects::from_values(kind, values).expect("fixtures type");
            (kind, typed.to_json())
        })
        .collect()
}

fn flatten(mut value: Value, hint: Option<(&str, &str)>, lists: &mut BTreeMap<Kind, Vec<Value>>) {
    if let Some((api_version, kind)) = hint {
        if value.get("kind").is_none() {
            value["kind"] = Value::from(kind);
        }
        if value.get("apiVersion").is_none() {
            value["apiVersion"] = Value::from(api_version);
        }
    }
    let kind = value["kind"].as_str().unwrap_or_default().to_string();
    let api_version = value["apiVersion"].as_str().unwrap_or_default().to_string();
    if let Some(items) = value
        .get_mut("items")
        .and_then(Value::as_array_mut)
        .map(std::mem::take)
    {
        let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty());
        for item in items {
            flatten(item, item_kind.map(|k| (api_version.as_str(), k)), lists);
        }
        return;
    }
    if let Some(k) = Kind::from_object(&api_version, &kind) {
        lists.entry(k).or_default().push(value);
    }
}

/// The objects of each kind as the reader typed them.
fn through_text(files: &[PathBuf]) -> BTreeMap<Kind, Value> {
    let state = snapshot::read(files, chrono::Utc::now())
        .expect("fixtures read")
        .state;
    let state = serde_json::to_value(&state).expect("state serializes");
    Kind::ALL
        .into_iter()
        .filter_map(|kind| {
            let field = super::registry::field_name(kind);
            match &state[field] {
                Value::Array(items) if !items.is_empty() => {
                    Some((kind, Value::Array(items.clone())))
                }
                _ => None,
            }
        })
        .collect()
}

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("fixtures/snapshots");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the fixtures directory")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_snapshot_fixture_types_the_same_from_text_as_from_json_values() {
    let files = fixtures();
    assert!(files.len() >= 10, "{files:?}");
    for file in &files {
        let one = std::slice::from_ref(file);
        let expected = through_values(one);
        assert!(!expected.is_empty(), "{} holds objects", file.display());
        assert_eq!(through_text(one), expected, "{}", file.display());
    }
    // Several at once, as several --snapshot flags: the fixtures are separate scenarios of
    // one cluster (the same nodes), and one object twice is refused, so those that share no
    // object with the ones taken before.
    let mut together: Vec<PathBuf> = Vec::new();
    for file in &files {
        let mut more = together.clone();
        more.push(file.clone());
        if snapshot::read(&more, chrono::Utc::now()).is_ok() {
            together = more;
        }
    }
    assert!(together.len() >= 2, "{together:?}");
    assert_eq!(through_text(&together), through_values(&together));
}

#[test]
fn a_yaml_snapshot_types_the_same_as_its_json() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let json = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .join("fixtures/snapshots/staging-today.json");
    let value: Value = serde_json::from_str(&std::fs::read_to_string(&json).expect("fixture"))
        .expect("fixture JSON");
    let yaml = dir.path().join("staging-today.yaml");
    std::fs::write(&yaml, serde_saphyr::to_string(&value).expect("YAML")).expect("written");
    assert_eq!(
        through_text(std::slice::from_ref(&yaml)),
        through_values(std::slice::from_ref(&json))
    );
    assert_eq!(through_text(&[yaml]), through_text(&[json]));
}

#[test]
fn a_snapshot_the_fast_scan_refuses_still_reads_the_same() {
    // Escaped surrogate pairs are left to the full parser.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("odd.json");
    std::fs::write(
        &file,
        r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"emoji":"\ud83d\ude00"}}}]}"#,
    )
    .expect("written");
    let typed = through_text(std::slice::from_ref(&file));
    assert_eq!(typed, through_values(&[file]));
    assert_eq!(typed[&Kind::Node][0]["metadata"]["labels"]["emoji"], "😀");
}
