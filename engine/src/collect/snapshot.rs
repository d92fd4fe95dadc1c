//! Reading snapshot files: what `kubectl get ... -o json` or `-o yaml` prints (a `v1` `List`,
//! or several YAML documents), metrics lists from `kubectl get --raw`, and the files
//! `gates snapshot` writes.
//!
//! kubectl's output cannot tell "no objects" from "not asked for", so a kind counts as
//! collected when the files hold any object of its API group (core and apps kinds come
//! together from the first documented command). Files written by `gates snapshot` say
//! exactly which kinds were collected and why others were absent, in an annotation.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::infra_record::INFRA_ANNOTATION;
use super::json_spans;
use super::kinds::Kind;
use super::raw::RawState;
use super::registry;
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
    /// Valid JSON that a snapshot must not hold (a key twice in one object).
    #[error("{file}:{line}:{column}: {message}")]
    Refused {
        file: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    /// The same object twice, at its second place.
    #[error("{place}: {message}")]
    Twice { place: String, message: String },
    #[error("{file}{at}: not valid YAML: {message}")]
    Yaml {
        file: PathBuf,
        /// `:line:column`, when the parser gives them.
        at: String,
        message: String,
    },
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
    // Each file's text, and its canonical form when the fast scan refuses it; the raw state
    // borrows every object's text from here until it is typed.
    let texts: Vec<OnceCell<String>> = (0..files.len() * 2).map(|_| OnceCell::new()).collect();
    let mut raw = RawState::default();
    let mut notes = Vec::new();
    let mut ignored = BTreeSet::new();
    let mut seen = Seen::default();
    for (index, file) in files.iter().enumerate() {
        let text = checked_text(file)?;
        let (text, lines_of_file) = as_json(file, text)?;
        let text: &str = texts[index * 2].get_or_init(|| text);
        let file_text = text;
        let mut pushed = 0;
        let mut actions = Vec::new();
        let walked = match walk_file(text, &mut actions) {
            Err(Walk::Refused) => {
                // The fast scan refused the text: parse it fully, for the same error as
                // before or for a canonical text it reads.
                actions.clear();
                let value = strict_json(text).map_err(|err| json_error(file, &err))?;
                let canonical: &str = texts[index * 2 + 1]
                    .get_or_init(|| serde_json::to_string(&value).unwrap_or_default());
                walk_file(canonical, &mut actions)
            }
            other => other,
        };
        for action in actions {
            match action {
                Action::Push(kind, text, metadata) => {
                    let place = Place {
                        file: index,
                        line: lines_of_file.then(|| line_of(file_text, text)).flatten(),
                        object: pushed,
                    };
                    pushed += 1;
                    if let Some(twice) = seen.add(kind, metadata, place) {
                        return Err(twice.error(files));
                    }
                    raw.push(kind, text)
                }
                Action::Present(kind) => raw.mark_present(kind),
                Action::List(list) => apply_list_annotations(file, &list, &mut raw)?,
                Action::Ignored(api_version, kind) => {
                    ignored.insert((api_version, kind));
                }
            }
        }
        match walked {
            Ok(()) => {}
            Err(Walk::Shape(message)) => {
                return Err(SnapshotError::Shape {
                    file: file.clone(),
                    message,
                });
            }
            Err(Walk::Refused) => {
                return Err(SnapshotError::Shape {
                    file: file.clone(),
                    message: "cannot be split into objects (nested too deeply?)".to_string(),
                });
            }
        }
    }
    for (api_version, kind) in ignored {
        notes.push(format!(
            "ignored objects of kind {kind} ({api_version}): gates does not read them"
        ));
    }
    mark_unlisted(&mut raw);
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

/// A snapshot file's text, refused before it is read when it is larger than gates reads.
fn checked_text(file: &Path) -> Result<String, SnapshotError> {
    let len = fs::metadata(file)
        .map_err(|source| SnapshotError::Read {
            file: file.to_path_buf(),
            source,
        })?
        .len();
    super::snapshot_bounds::check_size(len, super::snapshot_bounds::MAX_FILE_BYTES).map_err(
        |refused| SnapshotError::Shape {
            file: file.to_path_buf(),
            message: refused.to_string(),
        },
    )?;
    super::file_text::read(file, len).map_err(|source| SnapshotError::Read {
        file: file.to_path_buf(),
        source,
    })
}

/// Kinds with no object in any file: present but empty when their group was seen (the same
/// kubectl command lists them), absent with what to add otherwise.
fn mark_unlisted(raw: &mut RawState) {
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
}

/// Core, apps, policy and coordination kinds all come from the same kubectl command.
fn group_family(group: &str) -> &str {
    match group {
        "" | "apps" | "policy" | "coordination.k8s.io" => "core",
        other => other,
    }
}

/// The file's text as JSON: itself when it is JSON, its YAML documents as one JSON array
/// otherwise; and whether the JSON's lines are the file's.
fn as_json(file: &Path, text: String) -> Result<(String, bool), SnapshotError> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return Ok((text, true));
    }
    let documents = super::snapshot_bounds::yaml_documents_at(&text).map_err(|(message, at)| {
        SnapshotError::Yaml {
            file: file.to_path_buf(),
            at: at
                .map(|(line, column)| format!(":{line}:{column}"))
                .unwrap_or_default(),
            message,
        }
    })?;
    serde_json::to_string(&Value::Array(documents))
        .map(|json| (json, false))
        .map_err(|err| SnapshotError::Shape {
            file: file.to_path_buf(),
            message: err.to_string(),
        })
}

