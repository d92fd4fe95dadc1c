//! An environment's manifests as Flux applies them: from the environment's entry directory
//! (`clusters/staging`), every Flux `Kustomization` whose source is this repository is
//! followed to its `spec.path`, rendered, patched with its `spec.patches`, placed in its
//! `targetNamespace` and given its `commonMetadata` labels and annotations (on each object's
//! metadata, with the line that set them). HelmReleases get their effective values: `valuesFrom` ConfigMaps and
//! Secrets that live in the repository, in order, then `spec.values`, each value with the
//! file and line that set it last.
//!
//! `postBuild` substitutions are applied (see [`super::substitute`]) and `spec.components`
//! added to the path's kustomization. A source in another repository is skipped with the
//! reason; name prefixes or suffixes are errors naming the file; `images` is noted, since no trial reads image tags. A Flux
//! Kustomization that cannot be read is set aside with the kinds it may hold
//! ([`super::unread`]), so only the trials that read those kinds become errors.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use base64::Engine;

use super::argocd;
use super::kustomize::{self, Rendered, helm_charts};
use super::patch;
use super::site::{RepoError, Site};
use super::substitute::Vars;
use super::unread::{self, Unread};
use super::yaml::{self, Node, Value};

// What an environment renders to is pure: it lives in core.
pub use gates_core::declared::manifests::{HelmRelease, Manifests};

const FLUX_KUSTOMIZATION: &str = "kustomize.toolkit.fluxcd.io/";
const HELM_RELEASE: &str = "helm.toolkit.fluxcd.io/";

/// Render an environment from its entry directory, following the Flux Kustomizations whose
/// source is `flux-system`.
pub fn render(repo: &Path, entry: &str) -> Result<Manifests, RepoError> {
    render_from(repo, entry, &["flux-system".to_string()])
}

/// Render an environment from its entry directory. `sources`: the GitRepository names that
/// are this repository; a GitRepository declared in the repository whose URL is the
/// checkout's `origin` remote counts too.
pub fn render_from(repo: &Path, entry: &str, sources: &[String]) -> Result<Manifests, RepoError> {
    let origin = origin_url(repo);
    let mut out = Manifests::default();
    let mut seen = BTreeSet::new();
    let entry = kustomize::resolve("", entry, &Site::new(entry, 0))?;
    if !repo.join(&entry).is_dir() {
        return Err(RepoError::file(
            &entry,
            "the environment's entry directory does not exist",
        ));
    }
    seen.insert(entry.clone());
    let first = kustomize::autodetect(repo, &entry)?;
    let mut queue = vec![first];
    let mut index: Option<Vec<Node>> = None;
    while let Some(rendered) = queue.pop() {
        out.notes.extend(rendered.notes);
        out.unread.extend(rendered.unread);
        // The whole batch first: a Kustomization's substituteFrom may name a ConfigMap
        // written after it in the same directory.
        let start = out.objects.len();
        out.objects.extend(rendered.objects);
        for position in start..out.objects.len() {
            let object = out.objects[position].clone();
            if is_flux_kustomization(&object) {
                let sources_names = sources;
                let sources = Sources {
                    repo,
                    rendered: &out.objects,
                    index: &mut index,
                };
                let ours = Ours {
                    names: sources_names,
                    origin: origin.as_deref(),
                    objects: &out.objects,
                };
                match follow(repo, &object, &mut seen, &mut out.notes, sources, &ours) {
                    Ok(Some(next)) => queue.push(next),
                    Ok(None) => {}
                    Err(error) => out.unread.push(Unread {
                        error,
                        kinds: unread::kinds_under(repo, &flux_path(&object)),
                        object: None,
                    }),
                }
            } else if argocd::is_application_set(&object) || argocd::is_application(&object) {
                let is_ours = |url: &str| ours_url(url, sources, origin.as_deref());
                if argocd::is_application_set(&object) {
                    match argocd::expand(repo, &object, &is_ours, &mut out.notes) {
                        Ok(apps) => queue.push(Rendered {
                            objects: apps,
                            ..Rendered::default()
                        }),
                        Err(error) => out.unread.push(Unread {
                            error,
                            kinds: unread::Kinds::Any,
                            object: None,
                        }),
                    }
                } else {
                    match argocd::follow(repo, &object, &mut seen, &mut out.notes, &is_ours) {
                        Ok(Some(next)) => queue.push(next),
                        Ok(None) => {}
                        Err(error) => out.unread.push(Unread {
                            error,
                            kinds: argocd::source_path(&object)
                                .filter(|p| repo.join(p).is_dir())
                                .map(|p| unread::kinds_under(repo, &p))
                                .unwrap_or(unread::Kinds::Any),
                            object: None,
                        }),
                    }
                }
            }
        }
    }
    let objects = once_each(std::mem::take(&mut out.objects), &mut out.notes);
    let (charts, objects): (Vec<Node>, Vec<Node>) =
        objects.into_iter().partition(helm_charts::is_placeholder);
    out.objects = objects;
    out.helm_releases = out
        .objects
        .iter()
        .filter(|o| {
            o.get_str(&["kind"]) == Some("HelmRelease")
                && o.get_str(&["apiVersion"])
                    .is_some_and(|a| a.starts_with(HELM_RELEASE))
        })
        .map(|o| helm_release(o, &out.objects))
        .chain(charts.iter().map(inflated))
        .collect();
    Ok(out)
}

