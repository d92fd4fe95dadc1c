//! Kustomize `configMapGenerator`, `secretGenerator` and `generatorOptions`, as
//! sigs.k8s.io/kustomize builds them (`api/internal/generators`, `api/kv`): the data comes
//! from `envs` (and the older `env`), then `literals`, then `files`; a value that is not UTF-8
//! goes to a ConfigMap's `binaryData`; a Secret's values are base64, broken into lines of 70
//! characters. A generated object is absorbed into the accumulated ones by its `behavior`:
//! `create` adds it (an object with the same id is an error), `merge` and `replace` need
//! exactly one (`resmap.appendReplaceOrMerge`).
//!
//! Sites: the generated object and its name carry the generator entry's lines; a literal
//! carries its own line, an env file value its line in the env file, and a file's content
//! the file itself (line 0, "the whole file"), so Helm values read from a generated ConfigMap
//! point at their lines in the values file.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine;

use super::{join, list, resolve};
use crate::repo::site::{RepoError, Site};
use crate::repo::yaml::{Node, Value};

/// The annotation Kustomize marks a generated object with while it still needs its name
/// suffix (`utils.BuildAnnotationsGenAddHashSuffix`); [`super::names::finish`] removes it.
pub const NEEDS_HASH: &str = "internal.config.kubernetes.io/needsHashSuffix";

