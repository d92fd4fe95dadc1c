//! Judge: a probe's samples against its budget, the trials of a run, and the reports that
//! carry them (JSON, JUnit, timeline).

pub mod assemble;
pub mod attribution;
pub mod budget;
pub mod report;
pub mod split_brain;
pub mod verdicts;