/// Each object once. The same declaration reached through two Flux Kustomizations or Argo CD
/// Applications (a directory both include) is one object with two owners: it is kept once and
/// named as doubly owned. Two different declarations of one object are both kept and named:
/// which the cluster holds depends on the order they are applied.
fn once_each(objects: Vec<Node>, notes: &mut Vec<String>) -> Vec<Node> {
    let id = |o: &Node| {
        let api = o.get_str(&["apiVersion"]).unwrap_or_default();
        let group = api.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
        (
            group.to_string(),
            o.get_str(&["kind"]).unwrap_or_default().to_string(),
            o.get_str(&["metadata", "namespace"])
                .unwrap_or_default()
                .to_string(),
            o.get_str(&["metadata", "name"])
                .unwrap_or_default()
                .to_string(),
        )
    };
    let mut first: BTreeMap<(String, String, String, String), Site> = BTreeMap::new();
    let mut kept = Vec::with_capacity(objects.len());
    for object in objects {
        let key = id(&object);
        if key.3.is_empty() {
            kept.push(object);
            continue;
        }
        match first.get(&key) {
            Some(site) if *site == object.site => {
                notes.push(format!(
                    "{}: {} {}/{} is reached twice, through two Kustomizations or Applications that both include it: it is doubly owned (both apply it, and pruning by one removes it from the other); read once",
                    object.site, key.1, key.2, key.3
                ));
            }
            Some(site) => {
                notes.push(format!(
                    "{}: {} {}/{} is declared again (first at {site}); which declaration the cluster holds depends on the order they are applied",
                    object.site, key.1, key.2, key.3
                ));
                kept.push(object);
            }
            None => {
                first.insert(key, object.site.clone());
                kept.push(object);
            }
        }
    }
    kept
}

/// Which GitRepository names are this repository.
struct Ours<'a> {
    names: &'a [String],
    origin: Option<&'a str>,
    objects: &'a [Node],
}

impl Ours<'_> {
    fn is(&self, name: &str) -> bool {
        if self.names.iter().any(|n| n == name) {
            return true;
        }
        let Some(origin) = self.origin else {
            return false;
        };
        self.objects.iter().any(|o| {
            o.get_str(&["kind"]) == Some("GitRepository")
                && o.get_str(&["metadata", "name"]) == Some(name)
                && o.get_str(&["spec", "url"]).map(normal_url).as_deref() == Some(origin)
        })
    }
}

/// Whether an Argo CD `repoURL` is this repository: the checkout's origin URL, or a URL
/// listed in `repo.sources`.
fn ours_url(url: &str, sources: &[String], origin: Option<&str>) -> bool {
    let url = normal_url(url);
    origin == Some(url.as_str())
        || sources
            .iter()
            .any(|s| s.contains('/') && normal_url(s) == url)
}

/// The checkout's `origin` URL from `.git/config`, normalized.
fn origin_url(repo: &Path) -> Option<String> {
    let config = std::fs::read_to_string(repo.join(".git/config")).ok()?;
    let mut in_origin = false;
    for line in config.lines().map(str::trim) {
        if line.starts_with('[') {
            in_origin = line == "[remote \"origin\"]";
        } else if in_origin && let Some(url) = line.strip_prefix("url") {
            return Some(normal_url(url.trim_start().trim_start_matches('=').trim()));
        }
    }
    None
}

/// `host/owner/name` of a Git URL, whether written `https://`, `ssh://git@` or `git@host:`.
fn normal_url(url: &str) -> String {
    let url = url.trim().trim_end_matches('/').trim_end_matches(".git");
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    rest.replacen(':', "/", 1).to_lowercase()
}

/// A Flux Kustomization's `spec.path`, repository-relative (`.` when left out).
fn flux_path(ks: &Node) -> String {
    let path = ks.get_str(&["spec", "path"]).unwrap_or(".");
    kustomize::resolve("", path, &ks.site).unwrap_or_else(|_| path.to_string())
}

fn is_flux_kustomization(object: &Node) -> bool {
    object.get_str(&["kind"]) == Some("Kustomization")
        && object
            .get_str(&["apiVersion"])
            .is_some_and(|a| a.starts_with(FLUX_KUSTOMIZATION))
}

/// Where `postBuild.substituteFrom` objects are found: among the objects rendered so far,
/// else among every ConfigMap and Secret file of the repository (read once, when first
/// needed), since Flux reads them from the cluster whichever Kustomization applied them.
struct Sources<'a> {
    repo: &'a Path,
    rendered: &'a [Node],
    index: &'a mut Option<Vec<Node>>,
}

impl Sources<'_> {
    fn find(&mut self, kind: &str, name: &str, namespace: &str) -> Option<Node> {
        let matches = |o: &&Node| {
            o.get_str(&["kind"]) == Some(kind)
                && o.get_str(&["metadata", "name"]) == Some(name)
                && o.get_str(&["metadata", "namespace"])
                    .is_none_or(|n| n == namespace)
        };
        if let Some(found) = self.rendered.iter().find(matches) {
            return Some(found.clone());
        }
        let repo = self.repo;
        let index = self.index.get_or_insert_with(|| config_objects(repo));
        let mut candidates = index.iter().filter(matches);
        let first = candidates.next()?;
        // Two different files defining it: which one Flux applied is not known here.
        candidates.next().is_none().then(|| first.clone())
    }
}

