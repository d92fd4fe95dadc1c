//! Kustomize, as far as the gates need it, with positions: `resources` (files and local
//! directories), `patches`, `patchesStrategicMerge`, `patchesJson6902` (targets by kind and
//! name or by label and annotation selector), `commonLabels`, `labels`, `replicas` and
//! `namespace`. Every value of the output keeps the file and line that set it last.
//!
//! `kubectl kustomize` renders faithfully but forgets where values came from, so evidence
//! could only guess the line; this renderer keeps lines and refuses what it does not
//! implement. Constructs that would change what the trials read (generators, components,
//! remote bases, name prefixes, transformers) are errors naming the file and
//! line; constructs that cannot (`images`, `commonAnnotations`) are recorded as notes.

use std::path::Path;

use super::label_query;
use super::patch;

pub mod labels;
use super::site::{RepoError, Site};
use super::yaml::{self, Node, Value};

/// The objects a Kustomization produces, and what was left out on purpose.
#[derive(Debug, Clone, Default)]
pub struct Rendered {
    pub objects: Vec<Node>,
    /// Constructs skipped because no trial reads what they change, with the reason.
    pub notes: Vec<String>,
    /// Subdirectories of a plain directory that could not be rendered, with the kinds they
    /// may hold (see [`super::unread`]).
    pub unread: Vec<super::unread::Unread>,
}

const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Keys that cannot change anything a trial reads.
const NOTED: [(&str, &str); 4] = [
    ("images", "image names and tags are not read by any trial"),
    ("commonAnnotations", "annotations are not read by any trial"),
    ("buildMetadata", "build metadata is not read by any trial"),
    ("sortOptions", "resource order is not read by any trial"),
];

/// Kinds Kustomize leaves without a namespace.
const CLUSTER_SCOPED: [&str; 12] = [
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "StorageClass",
    "PriorityClass",
    "PersistentVolume",
    "CiliumL2AnnouncementPolicy",
    "CiliumLoadBalancerIPPool",
    "CiliumClusterwideNetworkPolicy",
    "ClusterIssuer",
    "ClusterSecretStore",
];

/// The repository-relative Kustomization file of `dir`, if it has one.
pub fn kustomization_file(repo: &Path, dir: &str) -> Option<String> {
    KUSTOMIZATION_FILES
        .iter()
        .map(|name| join(dir, name))
        .find(|rel| repo.join(rel).is_file())
}

/// Render the Kustomization in `dir` (repository-relative).
pub fn render(repo: &Path, dir: &str) -> Result<Rendered, RepoError> {
    render_depth(repo, dir, 0)
}

