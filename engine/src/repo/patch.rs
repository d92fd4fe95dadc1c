//! Merging positional YAML the way Kustomize and Helm do, so that every value keeps the site
//! of the file that set it last: a patch's values carry the patch file's lines.
//!
//! - Strategic merge (Kustomize `patches`, `patchesStrategicMerge`, Flux `spec.patches`):
//!   maps merge key by key, `key: null` deletes, lists merge by their merge key with the
//!   patch's items first, as Kustomize orders them, other lists are replaced. The merge key is
//!   the one Kubernetes' OpenAPI schema gives a built-in kind's list (`volumeMounts` by
//!   `mountPath`, a container's `ports` by `containerPort`, a Service's by `port`,
//!   `topologySpreadConstraints` by `topologyKey`, ...), and `name` elsewhere, as kyaml infers
//!   it for kinds it has no schema of; a list whose items do not all carry the key is
//!   replaced. `$patch: replace` and
//!   `$patch: delete` are honoured. Any other `$` directive is an error, not a guess.
//! - JSON 6902 (`add`, `replace`, `remove`; `test` checks): paths with `~0`/`~1` escapes and
//!   `-` for appending. `copy` and `move` are errors naming the patch.
//! - Helm values: maps merge, everything else is replaced, `null` deletes.

use super::site::{RepoError, Site};
use super::yaml::{Node, Value};

/// API groups of the built-in kinds, whose lists merge by their schema's merge keys.
const BUILT_IN_GROUPS: [&str; 12] = [
    "",
    "apps",
    "batch",
    "policy",
    "autoscaling",
    "networking.k8s.io",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "scheduling.k8s.io",
    "admissionregistration.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
];

/// The keys that identify an item of the list under `field`: the built-in types' list-map
/// keys (`x-kubernetes-list-map-keys`, else the patch merge key), `name` for any other list
/// (kyaml's inference). Items match when every key has the same value, absent alike.
fn merge_keys(field: &str, schema: Option<&str>) -> &'static [&'static str] {
    let Some(kind) = schema else {
        return &["name"];
    };
    match field {
        "volumeMounts" => &["mountPath"],
        "volumeDevices" => &["devicePath"],
        "hostAliases" => &["ip"],
        "topologySpreadConstraints" => &["topologyKey", "whenUnsatisfiable"],
        "conditions" => &["type"],
        "ports" if kind == "Service" => &["port", "protocol"],
        "ports" => &["containerPort", "protocol"],
        _ => &["name"],
    }
}

/// Apply a strategic-merge patch to `base`.
pub fn strategic(base: &mut Node, patch: &Node) -> Result<(), RepoError> {
    let api = base.get_str(&["apiVersion"]).unwrap_or_default();
    let group = api.rsplit_once('/').map_or("", |(g, _)| g);
    let kind = base.get_str(&["kind"]).unwrap_or_default().to_string();
    let schema = BUILT_IN_GROUPS.contains(&group).then_some(kind.as_str());
    merge(base, patch, "", schema)
}