/// The 1-based line of `file_text` that `object` (a slice of it) starts on; `None` when
/// the object is not part of that text (a canonical form written after a full parse).
fn line_of(file_text: &str, object: &str) -> Option<usize> {
    let offset = (object.as_ptr() as usize).checked_sub(file_text.as_ptr() as usize)?;
    let before = file_text.as_bytes().get(..offset)?;
    Some(before.iter().filter(|b| **b == b'\n').count() + 1)
}

/// Where an object is: its file, its line when known, and its place among the file's objects.
#[derive(Debug, Clone, Copy)]
struct Place {
    file: usize,
    line: Option<usize>,
    object: usize,
}

impl Place {
    fn show(&self, files: &[PathBuf]) -> String {
        let file = files[self.file].display();
        match self.line {
            Some(line) => format!("{file}:{line}"),
            None => format!("{file} (object {})", self.object + 1),
        }
    }

    /// Where the first one is, said from the second's place.
    fn show_from(&self, other: &Place, files: &[PathBuf]) -> String {
        match self.line {
            Some(line) if self.file == other.file => format!("line {line}"),
            None if self.file == other.file => format!("object {}", self.object + 1),
            _ => self.show(files),
        }
    }
}

/// Every object read so far by kind, namespace and name: a snapshot that holds one twice
/// would count it twice (four control planes out of three nodes).
#[derive(Default)]
struct Seen {
    places: std::collections::HashMap<(Kind, String, String), Place>,
}

/// The same object twice: where it is first and again.
struct Twice {
    kind: Kind,
    namespace: String,
    name: String,
    first: Place,
    again: Place,
}

impl Seen {
    fn add(&mut self, kind: Kind, metadata: Option<&str>, place: Place) -> Option<Twice> {
        #[derive(serde::Deserialize)]
        struct Meta<'m> {
            #[serde(default, borrow)]
            name: Option<Cow<'m, str>>,
            #[serde(default, borrow)]
            namespace: Option<Cow<'m, str>>,
        }
        let meta: Meta = serde_json::from_str(metadata?).ok()?;
        // An object without a name is refused when typed, with its own message.
        let name = meta.name?.into_owned();
        let namespace = meta.namespace.map(Cow::into_owned).unwrap_or_default();
        let key = (kind, namespace, name);
        if let Some(first) = self.places.get(&key) {
            let (kind, namespace, name) = key;
            return Some(Twice {
                kind,
                namespace,
                name,
                first: *first,
                again: place,
            });
        }
        self.places.insert(key, place);
        None
    }
}

impl Twice {
    fn error(&self, files: &[PathBuf]) -> SnapshotError {
        let object = if self.namespace.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        };
        SnapshotError::Twice {
            place: self.again.show(files),
            message: format!(
                "{} `{object}` appears twice (also at {}); a snapshot holds each object once",
                self.kind.coordinates().kind,
                self.first.show_from(&self.again, files)
            ),
        }
    }
}

/// What [`strict_json`] says of a repeated key, before serde_json adds the position.
const TWICE: &str = "appears twice in one object";

