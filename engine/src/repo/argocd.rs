//! Argo CD, as far as the gates need it: an `Application` whose source is this repository is
//! followed to the objects its path renders, and a Helm chart it installs is read as a
//! release of that chart (its name and values), as a Flux HelmRelease is. An
//! `ApplicationSet` with `list` or `git` directory generators becomes the Applications it
//! would create.
//!
//! What Argo CD does, from its documentation (`docs/user-guide/`): a source's path is built
//! with Kustomize when it holds a kustomization, is a Helm chart when it holds `Chart.yaml`,
//! and is otherwise a directory of plain `.yaml`, `.yml` and `.json` files, only its top level
//! unless `directory.recurse` is true (`directory.md`). Helm values come, lowest first, from
//! the chart's own `values.yaml`, `helm.valueFiles`, `helm.values`, `helm.valuesObject`,
//! then `helm.parameters` (`helm.md`, "Order of precedence"); a value file `$ref/path` is
//! read from the source named `ref`. The destination namespace is given to namespaced objects
//! that name none (`application.yaml`). ApplicationSet templates substitute `{{path}}`,
//! `{{path.basename}}`, `{{path[N]}}` and list elements' keys, or with `goTemplate` the
//! fields `{{.path.path}}`, `{{.path.basename}}` and the elements' keys
//! (`applicationset/Generators-Git.md`, `Generators-List.md`).
//!
//! Anything else that would change what the trials read (other generators, Go template
//! functions, `templatePatch`, Kustomize name prefixes in the source, Jsonnet) is an error
//! naming its file and line; the Application is then set aside with the kinds of object its
//! path may hold, as an unreadable Flux Kustomization is.

use std::collections::BTreeMap;
use std::path::Path;

use super::kustomize::{self, Rendered, helm_charts};
use super::patch;
pub use super::paths::source_path;
use super::site::{RepoError, Site};
use super::yaml::{self, Node, Value};

const ARGO: &str = "argoproj.io/";

pub fn is_application(object: &Node) -> bool {
    object.get_str(&["kind"]) == Some("Application")
        && object
            .get_str(&["apiVersion"])
            .is_some_and(|a| a.starts_with(ARGO))
}

pub fn is_application_set(object: &Node) -> bool {
    object.get_str(&["kind"]) == Some("ApplicationSet")
        && object
            .get_str(&["apiVersion"])
            .is_some_and(|a| a.starts_with(ARGO))
}