fn merge(
    base: &mut Node,
    patch: &Node,
    field: &str,
    schema: Option<&str>,
) -> Result<(), RepoError> {
    match (&mut base.value, &patch.value) {
        (Value::Map(base_entries), Value::Map(patch_entries)) => {
            if let Some(directive) = directive(patch) {
                return match directive.as_str() {
                    Some("replace") => {
                        let mut replacement = patch.clone();
                        if let Value::Map(entries) = &mut replacement.value {
                            entries.retain(|(k, _)| k != "$patch");
                        }
                        *base = replacement;
                        Ok(())
                    }
                    Some("delete") => {
                        *base = Node::new(Value::Null, patch.site.clone());
                        Ok(())
                    }
                    _ => Err(RepoError::new(
                        directive.site.clone(),
                        format!(
                            "unsupported strategic-merge directive `$patch: {}`",
                            directive.show()
                        ),
                    )),
                };
            }
            for (key, value) in patch_entries {
                if key.starts_with('$') {
                    return Err(RepoError::new(
                        value.site.clone(),
                        format!("unsupported strategic-merge directive `{key}`"),
                    ));
                }
                let existing = base_entries.iter().position(|(k, _)| k == key);
                match (existing, value.is_null()) {
                    (Some(i), true) => {
                        base_entries.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => merge(&mut base_entries[i].1, value, key, schema)?,
                    (None, false) => base_entries.push((key.clone(), without_directives(value))),
                }
            }
            Ok(())
        }
        (Value::Seq(base_items), Value::Seq(patch_items))
            if keyed(base_items, merge_keys(field, schema)[0])
                && keyed(patch_items, merge_keys(field, schema)[0]) =>
        {
            let keys = merge_keys(field, schema);
            let id = |n: &Node| -> Vec<Option<String>> {
                keys.iter()
                    .map(|k| n.get_str(&[k]).map(str::to_string))
                    .collect()
            };
            // Kustomize merges with kyaml's `ListIncreaseDirection: prepend`: the patch's
            // items come first, in the patch's order, then the items only the base has.
            let mut rest = std::mem::take(base_items);
            let mut merged: Vec<Node> = Vec::new();
            for item in patch_items {
                let wanted = id(item);
                let same = |b: &Node| id(b) == wanted;
                let delete = directive(item).and_then(Node::as_str) == Some("delete");
                if let Some(i) = merged.iter().position(same) {
                    if delete {
                        merged.remove(i);
                    } else {
                        merge(&mut merged[i], item, "", schema)?;
                    }
                    continue;
                }
                match (rest.iter().position(same), delete) {
                    (Some(i), true) => {
                        rest.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => {
                        let mut existing = rest.remove(i);
                        merge(&mut existing, item, "", schema)?;
                        merged.push(existing);
                    }
                    (None, false) => merged.push(without_directives(item)),
                }
            }
            merged.extend(rest);
            *base_items = merged;
            Ok(())
        }
        _ => {
            *base = without_directives(patch);
            Ok(())
        }
    }
}

fn directive(node: &Node) -> Option<&Node> {
    node.entry("$patch")
}

fn keyed(items: &[Node], key: &str) -> bool {
    !items.is_empty() && items.iter().all(|i| i.get_str(&[key]).is_some())
}

fn without_directives(node: &Node) -> Node {
    let mut node = node.clone();
    if let Value::Map(entries) = &mut node.value {
        entries.retain(|(k, _)| !k.starts_with('$'));
    }
    node
}

/// Apply a JSON 6902 patch (a list of operations) to `base`.
pub fn json6902(base: &mut Node, ops: &Node) -> Result<(), RepoError> {
    let Some(ops) = ops.as_seq() else {
        return Err(RepoError::new(
            ops.site.clone(),
            "a JSON 6902 patch must be a list of operations",
        ));
    };
    for op in ops {
        let at = op.site.clone();
        let name = op
            .get_str(&["op"])
            .ok_or_else(|| RepoError::new(at.clone(), "JSON 6902 operation without `op`"))?;
        let path = op
            .get_str(&["path"])
            .ok_or_else(|| RepoError::new(at.clone(), "JSON 6902 operation without `path`"))?;
        let tokens = pointer(path, &at)?;
        match name {
            "add" | "replace" | "test" => {
                let value = op.entry("value").ok_or_else(|| {
                    RepoError::new(at.clone(), format!("JSON 6902 `{name}` without `value`"))
                })?;
                if name == "test" {
                    let found = locate(base, &tokens, &at, path)?;
                    if found.to_json() != value.to_json() {
                        return Err(RepoError::new(
                            at,
                            format!("JSON 6902 test failed at {path}"),
                        ));
                    }
                    continue;
                }
                set(base, &tokens, value.clone(), name == "add", &at, path)?;
            }
            "remove" => remove(base, &tokens, &at, path)?,
            other => {
                return Err(RepoError::new(
                    at,
                    format!(
                        "unsupported JSON 6902 operation `{other}` (gates applies add, replace, remove and test)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn pointer(path: &str, at: &Site) -> Result<Vec<String>, RepoError> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err(RepoError::new(
            at.clone(),
            format!("JSON pointer `{path}` must start with `/`"),
        ));
    };
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn missing(at: &Site, path: &str) -> RepoError {
    RepoError::new(
        at.clone(),
        format!("JSON 6902 path {path} does not exist in the target"),
    )
}

fn locate<'a>(
    mut node: &'a Node,
    tokens: &[String],
    at: &Site,
    path: &str,
) -> Result<&'a Node, RepoError> {
    for token in tokens {
        node = match &node.value {
            Value::Map(_) => node.entry(token),
            Value::Seq(items) => token.parse::<usize>().ok().and_then(|i| items.get(i)),
            Value::Null | Value::Scalar(..) => None,
        }
        .ok_or_else(|| missing(at, path))?;
    }
    Ok(node)
}

fn parent<'a>(
    mut node: &'a mut Node,
    tokens: &[String],
    at: &Site,
    path: &str,
) -> Result<&'a mut Node, RepoError> {
    for token in tokens {
        node = match &mut node.value {
            Value::Map(entries) => entries.iter_mut().find(|(k, _)| k == token).map(|(_, v)| v),
            Value::Seq(items) => token.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
            Value::Null | Value::Scalar(..) => None,
        }
        .ok_or_else(|| missing(at, path))?;
    }
    Ok(node)
}

fn set(
    base: &mut Node,
    tokens: &[String],
    value: Node,
    add: bool,
    at: &Site,
    path: &str,
) -> Result<(), RepoError> {
    let Some((last, init)) = tokens.split_last() else {
        *base = value;
        return Ok(());
    };
    let target = parent(base, init, at, path)?;
    match &mut target.value {
        Value::Map(entries) => match entries.iter_mut().find(|(k, _)| k == last) {
            Some((_, existing)) => *existing = value,
            None if add => entries.push((last.clone(), value)),
            None => return Err(missing(at, path)),
        },
        Value::Seq(items) => {
            let index = if last == "-" {
                items.len()
            } else {
                last.parse::<usize>().map_err(|_| missing(at, path))?
            };
            if add && index <= items.len() {
                items.insert(index, value);
            } else if !add && index < items.len() {
                items[index] = value;
            } else {
                return Err(missing(at, path));
            }
        }
        Value::Null | Value::Scalar(..) => return Err(missing(at, path)),
    }
    Ok(())
}

fn remove(base: &mut Node, tokens: &[String], at: &Site, path: &str) -> Result<(), RepoError> {
    let Some((last, init)) = tokens.split_last() else {
        return Err(missing(at, path));
    };
    let target = parent(base, init, at, path)?;
    match &mut target.value {
        Value::Map(entries) => {
            let i = entries
                .iter()
                .position(|(k, _)| k == last)
                .ok_or_else(|| missing(at, path))?;
            entries.remove(i);
        }
        Value::Seq(items) => {
            let i = last.parse::<usize>().map_err(|_| missing(at, path))?;
            if i >= items.len() {
                return Err(missing(at, path));
            }
            items.remove(i);
        }
        Value::Null | Value::Scalar(..) => return Err(missing(at, path)),
    }
    Ok(())
}

/// Merge Helm values: `over` wins; maps merge recursively, `null` deletes a key.
pub fn helm_values(base: &mut Node, over: &Node) {
    match (&mut base.value, &over.value) {
        (Value::Map(base_entries), Value::Map(over_entries)) => {
            for (key, value) in over_entries {
                let existing = base_entries.iter().position(|(k, _)| k == key);
                match (existing, value.is_null()) {
                    (Some(i), true) => {
                        base_entries.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => helm_values(&mut base_entries[i].1, value),
                    (None, false) => base_entries.push((key.clone(), value.clone())),
                }
            }
        }
        _ => *base = over.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repo::yaml::parse;

    fn doc(file: &str, text: &str) -> Node {
        parse(file, text).unwrap().remove(0)
    }

    #[test]
    fn a_strategic_merge_keeps_the_patch_line_as_the_last_setter() {
        let mut base = doc(
            "base.yaml",
            "spec:\n  values:\n    service:\n      spec:\n        externalTrafficPolicy: Local\n    replicas: 1\n",
        );
        let patch = doc(
            "patch.yaml",
            "spec:\n  values:\n    service:\n      spec:\n        externalTrafficPolicy: Cluster\n",
        );
        strategic(&mut base, &patch).unwrap();
        let etp = base
            .get(&["spec", "values", "service", "spec", "externalTrafficPolicy"])
            .unwrap();
        assert_eq!(
            (etp.as_str(), etp.site.to_string().as_str()),
            (Some("Cluster"), "patch.yaml:5")
        );
        assert_eq!(
            base.get(&["spec", "values", "replicas"])
                .unwrap()
                .site
                .to_string(),
            "base.yaml:6"
        );
    }

    #[test]
    fn named_lists_merge_by_name_and_null_deletes() {
        let mut base = doc(
            "d.yaml",
            "containers:\n- name: a\n  image: a:1\n- name: b\n  image: b:1\nold: x\n",
        );
        let patch = doc(
            "p.yaml",
            "containers:\n- name: b\n  image: b:2\nold: null\n",
        );
        strategic(&mut base, &patch).unwrap();
        let containers = base.get(&["containers"]).unwrap().as_seq().unwrap();
        assert_eq!(containers.len(), 2);
        // The patch's items first, then the base's others (Kustomize's order).
        assert_eq!(containers[0].get_str(&["image"]), Some("b:2"));
        assert_eq!(containers[1].get_str(&["name"]), Some("a"));
        assert!(base.entry("old").is_none());
    }

    #[test]
    fn unknown_directives_are_errors_naming_the_patch_line() {
        let mut base = doc("d.yaml", "a: {b: 1}\n");
        let patch = doc("p.yaml", "a:\n  $retainKeys: [b]\n");
        let err = strategic(&mut base, &patch).unwrap_err();
        assert!(err.to_string().starts_with("p.yaml:2"), "{err}");
    }

    #[test]
    fn json6902_adds_replaces_and_removes_with_the_patch_lines() {
        let mut base = doc(
            "d.yaml",
            "spec:\n  replicas: 1\n  list: [a, b]\n  gone: x\n",
        );
        let ops = doc(
            "ops.yaml",
            "- op: replace\n  path: /spec/replicas\n  value: 3\n- op: add\n  path: /spec/list/-\n  value: c\n- op: remove\n  path: /spec/gone\n- op: add\n  path: /spec/a~1b\n  value: slash\n",
        );
        json6902(&mut base, &ops).unwrap();
        let replicas = base.get(&["spec", "replicas"]).unwrap();
        assert_eq!((replicas.as_i64(), replicas.site.line), (Some(3), 3));
        assert_eq!(
            base.get(&["spec", "list"]).unwrap().as_seq().unwrap().len(),
            3
        );
        assert!(base.get(&["spec", "gone"]).is_none());
        assert_eq!(base.get_str(&["spec", "a/b"]), Some("slash"));
    }

    #[test]
    fn json6902_on_a_missing_path_or_an_unknown_op_is_an_error() {
        let mut base = doc("d.yaml", "spec: {}\n");
        let err = json6902(
            &mut base,
            &doc("ops.yaml", "- op: replace\n  path: /spec/x\n  value: 1\n"),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("ops.yaml:1") && err.message.contains("/spec/x"),
            "{err}"
        );
        let err = json6902(
            &mut base,
            &doc("ops.yaml", "- op: move\n  from: /a\n  path: /b\n"),
        )
        .unwrap_err();
        assert!(err.message.contains("`move`"), "{err}");
        assert!(json6902(&mut base, &doc("ops.yaml", "op: add\n")).is_err());
        assert!(
            json6902(
                &mut base,
                &doc("ops.yaml", "- op: add\n  path: spec\n  value: 1\n")
            )
            .is_err()
        );
    }

    #[test]
    fn helm_values_replace_lists_and_merge_maps() {
        let mut base = doc("chart.yaml", "a: {b: 1, c: [1, 2]}\n");
        helm_values(&mut base, &doc("over.yaml", "a: {c: [3]}\n"));
        assert_eq!(base.get(&["a", "b"]).unwrap().as_i64(), Some(1));
        assert_eq!(base.get(&["a", "c"]).unwrap().show(), "[3]");
    }
}
