//! Reading snapshot files: what `kubectl get ... -o json` or `-o yaml` prints (a `v1` `List`,
//! or several YAML documents), metrics lists from `kubectl get --raw`, and the files
//! `gates snapshot` writes.
//!
//! kubectl's output cannot tell "no objects" from "not asked for", so a kind counts as
//! collected when the files hold any object of its API group (core and apps kinds come
//! together from the first documented command). Files written by `gates snapshot` say
//! exactly which kinds were collected and why others were absent, in an annotation.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::infra_record::INFRA_ANNOTATION;
use super::kinds::Kind;
use super::raw::RawState;
use crate::state::{Source, State};

/// Annotation on the List that `gates snapshot` writes: `kind=reason` lines for kinds the
/// cluster did not serve.
pub const ABSENT_ANNOTATION: &str = "gates.adr/absent";
/// Annotation listing every kind `gates snapshot` collected.
pub const COLLECTED_ANNOTATION: &str = "gates.adr/collected";
/// Annotation with the snapshot's provenance (environment, time, cluster, topology) as JSON.
pub const PROVENANCE_ANNOTATION: &str = "gates.adr/provenance";

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}:{line}:{column}: not valid JSON: {message}")]
    Json {
        file: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{file}: not valid YAML: {message}")]
    Yaml { file: PathBuf, message: String },
    #[error("{file}: {message}")]
    Shape { file: PathBuf, message: String },
}

/// The result of reading snapshot files: the state, and notes about what was ignored.
pub struct Snapshot {
    pub state: State,
    pub notes: Vec<String>,
    /// The origin each `gates snapshot` file recorded (kubectl output records none).
    pub provenance: Vec<(PathBuf, crate::state::provenance::Provenance)>,
}

pub fn read(files: &[PathBuf], collected_at: DateTime<Utc>) -> Result<Snapshot, SnapshotError> {
    let mut raw = RawState::default();
    let mut notes = Vec::new();
    let mut ignored = BTreeSet::new();
    for file in files {
        let len = fs::metadata(file)
            .map_err(|source| SnapshotError::Read {
                file: file.clone(),
                source,
            })?
            .len();
        super::snapshot_bounds::check_size(len, super::snapshot_bounds::MAX_FILE_BYTES).map_err(
            |message| SnapshotError::Shape {
                file: file.clone(),
                message,
            },
        )?;
        let text = fs::read_to_string(file).map_err(|source| SnapshotError::Read {
            file: file.clone(),
            source,
        })?;
        for document in parse_documents(file, &text)? {
            add_document(file, document, None, &mut raw, &mut ignored)?;
        }
    }
    for (api_version, kind) in ignored {
        notes.push(format!(
            "ignored objects of kind {kind} ({api_version}): gates does not read them"
        ));
    }
    // Kinds with no object in any file: present-but-empty when their group was seen,
    // absent (with what to add) otherwise.
    let seen: BTreeSet<&str> = raw
        .lists
        .iter()
        .filter(|(_, list)| list.as_ref().is_ok_and(|l| !l.is_empty()))
        .map(|(kind, _)| group_family(kind.coordinates().group))
        .collect();
    for kind in Kind::ALL {
        if raw.lists.contains_key(&kind) {
            continue;
        }
        let c = kind.coordinates();
        if seen.contains(group_family(c.group)) {
            raw.mark_present(kind);
        } else {
            raw.mark_absent(kind, format!(
                "the snapshot holds no {} ({}): add the output of `kubectl get {}.{} -A -o json`{}",
                c.resource_name(),
                kind.absent_hint(),
                c.plural,
                if c.group.is_empty() { "" } else { c.group },
                if c.group == "metrics.k8s.io" { " (for metrics: `kubectl get --raw /apis/metrics.k8s.io/v1beta1/nodes`)" } else { "" }
            ));
        }
    }
    let source = Source::Snapshot {
        files: files.iter().map(|f| f.display().to_string()).collect(),
    };
    let infra = raw.infra.take();
    let provenance = std::mem::take(&mut raw.provenance);
    for (file, missing) in std::mem::take(&mut raw.incomplete) {
        notes.push(format!(
            "{} was written incomplete; it could not read: {missing}",
            file.display()
        ));
    }
    let mut state = raw.into_state(source, collected_at);
    if let Some((_, first)) = provenance.first() {
        state.cluster_identity = first.cluster.clone();
        state.recorded = Some(first.clone());
    }
    match infra {
        Some(record) => record.apply(&mut state),
        None => super::infra_record::not_recorded(&mut state),
    }
    Ok(Snapshot {
        state,
        notes,
        provenance,
    })
}

/// Core, apps, policy and coordination kinds all come from the same kubectl command.
fn group_family(group: &str) -> &str {
    match group {
        "" | "apps" | "policy" | "coordination.k8s.io" => "core",
        other => other,
    }
}