/// The JSON value of `text`, refusing an object that holds a key twice: serde_json keeps
/// the last silently, so a snapshot would be read as something it does not say.
fn strict_json(text: &str) -> Result<Value, serde_json::Error> {
    use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

    struct Strict;

    impl<'de> DeserializeSeed<'de> for Strict {
        type Value = Value;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Strict {
        type Value = Value;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
            Ok(Value::Bool(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_str<E>(self, v: &str) -> Result<Value, E> {
            Ok(Value::String(v.to_string()))
        }
        fn visit_string<E>(self, v: String) -> Result<Value, E> {
            Ok(Value::String(v))
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            let mut items = Vec::new();
            while let Some(item) = seq.next_element_seed(Strict)? {
                items.push(item);
            }
            Ok(Value::Array(items))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut object = serde_json::Map::new();
            while let Some(key) = map.next_key::<String>()? {
                if object.contains_key(&key) {
                    return Err(de::Error::custom(format!("the key `{key}` {TWICE}")));
                }
                let value = map.next_value_seed(Strict)?;
                object.insert(key, value);
            }
            Ok(Value::Object(object))
        }
    }

    let mut de = serde_json::Deserializer::from_str(text);
    let value = Strict.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

fn json_error(file: &Path, err: &serde_json::Error) -> SnapshotError {
    let message = err.to_string();
    if err.is_data() && message.contains(TWICE) {
        // serde_json adds the position in words; it is printed as file:line:column.
        let message = match message.find(" at line ") {
            Some(i) => message[..i].to_string(),
            None => message,
        };
        return SnapshotError::Refused {
            file: file.to_path_buf(),
            line: err.line(),
            column: err.column(),
            message: format!("{message}; a snapshot must say each field once"),
        };
    }
    SnapshotError::Json {
        file: file.to_path_buf(),
        line: err.line(),
        column: err.column(),
        message: err.to_string(),
    }
}

/// What reading one file does to the raw state, in the file's order.
enum Action<'t> {
    /// An object's kind, text and the text of its metadata.
    Push(Kind, &'t str, Option<&'t str>),
    Present(Kind),
    /// A list's own fields (its annotations say what `gates snapshot` recorded).
    List(Value),
    Ignored(String, String),
}

enum Walk {
    /// The fast scan does not accept the text; it is parsed in full instead.
    Refused,
    Shape(String),
}

impl From<json_spans::Refused> for Walk {
    fn from(_: json_spans::Refused) -> Walk {
        Walk::Refused
    }
}

/// A file's documents: a top-level array holds several, anything else is one.
fn walk_file<'t>(text: &'t str, actions: &mut Vec<Action<'t>>) -> Result<(), Walk> {
    if json_spans::shape(text) == json_spans::Shape::Array {
        for document in json_spans::documents(text)? {
            walk_document(&document, None, actions)?;
        }
        Ok(())
    } else {
        walk_document(&json_spans::document(text)?, None, actions)
    }
}

fn walk_document<'t>(
    document: &json_spans::Document<'t>,
    list_item_kind: Option<(&str, &str)>,
    actions: &mut Vec<Action<'t>>,
) -> Result<(), Walk> {
    let text = document.text;
    let shape = json_spans::shape(text);
    if shape != json_spans::Shape::Object {
        return Err(Walk::Shape(format!(
            "expected a Kubernetes object or List, found {}",
            shape_name(shape)
        )));
    }
    let kind = field(document.kind, list_item_kind.map(|(_, k)| k));
    let api_version = field(document.api_version, list_item_kind.map(|(v, _)| v));
    if kind.is_empty() || api_version.is_empty() {
        return Err(Walk::Shape(format!(
            "object {} has no kind or apiVersion; snapshots are `kubectl get ... -o json` output",
            registry::name_in(text)
        )));
    }
    if let Some(items) = &document.items {
        let metadata = document
            .metadata
            .and_then(|m| serde_json::from_str::<Value>(m).ok())
            .unwrap_or(Value::Null);
        actions.push(Action::List(serde_json::json!({ "metadata": metadata })));
        let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty());
        for item in items {
            let hint = item_kind.map(|k| (api_version.as_ref(), k));
            walk_document(item, hint, actions)?;
        }
        // An explicit, empty metrics list still means the metrics API answered.
        if let Some(k) = item_kind.and_then(|k| Kind::from_object(&api_version, k)) {
            actions.push(Action::Present(k));
        }
        return Ok(());
    }
    match Kind::from_object(&api_version, &kind) {
        Some(k) => actions.push(Action::Push(k, text, document.metadata)),
        None => actions.push(Action::Ignored(api_version.into_owned(), kind.into_owned())),
    }
    Ok(())
}

/// The text of a `kind` or `apiVersion` member; items of typed lists (NodeMetricsList from
/// `--raw`) carry none and take their list's. A string without escapes (every one in
/// practice: hundreds of thousands per large snapshot) is its own text between the quotes.
fn field<'v>(value: Option<&'v str>, from_list: Option<&'v str>) -> Cow<'v, str> {
    match value {
        None => Cow::Borrowed(from_list.unwrap_or_default()),
        Some(value) => match value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
            Some(plain) if !plain.contains('\\') => Cow::Borrowed(plain),
            _ => Cow::Owned(serde_json::from_str::<String>(value).unwrap_or_default()),
        },
    }
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