fn render_depth(repo: &Path, dir: &str, depth: usize) -> Result<Rendered, RepoError> {
    if depth > 32 {
        return Err(RepoError::file(
            dir,
            "Kustomizations nest more than 32 deep (a cycle?)",
        ));
    }
    let Some(file) = kustomization_file(repo, dir) else {
        return Err(RepoError::file(
            dir,
            "no kustomization.yaml in this directory, which a Kustomization lists as a resource",
        ));
    };
    let text = read(repo, &file)?;
    let mut docs = yaml::parse(&file, &text)?;
    if docs.len() != 1 || docs[0].as_map().is_none() {
        return Err(RepoError::file(
            &file,
            "a kustomization must be one YAML mapping",
        ));
    }
    let k = docs.remove(0);
    let mut out = Rendered::default();
    let mut namespace = None;
    let entries = k.as_map().unwrap_or_default();
    for (key, value) in entries {
        match key.as_str() {
            "apiVersion" | "kind" => {}
            "resources" | "bases" => {
                for item in list(value, &file, key)? {
                    let Some(path) = item.as_str() else {
                        return Err(RepoError::new(
                            item.site.clone(),
                            "a resource must be a path",
                        ));
                    };
                    if is_remote(path) {
                        return Err(RepoError::new(
                            item.site.clone(),
                            format!(
                                "remote base `{path}`: gates reads only the repository itself; vendor it or check it where it lives"
                            ),
                        ));
                    }
                    let rel = resolve(dir, path, &item.site)?;
                    let full = repo.join(&rel);
                    if full.is_dir() {
                        let child = render_depth(repo, &rel, depth + 1)?;
                        out.objects.extend(child.objects);
                        out.notes.extend(child.notes);
                    } else if full.is_file() {
                        let text = read(repo, &rel)?;
                        for doc in yaml::parse(&rel, &text)? {
                            out.objects.extend(objects(doc)?);
                        }
                    } else {
                        return Err(RepoError::new(
                            item.site.clone(),
                            format!("resource `{path}` does not exist ({rel})"),
                        ));
                    }
                }
            }
            "patches"
            | "patchesStrategicMerge"
            | "patchesJson6902"
            | "replicas"
            | "commonLabels"
            | "labels" => {}
            "namespace" => namespace = value.as_str().map(str::to_string),
            other => {
                if let Some((_, why)) = NOTED.iter().find(|(k, _)| *k == other) {
                    out.notes
                        .push(format!("{}: `{other}` skipped: {why}", value.site));
                } else {
                    return Err(RepoError::new(
                        value.site.clone(),
                        format!(
                            "Kustomize `{other}` is not evaluated by gates; the trials would read objects it changes or creates, so it is refused rather than guessed"
                        ),
                    ));
                }
            }
        }
    }
    // Patches apply to the accumulated resources, in the order Kustomize applies them.
    if let Some(value) = k.entry("patchesStrategicMerge") {
        for item in list(value, &file, "patchesStrategicMerge")? {
            for patch_doc in patch_docs(repo, dir, item)? {
                apply_strategic(&mut out.objects, &patch_doc, None)?;
            }
        }
    }
    if let Some(value) = k.entry("patchesJson6902") {
        for item in list(value, &file, "patchesJson6902")? {
            let target = Target::read(item.entry("target"), &item.site)?;
            let ops = patch_source(repo, dir, item)?;
            for doc in ops {
                apply_json(&mut out.objects, &doc, &target)?;
            }
        }
    }
    if let Some(value) = k.entry("patches") {
        for item in list(value, &file, "patches")? {
            apply_patch_entry(repo, dir, item, &mut out.objects)?;
        }
    }
    // Labels after the patches, as Kustomize's transformers run.
    if let Some(value) = k.entry("commonLabels") {
        labels::Labels::common(value)?.apply(&mut out.objects);
    }
    if let Some(value) = k.entry("labels") {
        for item in list(value, &file, "labels")? {
            labels::Labels::entry(item)?.apply(&mut out.objects);
        }
    }
    if let Some(value) = k.entry("replicas") {
        for item in list(value, &file, "replicas")? {
            let (Some(name), Some(count)) = (item.get(&["name"]), item.get(&["count"])) else {
                return Err(RepoError::new(
                    item.site.clone(),
                    "a replicas entry needs `name` and `count`",
                ));
            };
            let mut found = false;
            for object in &mut out.objects {
                let kind = object.get_str(&["kind"]).unwrap_or_default();
                if ["Deployment", "StatefulSet", "ReplicaSet"].contains(&kind)
                    && object.get_str(&["metadata", "name"]) == name.as_str()
                {
                    set_path(object, &["spec", "replicas"], count.clone());
                    found = true;
                }
            }
            if !found {
                return Err(RepoError::new(
                    name.site.clone(),
                    format!(
                        "replicas: no Deployment or StatefulSet named `{}`",
                        name.show()
                    ),
                ));
            }
        }
    }
    if let Some(ns) = namespace {
        let site = k
            .entry("namespace")
            .map(|n| n.site.clone())
            .unwrap_or_default();
        set_namespace(&mut out.objects, &ns, &site);
    }
    Ok(out)
}

/// Give namespaced objects the namespace, as `namespace:` and Flux `targetNamespace` do.
pub fn set_namespace(objects: &mut [Node], namespace: &str, site: &Site) {
    for object in objects {
        let kind = object.get_str(&["kind"]).unwrap_or_default();
        if !CLUSTER_SCOPED.contains(&kind) {
            set_path(
                object,
                &["metadata", "namespace"],
                Node::str(namespace, site.clone()),
            );
        }
    }
}

/// Apply one entry of `patches` (Kustomize) or Flux `spec.patches`: `path` or inline `patch`,
/// with an optional `target`. A list is JSON 6902, a mapping a strategic merge.
pub fn apply_patch_entry(
    repo: &Path,
    dir: &str,
    item: &Node,
    objects: &mut [Node],
) -> Result<(), RepoError> {
    let target = match item.entry("target") {
        Some(t) => Some(Target::read(Some(t), &item.site)?),
        None => None,
    };
    for doc in patch_source(repo, dir, item)? {
        match (&doc.value, &target) {
            (Value::Seq(_), Some(target)) => apply_json(objects, &doc, target)?,
            (Value::Seq(_), None) => {
                return Err(RepoError::new(
                    item.site.clone(),
                    "a JSON 6902 patch needs a `target`",
                ));
            }
            (Value::Map(_), target) => apply_strategic(objects, &doc, target.as_ref())?,
            (Value::Null | Value::Scalar(..), _) => {
                return Err(RepoError::new(
                    doc.site.clone(),
                    "a patch must be a mapping or a list of operations",
                ));
            }
        }
    }
    Ok(())
}

