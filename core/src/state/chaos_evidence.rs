//! Gate 4's evidence, as `gates check` reads it back: the newest chaos report of the
//! environment, the record as the chaos run wrote it, and where it was read from. The report
//! itself is written by the chaos run; only what was read of it is part of the state the
//! checks see.

use serde::Serialize;

use crate::record::chaos::ChaosRecord;

/// The newest chaos report of an environment, read back.
#[derive(Debug, Clone, Serialize)]
pub struct ChaosEvidence {
    /// The file it was read from, for the finding's evidence.
    pub file: String,
    pub record: ChaosRecord,
}
