//! Paths in a repository: joining and resolving the paths files write, reading a file, and
//! the directories a Kustomization or an Argo CD Application points at. A leaf that the
//! renderers (Kustomize, Argo CD, Flux) and the walk over what they leave unread share.

use std::path::Path;

use super::site::{RepoError, Site};
use super::yaml::Node;

const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// The repository-relative Kustomization file of `dir`, if it has one.
pub fn kustomization_file(repo: &Path, dir: &str) -> Option<String> {
    KUSTOMIZATION_FILES
        .iter()
        .map(|name| join(dir, name))
        .find(|rel| repo.join(rel).is_file())
}

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

/// The repository-relative path an Application renders, for setting it aside.
pub fn source_path(app: &Node) -> Option<String> {
    let source = app.get(&["spec", "source"]).or_else(|| {
        app.get(&["spec", "sources"])
            .and_then(|s| s.as_seq()?.first())
    })?;
    let path = source.get_str(&["path"])?;
    resolve("", path, &source.site).ok()
}
