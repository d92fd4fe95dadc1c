//! The parts of an environment's manifests gates could not read, and which kinds of object
//! they may hold. One unreadable Flux Kustomization (a remote base, a `replacements` gates
//! does not evaluate)
//! then makes only the trials that read those kinds `error`; the others reach their verdicts.
//!
//! The kinds come from a raw walk of the part's files: every document's `kind`, the
//! ConfigMaps and Secrets its generators make, and the files of the Flux Kustomizations it
//! holds, without applying anything. That over-approximates what the part renders, since
//! Kustomize's transformers change names, labels and fields but never an object's kind;
//! a construct that creates objects gates cannot list (a remote base, the old
//! `helmChartInflationGenerator`) may hold any. A `helmCharts` entry is read as a release of
//! its chart, as a HelmRelease is (see `kustomize/helm_charts.rs`).

use std::collections::BTreeSet;
use std::path::Path;

use super::paths;
use super::site::Site;
use super::yaml::{self, Node};

// The unread part, its kinds and the test for `${...}` are pure: they live in core.
pub use gates_core::declared::unread::{Kinds, Unread, holds_variable};

/// The kinds one object left unread may bring: its own, and for a Flux Kustomization or an
/// Argo CD Application everything its path may render (anything, when the path itself is
/// not known).
pub fn kinds_of_object(repo: &Path, object: &Node) -> Kinds {
    let kind = object.get_str(&["kind"]).unwrap_or("?");
    let api = object.get_str(&["apiVersion"]).unwrap_or_default();
    let path = if kind == "Kustomization" && api.starts_with("kustomize.toolkit.fluxcd.io/") {
        Some(object.get_str(&["spec", "path"]).unwrap_or(".").to_string())
    } else if kind == "Application" && api.starts_with("argoproj.io/") {
        match paths::source_path(object) {
            Some(p) => Some(p),
            None => return Kinds::Any,
        }
    } else if kind == "ApplicationSet" && api.starts_with("argoproj.io/") {
        return Kinds::Any;
    } else {
        None
    };
    let Some(path) = path else {
        return Kinds::one(kind);
    };
    if path.contains("${") {
        return Kinds::Any;
    }
    let Ok(dir) = paths::resolve("", &path, &object.site) else {
        return Kinds::Any;
    };
    match kinds_under(repo, &dir) {
        Kinds::Any => Kinds::Any,
        Kinds::Only(mut kinds) => {
            kinds.insert(kind.to_string());
            Kinds::Only(kinds)
        }
    }
}

/// The kinds the Flux Kustomization path `dir` may render, read raw.
pub fn kinds_under(repo: &Path, dir: &str) -> Kinds {
    if !repo.join(dir).exists() {
        // Flux fails such a Kustomization and applies nothing of it.
        return Kinds::Only(BTreeSet::new());
    }
    let mut walk = Walk {
        repo,
        kinds: BTreeSet::new(),
        seen: BTreeSet::new(),
    };
    match walk.dir(dir, 0) {
        Ok(()) => Kinds::Only(walk.kinds),
        Err(()) => Kinds::Any,
    }
}

/// Constructs that create objects gates cannot list without running them.
const CREATES_ANY: [&str; 1] = ["helmChartInflationGenerator"];

/// A raw walk of a part's files; `Err(())`: it may hold any kind.
struct Walk<'a> {
    repo: &'a Path,
    kinds: BTreeSet<String>,
    seen: BTreeSet<String>,
}

