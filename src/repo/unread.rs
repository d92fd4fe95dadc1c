//! The parts of an environment's manifests gates could not read, and which kinds of object
//! they may hold. One unreadable Flux Kustomization (a `helmCharts` inflation, a remote base)
//! then makes only the trials that read those kinds `error`; the others reach their verdicts.
//!
//! The kinds come from a raw walk of the part's files: every document's `kind`, the
//! ConfigMaps and Secrets its generators make, and the files of the Flux Kustomizations it
//! holds, without applying anything. That over-approximates what the part renders, since
//! Kustomize's transformers change names, labels and fields but never an object's kind;
//! a construct that creates objects of its own (`helmCharts`, a remote base) may hold any.

use std::collections::BTreeSet;
use std::path::Path;

use super::kustomize;
use super::site::{RepoError, Site};
use super::yaml::{self, Node};

/// A part of the manifests that was not read.
#[derive(Debug, Clone)]
pub struct Unread {
    /// Why: the construct, with its file and line.
    pub error: RepoError,
    /// The kinds it may hold.
    pub kinds: Kinds,
}

/// The kinds of object an unread part may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kinds {
    Any,
    Only(BTreeSet<String>),
}

impl Kinds {
    pub fn one(kind: &str) -> Kinds {
        Kinds::Only(BTreeSet::from([kind.to_string()]))
    }

    /// Whether an object of one of `reads` may be among them.
    pub fn may_hold(&self, reads: &[&str]) -> bool {
        match self {
            Kinds::Any => true,
            Kinds::Only(kinds) => reads.iter().any(|k| kinds.contains(*k)),
        }
    }
}

/// The kinds the Flux Kustomization path `dir` may render, read raw.
pub fn kinds_under(repo: &Path, dir: &str) -> Kinds {
    let mut kinds = BTreeSet::new();
    if !repo.join(dir).exists() {
        // Flux fails such a Kustomization and applies nothing of it.
        return Kinds::Only(kinds);
    }
    let mut seen = BTreeSet::new();
    match walk(repo, dir, &mut kinds, &mut seen, 0) {
        Ok(()) => Kinds::Only(kinds),
        Err(()) => Kinds::Any,
    }
}

/// Constructs that create objects gates cannot list without running them.
const CREATES_ANY: [&str; 2] = ["helmCharts", "helmChartInflationGenerator"];

fn walk(
    repo: &Path,
    dir: &str,
    kinds: &mut BTreeSet<String>,
    seen: &mut BTreeSet<String>,
    depth: usize,
) -> Result<(), ()> {
    if depth > 32 || !seen.insert(dir.to_string()) {
        return Ok(());
    }
    let Some(file) = kustomize::kustomization_file(repo, dir) else {
        // Flux generates a kustomization of every YAML file below a plain directory.
        return yaml_files(repo, dir, kinds, seen, depth);
    };
    let k = parse(repo, &file)?;
    let k = k.first().ok_or(())?;
    if CREATES_ANY.iter().any(|key| k.entry(key).is_some()) {
        return Err(());
    }
    for key in ["configMapGenerator", "secretGenerator"] {
        if k.entry(key).is_some() {
            kinds.insert(
                if key.starts_with("config") {
                    "ConfigMap"
                } else {
                    "Secret"
                }
                .into(),
            );
        }
    }
    for key in ["resources", "bases", "components"] {
        for item in k.entry(key).and_then(Node::as_seq).unwrap_or_default() {
            let path = item.as_str().ok_or(())?;
            if path.contains("://") || path.starts_with("github.com/") {
                return Err(());
            }
            let rel = kustomize::resolve(dir, path, &item.site).map_err(|_| ())?;
            let full = repo.join(&rel);
            if full.is_dir() {
                walk(repo, &rel, kinds, seen, depth + 1)?;
            } else {
                documents(repo, &rel, kinds, seen, depth)?;
            }
        }
    }
    Ok(())
}

fn yaml_files(
    repo: &Path,
    dir: &str,
    kinds: &mut BTreeSet<String>,
    seen: &mut BTreeSet<String>,
    depth: usize,
) -> Result<(), ()> {
    let mut entries: Vec<_> = std::fs::read_dir(repo.join(dir))
        .map_err(|_| ())?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let Some(name) = name else { continue };
        let rel = if dir.is_empty() || dir == "." {
            name.clone()
        } else {
            format!("{dir}/{name}")
        };
        if path.is_dir() {
            walk(repo, &rel, kinds, seen, depth + 1)?;
        } else if name.ends_with(".yaml") || name.ends_with(".yml") {
            documents(repo, &rel, kinds, seen, depth)?;
        }
    }
    Ok(())
}

/// The kinds of a file's documents; a Flux Kustomization among them adds its path's.
fn documents(
    repo: &Path,
    rel: &str,
    kinds: &mut BTreeSet<String>,
    seen: &mut BTreeSet<String>,
    depth: usize,
) -> Result<(), ()> {
    for doc in parse(repo, rel)? {
        let Some(kind) = doc.get_str(&["kind"]) else {
            continue;
        };
        kinds.insert(kind.to_string());
        if kind == "List" {
            return Err(());
        }
        let flux = doc
            .get_str(&["apiVersion"])
            .is_some_and(|a| a.starts_with("kustomize.toolkit.fluxcd.io/"));
        if kind == "Kustomization" && flux {
            let path = doc.get_str(&["spec", "path"]).unwrap_or(".");
            let site = Site::new(rel, 0);
            let dir = kustomize::resolve("", path, &site).map_err(|_| ())?;
            if repo.join(&dir).is_dir() {
                walk(repo, &dir, kinds, seen, depth + 1)?;
            }
        }
    }
    Ok(())
}

fn parse(repo: &Path, rel: &str) -> Result<Vec<Node>, ()> {
    let text = std::fs::read_to_string(repo.join(rel)).map_err(|_| ())?;
    yaml::parse(rel, &text).map_err(|_| ())
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

    #[test]
    fn the_kinds_of_a_part_are_those_of_its_files_its_generators_and_its_flux_children() {
        let dir = repo(&[
            (
                "apps/kustomization.yaml",
                "resources: [deploy.yaml, ../more]\nconfigMapGenerator:\n  - name: x\n    literals: [a=b]\n",
            ),
            (
                "apps/deploy.yaml",
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
            ),
            (
                "more/ks.yaml",
                "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: k}\nspec: {path: ./deep}\n",
            ),
            (
                "deep/pdb.yaml",
                "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: p}\n",
            ),
        ]);
        let Kinds::Only(kinds) = kinds_under(dir.path(), "apps") else {
            panic!("all files were readable");
        };
        let kinds: Vec<&str> = kinds.iter().map(String::as_str).collect();
        assert_eq!(
            kinds,
            [
                "ConfigMap",
                "Deployment",
                "Kustomization",
                "PodDisruptionBudget"
            ]
        );
        assert!(!kinds_under(dir.path(), "apps").may_hold(&["Service"]));
    }

    #[test]
    fn a_chart_inflated_by_kustomize_may_hold_any_kind() {
        let dir = repo(&[(
            "apps/kustomization.yaml",
            "helmCharts:\n  - name: traefik\n    repo: https://example.invalid\n",
        )]);
        assert_eq!(kinds_under(dir.path(), "apps"), Kinds::Any);
        assert!(Kinds::Any.may_hold(&["Service"]));
    }
}
