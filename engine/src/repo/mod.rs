//! The repository as evidence. ADR 007's implementation status cites files and lines of the
//! GitOps repository, not cluster objects, and a live check of staging cannot see the shared
//! values production will get. This module reads what a repository declares for each of its
//! environments (Flux Kustomizations and HelmReleases, Terraform VMs and variables, Talos
//! machine-config patches), keeps the file and line of every value through every merge and
//! patch, and evaluates the gates on it: before merge, before promotion, with no cluster.
//!
//! Nothing is guessed: a construct gates does not evaluate is an error naming the file and
//! line, or skipped with the reason where it cannot change what a trial reads.

pub mod argocd;
pub mod declared;
pub mod flux;
pub mod kustomize;
pub mod patch;
pub mod paths;
mod run;
pub mod substitute;
pub mod talos;
pub mod terraform;
#[cfg(test)]
pub mod testing;
pub mod trials;
pub mod unread;
pub mod validate;

// The declared state's YAML tree, sites and label queries are pure: they live in core.
pub use gates_core::declared::{label_query, site, yaml};
pub use run::{RepoError, RepoRun, prepare};