/// Follow one Application. `ours` says whether a repoURL is this repository; `seen` holds the
/// paths already rendered (an app of apps that lists itself stops there).
pub fn follow(
    repo: &Path,
    app: &Node,
    seen: &mut std::collections::BTreeSet<String>,
    notes: &mut Vec<String>,
    ours: &dyn Fn(&str) -> bool,
) -> Result<Option<Rendered>, RepoError> {
    let name = app.get_str(&["metadata", "name"]).unwrap_or("?");
    let sources: Vec<&Node> = match (app.get(&["spec", "source"]), app.get(&["spec", "sources"])) {
        (Some(one), _) => vec![one],
        (None, Some(many)) => many.as_seq().unwrap_or_default().iter().collect(),
        (None, None) => {
            return Err(RepoError::new(
                app.site.clone(),
                format!("Application {name} has neither spec.source nor spec.sources"),
            ));
        }
    };
    let namespace = app
        .get(&["spec", "destination", "namespace"])
        .filter(|n| n.as_str().is_some_and(|s| !s.is_empty()));
    // The sources other sources' value files name as `$ref`.
    let refs: BTreeMap<&str, &Node> = sources
        .iter()
        .filter_map(|s| Some((s.get_str(&["ref"])?, *s)))
        .collect();
    let mut out = Rendered::default();
    for source in &sources {
        let url = source.get_str(&["repoURL"]).unwrap_or_default();
        if source.get(&["chart"]).is_some() {
            out.objects
                .push(chart_release(repo, app, source, None, &refs, ours)?);
            continue;
        }
        if source.get(&["ref"]).is_some() && source.get(&["path"]).is_none() {
            continue;
        }
        if !ours(url) {
            notes.push(format!(
                "{}: Argo CD Application {name} source `{url}` skipped: it is not this repository (the checkout's origin URL or repo.sources)",
                source.site
            ));
            continue;
        }
        let path = source.get(&["path"]);
        let dir = kustomize::resolve(
            "",
            path.and_then(Node::as_str).unwrap_or("."),
            path.map(|p| &p.site).unwrap_or(&source.site),
        )?;
        if !repo.join(&dir).is_dir() {
            return Err(RepoError::new(
                path.map(|p| p.site.clone())
                    .unwrap_or_else(|| source.site.clone()),
                format!("Argo CD Application {name}: path `{dir}` does not exist"),
            ));
        }
        if !seen.insert(dir.clone()) {
            continue;
        }
        let mut rendered = if kustomize::kustomization_file(repo, &dir).is_some() {
            kustomized(repo, &dir, source, name, notes)?
        } else if repo.join(&dir).join("Chart.yaml").is_file() {
            let mut local = Rendered::default();
            local
                .objects
                .push(chart_release(repo, app, source, Some(&dir), &refs, ours)?);
            local
        } else {
            directory(repo, &dir, source)?
        };
        if let Some(ns) = namespace {
            fill_namespace(&mut rendered.objects, ns);
        }
        out.objects.append(&mut rendered.objects);
        out.notes.append(&mut rendered.notes);
        out.unread.append(&mut rendered.unread);
    }
    if let Some(ns) = namespace {
        fill_namespace(&mut out.objects, ns);
    }
    Ok(Some(out))
}

/// A Kustomize source with the Application's `kustomize` options gates evaluates.
fn kustomized(
    repo: &Path,
    dir: &str,
    source: &Node,
    name: &str,
    notes: &mut Vec<String>,
) -> Result<Rendered, RepoError> {
    let options = source.get(&["kustomize"]);
    let option = |key: &str| options.and_then(|o| o.get(&[key]));
    let layer = kustomize::Layer {
        components: option("components"),
        name_prefix: option("namePrefix"),
        name_suffix: option("nameSuffix"),
    };
    let mut rendered = kustomize::render_layer(repo, dir, &layer)?;
    for (key, value) in options.and_then(Node::as_map).unwrap_or_default() {
        match key.as_str() {
            "components" | "namePrefix" | "nameSuffix" => {}
            "namespace" => {
                if let Some(ns) = value.as_str().filter(|s| !s.is_empty()) {
                    kustomize::set_namespace(&mut rendered.objects, ns, &value.site);
                }
            }
            "patches" => {
                for item in value.as_seq().unwrap_or_default() {
                    kustomize::apply_patch_entry(
                        repo,
                        &source.site.file_dir(),
                        item,
                        &mut rendered.objects,
                        notes,
                    )?;
                }
            }
            "images" | "commonAnnotations" | "commonAnnotationsEnvsubst" | "version" => {
                notes.push(format!(
                    "{}: Argo CD Application {name}: `kustomize.{key}` skipped: no trial reads what it changes",
                    value.site
                ));
            }
            other => {
                return Err(RepoError::new(
                    value.site.clone(),
                    format!(
                        "Argo CD Application {name}: `kustomize.{other}` changes the manifests in ways gates does not evaluate"
                    ),
                ));
            }
        }
    }
    kustomize::names::finish(&mut rendered.objects)?;
    Ok(rendered)
}

