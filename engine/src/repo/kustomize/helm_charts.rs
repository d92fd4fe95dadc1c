//! Kustomize `helmCharts`: each entry inflates a chart with `helm template`. gates does not
//! run Helm (the chart lives in a chart repository outside the repository), so an entry is
//! read the way a Flux HelmRelease is: the chart's name and the values the repository gives
//! it, with the lines that set them. The objects the chart renders are not known; the trials
//! that model a chart (its defaults, see `trials/controllers.rs`) judge the release from its
//! values, as they do a HelmRelease's.
//!
//! An entry becomes a placeholder object of kind [`KIND`] among the rendered objects, so the
//! kustomization's `namespace` (and a parent's) reaches it as it reaches the chart's objects;
//! patches never select it. [`super::super::flux`] takes the placeholders out and turns them
//! into releases.
//!
//! Values, as sigs.k8s.io/kustomize's HelmChartInflationGenerator builds them
//! (`api/internal/builtins/HelmChartInflationGenerator.go`): `valuesFile` (a local path; a URL
//! is outside the repository), merged with `valuesInline` by `valuesMerge`: `override` (the
//! default) lets the inline values win, `merge` keeps the file's, `replace` drops the file;
//! then each `additionalValuesFiles` entry over them, in order. Helm puts the chart's own
//! defaults under all of them.
//!
//! A patch of the same kustomization (or a parent) that may reach the chart's objects (its
//! target names no object, or names one that is not among the other resources) changes what
//! the chart renders in a way gates cannot follow: the release's values are then unknown,
//! naming the patch.

use std::path::Path;

use super::{read, resolve};
use crate::repo::patch;
use crate::repo::site::{RepoError, Site};
use crate::repo::yaml::{self, Node, Value};

/// The placeholder kind of one inflation (never a real Kubernetes kind).
pub const KIND: &str = "KustomizeHelmChart";
pub const API_VERSION: &str = "gates.internal/v1";

/// The keys of a `helmCharts` entry (kustomize's `types.HelmChart`).
const KEYS: [&str; 16] = [
    "name",
    "version",
    "repo",
    "releaseName",
    "namespace",
    "valuesFile",
    "valuesInline",
    "valuesMerge",
    "additionalValuesFiles",
    "includeCRDs",
    "skipHooks",
    "skipTests",
    "apiVersions",
    "kubeVersion",
    "nameTemplate",
    "devel",
];

/// Whether an object is an inflation placeholder.
pub fn is_placeholder(object: &Node) -> bool {
    object.get_str(&["kind"]) == Some(KIND) && object.get_str(&["apiVersion"]) == Some(API_VERSION)
}

/// Add a placeholder for every `helmCharts` entry of the kustomization in `dir`. Every
/// problem of every entry is reported at once.
pub fn run(repo: &Path, dir: &str, k: &Node, objects: &mut Vec<Node>) -> Result<(), RepoError> {
    let Some(list) = k.entry("helmCharts") else {
        return Ok(());
    };
    let items = match &list.value {
        Value::Null => return Ok(()),
        Value::Seq(items) => items,
        _ => {
            return Err(RepoError::new(
                list.site.clone(),
                "`helmCharts` must be a list of charts",
            ));
        }
    };
    let mut problems = Vec::new();
    for item in items {
        match entry(repo, dir, item) {
            Ok(object) => objects.push(object),
            Err(err) => problems.push(err),
        }
    }
    match problems.len() {
        0 => Ok(()),
        1 => Err(problems.remove(0)),
        _ => {
            let first = problems[0].site.clone();
            Err(RepoError::new(
                first,
                problems
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join("; "),
            ))
        }
    }
}

