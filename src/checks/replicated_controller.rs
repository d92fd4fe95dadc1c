//! (being written)

use std::collections::BTreeMap;

use serde::Deserialize;

use super::Context;
use crate::verdict::Finding;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Names the trial (`coredns`); workloads are found by `selector`, never by name.
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    pub selector: BTreeMap<String, String>,
    #[serde(default = "default_min_replicas")]
    pub min_replicas: usize,
}

fn default_min_replicas() -> usize {
    2
}

pub fn evaluate(_ctx: Context<'_>, _params: &Params) -> Finding {
    Finding::error("this check is not implemented yet")
}