/// A plain directory: its top-level manifest files, or every file below with `recurse`.
fn directory(repo: &Path, dir: &str, source: &Node) -> Result<Rendered, RepoError> {
    let options = source.get(&["directory"]);
    for key in ["include", "exclude", "jsonnet"] {
        if let Some(value) = options.and_then(|o| o.get(&[key])) {
            return Err(RepoError::new(
                value.site.clone(),
                format!("Argo CD `directory.{key}` is not evaluated by gates"),
            ));
        }
    }
    let recurse = options
        .and_then(|o| o.get(&["recurse"]))
        .and_then(Node::as_bool)
        .unwrap_or(false);
    let mut out = Rendered::default();
    let mut stack = vec![dir.to_string()];
    while let Some(current) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(repo.join(&current))
            .map_err(|err| RepoError::file(&current, format!("cannot read the directory: {err}")))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        entries.sort();
        for path in entries {
            let file_name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let rel = kustomize::join(&current, &file_name);
            if path.is_dir() {
                if recurse && !file_name.starts_with('.') {
                    stack.push(rel);
                }
                continue;
            }
            if ![".yaml", ".yml", ".json"]
                .iter()
                .any(|ext| file_name.ends_with(ext))
            {
                continue;
            }
            let text = kustomize::read(repo, &rel)?;
            for doc in yaml::parse(&rel, &text)? {
                if doc.get_str(&["kind"]).is_some() && doc.get_str(&["apiVersion"]).is_some() {
                    out.objects.push(doc);
                }
            }
        }
    }
    Ok(out)
}

/// A Helm source as a release placeholder: a chart from a chart repository (`chart`), or the
/// local chart in `local` (whose own `values.yaml` is in the repository and comes first).
fn chart_release(
    repo: &Path,
    app: &Node,
    source: &Node,
    local: Option<&str>,
    refs: &BTreeMap<&str, &Node>,
    ours: &dyn Fn(&str) -> bool,
) -> Result<Node, RepoError> {
    let app_name = app.get_str(&["metadata", "name"]).unwrap_or("?");
    let helm = source.get(&["helm"]);
    let text = |path: &[&str]| helm.and_then(|h| h.get_str(path)).filter(|s| !s.is_empty());
    let (chart, chart_site) = match local {
        Some(dir) => {
            let file = kustomize::join(dir, "Chart.yaml");
            let doc = yaml::parse(&file, &kustomize::read(repo, &file)?)?
                .into_iter()
                .next();
            let name = doc
                .as_ref()
                .and_then(|d| d.get_str(&["name"]))
                .unwrap_or("?")
                .to_string();
            (name, Site::new(&file, 1))
        }
        None => (
            source.get_str(&["chart"]).unwrap_or("?").to_string(),
            source
                .get(&["chart"])
                .map(|c| c.site.clone())
                .unwrap_or_else(|| source.site.clone()),
        ),
    };
    let mut unknown: Option<RepoError> = None;
    // A values file or string that does not parse makes this release's values unknown, not
    // the whole Application unread.
    let values = match release_values(repo, source, local, refs, ours, app_name, &mut unknown) {
        Ok(values) => values,
        Err(err) => {
            unknown.get_or_insert(err);
            Node::new(Value::Map(Vec::new()), source.site.clone())
        }
    };
    let release = text(&["releaseName"]).unwrap_or(app_name).to_string();
    let namespace = app
        .get_str(&["spec", "destination", "namespace"])
        .filter(|s| !s.is_empty());
    Ok(helm_charts::placeholder(
        &chart,
        &chart_site,
        &release,
        namespace,
        values,
        unknown,
        &source.site,
    ))
}