impl Walk<'_> {
    fn dir(&mut self, dir: &str, depth: usize) -> Result<(), ()> {
        if depth > 32 || !self.seen.insert(dir.to_string()) {
            return Ok(());
        }
        let Some(file) = paths::kustomization_file(self.repo, dir) else {
            // Flux generates a kustomization of every YAML file below a plain directory.
            return self.yaml_files(dir, depth);
        };
        let k = parse(self.repo, &file)?;
        let k = k.first().ok_or(())?;
        if CREATES_ANY.iter().any(|key| k.entry(key).is_some()) {
            return Err(());
        }
        for (key, kind) in [
            ("configMapGenerator", "ConfigMap"),
            ("secretGenerator", "Secret"),
            // Read as a release of its chart, as a HelmRelease is.
            ("helmCharts", "HelmRelease"),
        ] {
            if k.entry(key).is_some() {
                self.kinds.insert(kind.into());
            }
        }
        for key in ["resources", "bases", "components"] {
            for item in k.entry(key).and_then(Node::as_seq).unwrap_or_default() {
                let path = item.as_str().ok_or(())?;
                if path.contains("://") || path.starts_with("github.com/") {
                    return Err(());
                }
                let rel = paths::resolve(dir, path, &item.site).map_err(|_| ())?;
                self.entry(&rel, depth)?;
            }
        }
        Ok(())
    }

    /// A directory is walked, a file read.
    fn entry(&mut self, rel: &str, depth: usize) -> Result<(), ()> {
        if self.repo.join(rel).is_dir() {
            self.dir(rel, depth + 1)
        } else {
            self.documents(rel, depth)
        }
    }

    fn yaml_files(&mut self, dir: &str, depth: usize) -> Result<(), ()> {
        let mut names: Vec<String> = std::fs::read_dir(self.repo.join(dir))
            .map_err(|_| ())?
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names {
            let rel = paths::join(dir, &name);
            let yaml = name.ends_with(".yaml") || name.ends_with(".yml");
            if yaml || self.repo.join(&rel).is_dir() {
                self.entry(&rel, depth)?;
            }
        }
        Ok(())
    }

    /// The kinds of a file's documents; a Flux Kustomization among them adds its path's.
    fn documents(&mut self, rel: &str, depth: usize) -> Result<(), ()> {
        let docs = match parse(self.repo, rel) {
            Ok(docs) => docs,
            Err(()) => return self.kinds_written(rel),
        };
        for doc in docs {
            let Some(kind) = doc.get_str(&["kind"]) else {
                continue;
            };
            self.kinds.insert(kind.to_string());
            if kind == "List" {
                return Err(());
            }
            let flux = doc
                .get_str(&["apiVersion"])
                .is_some_and(|a| a.starts_with("kustomize.toolkit.fluxcd.io/"));
            if kind == "Application"
                && doc
                    .get_str(&["apiVersion"])
                    .is_some_and(|a| a.starts_with("argoproj.io/"))
            {
                let dir = paths::source_path(&doc).ok_or(())?;
                if self.repo.join(&dir).is_dir() {
                    self.dir(&dir, depth + 1)?;
                }
            }
            if kind == "ApplicationSet" {
                return Err(());
            }
            if kind == "Kustomization" && flux {
                let path = doc.get_str(&["spec", "path"]).unwrap_or(".");
                let dir = paths::resolve("", path, &Site::new(rel, 0)).map_err(|_| ())?;
                if self.repo.join(&dir).is_dir() {
                    self.dir(&dir, depth + 1)?;
                }
            }
        }
        Ok(())
    }
}

impl Walk<'_> {
    /// The kinds of a file that does not parse (a duplicate key, say), from the `kind:` line
    /// at the top of each of its documents. A document without one, or one that could
    /// bring in other files (a Kustomization, an Application, a List), may hold anything.
    fn kinds_written(&mut self, rel: &str) -> Result<(), ()> {
        let text = std::fs::read_to_string(self.repo.join(rel)).map_err(|_| ())?;
        for document in text.split("\n---") {
            let meaningful = document.lines().any(|l| {
                let t = l.trim();
                !t.is_empty() && !t.starts_with('#') && !t.starts_with("---")
            });
            if !meaningful {
                continue;
            }
            let kind = document
                .lines()
                .find_map(|l| l.strip_prefix("kind:"))
                .map(|k| k.trim().trim_matches(['"', '\'']))
                .filter(|k| !k.is_empty() && !k.contains(' '))
                .ok_or(())?;
            if matches!(
                kind,
                "Kustomization" | "Application" | "ApplicationSet" | "List"
            ) {
                return Err(());
            }
            self.kinds.insert(kind.to_string());
        }
        Ok(())
    }
}

fn parse(repo: &Path, rel: &str) -> Result<Vec<Node>, ()> {
    let text = std::fs::read_to_string(repo.join(rel)).map_err(|_| ())?;
    yaml::parse(rel, &text).map_err(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::repo::testing::repo;

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
    fn a_file_that_does_not_parse_holds_the_kinds_its_documents_name_at_their_top() {
        let dir = repo(&[
            (
                "apps/kafka.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations: {}\n  annotations: {}\n---\napiVersion: kafka.strimzi.io/v1beta2\nkind: Kafka\n",
            ),
            ("other/bad.yaml", "apiVersion: v1\nmetadata: {a: 1, a: 2}\n"),
        ]);
        let Kinds::Only(kinds) = kinds_under(dir.path(), "apps") else {
            panic!("every document names its kind");
        };
        assert_eq!(
            kinds.into_iter().collect::<Vec<_>>(),
            vec!["ConfigMap".to_string(), "Kafka".to_string()]
        );
        assert_eq!(kinds_under(dir.path(), "other"), Kinds::Any);
    }

    #[test]
    fn a_chart_inflated_by_kustomize_is_held_as_a_release_and_the_old_generator_as_anything() {
        let dir = repo(&[
            (
                "apps/kustomization.yaml",
                "helmCharts:\n  - name: traefik\n    repo: https://example.invalid\n",
            ),
            (
                "old/kustomization.yaml",
                "helmChartInflationGenerator:\n  - chartName: traefik\n",
            ),
        ]);
        let kinds = kinds_under(dir.path(), "apps");
        assert!(kinds.may_hold(&["HelmRelease"]), "{kinds:?}");
        assert!(!kinds.may_hold(&["Service"]), "{kinds:?}");
        assert_eq!(kinds_under(dir.path(), "old"), Kinds::Any);
    }
}
