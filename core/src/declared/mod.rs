//! The declared state's pure parts: what a GitOps repository declares, read with the file and
//! line of every value. The engine reads the repository's files and renders each environment;
//! the types it reads them into, and the reading of text it was handed, live here.
//!
//! - [`yaml`]: the repository's YAML as a tree of [`yaml::Node`]s that keep their lines.
//! - [`site`]: where a value was written ([`site::Site`]) and what is wrong there
//!   ([`site::RepoError`]).
//! - [`environments`]: what a repository declares for each environment, and which nodes.
//! - [`label_query`]: label selectors written as one string, as Kustomize patch targets take
//!   them, compiled by [`crate::selector`].
//! - [`manifests`]: an environment's objects and HelmReleases as Flux applies them.
//! - [`talos`]: Talos machine-config patches, the nodes they apply to and what they say of a
//!   node.
//! - [`terraform`]: Terraform's VMs, variables and Talos patches.
//! - [`unread`]: the parts of an environment's manifests that could not be read, and the kinds
//!   those may hold.

pub mod environments;
pub mod label_query;
pub mod manifests;
pub mod site;
pub mod talos;
pub mod terraform;
pub mod unread;
pub mod yaml;