/// The values a Helm source gives its chart, in Argo CD's order; `unknown` records the first
/// value that lives outside the repository.
fn release_values(
    repo: &Path,
    source: &Node,
    local: Option<&str>,
    refs: &BTreeMap<&str, &Node>,
    ours: &dyn Fn(&str) -> bool,
    app_name: &str,
    unknown: &mut Option<RepoError>,
) -> Result<Node, RepoError> {
    let helm = source.get(&["helm"]);
    let mut values = Node::new(Value::Map(Vec::new()), source.site.clone());
    if let Some(dir) = local {
        let own = kustomize::join(dir, "values.yaml");
        if repo.join(&own).is_file() {
            patch::helm_values(&mut values, &values_file(repo, &own)?);
        }
    }
    let ignore_missing = helm
        .and_then(|h| h.get(&["ignoreMissingValueFiles"]))
        .and_then(Node::as_bool)
        .unwrap_or(false);
    for file in helm
        .and_then(|h| h.get(&["valueFiles"]))
        .and_then(Node::as_seq)
        .unwrap_or_default()
    {
        let Some(path) = file.as_str() else {
            return Err(RepoError::new(
                file.site.clone(),
                "helm.valueFiles entries must be paths",
            ));
        };
        let rel = in_repository(path, &file.site, local, refs, ours)?;
        let Some(rel) = rel else {
            unknown.get_or_insert_with(|| {
                RepoError::new(
                    file.site.clone(),
                    format!(
                        "Argo CD Application {app_name}: value file `{path}` is outside the repository, so the chart's effective values cannot be known"
                    ),
                )
            });
            continue;
        };
        if !repo.join(&rel).is_file() {
            if ignore_missing {
                continue;
            }
            return Err(RepoError::new(
                file.site.clone(),
                format!(
                    "Argo CD Application {app_name}: value file `{path}` does not exist ({rel})"
                ),
            ));
        }
        patch::helm_values(&mut values, &values_file(repo, &rel)?);
    }
    if let Some(inline) = helm.and_then(|h| h.get(&["values"])) {
        let embedded = match &inline.value {
            Value::Map(_) => inline.clone(),
            _ => yaml::parse_shifted(
                &inline.site.file,
                inline.as_str().unwrap_or_default(),
                inline.site.line,
            )?
            .into_iter()
            .next()
            .unwrap_or_else(|| Node::new(Value::Map(Vec::new()), inline.site.clone())),
        };
        patch::helm_values(&mut values, &embedded);
    }
    if let Some(object) = helm.and_then(|h| h.get(&["valuesObject"])) {
        patch::helm_values(&mut values, object);
    }
    if let Some(params) = helm.and_then(|h| h.get(&["parameters"])) {
        unknown.get_or_insert_with(|| {
            RepoError::new(
                params.site.clone(),
                format!(
                    "Argo CD Application {app_name}: helm.parameters (--set) are not evaluated by gates, so the chart's effective values cannot be known"
                ),
            )
        });
    }
    Ok(values)
}

/// A `helm.valueFiles` path as a repository-relative path: `$ref/...` through a source of
/// this repository, or relative to the chart's directory here; `None` when it lies outside
/// the repository (another repository's source, a URL, a chart from a chart repository).
fn in_repository(
    path: &str,
    at: &Site,
    local: Option<&str>,
    refs: &BTreeMap<&str, &Node>,
    ours: &dyn Fn(&str) -> bool,
) -> Result<Option<String>, RepoError> {
    Ok(if let Some(rest) = path.strip_prefix('$') {
        let (name, inner) = rest.split_once('/').unwrap_or((rest, ""));
        match refs.get(name) {
            Some(r) if ours(r.get_str(&["repoURL"]).unwrap_or_default()) => {
                Some(kustomize::resolve("", inner, at)?)
            }
            Some(_) | None => None,
        }
    } else if path.contains("://") {
        None
    } else {
        match local {
            Some(dir) => Some(kustomize::resolve(dir, path, at)?),
            // Relative to a chart that lives in its chart repository.
            None => None,
        }
    })
}

fn values_file(repo: &Path, rel: &str) -> Result<Node, RepoError> {
    let mut docs = yaml::parse(rel, &kustomize::read(repo, rel)?)?;
    match docs.len() {
        0 => Ok(Node::new(Value::Map(Vec::new()), Site::new(rel, 0))),
        1 if docs[0].is_null() => Ok(Node::new(Value::Map(Vec::new()), Site::new(rel, 0))),
        1 if docs[0].as_map().is_some() => Ok(docs.remove(0)),
        _ => Err(RepoError::file(
            rel,
            "a Helm values file must be one YAML mapping",
        )),
    }
}