fn patch_source(repo: &Path, dir: &str, item: &Node) -> Result<Vec<Node>, RepoError> {
    if let Some(path) = item.get(&["path"]) {
        let rel = resolve(dir, path.as_str().unwrap_or_default(), &path.site)?;
        let text = read(repo, &rel)?;
        return yaml::parse(&rel, &text);
    }
    if let Some(inline) = item.get(&["patch"]) {
        let text = inline.as_str().unwrap_or_default();
        // Block scalars start on the line after their indicator.
        return yaml::parse_shifted(&inline.site.file, text, inline.site.line);
    }
    Err(RepoError::new(
        item.site.clone(),
        "a patch needs `path` or `patch`",
    ))
}

fn patch_docs(repo: &Path, dir: &str, item: &Node) -> Result<Vec<Node>, RepoError> {
    match &item.value {
        Value::Scalar(text, _) if text.contains('\n') || text.contains(':') => {
            yaml::parse_shifted(&item.site.file, text, item.site.line)
        }
        Value::Scalar(path, _) => {
            let rel = resolve(dir, path, &item.site)?;
            let text = read(repo, &rel)?;
            yaml::parse(&rel, &text)
        }
        _ => Err(RepoError::new(
            item.site.clone(),
            "a strategic-merge patch must be a path or inline YAML",
        )),
    }
}

/// Which objects a patch applies to.
#[derive(Debug, Clone, Default)]
pub struct Target {
    group: Option<String>,
    version: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    namespace: Option<String>,
    /// `labelSelector` and `annotationSelector`, compiled.
    labels: Option<crate::selector::Selector>,
    annotations: Option<crate::selector::Selector>,
    site: Site,
}

impl Target {
    fn read(node: Option<&Node>, at: &Site) -> Result<Target, RepoError> {
        let Some(node) = node else {
            return Err(RepoError::new(
                at.clone(),
                "a JSON 6902 patch needs a `target`",
            ));
        };
        let mut target = Target {
            site: node.site.clone(),
            ..Target::default()
        };
        for (key, value) in node.as_map().unwrap_or_default() {
            let text = value.as_str().map(str::to_string);
            match key.as_str() {
                "group" => target.group = text,
                "version" => target.version = text,
                "kind" => target.kind = text,
                "name" => target.name = text,
                "namespace" => target.namespace = text,
                "labelSelector" | "annotationSelector" => {
                    let selector = label_query::parse(text.as_deref().unwrap_or_default())
                        .map_err(|err| {
                            RepoError::new(value.site.clone(), format!("patch target {key}: {err}"))
                        })?;
                    if key == "labelSelector" {
                        target.labels = Some(selector);
                    } else {
                        target.annotations = Some(selector);
                    }
                }
                other => {
                    return Err(RepoError::new(
                        value.site.clone(),
                        format!(
                            "patch target `{other}` is not evaluated by gates; name the target by kind and name"
                        ),
                    ));
                }
            }
        }
        Ok(target)
    }

    fn of(object: &Node) -> Target {
        let api = object.get_str(&["apiVersion"]).unwrap_or_default();
        let (group, version) = match api.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api),
        };
        Target {
            group: Some(group.to_string()),
            version: Some(version.to_string()),
            kind: object.get_str(&["kind"]).map(str::to_string),
            name: object.get_str(&["metadata", "name"]).map(str::to_string),
            namespace: object
                .get_str(&["metadata", "namespace"])
                .map(str::to_string),
            labels: None,
            annotations: None,
            site: object.site.clone(),
        }
    }

    fn selects(&self, object: &Node) -> bool {
        let id = Target::of(object);
        let same = |want: &Option<String>, have: &Option<String>| {
            want.as_ref()
                .is_none_or(|w| have.as_deref().unwrap_or_default() == w)
        };
        let meta = |key: &str| {
            object
                .get(&["metadata", key])
                .and_then(Node::string_map)
                .unwrap_or_default()
        };
        same(&self.group, &id.group)
            && same(&self.version, &id.version)
            && same(&self.kind, &id.kind)
            && same(&self.name, &id.name)
            && same(&self.namespace, &id.namespace)
            && self
                .labels
                .as_ref()
                .is_none_or(|s| s.matches(&meta("labels")))
            && self
                .annotations
                .as_ref()
                .is_none_or(|s| s.matches(&meta("annotations")))
    }

    fn describe(&self) -> String {
        let mut out = format!(
            "{}/{}",
            self.kind.as_deref().unwrap_or("*"),
            self.name.as_deref().unwrap_or("*")
        );
        if self.labels.is_some() || self.annotations.is_some() {
            out.push_str(" with the selected labels or annotations");
        }
        out
    }
}

