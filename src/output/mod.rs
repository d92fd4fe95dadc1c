//! What the reader sees: the reporters that turn a run's results into terminal lines. The
//! engine evaluates; these only print.

pub mod chaos;
pub mod files;
pub mod fleet;
pub mod libtest;
pub mod notes;
pub mod report;
pub mod served;

/// How a command prints its results: libtest's lines, their one-line form, or JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Pretty,
    Terse,
    Json,
}

/// Whether the terminal lines are coloured (`auto`: on a terminal, unless `NO_COLOR` is set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}
