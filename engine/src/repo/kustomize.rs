//! Kustomize, as far as the gates need it, with positions: `resources` (files and local
//! directories), `components` (local `kind: Component` directories), `configMapGenerator`,
//! `secretGenerator` and `generatorOptions` (with Kustomize's content-hash name suffix and the
//! pod-template references to the generated names), `patches`, `patchesStrategicMerge`,
//! `patchesJson6902` (targets by kind and name or by label and annotation selector),
//! `commonLabels`, `labels`, `commonAnnotations`, `replicas`, `namespace`, `namePrefix` and
//! `nameSuffix` (with every reference to a renamed object rewritten, as Kustomize's name
//! references do). Every value of the output keeps the file and line that set it last.
//!
//! A kustomization is built as Kustomize's `accumulateTarget` builds it: its resources, then
//! its generators, then each component in order (which adds its own resources and generated
//! objects to the same list and runs its own transformers over everything accumulated so
//! far), then its own transformers. Names get their hash suffix once, at the end of the
//! build, and references to them are rewritten then.
//!
//! `kubectl kustomize` renders faithfully but forgets where values came from, so evidence
//! could only guess the line; this renderer keeps lines and refuses what it does not
//! implement. Constructs that would change what the trials read (`helmCharts`, remote bases,
//! transformers, `configurations`) are errors naming the file and line;
//! constructs that cannot (`images`) are recorded as notes.

use std::path::{Path, PathBuf};

use super::label_query;
use super::patch;

mod back_references;
pub mod generators;
pub mod helm_charts;
pub mod labels;
pub mod names;
pub mod replacements;
pub use super::paths::{join, kustomization_file, read, resolve};
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

/// The `apiVersion` Kustomize requires of each kind (`types.Kustomization.EnforceFields`).
const KUSTOMIZATION_VERSION: &str = "kustomize.config.k8s.io/v1beta1";
const COMPONENT_VERSION: &str = "kustomize.config.k8s.io/v1alpha1";

/// Keys gates evaluates.
const EVALUATED: [&str; 20] = [
    "namePrefix",
    "nameSuffix",
    "apiVersion",
    "helmCharts",
    "replacements",
    "kind",
    "resources",
    "bases",
    "components",
    "configMapGenerator",
    "secretGenerator",
    "generatorOptions",
    "patches",
    "patchesStrategicMerge",
    "patchesJson6902",
    "replicas",
    "commonLabels",
    "labels",
    "commonAnnotations",
    "namespace",
];

/// Keys that cannot change anything a trial reads.
const NOTED: [(&str, &str); 5] = [
    (
        "metadata",
        "the kustomization's own name and labels change no object it builds",
    ),
    (
        "helmGlobals",
        "where charts are kept; gates reads a chart's name and values, not its files",
    ),
    ("images", "image names and tags are not read by any trial"),
    ("buildMetadata", "build metadata is not read by any trial"),
    ("sortOptions", "resource order is not read by any trial"),
];

/// Kinds left without a namespace: the built-in kinds Kustomize knows as cluster-scoped
/// (`kyaml/openapi`'s `precomputedIsNamespaceScoped`), and cluster-scoped custom kinds the
/// API server stores without one (Kustomize, which does not know them, writes one).
const CLUSTER_SCOPED: [&str; 23] = [
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "StorageClass",
    "PriorityClass",
    "PersistentVolume",
    "Node",
    "ComponentStatus",
    "CSIDriver",
    "CSINode",
    "VolumeAttachment",
    "IngressClass",
    "RuntimeClass",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "APIService",
    "CertificateSigningRequest",
    "CiliumL2AnnouncementPolicy",
    "CiliumLoadBalancerIPPool",
    "CiliumClusterwideNetworkPolicy",
    "ClusterIssuer",
    "ClusterSecretStore",
];

/// Render the Kustomization in `dir` (repository-relative). A Component renders on its own,
/// as `kustomize build` renders one.
pub fn render(repo: &Path, dir: &str) -> Result<Rendered, RepoError> {
    let k = Kustomization::load(repo, dir, 0, "is rendered")?;
    let mut out = Rendered::default();
    accumulate(repo, &k, &mut out, 0)?;
    names::finish(&mut out.objects)?;
    Ok(out)
}

/// What Flux (`spec.components`, `spec.namePrefix`, `spec.nameSuffix`) and Argo CD
/// (`kustomize.components`, `namePrefix`, `nameSuffix`) add to the kustomization of the path
/// they build, as their generators write it into that file: components after the
/// directory's own (paths relative to that path), a prefix or suffix in place of its own.
#[derive(Debug, Clone, Copy, Default)]
pub struct Layer<'a> {
    pub components: Option<&'a Node>,
    pub name_prefix: Option<&'a Node>,
    pub name_suffix: Option<&'a Node>,
}

/// Render `dir` with what a GitOps controller adds to its kustomization; a directory without
/// one is read as Flux and Argo CD read it, with the additions applied to its objects.
pub fn render_layer(repo: &Path, dir: &str, layer: &Layer<'_>) -> Result<Rendered, RepoError> {
    let extra = match layer.components {
        Some(components) => match components.as_seq() {
            Some(extra) => Some((components, extra)),
            None => {
                return Err(RepoError::new(
                    components.site.clone(),
                    "`spec.components` must be a list of paths",
                ));
            }
        },
        None => None,
    };
    if kustomization_file(repo, dir).is_some() {
        let mut k = Kustomization::load(repo, dir, 0, "is rendered")?;
        if let Value::Map(entries) = &mut k.node.value {
            if let Some((components, extra)) = extra {
                match entries.iter_mut().find(|(key, _)| key == "components") {
                    Some((
                        _,
                        Node {
                            value: Value::Seq(items),
                            ..
                        },
                    )) => items.extend(extra.iter().cloned()),
                    Some((_, other)) => *other = components.clone(),
                    None => entries.push(("components".to_string(), components.clone())),
                }
            }
            for (key, value) in [
                ("namePrefix", layer.name_prefix),
                ("nameSuffix", layer.name_suffix),
            ] {
                let Some(value) = value else {
                    continue;
                };
                match entries.iter_mut().find(|(k, _)| k == key) {
                    Some((_, old)) => *old = value.clone(),
                    None => entries.push((key.to_string(), value.clone())),
                }
            }
        }
        let mut out = Rendered::default();
        accumulate(repo, &k, &mut out, 0)?;
        names::finish(&mut out.objects)?;
        return Ok(out);
    }
    let mut out = autodetect(repo, dir)?;
    if let Some((components, _)) = extra {
        let k = Kustomization {
            dir: dir.to_string(),
            file: components.site.file.clone(),
            node: Node::new(
                Value::Map(vec![("components".to_string(), components.clone())]),
                components.site.clone(),
            ),
            component: false,
        };
        accumulate_components(repo, &k, &mut out, 0)?;
    }
    names::affix(&mut out.objects, layer.name_prefix, layer.name_suffix)?;
    names::finish(&mut out.objects)?;
    Ok(out)
}

