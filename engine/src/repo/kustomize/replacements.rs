//! Kustomize `replacements`, as sigs.k8s.io/kustomize's replacement filter applies them
//! (`api/filters/replacement/replacement.go`, `api/types/replacement.go`): the last
//! transformer of a kustomization. Each replacement copies one value, read from the one object
//! its `source` selects (`fieldPath`, `metadata.name` when left out; `options.delimiter` and
//! `index` take one part of a string), into every object its `targets` select and do not
//! `reject`, at each of the target's `fieldPaths` (`options.create` makes a missing path;
//! without it a missing path is left alone; `delimiter`/`index` replace one part of the
//! string there). An entry is inline or a `path` to a file of one replacement or a list.
//!
//! Field paths are dotted, with `[key=value]` picking a list element by a field and a number
//! picking one by position. The copied value keeps the line of the source object that set it,
//! so evidence names where the value came from; a scalar target keeps its own style, so a
//! string copied onto a number stays a number, as `kubectl kustomize` renders it. A construct outside this is an error naming
//! it; a source that selects no object or more than one is Kustomize's own error.

use std::path::Path;

use super::{Target, read, resolve};
use crate::repo::site::{RepoError, Site};
use crate::repo::yaml::{self, Node, Value};

/// Apply the kustomization's `replacements` to `objects`. Returns the targets that may reach
/// objects gates does not render (a chart's), for the caller to mark.
pub fn run(
    repo: &Path,
    dir: &str,
    list: &[Node],
    objects: &mut [Node],
) -> Result<Vec<(Site, Target)>, RepoError> {
    let mut reaching = Vec::new();
    for item in list {
        for replacement in entries(repo, dir, item)? {
            apply(&replacement, objects, &mut reaching)?;
        }
    }
    Ok(reaching)
}

/// The replacements of one list entry: inline, or the file at `path`.
fn entries(repo: &Path, dir: &str, item: &Node) -> Result<Vec<Node>, RepoError> {
    let Some(path) = item.get(&["path"]) else {
        return Ok(vec![item.clone()]);
    };
    let Some(text) = path.as_str() else {
        return Err(RepoError::new(
            path.site.clone(),
            "replacements `path` must be a path",
        ));
    };
    let rel = resolve(dir, text, &path.site)?;
    if !repo.join(&rel).is_file() {
        return Err(RepoError::new(
            path.site.clone(),
            format!("replacements file `{text}` does not exist ({rel})"),
        ));
    }
    let mut out = Vec::new();
    for doc in yaml::parse(&rel, &read(repo, &rel)?)? {
        match &doc.value {
            Value::Seq(items) => out.extend(items.iter().cloned()),
            Value::Map(_) => out.push(doc),
            _ => {
                return Err(RepoError::new(
                    doc.site.clone(),
                    "a replacements file holds a replacement or a list of them",
                ));
            }
        }
    }
    Ok(out)
}

fn refuse_unknown(node: &Node, known: &[&str], what: &str) -> Result<(), RepoError> {
    for (key, value) in node.as_map().unwrap_or_default() {
        if !known.contains(&key.as_str()) {
            return Err(RepoError::new(
                value.site.clone(),
                format!("replacement {what} `{key}` is not evaluated by gates"),
            ));
        }
    }
    Ok(())
}

/// A selector (`source`, a target's `select` or `reject`) as a patch target.
fn selector(node: &Node, at: &Site, extra: &[&str]) -> Result<Target, RepoError> {
    let mut keys = vec![
        "group",
        "version",
        "kind",
        "name",
        "namespace",
        "labelSelector",
        "annotationSelector",
    ];
    keys.extend_from_slice(extra);
    refuse_unknown(node, &keys, "selector field")?;
    let mut plain = node.clone();
    if let Value::Map(entries) = &mut plain.value {
        entries.retain(|(k, _)| !extra.contains(&k.as_str()));
    }
    Target::read(Some(&plain), at)
}

fn apply(
    replacement: &Node,
    objects: &mut [Node],
    reaching: &mut Vec<(Site, Target)>,
) -> Result<(), RepoError> {
    refuse_unknown(replacement, &["source", "targets"], "field")?;
    let value = source_value(replacement, objects)?;
    for target in replacement
        .get(&["targets"])
        .and_then(Node::as_seq)
        .unwrap_or_default()
    {
        replace_in(target, &value, objects, reaching)?;
    }
    Ok(())
}

