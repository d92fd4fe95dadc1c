//! Gate 4 is proven by `gates chaos`, not by reading the cluster. Until a chaos report
//! exists for the environment, its trial is skipped with the command to run.

use serde::Deserialize;

use super::Context;
use crate::verdict::Finding;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {}

pub fn evaluate(ctx: Context<'_>, _params: &Params) -> Finding {
    Finding::skip(format!(
        "no chaos report for {}: run `gates chaos {}`",
        ctx.env.name, ctx.env.name
    ))
}
