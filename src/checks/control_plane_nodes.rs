//! (being written)

use serde::Deserialize;

use super::Context;
use crate::verdict::Finding;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {}

pub fn evaluate(_ctx: Context<'_>, _params: &Params) -> Finding {
    Finding::error("this check is not implemented yet")
}
