//! `gates history ENV`: the last results per gate and per chaos host, with trends.

use gates_core::exit::ExitCode;

use crate::cli::{Format, HistoryArgs};
use crate::error::AppError;
use crate::output::report;
use crate::streams::Streams;

/// `gates history ENV`: the last results per gate and per chaos host, with trends.
pub fn run(args: HistoryArgs, streams: &mut Streams) -> Result<ExitCode, AppError> {
    let found = report::history::read(&args.reports, &args.env)?;
    for err in &found.unreadable {
        streams.say(format_args!("error: {err}"));
    }
    let history = report::history::History::of(&args.env, &found, args.last.max(1));
    match args.format {
        Format::Json => streams.println(history.render_json()),
        Format::Pretty | Format::Terse => streams.print(&history.render_text()),
    }
    Ok(if found.unreadable.is_empty() {
        ExitCode::Passed
    } else {
        ExitCode::CannotTell
    })
}