fn apply_strategic(
    objects: &mut [Node],
    doc: &Node,
    target: Option<&Target>,
) -> Result<(), RepoError> {
    let own;
    let target = match target {
        Some(t) => t,
        None => {
            own = Target {
                group: None,
                version: None,
                namespace: None,
                ..Target::of(doc)
            };
            &own
        }
    };
    let mut hit = false;
    for object in objects.iter_mut().filter(|o| target.selects(o)) {
        hit = true;
        let mut body = doc.clone();
        if let Value::Map(entries) = &mut body.value {
            entries.retain(|(k, _)| k != "apiVersion" && k != "kind");
            if let Some((_, meta)) = entries.iter_mut().find(|(k, _)| k == "metadata")
                && let Value::Map(meta) = &mut meta.value
            {
                meta.retain(|(k, _)| k != "name" && k != "namespace");
            }
        }
        patch::strategic(object, &body)?;
    }
    if !hit {
        return Err(RepoError::new(
            doc.site.clone(),
            format!(
                "the patch targets {}, which is not among the resources",
                target.describe()
            ),
        ));
    }
    Ok(())
}

fn apply_json(objects: &mut [Node], ops: &Node, target: &Target) -> Result<(), RepoError> {
    let mut hit = false;
    for object in objects.iter_mut().filter(|o| target.selects(o)) {
        hit = true;
        patch::json6902(object, ops)?;
    }
    if !hit {
        return Err(RepoError::new(
            target.site.clone(),
            format!(
                "the patch targets {}, which is not among the resources",
                target.describe()
            ),
        ));
    }
    Ok(())
}

/// The documents of a manifest file as objects (a `List` is unpacked).
fn objects(doc: Node) -> Result<Vec<Node>, RepoError> {
    if doc.as_map().is_none() {
        return Err(RepoError::new(
            doc.site.clone(),
            "a manifest must be a YAML mapping",
        ));
    }
    if doc.get_str(&["kind"]).is_some_and(|k| k.ends_with("List"))
        && let Some(items) = doc.get(&["items"]).and_then(Node::as_seq)
    {
        return Ok(items.to_vec());
    }
    if doc.get_str(&["kind"]).is_none() || doc.get_str(&["apiVersion"]).is_none() {
        return Err(RepoError::new(
            doc.site.clone(),
            "a resource without `apiVersion` and `kind`",
        ));
    }
    Ok(vec![doc])
}

/// Every `kind:` object in the YAML files under `dir`, the way Flux builds a directory that
/// has no kustomization.yaml: subdirectories with one are rendered as Kustomizations.
pub fn autodetect(repo: &Path, dir: &str) -> Result<Rendered, RepoError> {
    if kustomization_file(repo, dir).is_some() {
        return render(repo, dir);
    }
    let full = repo.join(dir);
    let mut entries: Vec<_> = std::fs::read_dir(&full)
        .map_err(|err| RepoError::file(dir, format!("cannot read the directory: {err}")))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    let mut out = Rendered::default();
    for path in entries {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let rel = join(dir, &name);
        if path.is_dir() {
            // Each directory below a plain one is a Kustomization of its own to Flux's
            // generated kustomization; one gates cannot read leaves the others readable.
            match autodetect(repo, &rel) {
                Ok(child) => {
                    out.objects.extend(child.objects);
                    out.notes.extend(child.notes);
                    out.unread.extend(child.unread);
                }
                Err(error) => out.unread.push(super::unread::Unread {
                    error,
                    kinds: super::unread::kinds_under(repo, &rel),
                }),
            }
        } else if name.ends_with(".yaml") || name.ends_with(".yml") {
            let text = read(repo, &rel)?;
            for doc in yaml::parse(&rel, &text)? {
                if doc.get_str(&["kind"]).is_some() && doc.get_str(&["apiVersion"]).is_some() {
                    out.objects.extend(objects(doc)?);
                } else {
                    out.notes.push(format!("{}: not a Kubernetes object (no apiVersion and kind); Flux would refuse it", doc.site));
                }
            }
        }
    }
    Ok(out)
}

