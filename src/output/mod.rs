//! What the reader sees: the reporters that turn a run's results into terminal lines. The
//! engine evaluates; these only print.

pub mod files;
pub mod libtest;
pub mod notes;
