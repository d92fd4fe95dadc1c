//! The version of the report files gates writes. Dashboards, `gates history`, gate 4 (which
//! reads the newest chaos report) and `gates adr` read them back, sometimes written by another
//! gates on another machine: a report from a newer gates may mean something this one cannot
//! tell, so it is refused by name rather than half-read. Reports from before the version was
//! written carry none and read as they always did.

/// The version every check and chaos report this gates writes carries (`schema_version`).
pub const SCHEMA_VERSION: u32 = 1;

/// A report written by a newer gates than this one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "written by a newer gates (schema_version {found}; this gates reads up to {SCHEMA_VERSION}): update gates to read it"
)]
pub struct NewerReport {
    pub found: u32,
}

/// Whether a report's `schema_version` (absent in reports from before versions) can be read.
pub fn admit(found: Option<u32>) -> Result<(), NewerReport> {
    match found {
        Some(found) if found > SCHEMA_VERSION => Err(NewerReport { found }),
        _ => Ok(()),
    }
}

/// Only the version of a report, read before the rest.
#[derive(Debug, Default, serde::Deserialize)]
pub struct Versioned {
    #[serde(default)]
    pub schema_version: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_without_a_version_or_of_this_version_is_read_and_a_newer_one_refused() {
        assert_eq!(admit(None), Ok(()));
        assert_eq!(admit(Some(SCHEMA_VERSION)), Ok(()));
        let err = admit(Some(SCHEMA_VERSION + 1)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "written by a newer gates (schema_version {}; this gates reads up to {SCHEMA_VERSION}): update gates to read it",
                SCHEMA_VERSION + 1
            )
        );
    }
}