/// The value a replacement copies: its source's field, cut by the source's options; the one
/// object the source selects must have it.
fn source_value(replacement: &Node, objects: &[Node]) -> Result<Node, RepoError> {
    let Some(source) = replacement.get(&["source"]) else {
        return Err(RepoError::new(
            replacement.site.clone(),
            "a replacement needs a `source`",
        ));
    };
    let from = selector(source, &source.site, &["fieldPath", "options"])?;
    let chosen: Vec<&Node> = objects.iter().filter(|o| from.selects(o)).collect();
    let object = match chosen.as_slice() {
        [one] => *one,
        [] => {
            return Err(RepoError::new(
                source.site.clone(),
                format!("replacement source {} selects nothing", from.describe()),
            ));
        }
        _ => {
            return Err(RepoError::new(
                source.site.clone(),
                format!(
                    "replacement source {} selects {} objects; Kustomize needs exactly one",
                    from.describe(),
                    chosen.len()
                ),
            ));
        }
    };
    let field = source.get_str(&["fieldPath"]).unwrap_or("metadata.name");
    let path = field_path(field, &source.site)?;
    let Some(found) = lookup(object, &path) else {
        return Err(RepoError::new(
            source.site.clone(),
            format!(
                "replacement source fieldPath `{field}` is not set on {}",
                from.describe()
            ),
        ));
    };
    let mut value = found.clone();
    if let Some(options) = source.get(&["options"]) {
        refuse_unknown(options, &["delimiter", "index"], "source option")?;
        if let Some(delimiter) = options.get_str(&["delimiter"]) {
            let text = value.as_str().unwrap_or_default().to_string();
            let index = options.get(&["index"]).and_then(Node::as_i64).unwrap_or(0);
            let parts: Vec<&str> = text.split(delimiter).collect();
            let Some(part) = usize::try_from(index).ok().and_then(|i| parts.get(i)) else {
                return Err(RepoError::new(
                    options.site.clone(),
                    format!(
                        "options.index {index} is out of bounds for `{text}` split by `{delimiter}`"
                    ),
                ));
            };
            value = Node::str(*part, value.site.clone());
        }
    }
    Ok(value)
}

/// One target of a replacement: `value` written at each of its field paths in every object
/// it selects and does not reject.
fn replace_in(
    target: &Node,
    value: &Node,
    objects: &mut [Node],
    reaching: &mut Vec<(Site, Target)>,
) -> Result<(), RepoError> {
    refuse_unknown(
        target,
        &["select", "reject", "fieldPaths", "options"],
        "target field",
    )?;
    let Some(select) = target.get(&["select"]) else {
        return Err(RepoError::new(
            target.site.clone(),
            "a replacement target needs `select`",
        ));
    };
    let select = selector(select, &target.site, &[])?;
    let rejects: Vec<Target> = target
        .get(&["reject"])
        .and_then(Node::as_seq)
        .unwrap_or_default()
        .iter()
        .map(|r| selector(r, &r.site, &[]))
        .collect::<Result<_, _>>()?;
    let options = target.get(&["options"]);
    if let Some(options) = options {
        refuse_unknown(options, &["delimiter", "index", "create"], "target option")?;
    }
    let create = options
        .and_then(|o| o.get(&["create"]))
        .and_then(Node::as_bool)
        .unwrap_or(false);
    let delimiter = options.and_then(|o| o.get_str(&["delimiter"]));
    let index = options
        .and_then(|o| o.get(&["index"]))
        .and_then(Node::as_i64)
        .unwrap_or(0);
    let fields: Vec<String> = match target.get(&["fieldPaths"]).and_then(Node::as_seq) {
        Some(items) => items
            .iter()
            .map(|i| i.as_str().unwrap_or_default().to_string())
            .collect(),
        None => vec!["metadata.name".to_string()],
    };
    reaching.push((target.site.clone(), select.clone()));
    for object in objects
        .iter_mut()
        .filter(|o| select.selects(o) && !rejects.iter().any(|r| r.selects(o)))
    {
        for field in &fields {
            let path = field_path(field, &target.site)?;
            let new = match delimiter {
                Some(d) => {
                    let Some(old) = lookup(object, &path).and_then(Node::as_str) else {
                        continue;
                    };
                    let mut parts: Vec<String> = old.split(d).map(str::to_string).collect();
                    let text = value.as_str().unwrap_or_default().to_string();
                    match usize::try_from(index) {
                        Ok(i) if i < parts.len() => parts[i] = text,
                        Ok(_) => parts.push(text),
                        Err(_) => parts.insert(0, text),
                    }
                    Node::str(parts.join(d), value.site.clone())
                }
                None => value.clone(),
            };
            set(object, &path, new, create, &target.site)?;
        }
    }
    Ok(())
}

