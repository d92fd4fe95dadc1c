//! `gates snapshot ENV`: read the environment live and write what was read to a file that
//! `check --snapshot` and `predict --snapshot` read back.

use gates_core::exit::ExitCode;

use crate::cli::SnapshotArgs;
use crate::collect;
use crate::config::{Config, Environment};
use crate::error::AppError;
use crate::output::files::write_file;
use crate::streams::Streams;

pub async fn run(
    config: &Config,
    args: SnapshotArgs,
    streams: &mut Streams,
) -> Result<ExitCode, AppError> {
    let env: &Environment = config.environment(&args.env)?;
    let text = collect::snapshot_writer::write_live(config, env, args.allow_incomplete).await?;
    write_file(&args.output, &text)?;
    streams.say(format_args!("snapshot: {}", args.output.display()));
    Ok(ExitCode::Passed)
}