/// Run the generators of one kustomization over the accumulated objects: every
/// `configMapGenerator` entry, then every `secretGenerator` entry.
pub fn run(
    repo: &Path,
    dir: &str,
    file: &str,
    k: &Node,
    objects: &mut Vec<Node>,
) -> Result<(), RepoError> {
    let global = k.entry("generatorOptions").map(Options::read).transpose()?;
    for (key, kind) in [
        ("configMapGenerator", "ConfigMap"),
        ("secretGenerator", "Secret"),
    ] {
        let Some(value) = k.entry(key) else {
            continue;
        };
        for item in list(value, file, key)? {
            let generator = Generator::read(item, kind, global.as_ref())?;
            let object = generator.generate(repo, dir)?;
            absorb(objects, object, generator.behavior, &item.site)?;
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Behavior {
    Create,
    Merge,
    Replace,
}

/// `options` of an entry, or the kustomization's `generatorOptions`.
#[derive(Debug, Clone, Default)]
struct Options {
    labels: Vec<(String, Node)>,
    annotations: Vec<(String, Node)>,
    disable_hash: bool,
    immutable: Option<Node>,
}

impl Options {
    fn read(node: &Node) -> Result<Options, RepoError> {
        let Some(entries) = node.as_map() else {
            return Err(RepoError::new(
                node.site.clone(),
                "generator options must be a mapping",
            ));
        };
        let mut out = Options::default();
        for (key, value) in entries {
            match key.as_str() {
                "labels" => out.labels = super::labels::pairs(value, "options.labels")?,
                "annotations" => {
                    out.annotations = super::labels::pairs(value, "options.annotations")?
                }
                "disableNameSuffixHash" => out.disable_hash = flag(value, key)?,
                "immutable" => {
                    if flag(value, key)? {
                        out.immutable = Some(value.clone());
                    }
                }
                other => {
                    return Err(RepoError::new(
                        value.site.clone(),
                        format!(
                            "generator option `{other}` is not evaluated by gates (labels, annotations, disableNameSuffixHash and immutable are)"
                        ),
                    ));
                }
            }
        }
        Ok(out)
    }

    /// Kustomize's `MergeGlobalOptionsIntoLocal`: the entry's labels and annotations win over
    /// the global ones; either side's `disableNameSuffixHash` or `immutable` sets it.
    fn merged(mut self, global: Option<&Options>) -> Options {
        let Some(global) = global else {
            return self;
        };
        for (mine, theirs) in [
            (&mut self.labels, &global.labels),
            (&mut self.annotations, &global.annotations),
        ] {
            for (key, value) in theirs {
                if !mine.iter().any(|(k, _)| k == key) {
                    mine.push((key.clone(), value.clone()));
                }
            }
        }
        self.disable_hash |= global.disable_hash;
        if self.immutable.is_none() {
            self.immutable = global.immutable.clone();
        }
        self
    }
}

fn flag(value: &Node, key: &str) -> Result<bool, RepoError> {
    value.as_bool().ok_or_else(|| {
        RepoError::new(
            value.site.clone(),
            format!("generator option {key} must be true or false"),
        )
    })
}

/// One entry of `configMapGenerator` or `secretGenerator`.
struct Generator<'a> {
    item: &'a Node,
    kind: &'static str,
    name: &'a Node,
    namespace: Option<&'a Node>,
    behavior: Behavior,
    secret_type: Option<&'a Node>,
    options: Options,
}

impl<'a> Generator<'a> {
    fn read(
        item: &'a Node,
        kind: &'static str,
        global: Option<&Options>,
    ) -> Result<Generator<'a>, RepoError> {
        let Some(entries) = item.as_map() else {
            return Err(RepoError::new(
                item.site.clone(),
                format!("a {kind} generator must be a mapping"),
            ));
        };
        for (key, value) in entries {
            let known = matches!(
                key.as_str(),
                "name"
                    | "namespace"
                    | "behavior"
                    | "literals"
                    | "files"
                    | "envs"
                    | "env"
                    | "options"
            ) || (kind == "Secret" && key == "type");
            if !known {
                return Err(RepoError::new(
                    value.site.clone(),
                    format!(
                        "{kind} generator field `{key}` is not evaluated by gates; the trials would read the object it changes, so it is refused rather than guessed"
                    ),
                ));
            }
        }
        let Some(name) = item
            .entry("name")
            .filter(|n| n.as_str().is_some_and(|s| !s.is_empty()))
        else {
            return Err(RepoError::new(
                item.site.clone(),
                format!("a {kind} generator needs a `name`"),
            ));
        };
        let behavior = match item.get_str(&["behavior"]).unwrap_or("create") {
            "" | "create" => Behavior::Create,
            "merge" => Behavior::Merge,
            "replace" => Behavior::Replace,
            other => {
                return Err(RepoError::new(
                    item.entry("behavior")
                        .map(|b| b.site.clone())
                        .unwrap_or_default(),
                    format!("generator behavior `{other}` is not create, merge or replace"),
                ));
            }
        };
        let options = item
            .entry("options")
            .map(Options::read)
            .transpose()?
            .unwrap_or_default()
            .merged(global);
        Ok(Generator {
            item,
            kind,
            name,
            namespace: item
                .entry("namespace")
                .filter(|n| n.as_str().is_some_and(|s| !s.is_empty())),
            behavior,
            secret_type: item.entry("type"),
            options,
        })
    }

    /// The generated object, marked for its hash suffix unless that is disabled.
    fn generate(&self, repo: &Path, dir: &str) -> Result<Node, RepoError> {
        let at = self.item.site.clone();
        let mut meta = vec![("name".to_string(), self.name.clone())];
        if let Some(ns) = self.namespace {
            meta.push(("namespace".to_string(), ns.clone()));
        }
        if !self.options.labels.is_empty() {
            meta.push(("labels".to_string(), map(sorted(&self.options.labels), &at)));
        }
        let mut annotations = sorted(&self.options.annotations);
        if !self.options.disable_hash {
            annotations.push((NEEDS_HASH.to_string(), Node::str("enabled", at.clone())));
        }
        if !annotations.is_empty() {
            meta.push(("annotations".to_string(), map(annotations, &at)));
        }
        let mut entries = vec![
            ("apiVersion".to_string(), Node::str("v1", at.clone())),
            ("kind".to_string(), Node::str(self.kind, at.clone())),
            ("metadata".to_string(), map(meta, &at)),
        ];
        if self.kind == "Secret" {
            let t = match self.secret_type {
                Some(t) => Node::str(t.as_str().unwrap_or("Opaque"), t.site.clone()),
                None => Node::str("Opaque", at.clone()),
            };
            entries.push(("type".to_string(), t));
        }
        let (data, binary) = self.data(repo, dir)?;
        if !data.is_empty() {
            entries.push(("data".to_string(), map(data, &at)));
        }
        if !binary.is_empty() {
            entries.push(("binaryData".to_string(), map(binary, &at)));
        }
        if let Some(immutable) = &self.options.immutable {
            let value = Node::new(
                Value::Scalar("true".to_string(), true),
                immutable.site.clone(),
            );
            entries.push(("immutable".to_string(), value));
        }
        Ok(Node::new(Value::Map(entries), at))
    }

    /// `data` and `binaryData`, each sorted by key as Kustomize writes them.
    #[allow(clippy::type_complexity)]
    fn data(
        &self,
        repo: &Path,
        dir: &str,
    ) -> Result<(Vec<(String, Node)>, Vec<(String, Node)>), RepoError> {
        let pairs = sources(repo, dir, self.item)?;
        let mut data = Vec::new();
        let mut binary = Vec::new();
        for (key, bytes, site) in pairs {
            if self.kind == "Secret" {
                data.push((key, Node::str(base64_lines(&bytes), site)));
                continue;
            }
            match String::from_utf8(bytes) {
                Ok(text) => data.push((key, Node::str(text, site))),
                Err(err) => binary.push((key, Node::str(base64_lines(err.as_bytes()), site))),
            }
        }
        data.sort_by(|a, b| a.0.cmp(&b.0));
        binary.sort_by(|a, b| a.0.cmp(&b.0));
        Ok((data, binary))
    }
}

fn sorted(pairs: &[(String, Node)]) -> Vec<(String, Node)> {
    let mut out = pairs.to_vec();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn map(entries: Vec<(String, Node)>, site: &Site) -> Node {
    Node::new(Value::Map(entries), site.clone())
}

/// Base64 as Kustomize's `encodeBase64` writes it: when the encoding is 70 characters or
/// longer, every line of up to 70 characters ends with a newline.
pub fn base64_lines(bytes: &[u8]) -> String {
    const LINE: usize = 70;
    let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
    if encoded.len() < LINE {
        return encoded;
    }
    let mut out = String::with_capacity(encoded.len() + encoded.len() / LINE + 1);
    for chunk in encoded.as_bytes().chunks(LINE) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out
}

type Pair = (String, Vec<u8>, Site);

/// The key-value pairs of an entry in Kustomize's order (`kv.loader.Load`): env files,
/// literals, files. A repeated key is an error, as Kustomize's.
fn sources(repo: &Path, dir: &str, item: &Node) -> Result<Vec<Pair>, RepoError> {
    let mut pairs = Vec::new();
    let mut envs: Vec<&Node> = match item.entry("envs") {
        Some(value) => list(value, &item.site.file, "envs")?.iter().collect(),
        None => Vec::new(),
    };
    envs.extend(item.entry("env"));
    for env in envs {
        pairs.extend(env_file(repo, dir, env)?);
    }
    if let Some(value) = item.entry("literals") {
        for literal in list(value, &item.site.file, "literals")? {
            pairs.push(literal_pair(literal)?);
        }
    }
    if let Some(value) = item.entry("files") {
        for source in list(value, &item.site.file, "files")? {
            pairs.push(file_pair(repo, dir, source)?);
        }
    }
    let mut seen = BTreeMap::new();
    for (key, _, site) in &pairs {
        if !is_data_key(key) {
            return Err(RepoError::new(
                site.clone(),
                format!(
                    "`{key}` is not a valid ConfigMap or Secret key (letters, digits, `-`, `_` and `.`)"
                ),
            ));
        }
        if seen.insert(key.clone(), ()).is_some() {
            return Err(RepoError::new(
                site.clone(),
                format!("the generator repeats the key `{key}`, which Kustomize refuses"),
            ));
        }
    }
    Ok(pairs)
}

/// apimachinery's `IsConfigMapKey`: at most 253 of `[-._a-zA-Z0-9]`, not `.` or `..`.
fn is_data_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key != "."
        && key != ".."
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// apimachinery's `IsEnvVarName`: `[-._a-zA-Z][-._a-zA-Z0-9]*`.
fn is_env_name(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '-' | '_' | '.'))
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// `key=value`; the value loses one pair of matching quotes (`kv.parseLiteralSource`).
fn literal_pair(literal: &Node) -> Result<Pair, RepoError> {
    let text = literal.as_str().unwrap_or_default();
    let Some((key, value)) = text.split_once('=').filter(|(k, _)| !k.is_empty()) else {
        return Err(RepoError::new(
            literal.site.clone(),
            format!("literal `{text}` is not key=value"),
        ));
    };
    let bytes = value.as_bytes();
    let unquoted = if bytes.len() >= 2
        && bytes[0] == bytes[bytes.len() - 1]
        && (bytes[0] == b'"' || bytes[0] == b'\'')
    {
        &value[1..value.len() - 1]
    } else {
        value
    };
    Ok((
        key.to_string(),
        unquoted.as_bytes().to_vec(),
        literal.site.clone(),
    ))
}

/// `[key=]path` (`generators.ParseFileSource`): the key defaults to the file's name.
fn file_pair(repo: &Path, dir: &str, source: &Node) -> Result<Pair, RepoError> {
    let text = source.as_str().unwrap_or_default();
    let (key, path) = match text.matches('=').count() {
        0 => (text.rsplit('/').next().unwrap_or(text), text),
        1 if !text.starts_with('=') && !text.ends_with('=') => {
            text.split_once('=').unwrap_or((text, text))
        }
        _ => {
            return Err(RepoError::new(
                source.site.clone(),
                format!("file source `{text}` is not `path` or `key=path`"),
            ));
        }
    };
    let rel = inside(dir, path, &source.site)?;
    let bytes = std::fs::read(repo.join(&rel)).map_err(|err| {
        RepoError::new(
            source.site.clone(),
            format!("cannot read `{path}` ({rel}): {err}"),
        )
    })?;
    Ok((key.to_string(), bytes, Site::new(rel, 0)))
}

/// An env file: `KEY=value` lines; blank lines and `#` comments are skipped, leading space is
/// dropped, a line without `=` is the key with an empty value (`kv.keyValuesFromLine`).
fn env_file(repo: &Path, dir: &str, env: &Node) -> Result<Vec<Pair>, RepoError> {
    let path = env.as_str().unwrap_or_default();
    let rel = inside(dir, path, &env.site)?;
    let text = std::fs::read_to_string(repo.join(&rel)).map_err(|err| {
        RepoError::new(
            env.site.clone(),
            format!("cannot read env file `{path}` ({rel}): {err}"),
        )
    })?;
    let mut pairs = Vec::new();
    for (index, raw) in text.split('\n').enumerate() {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let raw = if index == 0 {
            raw.strip_prefix('\u{feff}').unwrap_or(raw)
        } else {
            raw
        };
        let line = raw.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = line.split_once('=').unwrap_or((line, ""));
        let site = Site::new(rel.clone(), index + 1);
        if !is_env_name(key) {
            return Err(RepoError::new(
                site,
                format!(
                    "`{key}` is not a valid environment variable name, which Kustomize requires of an env file's keys"
                ),
            ));
        }
        pairs.push((key.to_string(), value.as_bytes().to_vec(), site));
    }
    Ok(pairs)
}

/// A generator's file, which Kustomize loads only from within the kustomization's directory
/// (`LoadRestrictionsRootOnly`, kubectl's default).
fn inside(dir: &str, path: &str, at: &Site) -> Result<String, RepoError> {
    let rel = resolve(dir, path, at)?;
    let root = join(dir, "");
    if !dir.is_empty() && dir != "." && !rel.starts_with(&root) {
        return Err(RepoError::new(
            at.clone(),
            format!(
                "`{path}` is outside the kustomization's directory {dir}, which Kustomize refuses to load generator files from"
            ),
        ));
    }
    Ok(rel)
}

/// The effective namespace Kustomize compares ids by (`ResId.EffectiveNamespace`).
fn namespace(object: &Node) -> &str {
    match object.get_str(&["metadata", "namespace"]) {
        None | Some("") => "default",
        Some(ns) => ns,
    }
}

fn same_id(a: &Node, b: &Node) -> bool {
    a.get_str(&["apiVersion"]) == b.get_str(&["apiVersion"])
        && a.get_str(&["kind"]) == b.get_str(&["kind"])
        && a.get_str(&["metadata", "name"]) == b.get_str(&["metadata", "name"])
        && namespace(a) == namespace(b)
}

/// Kustomize's `appendReplaceOrMerge`.
fn absorb(
    objects: &mut Vec<Node>,
    new: Node,
    behavior: Behavior,
    at: &Site,
) -> Result<(), RepoError> {
    let matches: Vec<usize> = (0..objects.len())
        .filter(|&i| same_id(&objects[i], &new))
        .collect();
    let describe = || {
        format!(
            "{} {}/{}",
            new.get_str(&["kind"]).unwrap_or_default(),
            namespace(&new),
            new.get_str(&["metadata", "name"]).unwrap_or_default()
        )
    };
    match (matches.as_slice(), behavior) {
        ([], Behavior::Create) => objects.push(new),
        ([], _) => {
            return Err(RepoError::new(
                at.clone(),
                format!(
                    "behavior {behavior:?}: there is no {} among the resources to merge with or replace (Kustomize compares name and namespace)",
                    describe()
                ),
            ));
        }
        ([_], Behavior::Create) => {
            return Err(RepoError::new(
                at.clone(),
                format!(
                    "{} is already among the resources; Kustomize needs `behavior: merge` or `replace` to generate it again",
                    describe()
                ),
            ));
        }
        ([i], _) => {
            let merged = combine(&objects[*i], new, behavior == Behavior::Merge);
            objects[*i] = merged;
        }
        _ => {
            return Err(RepoError::new(
                at.clone(),
                format!("several objects could take the merge of {}", describe()),
            ));
        }
    }
    Ok(())
}

/// The new object with the old one's name and namespace, the labels and annotations of both
/// (the new ones win; the hash suffix only when both want it: `CopyMergeMetaDataFieldsFrom`),
/// and, for `merge`, the data of both (`MergeDataMapFrom`, whose values are strings).
fn combine(old: &Node, mut new: Node, merge: bool) -> Node {
    for key in ["labels", "annotations"] {
        let mut entries = map_entries(old.get(&["metadata", key]));
        for (k, v) in map_entries(new.get(&["metadata", key])) {
            upsert(&mut entries, k, v);
        }
        if key == "annotations" {
            let both = [old, &new]
                .iter()
                .all(|o| o.get(&["metadata", "annotations", NEEDS_HASH]).is_some());
            if !both {
                entries.retain(|(k, _)| k != NEEDS_HASH);
            }
        }
        let value = (!entries.is_empty()).then(|| map(entries, &new.site));
        set_meta(&mut new, key, value);
    }
    set_meta(&mut new, "name", old.get(&["metadata", "name"]).cloned());
    set_meta(
        &mut new,
        "namespace",
        old.get(&["metadata", "namespace"]).cloned(),
    );
    if merge {
        for key in ["data", "binaryData"] {
            let mut entries: Vec<(String, Node)> = map_entries(old.entry(key))
                .into_iter()
                .chain(map_entries(new.entry(key)))
                .map(|(k, v)| (k, as_string(v)))
                .fold(Vec::new(), |mut acc, (k, v)| {
                    upsert(&mut acc, k, v);
                    acc
                });
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let value = (!entries.is_empty()).then(|| map(entries, &new.site));
            set_key(&mut new, key, value);
        }
    }
    new
}

fn map_entries(node: Option<&Node>) -> Vec<(String, Node)> {
    node.and_then(Node::as_map)
        .map(<[_]>::to_vec)
        .unwrap_or_default()
}

fn upsert(entries: &mut Vec<(String, Node)>, key: String, value: Node) {
    match entries.iter_mut().find(|(k, _)| *k == key) {
        Some(entry) => entry.1 = value,
        None => entries.push((key, value)),
    }
}

/// A value as the string Kustomize's data maps hold.
fn as_string(node: Node) -> Node {
    match node.value {
        Value::Scalar(text, _) => Node::str(text, node.site),
        _ => node,
    }
}

fn set_meta(object: &mut Node, key: &str, value: Option<Node>) {
    if let Some(meta) = object.entry_mut("metadata") {
        set_key(meta, key, value);
    }
}

/// Set or remove `key` of a mapping.
fn set_key(node: &mut Node, key: &str, value: Option<Node>) {
    let Value::Map(entries) = &mut node.value else {
        return;
    };
    match value {
        Some(value) => upsert(entries, key.to_string(), value),
        None => entries.retain(|(k, _)| k != key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_breaks_lines_of_seventy_as_kustomize_does() {
        assert_eq!(base64_lines(b"admin"), "YWRtaW4=");
        let long = base64_lines(&[b'x'; 60]);
        let lines: Vec<&str> = long.split_terminator('\n').collect();
        assert_eq!(lines.iter().map(|l| l.len()).collect::<Vec<_>>(), [70, 10]);
        assert!(long.ends_with('\n'));
    }
}