fn shape_name(shape: json_spans::Shape) -> &'static str {
    match shape {
        json_spans::Shape::Null => "null",
        json_spans::Shape::Boolean => "a boolean",
        json_spans::Shape::Number => "a number",
        json_spans::Shape::String => "a string",
        json_spans::Shape::Array => "a list",
        json_spans::Shape::Object => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read `files` (name, text) written to a scratch directory; the error as text.
    fn refused(files: &[(&str, &str)]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<PathBuf> = files
            .iter()
            .map(|(name, text)| {
                let path = dir.path().join(name);
                fs::write(&path, text).unwrap();
                path
            })
            .collect();
        match read(&paths, Utc::now()) {
            Ok(_) => panic!("the snapshot should be refused"),
            Err(err) => err.to_string(),
        }
    }

    const NODE_A: &str = r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}}"#;

    #[test]
    fn a_duplicate_key_in_a_snapshot_object_is_an_error_naming_file_line_and_key() {
        let text = "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n  {\"apiVersion\": \"v1\", \"kind\": \"Node\",\n   \"metadata\": {\"name\": \"a\", \"labels\": {\"zone\": \"pve1\",\n     \"zone\": \"pve2\"}}}\n]}\n";
        let err = refused(&[("snapshot.json", text)]);
        assert!(err.contains("snapshot.json:4:"), "{err}");
        assert!(
            err.contains("the key `zone` appears twice in one object"),
            "{err}"
        );
    }

    #[test]
    fn a_duplicate_key_is_refused_wherever_it_is_and_however_it_is_written() {
        for (text, line, key) in [
            (
                r#"{"apiVersion": "v1", "kind": "Node", "kind": "Pod", "metadata": {"name": "a"}}"#,
                1,
                "kind",
            ),
            (
                "{\"apiVersion\": \"v1\", \"kind\": \"Node\",\n \"metadata\": {\"name\": \"a\", \"n\\u0061me\": \"b\"}}",
                2,
                "name",
            ),
            (
                "[\n{\"apiVersion\": \"v1\", \"kind\": \"Node\", \"metadata\": {\"name\": \"a\"}, \"spec\": {}, \"spec\": {}}\n]",
                2,
                "spec",
            ),
        ] {
            let err = refused(&[("s.json", text)]);
            assert!(err.contains(&format!("s.json:{line}:")), "{err}");
            assert!(
                err.contains(&format!("the key `{key}` appears twice")),
                "{err}"
            );
        }
    }

    #[test]
    fn a_duplicate_key_in_a_yaml_snapshot_is_an_error_too() {
        let text = "apiVersion: v1\nkind: Node\nmetadata:\n  name: a\n  name: b\n";
        let err = refused(&[("s.yaml", text)]);
        assert!(
            err.contains("s.yaml:5:3: not valid YAML: duplicate mapping key: name"),
            "{err}"
        );
        assert!(!err.contains("DuplicateKeyPolicy"), "{err}");
    }

    #[test]
    fn the_same_object_twice_in_a_yaml_snapshot_is_an_error_naming_both_objects() {
        let node = "apiVersion: v1\nkind: Node\nmetadata:\n  name: a\n";
        let err = refused(&[("s.yaml", &format!("{node}---\n{node}"))]);
        assert!(
            err.contains("s.yaml (object 2): Node `a` appears twice (also at object 1)"),
            "{err}"
        );
    }

    #[test]
    fn the_same_object_twice_in_a_snapshot_is_an_error_naming_it_and_both_lines() {
        let text = format!(
            "{{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n  {NODE_A},\n  {NODE_A}\n]}}\n"
        );
        let err = refused(&[("s.json", &text)]);
        assert!(
            err.contains("s.json:3: Node `a` appears twice (also at line 2)"),
            "{err}"
        );
    }

    #[test]
    fn the_same_object_in_two_snapshot_files_is_an_error_naming_both_files() {
        let pod =
            r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "ns", "name": "p"}}"#;
        let err = refused(&[("a.json", pod), ("b.json", pod)]);
        assert!(
            err.contains("b.json:1: Pod `ns/p` appears twice (also at "),
            "{err}"
        );
        assert!(err.contains("a.json:1)"), "{err}");
    }

    #[test]
    fn objects_of_the_same_name_in_other_namespaces_or_kinds_are_not_duplicates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let text = r#"{"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "a", "name": "p"}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "b", "name": "p"}},
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "p"}}]}"#;
        fs::write(&path, text).unwrap();
        read(&[path], Utc::now()).unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn a_kind_reads_the_same_whether_written_plain_or_with_escapes() {
        assert!(matches!(
            field(Some(r#""Pod""#), None),
            Cow::Borrowed("Pod")
        ));
        assert_eq!(field(Some(r#""P\u006fd""#), None), "Pod");
        assert_eq!(field(Some(r#""a\"b""#), None), "a\"b");
        // Not a string: no kind, which the reader refuses with the object's name.
        assert_eq!(field(Some("5"), None), "");
        assert_eq!(field(Some(r#""""#), None), "");
        assert_eq!(field(None, Some("NodeMetrics")), "NodeMetrics");
        assert_eq!(field(None, None), "");
    }
}