/// A list entry of a kustomization; one left empty (`patches:` with every item commented
/// out) is null, which Kustomize's Go decoding reads as no items.
fn list<'a>(value: &'a Node, file: &str, key: &str) -> Result<&'a [Node], RepoError> {
    if matches!(value.value, Value::Null) {
        return Ok(&[]);
    }
    value.as_seq().ok_or_else(|| {
        RepoError::new(
            if value.site.file.is_empty() {
                Site::new(file, 0)
            } else {
                value.site.clone()
            },
            format!("`{key}` must be a list"),
        )
    })
}

/// Set the value at `path`, creating the maps on the way and replacing what is there.
pub fn set_path(object: &mut Node, path: &[&str], value: Node) {
    let mut node = object;
    for (i, key) in path.iter().enumerate() {
        if !matches!(node.value, Value::Map(_)) {
            node.value = Value::Map(Vec::new());
        }
        let Value::Map(entries) = &mut node.value else {
            return;
        };
        let last = i + 1 == path.len();
        let index = match entries.iter().position(|(k, _)| k == key) {
            Some(index) => index,
            None => {
                entries.push((
                    key.to_string(),
                    Node::new(Value::Map(Vec::new()), value.site.clone()),
                ));
                entries.len() - 1
            }
        };
        if last {
            entries[index].1 = value;
            return;
        }
        node = &mut entries[index].1;
    }
}

fn is_remote(path: &str) -> bool {
    path.contains("://") || path.starts_with("git@") || path.starts_with("github.com/")
}

/// `dir/name` with `/` separators.
pub fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() || dir == "." {
        name.to_string()
    } else {
        format!("{}/{name}", dir.trim_end_matches('/'))
    }
}

/// A path written in a file under `dir`, made repository-relative; one that leaves the
/// repository is an error.
pub fn resolve(dir: &str, path: &str, at: &Site) -> Result<String, RepoError> {
    let mut parts: Vec<&str> = if path.starts_with('/') {
        Vec::new()
    } else {
        dir.split('/')
            .filter(|p| !p.is_empty() && *p != ".")
            .collect()
    };
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(RepoError::new(
                        at.clone(),
                        format!("`{path}` points outside the repository"),
                    ));
                }
            }
            part => parts.push(part),
        }
    }
    Ok(parts.join("/"))
}