/// Give namespaced objects without a namespace the destination's.
fn fill_namespace(objects: &mut [Node], namespace: &Node) {
    for object in objects.iter_mut() {
        let kind = object.get_str(&["kind"]).unwrap_or_default();
        if kustomize::is_cluster_scoped(kind)
            || object
                .get_str(&["metadata", "namespace"])
                .is_some_and(|n| !n.is_empty())
        {
            continue;
        }
        kustomize::set_path(object, &["metadata", "namespace"], namespace.clone());
    }
}

/// The Applications an ApplicationSet creates.
pub fn expand(
    repo: &Path,
    set: &Node,
    ours: &dyn Fn(&str) -> bool,
    notes: &mut Vec<String>,
) -> Result<Vec<Node>, RepoError> {
    let name = set.get_str(&["metadata", "name"]).unwrap_or("?");
    for refused in ["templatePatch", "strategy"] {
        if let Some(node) = set.get(&["spec", refused])
            && refused == "templatePatch"
        {
            return Err(RepoError::new(
                node.site.clone(),
                format!("ApplicationSet {name}: `spec.templatePatch` is not evaluated by gates"),
            ));
        }
    }
    let go = set
        .get(&["spec", "goTemplate"])
        .and_then(Node::as_bool)
        .unwrap_or(false);
    let Some(template) = set.get(&["spec", "template"]) else {
        return Err(RepoError::new(
            set.site.clone(),
            format!("ApplicationSet {name} has no spec.template"),
        ));
    };
    let mut apps = Vec::new();
    for generator in set
        .get(&["spec", "generators"])
        .and_then(Node::as_seq)
        .unwrap_or_default()
    {
        for params in generated(repo, generator, name, go, ours, notes)? {
            let mut app = template.clone();
            substitute(&mut app, &params, go)?;
            let mut entries = vec![
                (
                    "apiVersion".to_string(),
                    Node::str("argoproj.io/v1alpha1", set.site.clone()),
                ),
                (
                    "kind".to_string(),
                    Node::str("Application", set.site.clone()),
                ),
            ];
            if let Value::Map(fields) = app.value {
                entries.extend(
                    fields
                        .into_iter()
                        .filter(|(k, _)| k != "apiVersion" && k != "kind"),
                );
            }
            apps.push(Node::new(Value::Map(entries), template.site.clone()));
        }
    }
    Ok(apps)
}

/// Template parameters: flat names (`path.basename`) with their values.
type Params = BTreeMap<String, Node>;

