//! `gates validate` for an environment's `repo` section: before a pull request's CI job runs
//! the repository trials, say whether the section points at a checkout that gates can read at
//! all. The checkout and every directory and file the section names must exist, the layout
//! must yield the environment, and the declared state (Flux, Kustomize, HelmRelease values,
//! Terraform, Talos patches) must load and parse. Files only: no cluster, no network, no git.
//!
//! A problem in the environment file names its file, line, column and the key; a problem in
//! the repository names the repository file and line, as the repository trials would.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::declared::{self, Layout};
use super::site::RepoError;
use crate::config::spans::{self, Node};
use crate::config::{Environment, RepoSpec};

/// What the `repo` section check found: problems (exit 2) and notes.
#[derive(Debug, Default, PartialEq)]
pub struct RepoFindings {
    pub problems: Vec<String>,
    pub notes: Vec<String>,
}

/// Check `env`'s `repo` section; nothing to say when it has none.
pub fn check(env: &Environment) -> RepoFindings {
    let mut found = RepoFindings::default();
    let Some(spec) = &env.repo else {
        return found;
    };
    let tree = std::fs::read_to_string(&env.file)
        .ok()
        .and_then(|text| spans::parse(&text).ok());
    let at = Places {
        file: &env.file,
        tree: tree.as_ref(),
    };
    let Some(path) = &spec.path else {
        found.notes.push(format!(
            "{}: repo: no `path`; the repository trials need `gates check --repo PATH`",
            at.of(&["repo"])
        ));
        return found;
    };
    let root = env
        .file
        .parent()
        .map_or_else(|| path.clone(), |dir| dir.join(path));
    if !root.is_dir() {
        found.problems.push(format!(
            "{}: repo.path: {} is not a directory (paths are relative to the environment file)",
            at.of(&["repo", "path"]),
            root.display()
        ));
        return found;
    }
    named_paths(spec, &root, &at, &mut found.problems);
    if !found.problems.is_empty() {
        // Loading a layout whose directories are missing would only repeat them.
        return found;
    }
    let layout = Layout::resolve(&root, spec);
    if layout.names.is_empty() {
        found.problems.push(format!(
            "{}: repo: no environments found: {} has no clusters/ENV directories and repo.kubernetes names none",
            at.of(&["repo"]),
            root.display()
        ));
        return found;
    }
    let known: Vec<&str> = layout.names.iter().map(String::as_str).collect();
    environments_named(env, spec, &layout, &at, &mut found.problems);
    let errors = declared_errors(&root, &layout);
    found.problems.extend(errors);
    if found.problems.is_empty() {
        found.notes.push(format!(
            "repository {}: {} read ({})",
            root.display(),
            if known.len() == 1 {
                "1 environment".to_string()
            } else {
                format!("{} environments", known.len())
            },
            known.join(", ")
        ));
    }
    found
}

/// The environment and the `tfvars` and `talos` entries must name environments of the
/// repository.
fn environments_named(
    env: &Environment,
    spec: &RepoSpec,
    layout: &Layout,
    at: &Places,
    problems: &mut Vec<String>,
) {
    let known: Vec<&str> = layout.names.iter().map(String::as_str).collect();
    let own = spec.environment.clone().unwrap_or_else(|| env.name.clone());
    if !layout.names.contains(&own) {
        let key = if spec.environment.is_some() {
            "repo.environment"
        } else {
            "repo"
        };
        problems.push(format!(
            "{}: {key}: `{own}` is not an environment of the repository (it has: {}); set repo.environment",
            at.of(&["repo", "environment"]),
            known.join(", ")
        ));
    }
    for (section, map) in [("tfvars", &spec.tfvars), ("talos", &spec.talos)] {
        for name in map.keys().filter(|n| !layout.names.contains(*n)) {
            problems.push(format!(
                "{}: repo.{section}.{name}: `{name}` is not an environment of the repository (it has: {})",
                at.of(&["repo", section, name]),
                known.join(", ")
            ));
        }
    }
}

/// What the declared state of every environment of the repository could not load, read or
/// evaluate, each said once.
fn declared_errors(root: &Path, layout: &Layout) -> BTreeSet<String> {
    let declared = declared::load(root, layout);
    // A file both environments include is said once.
    let mut errors: BTreeSet<String> = BTreeSet::new();
    for env in declared.environments.values() {
        let failed = [
            env.manifests.as_ref().and_then(|m| m.as_ref().err()),
            env.terraform.as_ref().and_then(|t| t.as_ref().err()),
            env.talos.as_ref().and_then(|t| t.as_ref().err()),
        ];
        errors.extend(failed.into_iter().flatten().map(|e| in_repo(root, e)));
        // Parts the trials set aside are problems of the repository all the same.
        if let Some(Ok(m)) = &env.manifests {
            errors.extend(m.unread.iter().map(|u| in_repo(root, &u.error)));
        }
        if let Some(Ok(tf)) = &env.terraform {
            errors.extend(
                tf.unread_modules
                    .iter()
                    .map(|module| format!("{}: {module}", root.display())),
            );
        }
        // Talos patches gates could not read (a Jinja template with control flow, a patch it
        // cannot apply), and values a template writes that gates cannot evaluate: the trials
        // that read them cannot reach a verdict while they stay unknown.
        if let Some(Ok(talos)) = &env.talos {
            errors.extend(
                talos
                    .skipped
                    .iter()
                    .map(|s| format!("Talos patch not read: {s}")),
            );
            errors.extend(
                talos
                    .unknown
                    .iter()
                    .map(|u| format!("Talos value not known: {u}")),
            );
        }
    }
    errors
}

/// The directories and files the section names must exist in the checkout.
fn named_paths(spec: &RepoSpec, root: &Path, at: &Places, problems: &mut Vec<String>) {
    let mut want = |keys: &[&str], relative: &str, dir: bool| {
        let full = root.join(relative);
        let ok = if dir { full.is_dir() } else { full.is_file() };
        if !ok {
            problems.push(format!(
                "{}: {}: {} is not a {} in the repository {}",
                at.of(keys),
                keys.join("."),
                relative,
                if dir { "directory" } else { "file" },
                root.display()
            ));
        }
    };
    for (name, dir) in &spec.kubernetes {
        want(&["repo", "kubernetes", name], dir, true);
    }
    if let Some(dir) = &spec.terraform {
        want(&["repo", "terraform"], dir, true);
    }
    for (name, file) in &spec.tfvars {
        want(&["repo", "tfvars", name], file, false);
    }
    for (name, dir) in &spec.talos {
        want(&["repo", "talos", name], dir, true);
    }
}

/// `/checkout/kubernetes/x/release.yaml:12: message`: a repository error with the checkout's path.
fn in_repo(root: &Path, e: &RepoError) -> String {
    let file = root.join(&e.site.file);
    if e.site.line == 0 {
        format!("{}: {}", file.display(), e.message)
    } else {
        format!("{}:{}: {}", file.display(), e.site.line, e.message)
    }
}

/// Where a key of the environment file is: `file:line:column`, or the nearest enclosing key
/// that is there, or the file alone.
struct Places<'a> {
    file: &'a PathBuf,
    tree: Option<&'a Node>,
}

impl Places<'_> {
    fn of(&self, keys: &[&str]) -> String {
        let file = self.file.display();
        let Some(tree) = self.tree else {
            return file.to_string();
        };
        (1..=keys.len())
            .rev()
            .find_map(|n| tree.at(&keys[..n]))
            .map_or(file.to_string(), |node| {
                format!("{file}:{}:{}", node.line, node.column)
            })
    }
}