pub fn read(repo: &Path, rel: &str) -> Result<String, RepoError> {
    std::fs::read_to_string(repo.join(rel))
        .map_err(|err| RepoError::file(rel, format!("cannot read: {err}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, text).unwrap();
        }
        dir
    }

    const RELEASE: &str = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: traefik\nspec:\n  values:\n    service:\n      spec:\n        externalTrafficPolicy: Local\n";

    #[test]
    fn a_list_left_empty_is_no_items_as_kustomize_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("kustomization.yaml"),
            "resources:\n  - a.yaml\npatches:\n  # - path: off.yaml\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("a.yaml"),
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n",
        )
        .unwrap();
        let out = render(dir.path(), "").unwrap();
        assert_eq!(out.objects.len(), 1);
    }

    #[test]
    fn an_overlay_patch_sets_a_value_last_and_the_base_keeps_its_own_lines() {
        let dir = repo(&[
            ("base/kustomization.yaml", "resources: [release.yaml]\n"),
            ("base/release.yaml", RELEASE),
            (
                "env/kustomization.yaml",
                "namespace: traefik\nresources:\n  - ../base\npatches:\n  - path: etp.yaml\n",
            ),
            (
                "env/etp.yaml",
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: traefik\nspec:\n  values:\n    service:\n      spec:\n        externalTrafficPolicy: Cluster\n",
            ),
        ]);
        let out = render(dir.path(), "env").unwrap();
        assert_eq!(out.objects.len(), 1);
        let etp = out.objects[0]
            .get(&["spec", "values", "service", "spec", "externalTrafficPolicy"])
            .unwrap();
        assert_eq!(etp.as_str(), Some("Cluster"));
        assert_eq!(etp.site.to_string(), "env/etp.yaml:9");
        assert_eq!(
            out.objects[0].get_str(&["metadata", "namespace"]),
            Some("traefik")
        );
        let base = render(dir.path(), "base").unwrap();
        let local = base.objects[0]
            .get(&["spec", "values", "service", "spec", "externalTrafficPolicy"])
            .unwrap();
        assert_eq!(local.site.to_string(), "base/release.yaml:9");
    }

    #[test]
    fn inline_json6902_patches_point_at_the_kustomization_lines() {
        let dir = repo(&[
            ("base/kustomization.yaml", "resources: [release.yaml]\n"),
            ("base/release.yaml", RELEASE),
            (
                "env/kustomization.yaml",
                "resources: [../base]\npatches:\n  - target: {kind: HelmRelease, name: traefik}\n    patch: |\n      - op: replace\n        path: /spec/values/service/spec/externalTrafficPolicy\n        value: Cluster\n",
            ),
        ]);
        let out = render(dir.path(), "env").unwrap();
        let etp = out.objects[0]
            .get(&["spec", "values", "service", "spec", "externalTrafficPolicy"])
            .unwrap();
        assert_eq!(etp.as_str(), Some("Cluster"));
        assert_eq!(etp.site.to_string(), "env/kustomization.yaml:7");
    }

    #[test]
    fn generators_and_remote_bases_are_errors_naming_the_file_and_line() {
        let dir = repo(&[(
            "env/kustomization.yaml",
            "resources: []\nconfigMapGenerator:\n  - name: x\n",
        )]);
        let err = render(dir.path(), "env").unwrap_err();
        assert!(
            err.to_string().starts_with("env/kustomization.yaml:2"),
            "{err}"
        );
        assert!(err.message.contains("configMapGenerator"), "{err}");
        let dir = repo(&[(
            "env/kustomization.yaml",
            "resources:\n  - https://github.com/example/fleet//base?ref=v1\n",
        )]);
        let err = render(dir.path(), "env").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("env/kustomization.yaml:2: remote base"),
            "{err}"
        );
    }

    #[test]
    fn images_are_noted_not_refused() {
        let dir = repo(&[
            (
                "env/kustomization.yaml",
                "resources: [r.yaml]\nimages:\n  - name: a\n    newTag: b\n",
            ),
            ("env/r.yaml", RELEASE),
        ]);
        let out = render(dir.path(), "env").unwrap();
        assert_eq!(out.notes.len(), 1, "{:?}", out.notes);
    }

    #[test]
    fn missing_files_patch_targets_and_escapes_are_errors() {
        let dir = repo(&[("env/kustomization.yaml", "resources: [gone.yaml]\n")]);
        assert!(
            render(dir.path(), "env")
                .unwrap_err()
                .message
                .contains("does not exist")
        );
        let dir = repo(&[
            (
                "env/kustomization.yaml",
                "resources: [r.yaml]\npatches:\n  - path: p.yaml\n",
            ),
            ("env/r.yaml", RELEASE),
            (
                "env/p.yaml",
                "apiVersion: v1\nkind: Service\nmetadata: {name: nope}\n",
            ),
        ]);
        let err = render(dir.path(), "env").unwrap_err();
        assert!(err.to_string().starts_with("env/p.yaml:1"), "{err}");
        let dir = repo(&[("env/kustomization.yaml", "resources: [../../outside]\n")]);
        assert!(
            render(dir.path(), "env")
                .unwrap_err()
                .message
                .contains("outside the repository")
        );
        let dir = repo(&[
            ("env/kustomization.yaml", "resources: [r.yaml]\n"),
            ("env/r.yaml", "just: data\n"),
        ]);
        assert!(
            render(dir.path(), "env")
                .unwrap_err()
                .to_string()
                .starts_with("env/r.yaml:1")
        );
        let dir = repo(&[("env/kustomization.yaml", "resources: {a: b}\n")]);
        assert!(
            render(dir.path(), "env")
                .unwrap_err()
                .message
                .contains("must be a list")
        );
    }

    #[test]
    fn replicas_set_the_count_with_the_kustomization_line() {
        let dir = repo(&[
            (
                "env/kustomization.yaml",
                "resources: [d.yaml]\nreplicas:\n  - name: web\n    count: 2\n",
            ),
            (
                "env/d.yaml",
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 1}\n",
            ),
        ]);
        let out = render(dir.path(), "env").unwrap();
        let replicas = out.objects[0].get(&["spec", "replicas"]).unwrap();
        assert_eq!((replicas.as_i64(), replicas.site.line), (Some(2), 4));
    }
}
