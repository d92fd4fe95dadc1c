//! What the repository declares for one environment's cluster once it is rendered as Flux
//! applies it: its objects, its HelmReleases with their effective values, what was skipped on
//! purpose and what could not be read. The engine renders it (`repo::flux`).

use super::site::{RepoError, Site};
use super::unread::Unread;
use super::yaml::Node;

/// What the repository declares for one environment's cluster.
#[derive(Debug, Clone, Default)]
pub struct Manifests {
    pub objects: Vec<Node>,
    pub helm_releases: Vec<HelmRelease>,
    /// Constructs skipped on purpose, with the reason.
    pub notes: Vec<String>,
    /// Flux Kustomizations (or objects) that could not be read, and the kinds they may hold:
    /// a trial that reads one of those kinds is an error; the others are not affected.
    pub unread: Vec<Unread>,
}

impl Manifests {
    pub fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Node> + 'a {
        self.objects
            .iter()
            .filter(move |o| o.get_str(&["kind"]) == Some(kind))
    }
}

/// A HelmRelease and its effective values (chart defaults excluded: the repository does not
/// hold them).
#[derive(Debug, Clone)]
pub struct HelmRelease {
    pub namespace: String,
    pub name: String,
    /// `spec.chart.spec.chart`, when declared that way.
    pub chart: Option<String>,
    pub site: Site,
    /// The merged values, or why they cannot be known (a valuesFrom object that is not in the
    /// repository).
    pub values: Result<Node, RepoError>,
}