/// One step of a field path.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    /// `[key=value]`: the list element whose field is the value.
    Match(String, String),
    Index(usize),
}

fn field_path(text: &str, at: &Site) -> Result<Vec<Step>, RepoError> {
    let mut steps = Vec::new();
    for part in text.split('.') {
        if part.is_empty() {
            return Err(RepoError::new(
                at.clone(),
                format!("field path `{text}` has an empty step"),
            ));
        }
        if let Some(inner) = part.strip_prefix('[').and_then(|p| p.strip_suffix(']')) {
            let Some((k, v)) = inner.split_once('=') else {
                return Err(RepoError::new(
                    at.clone(),
                    format!(
                        "field path `{text}`: `{part}` is not evaluated by gates (only [key=value])"
                    ),
                ));
            };
            steps.push(Step::Match(k.to_string(), v.to_string()));
        } else if part.contains(['[', ']', '*']) {
            return Err(RepoError::new(
                at.clone(),
                format!("field path `{text}`: `{part}` is not evaluated by gates"),
            ));
        } else if let Ok(i) = part.parse::<usize>() {
            steps.push(Step::Index(i));
        } else {
            steps.push(Step::Key(part.to_string()));
        }
    }
    Ok(steps)
}

fn lookup<'a>(node: &'a Node, path: &[Step]) -> Option<&'a Node> {
    let Some((step, rest)) = path.split_first() else {
        return Some(node);
    };
    let next = match (step, &node.value) {
        (Step::Key(k), Value::Map(_)) => node.entry(k)?,
        (Step::Match(k, v), Value::Seq(items)) => items
            .iter()
            .find(|i| i.get_str(&[k.as_str()]) == Some(v.as_str()))?,
        (Step::Index(i), Value::Seq(items)) => items.get(*i)?,
        _ => return None,
    };
    lookup(next, rest)
}

/// Set the value at `path`; a missing step is made only with `create` (maps for keys), else the
/// object is left alone, as Kustomize leaves it.
fn set(
    node: &mut Node,
    path: &[Step],
    value: Node,
    create: bool,
    at: &Site,
) -> Result<(), RepoError> {
    let Some((step, rest)) = path.split_first() else {
        // A scalar keeps its own style (a number stays a number, as `kubectl kustomize`
        // renders it) and takes the source's text; anything else is replaced whole.
        node.value = match (&node.value, value.value) {
            (Value::Scalar(_, plain), Value::Scalar(text, _)) => Value::Scalar(text, *plain),
            (_, other) => other,
        };
        node.site = value.site;
        return Ok(());
    };
    if node.is_null() && create {
        node.value = match step {
            Step::Key(_) => Value::Map(Vec::new()),
            Step::Match(..) | Step::Index(_) => Value::Seq(Vec::new()),
        };
    }
    let child = match (step, &mut node.value) {
        (Step::Key(k), Value::Map(entries)) => match entries.iter().position(|(key, _)| key == k) {
            Some(i) => &mut entries[i].1,
            None if create => {
                entries.push((k.clone(), Node::new(Value::Null, at.clone())));
                &mut entries.last_mut().unwrap().1
            }
            None => return Ok(()),
        },
        (Step::Match(k, v), Value::Seq(items)) => {
            match items
                .iter()
                .position(|i| i.get_str(&[k.as_str()]) == Some(v.as_str()))
            {
                Some(i) => &mut items[i],
                None => return Ok(()),
            }
        }
        (Step::Index(i), Value::Seq(items)) => match items.get_mut(*i) {
            Some(item) => item,
            None => return Ok(()),
        },
        _ => return Ok(()),
    };
    set(child, rest, value, create, at)
}
