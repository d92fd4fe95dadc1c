//! The records of runs, as their report files hold them: each file format is one type tree
//! here, written and read back by the same types, so what a run writes and what a later
//! reader (gate 4, the HTML page, the history, the metrics) sees cannot drift apart.
//!
//! Times on a run's timeline are [`std::time::Duration`]s in memory and seconds in the files
//! ([`seconds`] says to what precision, and reads them back exactly).

pub mod chaos;
pub mod check;
pub mod event;
pub mod power;
pub mod prediction;
pub mod probe;
pub mod seconds;
pub mod split_brain;
pub mod timeline;
pub mod trial;