fn generated(
    repo: &Path,
    generator: &Node,
    set: &str,
    go: bool,
    ours: &dyn Fn(&str) -> bool,
    notes: &mut Vec<String>,
) -> Result<Vec<Params>, RepoError> {
    let (kind, body) = match generator.as_map() {
        Some([(kind, body)]) => (kind.as_str(), body),
        Some([(kind, body), (other, _), ..]) if other == "selector" => (kind.as_str(), body),
        _ => {
            return Err(RepoError::new(
                generator.site.clone(),
                format!("ApplicationSet {set}: a generator must name one kind"),
            ));
        }
    };
    match kind {
        "list" => {
            if let Some(elements) = body.get(&["elementsYaml"]) {
                return Err(RepoError::new(
                    elements.site.clone(),
                    format!("ApplicationSet {set}: list `elementsYaml` is not evaluated by gates"),
                ));
            }
            Ok(body
                .get(&["elements"])
                .and_then(Node::as_seq)
                .unwrap_or_default()
                .iter()
                .map(|element| {
                    let mut params = Params::new();
                    flatten("", element, &mut params);
                    params
                })
                .collect())
        }
        "git" => {
            let url = body.get_str(&["repoURL"]).unwrap_or_default();
            if !ours(url) {
                notes.push(format!(
                    "{}: ApplicationSet {set}: git generator over `{url}` skipped: it is not this repository",
                    body.site
                ));
                return Ok(Vec::new());
            }
            if let Some(files) = body.get(&["files"]) {
                return Err(RepoError::new(
                    files.site.clone(),
                    format!(
                        "ApplicationSet {set}: the git `files` generator is not evaluated by gates"
                    ),
                ));
            }
            let mut include = Vec::new();
            let mut exclude = Vec::new();
            for item in body
                .get(&["directories"])
                .and_then(Node::as_seq)
                .unwrap_or_default()
            {
                let Some(pattern) = item.get_str(&["path"]) else {
                    return Err(RepoError::new(
                        item.site.clone(),
                        format!("ApplicationSet {set}: a git directory needs a `path`"),
                    ));
                };
                if item.get(&["exclude"]).and_then(Node::as_bool) == Some(true) {
                    exclude.push(pattern.to_string());
                } else {
                    include.push((pattern.to_string(), item.site.clone()));
                }
            }
            let mut out = Vec::new();
            let mut found = std::collections::BTreeSet::new();
            for (pattern, site) in &include {
                for dir in matching_dirs(repo, pattern) {
                    if exclude.iter().any(|e| glob_path(e, &dir)) || !found.insert(dir.clone()) {
                        continue;
                    }
                    out.push(path_params(&dir, site, go));
                }
            }
            Ok(out)
        }
        other => Err(RepoError::new(
            generator.site.clone(),
            format!("ApplicationSet {set}: the `{other}` generator is not evaluated by gates"),
        )),
    }
}

/// A list element's keys as parameters: `a` and, for nested maps, `a.b`.
fn flatten(prefix: &str, node: &Node, params: &mut Params) {
    if let Value::Map(entries) = &node.value {
        for (key, value) in entries {
            let name = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            params.insert(name.clone(), value.clone());
            flatten(&name, value, params);
        }
    }
}

/// The parameters of one directory the git generator found.
fn path_params(dir: &str, site: &Site, go: bool) -> Params {
    let text = |s: &str| Node::str(s, site.clone());
    let basename = dir.rsplit('/').next().unwrap_or(dir);
    let normalized: String = basename
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let mut params = Params::new();
    let prefix = if go { "path." } else { "" };
    params.insert(
        if go {
            "path.path".into()
        } else {
            "path".into()
        },
        text(dir),
    );
    params.insert(
        format!("{prefix}{}basename", if go { "" } else { "path." }),
        text(basename),
    );
    params.insert(
        format!(
            "{prefix}{}basenameNormalized",
            if go { "" } else { "path." }
        ),
        text(&normalized),
    );
    for (i, segment) in dir.split('/').enumerate() {
        if go {
            params.insert(format!("path.segments.{i}"), text(segment));
        } else {
            params.insert(format!("path[{i}]"), text(segment));
        }
    }
    params
}

/// The repository's directories a generator path glob matches (`*`, `?` and `[...]` within
/// one segment, as Go's `path.Match`).
fn matching_dirs(repo: &Path, pattern: &str) -> Vec<String> {
    let mut current = vec![String::new()];
    for segment in pattern.trim_matches('/').split('/') {
        let mut next = Vec::new();
        for base in &current {
            let full = if base.is_empty() {
                repo.to_path_buf()
            } else {
                repo.join(base)
            };
            let Ok(entries) = std::fs::read_dir(&full) else {
                continue;
            };
            let mut names: Vec<String> = entries
                .filter_map(Result::ok)
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != ".git")
                .filter(|n| glob(segment, n))
                .collect();
            names.sort();
            next.extend(names.into_iter().map(|n| kustomize::join(base, &n)));
        }
        current = next;
    }
    current.retain(|d| !d.is_empty());
    current
}