/// One kustomization file, read and checked: a `Kustomization`, or a `Component` (which only
/// `components` may list).
struct Kustomization {
    dir: String,
    file: String,
    node: Node,
    component: bool,
}

impl Kustomization {
    fn load(
        repo: &Path,
        dir: &str,
        depth: usize,
        listed: &str,
    ) -> Result<Kustomization, RepoError> {
        if depth > 32 {
            return Err(RepoError::file(
                dir,
                "Kustomizations nest more than 32 deep (a cycle?)",
            ));
        }
        let Some(file) = kustomization_file(repo, dir) else {
            return Err(RepoError::file(
                dir,
                format!("no kustomization.yaml in this directory, which {listed}"),
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
        let node = docs.remove(0);
        let component = match node.get_str(&["kind"]).unwrap_or("Kustomization") {
            "Kustomization" => false,
            "Component" => true,
            other => {
                return Err(RepoError::new(
                    node.entry("kind")
                        .map(|k| k.site.clone())
                        .unwrap_or_default(),
                    format!("kind `{other}`: a kustomization is a Kustomization or a Component"),
                ));
            }
        };
        let (kind, want) = if component {
            ("Component", COMPONENT_VERSION)
        } else {
            ("Kustomization", KUSTOMIZATION_VERSION)
        };
        if let Some(api) = node.entry("apiVersion")
            && api.as_str() != Some(want)
        {
            return Err(RepoError::new(
                api.site.clone(),
                format!(
                    "apiVersion `{}`: Kustomize reads a {kind} only as {want}",
                    api.show()
                ),
            ));
        }
        Ok(Kustomization {
            dir: dir.to_string(),
            file,
            node,
            component,
        })
    }

    /// The list under `key`, empty when the key is absent.
    fn list(&self, key: &str) -> Result<&[Node], RepoError> {
        match self.node.entry(key) {
            Some(value) => list(value, &self.file, key),
            None => Ok(&[]),
        }
    }

    /// Refuse what gates does not evaluate; note what no trial reads.
    fn check_keys(&self, notes: &mut Vec<String>) -> Result<(), RepoError> {
        for (key, value) in self.node.as_map().unwrap_or_default() {
            if EVALUATED.contains(&key.as_str()) {
                continue;
            }
            if let Some((_, why)) = NOTED.iter().find(|(k, _)| k == key) {
                notes.push(format!("{}: `{key}` skipped: {why}", value.site));
                continue;
            }
            return Err(RepoError::new(
                value.site.clone(),
                format!(
                    "Kustomize `{key}` is not evaluated by gates; the trials would read objects it changes or creates, so it is refused rather than guessed"
                ),
            ));
        }
        Ok(())
    }
}

/// Kustomize's `accumulateTarget`: resources, generators, components, then this
/// kustomization's transformers over everything in `out`. A Component adds to the list it is
/// given; a Kustomization listed as a resource starts from an empty one.
fn accumulate(
    repo: &Path,
    k: &Kustomization,
    out: &mut Rendered,
    depth: usize,
) -> Result<(), RepoError> {
    k.check_keys(&mut out.notes)?;
    accumulate_resources(repo, k, out, depth)?;
    generators::run(repo, &k.dir, &k.file, &k.node, &mut out.objects)?;
    helm_charts::run(repo, &k.dir, &k.node, &mut out.objects)?;
    accumulate_components(repo, k, out, depth)?;
    transform(repo, k, out)
}

fn accumulate_resources(
    repo: &Path,
    k: &Kustomization,
    out: &mut Rendered,
    depth: usize,
) -> Result<(), RepoError> {
    for key in ["resources", "bases"] {
        for item in k.list(key)? {
            let (path, rel) = local_path(&k.dir, item, "a resource")?;
            let full = repo.join(&rel);
            if full.is_dir() {
                let child = Kustomization::load(
                    repo,
                    &rel,
                    depth + 1,
                    "a Kustomization lists as a resource",
                )?;
                if child.component {
                    return Err(RepoError::new(
                        item.site.clone(),
                        format!(
                            "`{path}` is a Component (kind: Component in {}); list it under `components`, not `{key}` (Kustomize refuses it there)",
                            child.file
                        ),
                    ));
                }
                let mut sub = Rendered::default();
                accumulate(repo, &child, &mut sub, depth + 1)?;
                out.objects.extend(sub.objects);
                out.notes.extend(sub.notes);
            } else if full.is_file() {
                let text = read(repo, &rel)?;
                for doc in yaml::parse_manifest(&rel, &text)? {
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
    Ok(())
}

/// Each component in order, over the objects accumulated so far.
fn accumulate_components(
    repo: &Path,
    k: &Kustomization,
    out: &mut Rendered,
    depth: usize,
) -> Result<(), RepoError> {
    for item in k.list("components")? {
        let (path, rel) = local_path(&k.dir, item, "a component")?;
        if !repo.join(&rel).is_dir() {
            return Err(RepoError::new(
                item.site.clone(),
                format!(
                    "component `{path}` is not a directory ({rel}); a component is a directory with a kind: Component kustomization"
                ),
            ));
        }
        let component = Kustomization::load(
            repo,
            &rel,
            depth + 1,
            "a Kustomization lists as a component",
        )?;
        if !component.component {
            return Err(RepoError::new(
                item.site.clone(),
                format!(
                    "`{path}` is a Kustomization, not a Component: {} needs `kind: Component` (apiVersion {COMPONENT_VERSION}) to be listed under `components` (Kustomize refuses it)",
                    component.file
                ),
            ));
        }
        accumulate(repo, &component, out, depth + 1)?;
    }
    Ok(())
}

/// A `resources` or `components` entry: the path as written and repository-relative.
fn local_path<'a>(dir: &str, item: &'a Node, what: &str) -> Result<(&'a str, String), RepoError> {
    let Some(path) = item.as_str() else {
        return Err(RepoError::new(
            item.site.clone(),
            format!("{what} must be a path"),
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
    Ok((path, resolve(dir, path, &item.site)?))
}

/// This kustomization's transformers over `out.objects`, in the order Kustomize runs its
/// builtin transformers (`kusttarget_configplugin.go`): strategic-merge patches, `patches`,
/// `namespace`, `labels` then `commonLabels`, `commonAnnotations`, JSON 6902 patches, `replicas`,
/// `replacements`.
fn transform(repo: &Path, k: &Kustomization, out: &mut Rendered) -> Result<(), RepoError> {
    let charts = out.objects.iter().any(helm_charts::is_placeholder);
    for item in k.list("patchesStrategicMerge")? {
        for patch_doc in patch_docs(repo, &k.dir, item)? {
            if charts && reaches_charts(&out.objects, &own_target(&patch_doc)) {
                helm_charts::patched_by(&mut out.objects, &patch_doc.site, "this patch");
                if !out
                    .objects
                    .iter()
                    .any(|o| own_target(&patch_doc).selects(o))
                {
                    continue;
                }
            }
            apply_strategic(&mut out.objects, &patch_doc, None)?;
            drop_deleted(&mut out.objects);
        }
    }
    for item in k.list("patches")? {
        if charts {
            let target = match item.entry("target") {
                Some(t) => Some(Target::read(Some(t), &item.site)?),
                None => None,
            };
            let reaches = match &target {
                Some(t) => reaches_charts(&out.objects, t),
                None => patch_source(repo, &k.dir, item)?
                    .iter()
                    .any(|doc| reaches_charts(&out.objects, &own_target(doc))),
            };
            if reaches {
                helm_charts::patched_by(&mut out.objects, &item.site, "this patch");
                if target.is_none() {
                    continue;
                }
            }
        }
        let missed = patch_entry(repo, &k.dir, item, &mut out.objects)?;
        drop_deleted(&mut out.objects);
        if !charts {
            note_miss(missed, &mut out.notes);
        }
    }
    if let Some(ns) = k.node.entry("namespace")
        && let Some(name) = ns.as_str()
    {
        set_namespace(&mut out.objects, name, &ns.site);
    }
    names::affix(
        &mut out.objects,
        k.node.entry("namePrefix"),
        k.node.entry("nameSuffix"),
    )?;
    for item in k.list("labels")? {
        labels::Labels::entry(item)?.apply(&mut out.objects);
    }
    if let Some(value) = k.node.entry("commonLabels") {
        labels::Labels::common(value)?.apply(&mut out.objects);
    }
    if let Some(value) = k.node.entry("commonAnnotations") {
        labels::annotate(value, &mut out.objects)?;
    }
    for item in k.list("patchesJson6902")? {
        let target = Target::read(item.entry("target"), &item.site)?;
        if charts && reaches_charts(&out.objects, &target) {
            helm_charts::patched_by(&mut out.objects, &item.site, "this patch");
        }
        for doc in patch_source(repo, &k.dir, item)? {
            let missed = apply_json(&mut out.objects, &doc, &target)?;
            if !charts {
                note_miss(missed, &mut out.notes);
            }
        }
    }
    for item in k.list("replicas")? {
        set_replicas(&mut out.objects, item, charts)?;
    }
    let reaching = replacements::run(repo, &k.dir, k.list("replacements")?, &mut out.objects)?;
    if charts {
        for (site, target) in reaching {
            if reaches_charts(&out.objects, &target) {
                helm_charts::patched_by(&mut out.objects, &site, "this replacement target");
            }
        }
    }
    Ok(())
}

/// The object an untargeted strategic-merge patch names.
fn own_target(doc: &Node) -> Target {
    Target {
        group: None,
        version: None,
        namespace: None,
        ..Target::of(doc)
    }
}

/// Whether a patch target may select objects a chart renders: it names no object, or names
/// one that is not among the other resources (a name Kustomize finds twice is an id clash, so
/// a target that found its object by name did not find a chart's).
fn reaches_charts(objects: &[Node], target: &Target) -> bool {
    target.name.is_none() || !objects.iter().any(|o| target.selects(o))
}

/// `replicas`; with a chart inflated in the build, a name not among the other resources may be
/// one of the chart's objects, which makes the chart's values unknown rather than an error.
fn set_replicas(objects: &mut [Node], item: &Node, charts: bool) -> Result<(), RepoError> {
    let (Some(name), Some(count)) = (item.get(&["name"]), item.get(&["count"])) else {
        return Err(RepoError::new(
            item.site.clone(),
            "a replicas entry needs `name` and `count`",
        ));
    };
    let mut found = false;
    for object in objects.iter_mut() {
        let kind = object.get_str(&["kind"]).unwrap_or_default();
        if ["Deployment", "StatefulSet", "ReplicaSet"].contains(&kind)
            && object.get_str(&["metadata", "name"]) == name.as_str()
        {
            set_path(object, &["spec", "replicas"], count.clone());
            found = true;
        }
    }
    if !found && charts {
        helm_charts::patched_by(objects, &item.site, "this replicas entry");
    } else if !found {
        return Err(RepoError::new(
            name.site.clone(),
            format!(
                "replicas: no Deployment or StatefulSet named `{}`",
                name.show()
            ),
        ));
    }
    Ok(())
}

/// What a patch with a `target` that selects nothing is. Kustomize applies it to nothing. In
/// a Kustomization gates refuses it (it is almost always a misspelt target, and the trials
/// would read values the author thinks are patched); a Component is written to be included
/// where some of its targets are absent, so there it is a note.
/// A targeted patch that selects nothing: Kustomize (v5.5, checked with `kubectl kustomize`)
/// applies it to nothing without an error, so it is noted, not refused. Flux relies on this
/// when a parent patches every child Kustomization with a patch for HelmReleases some
/// children do not have.
fn note_miss(missed: Option<Target>, notes: &mut Vec<String>) {
    if let Some(target) = missed {
        notes.push(format!(
            "{}: the patch targets {}, which none of the resources is; Kustomize applies it to nothing",
            target.site,
            target.describe()
        ));
    }
}

/// Whether Kustomize (and gates) leaves objects of this kind without a namespace.
pub fn is_cluster_scoped(kind: &str) -> bool {
    CLUSTER_SCOPED.contains(&kind)
}

/// Kustomize's namespace transformer, which `namespace:`, Flux `targetNamespace` and Argo CD
/// `kustomize.namespace` run: namespaced objects get the namespace; a `v1` Namespace is
/// renamed to it (the home-ops components that declare a Namespace named `_` rely on this);
/// RoleBinding and ClusterRoleBinding subjects named `default` and an APIService's service
/// get it (created where missing), and a CustomResourceDefinition's conversion webhook
/// service has it replaced where set.
pub fn set_namespace(objects: &mut [Node], namespace: &str, site: &Site) {
    if namespace.is_empty() {
        return;
    }
    let value = || Node::str(namespace, site.clone());
    for object in objects {
        back_references::store_previous_id(object);
        let kind = object.get_str(&["kind"]).unwrap_or_default().to_string();
        let api = object.get_str(&["apiVersion"]).unwrap_or_default();
        let group = api.rsplit_once('/').map_or("", |(g, _)| g).to_string();
        let version = api.rsplit('/').next().unwrap_or_default().to_string();
        if !CLUSTER_SCOPED.contains(&kind.as_str()) {
            set_path(object, &["metadata", "namespace"], value());
        }
        match (group.as_str(), version.as_str(), kind.as_str()) {
            ("", "v1", "Namespace") => set_path(object, &["metadata", "name"], value()),
            ("apiregistration.k8s.io", _, "APIService") => {
                set_path(object, &["spec", "service", "namespace"], value())
            }
            ("apiextensions.k8s.io", _, "CustomResourceDefinition") => {
                let path = ["spec", "conversion", "webhook", "clientConfig", "service"];
                if object
                    .get(&path)
                    .is_some_and(|service| service.entry("namespace").is_some())
                {
                    set_path(object, &[&path[..], &["namespace"]].concat(), value());
                }
            }
            (_, _, "RoleBinding" | "ClusterRoleBinding") => {
                if let Some(Value::Seq(subjects)) =
                    object.entry_mut("subjects").map(|s| &mut s.value)
                {
                    for subject in subjects
                        .iter_mut()
                        .filter(|s| s.get_str(&["name"]) == Some("default"))
                    {
                        set_path(subject, &["namespace"], value());
                    }
                }
            }
            _ => {}
        }
    }
}

/// Apply one entry of `patches` (Kustomize) or Flux `spec.patches`: `path` or inline `patch`,
/// with an optional `target`. A list is JSON 6902, a mapping a strategic merge (one with
/// `$patch: delete` removes what it reaches). A target that selects nothing is noted (see
/// [`note_miss`]).
pub fn apply_patch_entry(
    repo: &Path,
    dir: &str,
    item: &Node,
    objects: &mut Vec<Node>,
    notes: &mut Vec<String>,
) -> Result<(), RepoError> {
    note_miss(patch_entry(repo, dir, item, objects)?, notes);
    drop_deleted(objects);
    Ok(())
}

/// Remove the objects a strategic-merge patch with `$patch: delete` at its top level left
/// empty: Kustomize removes the objects such a patch reaches from the build.
fn drop_deleted(objects: &mut Vec<Node>) {
    objects.retain(|o| !o.is_null());
}

/// Like [`apply_patch_entry`]; a `target` that selected nothing is returned.
fn patch_entry(
    repo: &Path,
    dir: &str,
    item: &Node,
    objects: &mut [Node],
) -> Result<Option<Target>, RepoError> {
    let target = match item.entry("target") {
        Some(t) => Some(Target::read(Some(t), &item.site)?),
        None => None,
    };
    let mut missed = None;
    for doc in patch_source(repo, dir, item)? {
        let miss = match (&doc.value, &target) {
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
        };
        missed = missed.or(miss);
    }
    Ok(missed)
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
        if helm_charts::is_placeholder(object) {
            return false;
        }
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

/// A strategic-merge patch. Without a `target` it patches the object it names, which must
/// exist (Kustomize's `GetById`); with one, a target that selected nothing is returned.
fn apply_strategic(
    objects: &mut [Node],
    doc: &Node,
    target: Option<&Target>,
) -> Result<Option<Target>, RepoError> {
    let own;
    let selector = match target {
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
    for object in objects.iter_mut().filter(|o| selector.selects(o)) {
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
    match (hit, target) {
        (true, _) => Ok(None),
        (false, Some(target)) => Ok(Some(target.clone())),
        (false, None) => Err(RepoError::new(
            doc.site.clone(),
            format!(
                "the patch targets {}, which is not among the resources",
                selector.describe()
            ),
        )),
    }
}

/// A JSON 6902 patch on every object the target selects; a target that selected nothing is
/// returned.
fn apply_json(
    objects: &mut [Node],
    ops: &Node,
    target: &Target,
) -> Result<Option<Target>, RepoError> {
    let mut hit = false;
    for object in objects.iter_mut().filter(|o| target.selects(o)) {
        hit = true;
        patch::json6902(object, ops)?;
    }
    Ok((!hit).then(|| target.clone()))
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
    let mut out = Rendered::default();
    for (path, name) in entries(repo, dir, "the directory")? {
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
                    object: None,
                }),
            }
        } else if name.ends_with(".yaml") || name.ends_with(".yml") {
            let text = read(repo, &rel)?;
            for doc in yaml::parse_manifest(&rel, &text)? {
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
/// The entries of the repository directory `dir`, sorted, each with its file name; `what`
/// names the directory in the error.
pub fn entries(repo: &Path, dir: &str, what: &str) -> Result<Vec<(PathBuf, String)>, RepoError> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(repo.join(dir))
        .map_err(|err| RepoError::file(dir, format!("cannot read {what}: {err}")))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    paths.sort();
    Ok(paths
        .into_iter()
        .map(|path| {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (path, name)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::repo::testing::repo;

    const RELEASE: &str = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: traefik\nspec:\n  values:\n    service:\n      spec:\n        externalTrafficPolicy: Local\n";

    #[test]
    fn a_reference_that_may_name_two_renamed_objects_is_refused_at_its_line_as_kustomize_refuses_it()
     {
        let dir = repo(&[
            (
                "a/kustomization.yaml",
                "namespace: a\nconfigMapGenerator:\n  - name: settings\n    literals: [X=1]\n",
            ),
            (
                "b/kustomization.yaml",
                "namespace: b\nconfigMapGenerator:\n  - name: settings\n    literals: [X=2]\n",
            ),
            (
                "top/kustomization.yaml",
                "resources: [../a, ../b, role.yaml]\n",
            ),
            (
                "top/role.yaml",
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\nrules:\n  - resources: [configmaps]\n    resourceNames: [settings]\n",
            ),
        ]);
        let err = render(dir.path(), "top").unwrap_err().to_string();
        assert!(err.starts_with("top/role.yaml:6:"), "{err}");
        assert!(
            err.contains("a/settings-") && err.contains("b/settings-"),
            "{err}"
        );
        // Each alone is one candidate, renamed to its hashed name.
        let dir = repo(&[
            (
                "a/kustomization.yaml",
                "namespace: a\nconfigMapGenerator:\n  - name: settings\n    literals: [X=1]\n",
            ),
            ("top/kustomization.yaml", "resources: [../a, role.yaml]\n"),
            (
                "top/role.yaml",
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\nrules:\n  - resources: [configmaps]\n    resourceNames: [settings]\n",
            ),
        ]);
        let out = render(dir.path(), "top").unwrap();
        let role = out
            .objects
            .iter()
            .find(|o| o.get_str(&["kind"]) == Some("ClusterRole"))
            .unwrap();
        let names = role.get(&["rules"]).unwrap().as_seq().unwrap()[0]
            .get(&["resourceNames"])
            .unwrap();
        assert!(
            names.as_seq().unwrap()[0]
                .as_str()
                .unwrap()
                .starts_with("settings-")
        );
    }

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
    fn remote_bases_are_errors_naming_the_file_and_line() {
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

    fn chart<'a>(out: &'a Rendered, name: &str) -> &'a Node {
        out.objects
            .iter()
            .find(|o| {
                helm_charts::is_placeholder(o) && o.get_str(&["metadata", "name"]) == Some(name)
            })
            .unwrap_or_else(|| panic!("no chart {name} in {:?}", out.objects))
    }

    #[test]
    fn a_helm_chart_is_read_as_its_chart_and_values_with_the_lines_that_set_them() {
        let dir = repo(&[
            (
                "env/kustomization.yaml",
                "namespace: net\nhelmCharts:\n  - name: cilium\n    repo: https://example.invalid\n    releaseName: cni\n    valuesFile: values.yaml\n    valuesInline:\n      operator:\n        replicas: 3\n    additionalValuesFiles: [more.yaml]\n",
            ),
            (
                "env/values.yaml",
                "operator:\n  replicas: 1\n  podDisruptionBudget:\n    enabled: true\nhubble:\n  enabled: false\n",
            ),
            ("env/more.yaml", "hubble:\n  enabled: true\n"),
        ]);
        let out = render(dir.path(), "env").unwrap();
        let c = chart(&out, "cni");
        assert_eq!(c.get_str(&["spec", "chart"]), Some("cilium"));
        // The kustomization's namespace reaches the chart, as it reaches its objects.
        assert_eq!(c.get_str(&["metadata", "namespace"]), Some("net"));
        let values = c.get(&["spec", "values"]).unwrap();
        let replicas = values.get(&["operator", "replicas"]).unwrap();
        assert_eq!(
            replicas.as_i64(),
            Some(3),
            "inline overrides the file by default"
        );
        assert_eq!(replicas.site.to_string(), "env/kustomization.yaml:9");
        let pdb = values
            .get(&["operator", "podDisruptionBudget", "enabled"])
            .unwrap();
        assert_eq!(pdb.site.to_string(), "env/values.yaml:4");
        assert_eq!(
            values.get(&["hubble", "enabled"]).and_then(Node::as_bool),
            Some(true),
            "additional values files come last"
        );
    }

    #[test]
    fn values_merge_keeps_the_files_values_and_replace_drops_the_file() {
        let with = |merge: &str| {
            let dir = repo(&[
                (
                    "env/kustomization.yaml",
                    &format!(
                        "helmCharts:\n  - name: traefik\n    valuesFile: values.yaml\n    valuesMerge: {merge}\n    valuesInline:\n      deployment:\n        replicas: 3\n"
                    ),
                ),
                (
                    "env/values.yaml",
                    "deployment:\n  replicas: 1\npodDisruptionBudget:\n  enabled: true\n",
                ),
            ]);
            let out = render(dir.path(), "env").unwrap();
            chart(&out, "traefik")
                .get(&["spec", "values"])
                .unwrap()
                .clone()
        };
        let merged = with("merge");
        assert_eq!(
            merged
                .get(&["deployment", "replicas"])
                .and_then(Node::as_i64),
            Some(1)
        );
        assert!(merged.get(&["podDisruptionBudget", "enabled"]).is_some());
        let replaced = with("replace");
        assert_eq!(
            replaced
                .get(&["deployment", "replicas"])
                .and_then(Node::as_i64),
            Some(3)
        );
        assert!(replaced.get(&["podDisruptionBudget"]).is_none());
        let dir = repo(&[(
            "env/kustomization.yaml",
            "helmCharts:\n  - name: traefik\n    valuesMerge: mix\n",
        )]);
        let err = render(dir.path(), "env").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("env/kustomization.yaml:3: valuesMerge `mix`"),
            "{err}"
        );
    }

    #[test]
    fn a_patch_that_may_reach_the_charts_objects_makes_its_values_unknown_naming_the_patch() {
        let with = |patches: &str| {
            let dir = repo(&[
                (
                    "env/kustomization.yaml",
                    &format!("resources: [r.yaml]\nhelmCharts:\n  - name: traefik\n{patches}"),
                ),
                ("env/r.yaml", RELEASE),
            ]);
            let out = render(dir.path(), "env").unwrap();
            chart(&out, "traefik")
                .get_str(&["spec", "unknown"])
                .map(str::to_string)
        };
        // A patch of an object among the resources, by name, cannot reach the chart's.
        assert_eq!(
            with(
                "patches:\n  - target:\n      kind: HelmRelease\n      name: traefik\n    patch: |-\n      - op: add\n        path: /spec/suspend\n        value: true\n"
            ),
            None
        );
        // One naming an object that is not among them, or naming none, may.
        let why = with("patches:\n  - target:\n      kind: Deployment\n      name: traefik\n    patch: |-\n      - op: add\n        path: /spec/replicas\n        value: 1\n").unwrap();
        assert!(
            why.starts_with(
                "env/kustomization.yaml:5: this patch may change the objects chart traefik renders"
            ),
            "{why}"
        );
        assert!(with("patches:\n  - target:\n      kind: Deployment\n    patch: |-\n      - op: add\n        path: /spec/replicas\n        value: 1\n").is_some());
        assert!(with("replicas:\n  - name: traefik\n    count: 1\n").is_some());
        assert!(with("patchesStrategicMerge:\n  - |-\n    apiVersion: apps/v1\n    kind: Deployment\n    metadata:\n      name: traefik\n    spec:\n      replicas: 1\n").is_some());
    }

    #[test]
    fn helm_chart_entries_with_unknown_keys_or_missing_files_are_errors_at_their_lines() {
        let dir = repo(&[(
            "env/kustomization.yaml",
            "helmCharts:\n  - name: a\n    valuesFiel: v.yaml\n  - name: b\n    valuesFile: missing.yaml\n",
        )]);
        let err = render(dir.path(), "env").unwrap_err().to_string();
        assert!(err.contains("unknown key(s) `valuesFiel`"), "{err}");
        assert!(
            err.contains("env/kustomization.yaml:5: values file `missing.yaml` does not exist"),
            "{err}"
        );
    }

    #[test]
    fn a_replacement_copies_the_sources_value_with_its_line_and_refuses_an_ambiguous_source() {
        let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: v\ndata:\n  count: '3'\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n";
        let with = |replacements: &str| {
            let dir = repo(&[
                (
                    "env/kustomization.yaml",
                    &format!("resources: [r.yaml]\nreplacements:\n{replacements}"),
                ),
                ("env/r.yaml", cm),
            ]);
            render(dir.path(), "env")
        };
        let out = with("  - source: {kind: ConfigMap, name: v, fieldPath: data.count}\n    targets:\n      - select: {kind: Deployment}\n        fieldPaths: [spec.replicas]\n").unwrap();
        let replicas = find(&out.objects, "Deployment", "web")
            .get(&["spec", "replicas"])
            .unwrap()
            .clone();
        assert_eq!(replicas.as_i64(), Some(3), "the number keeps its style");
        assert_eq!(
            replicas.site.to_string(),
            "env/r.yaml:6",
            "the line that set the value"
        );
        let err = with("  - source: {kind: ConfigMap, name: nope}\n    targets: []\n").unwrap_err();
        assert!(
            err.to_string().starts_with(
                "env/kustomization.yaml:3: replacement source ConfigMap/nope selects nothing"
            ),
            "{err}"
        );
        let err = with("  - source: {kind: ConfigMap}\n    targets:\n      - select: {kind: Deployment}\n        fieldPaths: ['spec.template.spec.containers.*.image']\n").unwrap_err();
        assert!(
            err.to_string().contains("is not evaluated by gates"),
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

    const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  template:\n    spec:\n      containers:\n        - name: web\n          envFrom:\n            - configMapRef:\n                name: web-env\n      volumes:\n        - name: conf\n          configMap:\n            name: web-conf\n        - name: token\n          secret:\n            secretName: web-token\n";

    fn find<'a>(objects: &'a [Node], kind: &str, prefix: &str) -> &'a Node {
        objects
            .iter()
            .find(|o| {
                o.get_str(&["kind"]) == Some(kind)
                    && o.get_str(&["metadata", "name"])
                        .is_some_and(|n| n.starts_with(prefix))
            })
            .unwrap_or_else(|| panic!("no {kind} {prefix}* in {objects:?}"))
    }

    const COMPONENT: &str = "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n";

    #[test]
    fn a_component_adds_its_resources_and_patches_the_including_kustomizations_objects() {
        let dir = repo(&[
            (
                "app/kustomization.yaml",
                "namespace: media\nresources: [d.yaml]\ncomponents:\n  - ../common\n",
            ),
            ("app/d.yaml", DEPLOYMENT),
            (
                "common/kustomization.yaml",
                &format!(
                    "{COMPONENT}resources: [np.yaml]\npatches:\n  - target: {{kind: Deployment}}\n    patch: |\n      - op: replace\n        path: /spec/replicas\n        value: 3\n"
                ),
            ),
            (
                "common/np.yaml",
                "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: deny}\nspec: {podSelector: {}}\n",
            ),
        ]);
        let out = render(dir.path(), "app").unwrap();
        let replicas = find(&out.objects, "Deployment", "web")
            .get(&["spec", "replicas"])
            .unwrap();
        assert_eq!(
            (replicas.as_i64(), replicas.site.to_string().as_str()),
            (Some(3), "common/kustomization.yaml:9")
        );
        // The parent's namespace runs after the component, over the component's objects too.
        let np = find(&out.objects, "NetworkPolicy", "deny");
        assert_eq!(np.get_str(&["metadata", "namespace"]), Some("media"));
    }

    #[test]
    fn nested_components_run_before_the_component_that_lists_them_and_the_parent_runs_last() {
        let patch = |value: u32| {
            format!(
                "patches:\n  - target: {{kind: Deployment, name: web}}\n    patch: |\n      - op: replace\n        path: /spec/replicas\n        value: {value}\n"
            )
        };
        let dir = repo(&[
            (
                "app/kustomization.yaml",
                &format!("resources: [d.yaml]\ncomponents: [../outer]\n{}", patch(4)),
            ),
            ("app/d.yaml", DEPLOYMENT),
            (
                "outer/kustomization.yaml",
                &format!("{COMPONENT}components: [../inner]\n{}", patch(3)),
            ),
            (
                "inner/kustomization.yaml",
                &format!("{COMPONENT}{}", patch(2)),
            ),
        ]);
        let out = render(dir.path(), "app").unwrap();
        let replicas = out.objects[0].get(&["spec", "replicas"]).unwrap();
        assert_eq!(
            (replicas.as_i64(), replicas.site.to_string().as_str()),
            (Some(4), "app/kustomization.yaml:8")
        );
        let out = render(dir.path(), "outer").unwrap();
        assert!(out.objects.is_empty());
        assert_eq!(out.notes.len(), 2, "{:?}", out.notes);
        assert!(
            out.notes[0].contains("which none of the resources is"),
            "{:?}",
            out.notes
        );
    }

    #[test]
    fn a_component_under_resources_or_a_kustomization_under_components_is_refused_as_kustomize_refuses_it()
     {
        let dir = repo(&[
            ("app/kustomization.yaml", "resources:\n  - ../common\n"),
            ("common/kustomization.yaml", COMPONENT),
        ]);
        let err = render(dir.path(), "app").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("app/kustomization.yaml:2: `../common` is a Component"),
            "{err}"
        );
        let dir = repo(&[
            ("app/kustomization.yaml", "components:\n  - ../base\n"),
            ("base/kustomization.yaml", "resources: []\n"),
        ]);
        let err = render(dir.path(), "app").unwrap_err();
        assert!(
            err.to_string().starts_with(
                "app/kustomization.yaml:2: `../base` is a Kustomization, not a Component"
            ),
            "{err}"
        );
        let dir = repo(&[
            ("app/kustomization.yaml", "components: [../c]\n"),
            (
                "c/kustomization.yaml",
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Component\n",
            ),
        ]);
        let err = render(dir.path(), "app").unwrap_err();
        assert!(
            err.to_string().starts_with("c/kustomization.yaml:1"),
            "{err}"
        );
        assert!(err.message.contains("v1alpha1"), "{err}");
    }

    #[test]
    fn a_config_map_generator_keeps_the_line_of_each_literal_env_line_and_file() {
        let dir = repo(&[
            (
                "app/kustomization.yaml",
                "configMapGenerator:\n  - name: web-conf\n    envs: [app.env]\n    literals:\n      - TZ=\"Europe/Berlin\"\n    files:\n      - values.yaml=helm/values.yaml\n    options:\n      disableNameSuffixHash: true\n",
            ),
            ("app/app.env", "# comment\n\nLOG=debug\nFLAG\n"),
            ("app/helm/values.yaml", "replicas: 2\n"),
        ]);
        let out = render(dir.path(), "app").unwrap();
        let cm = find(&out.objects, "ConfigMap", "web-conf");
        let at = |key: &str| {
            let node = cm.get(&["data", key]).unwrap();
            (node.as_str().unwrap().to_string(), node.site.to_string())
        };
        assert_eq!(cm.get_str(&["metadata", "name"]), Some("web-conf"));
        assert_eq!(
            cm.get(&["metadata", "name"]).unwrap().site.to_string(),
            "app/kustomization.yaml:2"
        );
        assert_eq!(
            at("TZ"),
            ("Europe/Berlin".into(), "app/kustomization.yaml:5".into())
        );
        assert_eq!(at("LOG"), ("debug".into(), "app/app.env:3".into()));
        assert_eq!(at("FLAG"), (String::new(), "app/app.env:4".into()));
        // A file's content is the file's: Helm values read from it keep their own lines.
        assert_eq!(
            at("values.yaml"),
            ("replicas: 2\n".into(), "app/helm/values.yaml".into())
        );
        assert!(cm.get(&["metadata", "annotations"]).is_none(), "{cm:?}");
    }

    #[test]
    fn generated_names_get_kustomizes_content_hash_unless_an_option_disables_it() {
        // The suffixes kubectl kustomize (Kustomize v5.5) prints for these generators.
        let dir = repo(&[(
            "app/kustomization.yaml",
            "configMapGenerator:\n  - name: a\n    literals: [k=v]\n  - name: empty\nsecretGenerator:\n  - name: a\n    literals: [k=v]\n",
        )]);
        let out = render(dir.path(), "app").unwrap();
        let names: Vec<&str> = out
            .objects
            .iter()
            .filter_map(|o| o.get_str(&["metadata", "name"]))
            .collect();
        assert_eq!(names, ["a-bdg947hgcc", "empty-6ct58987ht", "a-ftgtgc4t9f"]);
        let secret = find(&out.objects, "Secret", "a-");
        assert_eq!(secret.get_str(&["data", "k"]), Some("dg=="));
        assert_eq!(secret.get_str(&["type"]), Some("Opaque"));
        let dir = repo(&[(
            "app/kustomization.yaml",
            "generatorOptions:\n  disableNameSuffixHash: true\n  labels: {team: media}\nconfigMapGenerator:\n  - name: a\n    literals: [k=v]\n    options:\n      labels: {team: tools}\n",
        )]);
        let out = render(dir.path(), "app").unwrap();
        assert_eq!(out.objects[0].get_str(&["metadata", "name"]), Some("a"));
        assert_eq!(
            out.objects[0].get_str(&["metadata", "labels", "team"]),
            Some("tools")
        );
    }

    #[test]
    fn pod_template_references_to_a_generated_name_follow_its_hash_in_the_same_namespace() {
        let cronjob = "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly, namespace: other}\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers:\n            - name: job\n              env:\n                - name: A\n                  valueFrom:\n                    configMapKeyRef: {name: web-env, key: A}\n";
        let dir = repo(&[
            (
                "app/kustomization.yaml",
                "resources: [d.yaml, c.yaml]\nconfigMapGenerator:\n  - name: web-env\n    literals: [A=1]\n  - name: web-conf\n    literals: [B=2]\n    options: {disableNameSuffixHash: true}\nsecretGenerator:\n  - name: web-token\n    literals: [t=x]\n",
            ),
            ("app/d.yaml", DEPLOYMENT),
            ("app/c.yaml", cronjob),
        ]);
        let out = render(dir.path(), "app").unwrap();
        let env = find(&out.objects, "ConfigMap", "web-env-");
        let env_name = env.get_str(&["metadata", "name"]).unwrap();
        let token = find(&out.objects, "Secret", "web-token-");
        let web = find(&out.objects, "Deployment", "web");
        let spec = web.get(&["spec", "template", "spec"]).unwrap();
        let refs = &spec.get(&["containers"]).unwrap().as_seq().unwrap()[0];
        let from = &refs.get(&["envFrom"]).unwrap().as_seq().unwrap()[0];
        assert_eq!(from.get_str(&["configMapRef", "name"]), Some(env_name));
        assert_eq!(
            from.get(&["configMapRef", "name"])
                .unwrap()
                .site
                .to_string(),
            "app/d.yaml:13"
        );
        let volumes = spec.get(&["volumes"]).unwrap().as_seq().unwrap();
        assert_eq!(volumes[0].get_str(&["configMap", "name"]), Some("web-conf"));
        assert_eq!(
            volumes[1].get_str(&["secret", "secretName"]),
            token.get_str(&["metadata", "name"])
        );
        // The CronJob is in another namespace: its reference is not to this ConfigMap.
        let nightly = find(&out.objects, "CronJob", "nightly")
            .to_json()
            .to_string();
        assert!(nightly.contains("\"name\":\"web-env\""), "{nightly}");
    }

    #[test]
    fn behavior_merge_adds_to_the_bases_data_and_replace_drops_it() {
        let dir = repo(&[
            (
                "base/kustomization.yaml",
                "configMapGenerator:\n  - name: conf\n    literals: [A=1, B=2]\n    options:\n      labels: {from: base}\nsecretGenerator:\n  - name: tok\n    literals: [old=x]\n",
            ),
            (
                "env/kustomization.yaml",
                "resources: [../base]\nconfigMapGenerator:\n  - name: conf\n    behavior: merge\n    literals: [B=3]\nsecretGenerator:\n  - name: tok\n    behavior: replace\n    literals: [new=y]\n",
            ),
        ]);
        let out = render(dir.path(), "env").unwrap();
        let conf = find(&out.objects, "ConfigMap", "conf-");
        assert_eq!(conf.get_str(&["data", "A"]), Some("1"));
        let b = conf.get(&["data", "B"]).unwrap();
        assert_eq!((b.as_str(), b.site.line), (Some("3"), 5));
        assert_eq!(conf.get_str(&["metadata", "labels", "from"]), Some("base"));
        let tok = find(&out.objects, "Secret", "tok-");
        assert!(tok.get(&["data", "old"]).is_none(), "{tok:?}");
        assert_eq!(tok.get_str(&["data", "new"]), Some("eQ=="));
        let dir = repo(&[(
            "env/kustomization.yaml",
            "configMapGenerator:\n  - name: conf\n    behavior: merge\n",
        )]);
        let err = render(dir.path(), "env").unwrap_err();
        assert!(
            err.to_string().starts_with("env/kustomization.yaml:2"),
            "{err}"
        );
        let dir = repo(&[(
            "env/kustomization.yaml",
            "configMapGenerator:\n  - name: conf\n  - name: conf\n",
        )]);
        let err = render(dir.path(), "env").unwrap_err();
        assert!(err.message.contains("already among the resources"), "{err}");
    }

    #[test]
    fn generator_files_outside_the_kustomization_and_unknown_fields_are_refused() {
        let dir = repo(&[
            (
                "app/kustomization.yaml",
                "configMapGenerator:\n  - name: a\n    files: [../common/x.conf]\n",
            ),
            ("common/x.conf", "x"),
        ]);
        let err = render(dir.path(), "app").unwrap_err();
        assert!(err.message.contains("outside the kustomization"), "{err}");
        let dir = repo(&[(
            "app/kustomization.yaml",
            "configMapGenerator:\n  - name: a\n    kv: [x]\n",
        )]);
        let err = render(dir.path(), "app").unwrap_err();
        assert!(
            err.to_string().starts_with("app/kustomization.yaml:3"),
            "{err}"
        );
    }
}
