//! What the reader sees: the reporters that turn a run's results into terminal lines. The
//! engine evaluates; these only print.

pub mod libtest;