fn glob_path(pattern: &str, path: &str) -> bool {
    let p: Vec<&str> = pattern.trim_matches('/').split('/').collect();
    let s: Vec<&str> = path.split('/').collect();
    p.len() == s.len() && p.iter().zip(&s).all(|(p, s)| glob(p, s))
}

/// Go's `path.Match` for one segment: `*`, `?` and `[...]` classes (with `^`/`!` and ranges).
fn glob(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], s: &[char]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some('*') => (0..=s.len()).any(|i| go(&p[1..], &s[i..])),
            Some('?') => !s.is_empty() && go(&p[1..], &s[1..]),
            Some('[') => {
                let Some(end) = p.iter().position(|&c| c == ']') else {
                    return false;
                };
                let Some(&c) = s.first() else { return false };
                let mut class = &p[1..end];
                let negate = matches!(class.first(), Some('^' | '!'));
                if negate {
                    class = &class[1..];
                }
                let mut hit = false;
                let mut i = 0;
                while i < class.len() {
                    if i + 2 < class.len() && class[i + 1] == '-' {
                        hit |= class[i] <= c && c <= class[i + 2];
                        i += 3;
                    } else {
                        hit |= class[i] == c;
                        i += 1;
                    }
                }
                hit != negate && go(&p[end + 1..], &s[1..])
            }
            Some(&c) => s.first() == Some(&c) && go(&p[1..], &s[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = name.chars().collect();
    go(&p, &s)
}

/// Substitute the template's `{{ ... }}` in every string of `node`. A whole-string tag takes
/// the parameter's value (a list element may give a map); a tag inside text takes its text.
fn substitute(node: &mut Node, params: &Params, go: bool) -> Result<(), RepoError> {
    match &mut node.value {
        Value::Seq(items) => items.iter_mut().try_for_each(|i| substitute(i, params, go)),
        Value::Map(entries) => entries
            .iter_mut()
            .try_for_each(|(_, v)| substitute(v, params, go)),
        Value::Null => Ok(()),
        Value::Scalar(..) => {
            let Some(text) = node.as_str().map(str::to_string) else {
                return Ok(());
            };
            if !text.contains("{{") {
                return Ok(());
            }
            let mut out = String::new();
            let mut rest = text.as_str();
            while let Some(start) = rest.find("{{") {
                out.push_str(&rest[..start]);
                let Some(len) = rest[start..].find("}}") else {
                    return Err(RepoError::new(
                        node.site.clone(),
                        format!("unclosed template tag in `{text}`"),
                    ));
                };
                let tag = rest[start + 2..start + len].trim();
                let key = if go {
                    parameter_of_go(tag).ok_or_else(|| {
                        RepoError::new(
                            node.site.clone(),
                            format!("Go template `{{{{{tag}}}}}` is not evaluated by gates (only `.field` references are)"),
                        )
                    })?
                } else {
                    tag.to_string()
                };
                let Some(value) = params.get(&key) else {
                    return Err(RepoError::new(
                        node.site.clone(),
                        format!("template parameter `{tag}` is not one the generator gives"),
                    ));
                };
                out.push_str(&value.show());
                rest = &rest[start + len + 2..];
            }
            out.push_str(rest);
            node.value = Node::str(out, node.site.clone()).value;
            Ok(())
        }
    }
}

/// `.a.b` → `a.b`; `index .path.segments N` → `path.segments.N`.
fn parameter_of_go(tag: &str) -> Option<String> {
    let tag = tag.trim_start_matches('-').trim_end_matches('-').trim();
    if let Some(rest) = tag.strip_prefix("index ") {
        let mut parts = rest.split_whitespace();
        let base = parts.next()?.strip_prefix('.')?;
        let i: usize = parts.next()?.parse().ok()?;
        return parts.next().is_none().then(|| format!("{base}.{i}"));
    }
    let field = tag.strip_prefix('.')?;
    field
        .chars()
        .all(|c| c.is_alphanumeric() || c == '.' || c == '_' || c == '-')
        .then(|| field.to_string())
}

#[cfg(test)]
mod tests;