fn parse_documents(file: &Path, text: &str) -> Result<Vec<Value>, SnapshotError> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let value: Value = serde_json::from_str(text).map_err(|err| SnapshotError::Json {
            file: file.to_path_buf(),
            line: err.line(),
            column: err.column(),
            message: err.to_string(),
        })?;
        return Ok(match value {
            Value::Array(items) => items,
            other => vec![other],
        });
    }
    super::snapshot_bounds::yaml_documents(text).map_err(|message| SnapshotError::Yaml {
        file: file.to_path_buf(),
        message,
    })
}

fn add_document(
    file: &Path,
    mut value: Value,
    list_item_kind: Option<(&str, &str)>,
    raw: &mut RawState,
    ignored: &mut BTreeSet<(String, String)>,
) -> Result<(), SnapshotError> {
    let shape = |message: String| SnapshotError::Shape {
        file: file.to_path_buf(),
        message,
    };
    if !value.is_object() {
        return Err(shape(format!(
            "expected a Kubernetes object or List, found {}",
            type_name(&value)
        )));
    }
    // Items of typed lists (NodeMetricsList from --raw) carry no kind of their own.
    if let Some((api_version, kind)) = list_item_kind {
        if value.get("kind").is_none() {
            value["kind"] = Value::from(kind);
        }
        if value.get("apiVersion").is_none() {
            value["apiVersion"] = Value::from(api_version);
        }
    }
    let kind = value["kind"].as_str().unwrap_or_default().to_string();
    let api_version = value["apiVersion"].as_str().unwrap_or_default().to_string();
    if kind.is_empty() || api_version.is_empty() {
        return Err(shape(format!(
            "object {} has no kind or apiVersion; snapshots are `kubectl get ... -o json` output",
            super::raw::object_name(&value)
        )));
    }
    if let Some(items) = value
        .get_mut("items")
        .and_then(Value::as_array_mut)
        .map(std::mem::take)
    {
        apply_list_annotations(file, &value, raw)?;
        let item_kind = kind
            .strip_suffix("List")
            .filter(|k| !k.is_empty())
            .map(str::to_string);
        for item in items {
            let hint = item_kind.as_deref().map(|k| (api_version.as_str(), k));
            add_document(file, item, hint, raw, ignored)?;
        }
        // An explicit, empty metrics list still means the metrics API answered.
        if let Some(k) = item_kind
            .as_deref()
            .and_then(|k| Kind::from_object(&api_version, k))
        {
            raw.mark_present(k);
        }
        return Ok(());
    }
    match Kind::from_object(&api_version, &kind) {
        Some(k) => raw.push(k, value),
        None => {
            ignored.insert((api_version, kind));
        }
    }
    Ok(())
}

/// Honour what `gates snapshot` recorded about collected and absent kinds and about Talos,
/// the API endpoint and Proxmox.
fn apply_list_annotations(
    file: &Path,
    list: &Value,
    raw: &mut RawState,
) -> Result<(), SnapshotError> {
    let annotations = &list["metadata"]["annotations"];
    if let Some(text) = annotations[INFRA_ANNOTATION].as_str() {
        let record = serde_json::from_str(text).map_err(|err| SnapshotError::Shape {
            file: file.to_path_buf(),
            message: format!(
                "annotation {INFRA_ANNOTATION} is not what `gates snapshot` writes ({err}); remove it to read the Kubernetes objects alone"
            ),
        })?;
        raw.infra = Some(record);
    }
    if let Some(text) = annotations[PROVENANCE_ANNOTATION].as_str() {
        let provenance = serde_json::from_str(text).map_err(|err| SnapshotError::Shape {
            file: file.to_path_buf(),
            message: format!(
                "annotation {PROVENANCE_ANNOTATION} is not what `gates snapshot` writes ({err})"
            ),
        })?;
        raw.provenance.push((file.to_path_buf(), provenance));
    }
    if let Some(text) = annotations[super::completeness::INCOMPLETE_ANNOTATION]
        .as_str()
        .filter(|t| !t.is_empty())
    {
        raw.incomplete
            .push((file.to_path_buf(), text.replace('\n', "; ")));
    }
    if let Some(collected) = annotations[COLLECTED_ANNOTATION].as_str() {
        for name in collected.split(',') {
            if let Some(kind) = Kind::ALL
                .into_iter()
                .find(|k| k.coordinates().resource_name() == name.trim())
            {
                raw.mark_present(kind);
            }
        }
    }
    if let Some(absent) = annotations[ABSENT_ANNOTATION].as_str() {
        for line in absent.lines() {
            if let Some((name, reason)) = line.split_once('=')
                && let Some(kind) = Kind::ALL
                    .into_iter()
                    .find(|k| k.coordinates().resource_name() == name.trim())
            {
                raw.mark_absent(kind, reason.trim().to_string());
            }
        }
    }
    Ok(())
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