/// Every ConfigMap and Secret document of the repository's YAML files.
fn config_objects(repo: &Path) -> Vec<Node> {
    let mut out = Vec::new();
    let mut stack = vec![repo.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with('.') && name != "node_modules" {
                    stack.push(path);
                }
                continue;
            }
            if !(name.ends_with(".yaml") || name.ends_with(".yml")) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            if !(text.contains("kind: ConfigMap") || text.contains("kind: Secret")) {
                continue;
            }
            let rel = path
                .strip_prefix(repo)
                .map(|p| p.to_string_lossy().replace('\\', "/"))
                .unwrap_or_default();
            if let Ok(docs) = yaml::parse(&rel, &text) {
                out.extend(
                    docs.into_iter()
                        .filter(|d| matches!(d.get_str(&["kind"]), Some("ConfigMap" | "Secret"))),
                );
            }
        }
    }
    out
}

/// Render the path of one Flux Kustomization, or note why it is not followed.
fn follow(
    repo: &Path,
    ks: &Node,
    seen: &mut BTreeSet<String>,
    notes: &mut Vec<String>,
    mut sources: Sources<'_>,
    ours: &Ours<'_>,
) -> Result<Option<Rendered>, RepoError> {
    let name = ks.get_str(&["metadata", "name"]).unwrap_or("?");
    let source_kind = ks
        .get_str(&["spec", "sourceRef", "kind"])
        .unwrap_or("GitRepository");
    let source_name = ks.get_str(&["spec", "sourceRef", "name"]).unwrap_or("?");
    if source_kind != "GitRepository" || !ours.is(source_name) {
        notes.push(format!(
            "{}: Flux Kustomization {name} skipped: its source {source_kind}/{source_name} is not this repository (flux-system, repo.sources, or a GitRepository at the checkout's origin URL)",
            ks.site
        ));
        return Ok(None);
    }
    let path = ks.get(&["spec", "path"]);
    let dir = kustomize::resolve(
        "",
        path.and_then(Node::as_str).unwrap_or("."),
        path.map(|p| &p.site).unwrap_or(&ks.site),
    )?;
    if !seen.insert(dir.clone()) {
        return Ok(None);
    }
    if !repo.join(&dir).is_dir() {
        let site = path
            .map(|p| p.site.clone())
            .unwrap_or_else(|| ks.site.clone());
        return Err(RepoError::new(
            site,
            format!("Flux Kustomization {name}: path `{dir}` does not exist"),
        ));
    }
    let layer = kustomize::Layer {
        components: ks.get(&["spec", "components"]),
        name_prefix: ks.get(&["spec", "namePrefix"]),
        name_suffix: ks.get(&["spec", "nameSuffix"]),
    };
    let mut rendered = kustomize::render_layer(repo, &dir, &layer)?;
    if let Some(patches) = ks.get(&["spec", "patches"]).and_then(Node::as_seq) {
        for item in patches {
            kustomize::apply_patch_entry(
                repo,
                &ks.site.file_dir(),
                item,
                &mut rendered.objects,
                notes,
            )?;
        }
    }
    if let Some(ns) = ks.get(&["spec", "targetNamespace"]) {
        let Some(namespace) = ns.as_str().filter(|n| !n.is_empty()) else {
            return Err(RepoError::new(
                ns.site.clone(),
                format!(
                    "Flux Kustomization {name}: `spec.targetNamespace` must be a namespace name"
                ),
            ));
        };
        kustomize::set_namespace(&mut rendered.objects, namespace, &ns.site);
    }
    // Flux's patches and namespace belong to the layer just built: references to what they
    // moved are fixed as Kustomize fixes them at the end of that build.
    kustomize::names::finish(&mut rendered.objects)?;
    if let Some(meta) = ks.get(&["spec", "commonMetadata"]) {
        common_metadata(meta, name, &mut rendered.objects)?;
    }
    post_build(repo, ks, &mut sources, &mut rendered);
    if let Some(images) = ks.get(&["spec", "images"]) {
        notes.push(format!(
            "{}: Flux Kustomization {name}: `spec.images` skipped: image names and tags are not read by any trial",
            images.site
        ));
    }
    Ok(Some(rendered))
}

/// Flux `spec.postBuild`: the `${...}` of the rendered objects substituted from
/// `substitute` and the ConfigMaps and Secrets of `substituteFrom`; an object that reads a
/// variable gates cannot know is set aside as unread.
fn post_build(repo: &Path, ks: &Node, sources: &mut Sources<'_>, rendered: &mut Rendered) {
    let namespace = ks
        .get_str(&["metadata", "namespace"])
        .unwrap_or("flux-system");
    let found: Vec<(String, String, Node)> = ks
        .get(&["spec", "postBuild", "substituteFrom"])
        .and_then(Node::as_seq)
        .unwrap_or_default()
        .iter()
        .filter_map(|s| {
            let kind = s.get_str(&["kind"])?.to_string();
            let name = s.get_str(&["name"])?.to_string();
            let object = sources.find(&kind, &name, namespace)?;
            Some((kind, name, object))
        })
        .collect();
    let lookup = |kind: &str, name: &str| {
        found
            .iter()
            .find(|(k, n, _)| k == kind && n == name)
            .map(|(_, _, o)| o)
    };
    if let Some(vars) = Vars::read(ks, namespace, lookup) {
        let kinds_of = |object: &Node| unread::kinds_of_object(repo, object);
        let (objects, unread) = vars.apply(std::mem::take(&mut rendered.objects), &kinds_of);
        rendered.objects = objects;
        rendered.unread.extend(unread);
    }
}