/// A `helmCharts` entry is a mapping of the keys Kustomize knows.
fn refuse_unknown_keys(item: &Node) -> Result<(), RepoError> {
    let Some(entries) = item.as_map() else {
        return Err(RepoError::new(
            item.site.clone(),
            "a `helmCharts` entry must be a mapping",
        ));
    };
    let unknown: Vec<&str> = entries
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| !KEYS.contains(k))
        .collect();
    if !unknown.is_empty() {
        return Err(RepoError::new(
            item.site.clone(),
            format!(
                "`helmCharts` entry: unknown key(s) {}",
                unknown
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    Ok(())
}

fn entry(repo: &Path, dir: &str, item: &Node) -> Result<Node, RepoError> {
    refuse_unknown_keys(item)?;
    let text = |key: &str| item.get_str(&[key]).filter(|s| !s.is_empty());
    let Some(chart) = text("name") else {
        return Err(RepoError::new(
            item.site.clone(),
            "a `helmCharts` entry needs the chart's `name`",
        ));
    };
    let at = |key: &str| {
        item.entry(key)
            .map(|n| n.site.clone())
            .unwrap_or_else(|| item.site.clone())
    };
    let mut unknown_values = None;
    let file = match text("valuesFile") {
        Some(path) if path.contains("://") => {
            unknown_values = Some(RepoError::new(
                at("valuesFile"),
                format!(
                    "valuesFile `{path}` is outside the repository, so the chart's effective values cannot be known"
                ),
            ));
            None
        }
        Some(path) => Some(values_file(repo, dir, path, &at("valuesFile"))?),
        None => None,
    };
    let inline = item.entry("valuesInline").filter(|n| !n.is_null());
    let merge = text("valuesMerge").unwrap_or("override");
    let empty = || Node::new(Value::Map(Vec::new()), item.site.clone());
    let mut values = match (merge, file, inline) {
        ("override" | "merge" | "replace", None, None) => empty(),
        ("override" | "merge", Some(file), None) => file,
        ("override" | "merge" | "replace", None, Some(inline)) => inline.clone(),
        ("override", Some(mut file), Some(inline)) => {
            patch::helm_values(&mut file, inline);
            file
        }
        ("merge", Some(file), Some(inline)) => {
            let mut merged = inline.clone();
            patch::helm_values(&mut merged, &file);
            merged
        }
        ("replace", _, inline) => inline.cloned().unwrap_or_else(empty),
        (other, _, _) => {
            return Err(RepoError::new(
                at("valuesMerge"),
                format!("valuesMerge `{other}`: Kustomize takes merge, override or replace"),
            ));
        }
    };
    for extra in item
        .entry("additionalValuesFiles")
        .and_then(Node::as_seq)
        .unwrap_or_default()
    {
        let Some(path) = extra.as_str() else {
            return Err(RepoError::new(
                extra.site.clone(),
                "additionalValuesFiles entries must be paths",
            ));
        };
        if path.contains("://") {
            unknown_values.get_or_insert_with(|| {
                RepoError::new(
                    extra.site.clone(),
                    format!(
                        "additional values file `{path}` is outside the repository, so the chart's effective values cannot be known"
                    ),
                )
            });
            continue;
        }
        let more = values_file(repo, dir, path, &extra.site)?;
        patch::helm_values(&mut values, &more);
    }
    Ok(placeholder(
        chart,
        &at("name"),
        text("releaseName").unwrap_or(chart),
        text("namespace"),
        values,
        unknown_values,
        &item.site,
    ))
}

/// A release placeholder: `chart` installed as `release` (in `namespace`, when given) with
/// `values`, or with values unknown for the reason given. Argo CD's Helm sources are read
/// into the same placeholder.
pub fn placeholder(
    chart: &str,
    chart_site: &Site,
    release: &str,
    namespace: Option<&str>,
    values: Node,
    unknown: Option<RepoError>,
    site: &Site,
) -> Node {
    let str_node = |s: &str, site: &Site| Node::str(s, site.clone());
    let mut metadata = vec![("name".to_string(), str_node(release, site))];
    if let Some(ns) = namespace {
        metadata.push(("namespace".to_string(), str_node(ns, site)));
    }
    let mut spec = vec![
        ("chart".to_string(), str_node(chart, chart_site)),
        ("values".to_string(), values),
    ];
    if let Some(err) = unknown {
        spec.push(("unknown".to_string(), str_node(&err.to_string(), &err.site)));
    }
    Node::new(
        Value::Map(vec![
            ("apiVersion".to_string(), str_node(API_VERSION, site)),
            ("kind".to_string(), str_node(KIND, site)),
            (
                "metadata".to_string(),
                Node::new(Value::Map(metadata), site.clone()),
            ),
            (
                "spec".to_string(),
                Node::new(Value::Map(spec), site.clone()),
            ),
        ]),
        site.clone(),
    )
}

/// A values file next to the kustomization, one YAML mapping (empty is none).
fn values_file(repo: &Path, dir: &str, path: &str, at: &Site) -> Result<Node, RepoError> {
    let rel = resolve(dir, path, at)?;
    if !repo.join(&rel).is_file() {
        return Err(RepoError::new(
            at.clone(),
            format!("values file `{path}` does not exist ({rel})"),
        ));
    }
    let text = read(repo, &rel)?;
    let mut docs = yaml::parse(&rel, &text)?;
    match docs.len() {
        0 => Ok(Node::new(Value::Map(Vec::new()), Site::new(&rel, 0))),
        1 if docs[0].is_null() => Ok(Node::new(Value::Map(Vec::new()), Site::new(&rel, 0))),
        1 if docs[0].as_map().is_some() => Ok(docs.remove(0)),
        _ => Err(RepoError::file(
            &rel,
            "a Helm values file must be one YAML mapping",
        )),
    }
}

/// Mark every placeholder in `objects` as changed by a patch gates cannot follow into the
/// chart's output (the first such patch is named).
pub fn patched_by(objects: &mut [Node], patch_site: &Site, what: &str) {
    for object in objects.iter_mut().filter(|o| is_placeholder(o)) {
        if object.get(&["spec", "unknown"]).is_some() {
            continue;
        }
        let chart = object
            .get_str(&["spec", "chart"])
            .unwrap_or("?")
            .to_string();
        let why = format!(
            "{patch_site}: {what} may change the objects chart {chart} renders, which gates does not render, so its effective values cannot be known"
        );
        super::set_path(
            object,
            &["spec", "unknown"],
            Node::str(why, patch_site.clone()),
        );
    }
}