/// Flux `spec.commonMetadata`: labels and annotations set on every object's metadata,
/// replacing a value the object had, each with the line of the Kustomization that set it.
fn common_metadata(meta: &Node, name: &str, objects: &mut [Node]) -> Result<(), RepoError> {
    let Some(entries) = meta.as_map() else {
        return Err(RepoError::new(
            meta.site.clone(),
            format!(
                "Flux Kustomization {name}: `spec.commonMetadata` must be a mapping of `labels` and `annotations`"
            ),
        ));
    };
    for (key, value) in entries {
        let what = format!("spec.commonMetadata.{key}");
        match key.as_str() {
            "labels" => kustomize::labels::Labels::metadata_only(value, &what)?.apply(objects),
            "annotations" => {
                let pairs = kustomize::labels::pairs(value, &what)?;
                for object in objects.iter_mut() {
                    for (k, v) in &pairs {
                        kustomize::set_path(object, &["metadata", "annotations", k], v.clone());
                    }
                }
            }
            other => {
                return Err(RepoError::new(
                    value.site.clone(),
                    format!(
                        "Flux Kustomization {name}: `spec.commonMetadata.{other}` is not `labels` or `annotations`"
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn helm_release(hr: &Node, objects: &[Node]) -> HelmRelease {
    let namespace = hr
        .get_str(&["metadata", "namespace"])
        .unwrap_or("default")
        .to_string();
    let name = hr.get_str(&["metadata", "name"]).unwrap_or("?").to_string();
    HelmRelease {
        chart: chart_name(hr, &namespace, objects),
        site: hr
            .get(&["metadata", "name"])
            .map(|n| n.site.clone())
            .unwrap_or_else(|| hr.site.clone()),
        values: values(hr, &namespace, objects),
        namespace,
        name,
    }
}

/// A Kustomize `helmCharts` inflation as a release: its chart, its values, and why they are
/// unknown when a patch or a values file outside the repository makes them so.
fn inflated(placeholder: &Node) -> HelmRelease {
    let values = match placeholder.get(&["spec", "unknown"]) {
        Some(why) => Err(RepoError::new(
            why.site.clone(),
            why.as_str().unwrap_or_default().to_string(),
        )),
        None => Ok(placeholder
            .get(&["spec", "values"])
            .cloned()
            .unwrap_or_else(|| Node::new(Value::Map(Vec::new()), placeholder.site.clone()))),
    };
    HelmRelease {
        namespace: placeholder
            .get_str(&["metadata", "namespace"])
            .unwrap_or("default")
            .to_string(),
        name: placeholder
            .get_str(&["metadata", "name"])
            .unwrap_or("?")
            .to_string(),
        chart: placeholder.get_str(&["spec", "chart"]).map(str::to_string),
        site: placeholder.site.clone(),
        values,
    }
}

/// The chart a HelmRelease installs: `spec.chart.spec.chart`, or through `spec.chartRef` the
/// chart of a HelmChart or the last path segment of an OCIRepository's `oci://` URL (the
/// chart's name in the registry), found in the release's namespace unless the reference
/// names another.
fn chart_name(hr: &Node, namespace: &str, objects: &[Node]) -> Option<String> {
    if let Some(chart) = hr.get_str(&["spec", "chart", "spec", "chart"]) {
        return Some(chart.to_string());
    }
    let kind = hr.get_str(&["spec", "chartRef", "kind"])?;
    let name = hr.get_str(&["spec", "chartRef", "name"])?;
    let ns = hr
        .get_str(&["spec", "chartRef", "namespace"])
        .unwrap_or(namespace);
    let source = objects.iter().find(|o| {
        o.get_str(&["kind"]) == Some(kind)
            && o.get_str(&["metadata", "name"]) == Some(name)
            && o.get_str(&["metadata", "namespace"]).unwrap_or("default") == ns
            && o.get_str(&["apiVersion"])
                .is_some_and(|a| a.starts_with("source.toolkit.fluxcd.io/"))
    })?;
    match kind {
        "HelmChart" => source.get_str(&["spec", "chart"]).map(str::to_string),
        "OCIRepository" => source
            .get_str(&["spec", "url"])
            .and_then(|url| url.strip_prefix("oci://"))
            .and_then(|path| path.trim_end_matches('/').rsplit('/').next())
            .filter(|chart| !chart.is_empty())
            .map(str::to_string),
        _ => None,
    }
}

fn values(hr: &Node, namespace: &str, objects: &[Node]) -> Result<Node, RepoError> {
    let mut merged = Node::new(Value::Map(Vec::new()), hr.site.clone());
    for source in hr
        .get(&["spec", "valuesFrom"])
        .and_then(Node::as_seq)
        .unwrap_or_default()
    {
        let kind = source.get_str(&["kind"]).unwrap_or_default();
        let name = source.get_str(&["name"]).unwrap_or_default();
        let key = source.get_str(&["valuesKey"]).unwrap_or("values.yaml");
        let optional = source
            .get(&["optional"])
            .and_then(Node::as_bool)
            .unwrap_or(false);
        if kind != "ConfigMap" && kind != "Secret" {
            return Err(RepoError::new(
                source.site.clone(),
                format!("valuesFrom kind `{kind}` is not ConfigMap or Secret"),
            ));
        }
        let object = objects.iter().find(|o| {
            o.get_str(&["kind"]) == Some(kind)
                && o.get_str(&["metadata", "name"]) == Some(name)
                && o.get_str(&["metadata", "namespace"]).unwrap_or("default") == namespace
        });
        let Some(object) = object else {
            if optional {
                continue;
            }
            return Err(RepoError::new(
                source.site.clone(),
                format!(
                    "valuesFrom {kind} {namespace}/{name} is not in the repository (created outside Git?), so the effective values cannot be known"
                ),
            ));
        };
        let Some(part) = value_of(object, kind, key)? else {
            if optional {
                continue;
            }
            return Err(RepoError::new(
                source.site.clone(),
                format!("{kind} {namespace}/{name} has no key `{key}`"),
            ));
        };
        match source.get_str(&["targetPath"]) {
            Some(path) => {
                let mut wrapped = part;
                for segment in path.rsplit('.') {
                    if segment.contains('[') || segment.is_empty() {
                        return Err(RepoError::new(
                            source.site.clone(),
                            format!("targetPath `{path}` with indexes is not evaluated by gates"),
                        ));
                    }
                    let site = wrapped.site.clone();
                    wrapped = Node::new(Value::Map(vec![(segment.to_string(), wrapped)]), site);
                }
                patch::helm_values(&mut merged, &wrapped);
            }
            None => patch::helm_values(&mut merged, &part),
        }
    }
    if let Some(inline) = hr.get(&["spec", "values"]) {
        patch::helm_values(&mut merged, inline);
    }
    Ok(merged)
}

/// The values document under `key` of a ConfigMap (`data`) or Secret (`stringData`, `data`).
fn value_of(object: &Node, kind: &str, key: &str) -> Result<Option<Node>, RepoError> {
    let plain = object
        .get(&["data", key])
        .filter(|_| kind == "ConfigMap")
        .or_else(|| {
            object
                .get(&["stringData", key])
                .filter(|_| kind == "Secret")
        });
    if let Some(text) = plain {
        let docs = yaml::parse_shifted(
            &text.site.file,
            text.as_str().unwrap_or_default(),
            text.site.line,
        )?;
        return Ok(Some(docs.into_iter().next().unwrap_or_else(|| {
            Node::new(Value::Map(Vec::new()), text.site.clone())
        })));
    }
    if kind == "Secret"
        && let Some(encoded) = object.get(&["data", key])
    {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded.as_str().unwrap_or_default().trim())
            .map_err(|_| {
                RepoError::new(
                    encoded.site.clone(),
                    format!("Secret data `{key}` is not base64"),
                )
            })?;
        let text = String::from_utf8(bytes).map_err(|_| {
            RepoError::new(
                encoded.site.clone(),
                format!("Secret data `{key}` is not UTF-8"),
            )
        })?;
        // Encoded values have no lines of their own: every value points at the key.
        let docs = yaml::parse(&encoded.site.file, &text).map_err(|e| {
            RepoError::new(
                encoded.site.clone(),
                format!("Secret data `{key}`: {}", e.message),
            )
        })?;
        return Ok(docs.into_iter().next().map(|mut d| {
            relocate(&mut d, &encoded.site);
            d
        }));
    }
    Ok(None)
}

fn relocate(node: &mut Node, site: &Site) {
    node.site = site.clone();
    match &mut node.value {
        Value::Seq(items) => items.iter_mut().for_each(|i| relocate(i, site)),
        Value::Map(entries) => entries.iter_mut().for_each(|(_, v)| relocate(v, site)),
        Value::Null | Value::Scalar(..) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::repo::testing::repo;

    const SYNC: &str = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: infra, namespace: flux-system}\nspec:\n  path: ./infra\n  sourceRef: {kind: GitRepository, name: flux-system}\n";

    #[test]
    fn helm_values_come_from_a_configmap_then_the_release_with_their_lines() {
        let dir = repo(&[
            ("clusters/env/infra.yaml", SYNC),
            (
                "infra/kustomization.yaml",
                "namespace: traefik\nresources: [release.yaml, values.yaml]\n",
            ),
            (
                "infra/release.yaml",
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: traefik}\nspec:\n  chart: {spec: {chart: traefik}}\n  valuesFrom:\n    - kind: ConfigMap\n      name: traefik-values\n  values:\n    deployment: {replicas: 2}\n",
            ),
            (
                "infra/values.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: traefik-values}\ndata:\n  values.yaml: |\n    deployment:\n      replicas: 1\n    service:\n      spec:\n        externalTrafficPolicy: Local\n",
            ),
        ]);
        let m = render(dir.path(), "clusters/env").unwrap();
        assert_eq!(m.helm_releases.len(), 1);
        let hr = &m.helm_releases[0];
        assert_eq!(
            (hr.namespace.as_str(), hr.chart.as_deref()),
            ("traefik", Some("traefik"))
        );
        let values = hr.values.as_ref().unwrap();
        let etp = values
            .get(&["service", "spec", "externalTrafficPolicy"])
            .unwrap();
        assert_eq!(etp.site.to_string(), "infra/values.yaml:10");
        let replicas = values.get(&["deployment", "replicas"]).unwrap();
        assert_eq!(
            (replicas.as_i64(), replicas.site.to_string()),
            (Some(2), "infra/release.yaml:10".to_string())
        );
    }

    #[test]
    fn a_values_source_outside_the_repository_makes_the_values_unknown_not_empty() {
        let dir = repo(&[
            ("clusters/env/infra.yaml", SYNC),
            (
                "infra/release.yaml",
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: t, namespace: t}\nspec:\n  valuesFrom:\n    - kind: Secret\n      name: from-vault\n",
            ),
        ]);
        let m = render(dir.path(), "clusters/env").unwrap();
        let err = m.helm_releases[0].values.as_ref().unwrap_err();
        assert!(err.to_string().starts_with("infra/release.yaml:6"), "{err}");
        assert!(err.message.contains("not in the repository"), "{err}");
    }

    #[test]
    fn other_sources_are_skipped_with_the_reason_and_post_build_substitutes_from_the_repository() {
        let other = SYNC.replace("name: flux-system}", "name: vendor}");
        let dir = repo(&[("clusters/env/infra.yaml", &other)]);
        let m = render(dir.path(), "clusters/env").unwrap();
        assert!(
            m.notes.iter().any(|n| n.contains("GitRepository/vendor")),
            "{:?}",
            m.notes
        );
        let post = format!(
            "{SYNC}  postBuild:\n    substitute: {{ZONE: a}}\n    substituteFrom:\n      - {{kind: ConfigMap, name: cluster-settings}}\n"
        );
        let dir = repo(&[
            ("clusters/env/infra.yaml", &post),
            (
                "infra/a.yaml",
                "apiVersion: v1\nkind: Namespace\nmetadata: {name: '${ZONE}-${COUNT}'}\n",
            ),
            (
                "elsewhere/settings.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cluster-settings, namespace: flux-system}\ndata: {COUNT: '3', ZONE: b}\n",
            ),
        ]);
        let m = render(dir.path(), "clusters/env").unwrap();
        let ns = m.of_kind("Namespace").next().expect("rendered");
        assert_eq!(
            ns.get_str(&["metadata", "name"]),
            Some("a-3"),
            "substitute wins over substituteFrom, found in any file of the repository"
        );
        assert!(m.unread.is_empty(), "{:?}", m.unread);
    }

    #[test]
    fn a_config_map_written_after_its_kustomization_in_the_same_directory_is_the_one_substituted() {
        let post = format!(
            "{SYNC}  postBuild:\n    substituteFrom:\n      - {{kind: ConfigMap, name: cluster-info}}\n"
        );
        let info = |zone: &str| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cluster-info, namespace: flux-system}}\ndata: {{ZONE: {zone}}}\n"
            )
        };
        let dir = repo(&[
            ("clusters/env/apps.yaml", &post),
            // Sorted after apps.yaml, and another cluster's copy elsewhere in the repository.
            ("clusters/env/info.yaml", &info("a")),
            ("clusters/other/info.yaml", &info("b")),
            (
                "infra/a.yaml",
                "apiVersion: v1\nkind: Namespace\nmetadata: {name: '${ZONE}'}\n",
            ),
        ]);
        let m = render(dir.path(), "clusters/env").unwrap();
        assert!(m.unread.is_empty(), "{:?}", m.unread);
        let ns = m.of_kind("Namespace").next().expect("rendered");
        assert_eq!(ns.get_str(&["metadata", "name"]), Some("a"));
    }

    #[test]
    fn a_flux_kustomization_left_unread_by_substitution_may_hold_what_its_path_holds() {
        let post = format!(
            "{SYNC}  postBuild:\n    substituteFrom:\n      - {{kind: ConfigMap, name: absent}}\n"
        );
        let child = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: child, namespace: flux-system}\nspec:\n  path: ./apps/${ZONE}\n  sourceRef: {kind: GitRepository, name: flux-system}\n";
        let dir = repo(&[
            ("clusters/env/apps.yaml", &post),
            ("infra/child.yaml", child),
            (
                "infra/plain.yaml",
                "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: plain, namespace: flux-system}\nspec:\n  path: ./apps/a\n  targetNamespace: ${NS}\n  sourceRef: {kind: GitRepository, name: flux-system}\n",
            ),
            (
                "apps/a/deploy.yaml",
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
            ),
        ]);
        let m = render(dir.path(), "clusters/env").unwrap();
        let kinds: Vec<&crate::repo::unread::Kinds> = m.unread.iter().map(|u| &u.kinds).collect();
        // The child's path is itself unknown: anything. The other's path is known: its kinds.
        assert!(
            kinds.contains(&&crate::repo::unread::Kinds::Any),
            "{kinds:?}"
        );
        assert!(
            kinds
                .iter()
                .any(|k| k.may_hold(&["Deployment"]) && !k.may_hold(&["Service"])),
            "{kinds:?}"
        );
    }

    #[test]
    fn an_object_two_kustomizations_both_include_is_read_once_and_named_doubly_owned() {
        let ks = |name: &str, path: &str| {
            format!(
                "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}, namespace: flux-system}}\nspec:\n  path: {path}\n  sourceRef: {{kind: GitRepository, name: flux-system}}\n"
            )
        };
        let dir = repo(&[
            ("clusters/env/all.yaml", &ks("all", "./apps")),
            ("clusters/env/web.yaml", &ks("web", "./apps/web")),
            (
                "apps/web/deploy.yaml",
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: web}\n",
            ),
        ]);
        let m = render(dir.path(), "clusters/env").unwrap();
        assert_eq!(m.of_kind("Deployment").count(), 1);
        assert!(
            m.notes
                .iter()
                .any(|n| n.starts_with("apps/web/deploy.yaml:") && n.contains("doubly owned")),
            "{:?}",
            m.notes
        );
    }

    #[test]
    fn a_chart_ref_names_the_chart_of_its_oci_repository_or_helm_chart() {
        let dir = repo(&[
            ("clusters/env/infra.yaml", SYNC),
            (
                "infra/kustomization.yaml",
                "namespace: kube-system\nresources: [release.yaml]\n",
            ),
            (
                "infra/release.yaml",
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: cni}\nspec:\n  chartRef: {kind: OCIRepository, name: cni}\n---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata: {name: cni}\nspec:\n  url: oci://registry.example/charts/cilium\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: lb}\nspec:\n  chartRef: {kind: HelmChart, name: lb, namespace: kube-system}\n---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmChart\nmetadata: {name: lb}\nspec: {chart: traefik}\n",
            ),
        ]);
        let m = render(dir.path(), "clusters/env").unwrap();
        let charts: Vec<(&str, Option<&str>)> = m
            .helm_releases
            .iter()
            .map(|hr| (hr.name.as_str(), hr.chart.as_deref()))
            .collect();
        assert_eq!(charts, [("cni", Some("cilium")), ("lb", Some("traefik"))]);
    }

    #[test]
    fn flux_spec_components_apply_to_the_path_with_or_without_its_own_kustomization() {
        const COMPONENT: &str = "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\npatches:\n  - target: {kind: Deployment}\n    patch: |\n      - op: replace\n        path: /spec/replicas\n        value: 2\n";
        for own in [false, true] {
            let sync = with_spec("  components:\n    - ../components/two\n");
            let mut files = vec![
                ("clusters/env/infra.yaml", sync.as_str()),
                ("infra/web.yaml", APP),
                ("components/two/kustomization.yaml", COMPONENT),
            ];
            if own {
                files.push(("infra/kustomization.yaml", "resources: [web.yaml]\n"));
            }
            let dir = repo(&files);
            let m = render(dir.path(), "clusters/env").unwrap();
            assert!(m.unread.is_empty(), "{:?}", m.unread);
            let web = m.of_kind("Deployment").next().expect("rendered");
            let replicas = web.get(&["spec", "replicas"]).unwrap();
            assert_eq!(replicas.as_i64(), Some(2), "own kustomization: {own}");
        }
    }

    #[test]
    fn a_flux_kustomization_gates_cannot_read_is_set_aside_with_the_kinds_it_may_hold() {
        let bad = with_spec("  targetNamespace: \"\"\n");
        let good = SYNC
            .replace("name: infra,", "name: apps,")
            .replace("./infra", "./apps");
        let dir = repo(&[
            ("clusters/env/infra.yaml", &bad),
            ("clusters/env/apps.yaml", &good),
            ("infra/web.yaml", APP),
            (
                "apps/svc.yaml",
                "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
            ),
        ]);
        let m = render(dir.path(), "clusters/env").expect("the readable part renders");
        assert!(m.of_kind("Service").next().is_some());
        assert_eq!(m.unread.len(), 1, "{:?}", m.unread);
        assert!(m.unread[0].kinds.may_hold(&["Deployment"]));
        assert!(!m.unread[0].kinds.may_hold(&["Service", "HelmRelease"]));
        assert!(
            m.unread[0]
                .error
                .to_string()
                .contains("`spec.targetNamespace`")
        );
    }

    const APP: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels: {tier: web}\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n";

    fn with_spec(extra: &str) -> String {
        format!("{SYNC}{extra}")
    }

    /// The Deployment of `APP` as the Flux Kustomization with `extra` in its spec renders it.
    fn web_with(extra: &str) -> Node {
        let sync = with_spec(extra);
        let dir = repo(&[("clusters/env/infra.yaml", &sync), ("infra/web.yaml", APP)]);
        let m = render(dir.path(), "clusters/env").unwrap();
        m.objects
            .into_iter()
            .find(|o| o.get_str(&["kind"]) == Some("Deployment"))
            .unwrap()
    }

    #[test]
    fn common_metadata_labels_reach_object_metadata_with_the_flux_line_but_not_pods_or_selectors() {
        let web = web_with(
            "  commonMetadata:\n    labels:\n      tier: edge\n      team: platform\n    annotations:\n      owner: ops\n",
        );
        let tier = web.get(&["metadata", "labels", "tier"]).unwrap();
        assert_eq!(
            (tier.as_str(), tier.site.to_string()),
            (Some("edge"), "clusters/env/infra.yaml:9".to_string())
        );
        assert_eq!(
            web.get(&["metadata", "annotations", "owner"])
                .map(|o| o.site.to_string()),
            Some("clusters/env/infra.yaml:12".to_string())
        );
        assert_eq!(
            web.get(&["spec", "template", "metadata", "labels", "team"]),
            None
        );
        assert_eq!(web.get(&["spec", "selector", "matchLabels", "team"]), None);
    }

    #[test]
    fn a_flux_name_prefix_and_suffix_rename_the_objects_and_every_reference_to_them() {
        for own in [false, true] {
            let sync =
                with_spec("  targetNamespace: apps\n  namePrefix: prod-\n  nameSuffix: -a\n");
            let app = format!(
                "{APP}    spec:\n      serviceAccountName: runner\n      containers:\n        - name: web\n          image: nginx\n          envFrom: [{{configMapRef: {{name: settings}}}}]\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: runner}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings}}\ndata: {{A: b}}\n"
            );
            let mut files = vec![
                ("clusters/env/infra.yaml", sync.as_str()),
                ("infra/web.yaml", app.as_str()),
            ];
            if own {
                // Flux writes its prefix in place of the directory's own.
                files.push((
                    "infra/kustomization.yaml",
                    "namePrefix: own-\nresources: [web.yaml]\n",
                ));
            }
            let dir = repo(&files);
            let m = render(dir.path(), "clusters/env").unwrap();
            assert!(m.unread.is_empty(), "{:?}", m.unread);
            let web = m.of_kind("Deployment").next().expect("rendered");
            let name = web.get(&["metadata", "name"]).unwrap();
            assert_eq!(
                (name.as_str(), name.site.to_string()),
                (Some("prod-web-a"), "clusters/env/infra.yaml:9".to_string()),
                "own kustomization: {own}"
            );
            let spec = ["spec", "template", "spec"];
            assert_eq!(
                web.get(&[&spec[..], &["serviceAccountName"]].concat())
                    .and_then(Node::as_str),
                Some("prod-runner-a")
            );
            let from = &web
                .get(&[&spec[..], &["containers"]].concat())
                .unwrap()
                .as_seq()
                .unwrap()[0];
            let envs = from.get(&["envFrom"]).unwrap().as_seq().unwrap();
            assert_eq!(
                envs[0].get_str(&["configMapRef", "name"]),
                Some("prod-settings-a")
            );
            assert_eq!(
                web.get(&["metadata", "annotations"]),
                None,
                "no build marks left"
            );
        }
    }

    #[test]
    fn target_namespace_and_flux_patches_set_values_with_the_flux_lines() {
        let web = web_with(
            "  targetNamespace: apps\n  patches:\n    - target: {kind: Deployment, name: web}\n      patch: |\n        - op: replace\n          path: /spec/replicas\n          value: 3\n",
        );
        let ns = web.get(&["metadata", "namespace"]).unwrap();
        assert_eq!(
            (ns.as_str(), ns.site.to_string()),
            (Some("apps"), "clusters/env/infra.yaml:7".to_string())
        );
        let replicas = web.get(&["spec", "replicas"]).unwrap();
        assert_eq!(replicas.as_i64(), Some(3));
        assert!(
            replicas
                .site
                .to_string()
                .starts_with("clusters/env/infra.yaml:"),
            "{}",
            replicas.site
        );
    }

    #[test]
    fn malformed_common_metadata_and_name_prefixes_are_errors_at_their_line() {
        for (extra, line, words) in [
            (
                "  commonMetadata:\n    labels: [a, b]\n",
                "clusters/env/infra.yaml:8",
                "must be a map of labels",
            ),
            (
                "  commonMetadata:\n    finalizers: {a: b}\n",
                "clusters/env/infra.yaml:8",
                "is not `labels` or `annotations`",
            ),
            (
                "  commonMetadata:\n    labels:\n      tier: {nested: map}\n",
                "clusters/env/infra.yaml:9",
                "spec.commonMetadata.labels.tier must be a string",
            ),
            (
                "  namePrefix: [prod-]\n",
                "clusters/env/infra.yaml:7",
                "`namePrefix` must be a string",
            ),
            (
                "  targetNamespace: \"\"\n",
                "clusters/env/infra.yaml:7",
                "must be a namespace name",
            ),
        ] {
            let sync = with_spec(extra);
            let dir = repo(&[("clusters/env/infra.yaml", &sync), ("infra/web.yaml", APP)]);
            let m = render(dir.path(), "clusters/env").unwrap();
            let err = &m.unread.first().expect("set aside as unread").error;
            assert!(err.to_string().starts_with(line), "{extra}: {err}");
            assert!(err.message.contains(words), "{extra}: {err}");
        }
    }

    #[test]
    fn a_missing_entry_directory_is_an_error_naming_it() {
        let dir = repo(&[]);
        assert!(
            render(dir.path(), "clusters/nowhere")
                .unwrap_err()
                .to_string()
                .contains("clusters/nowhere")
        );
    }
}
