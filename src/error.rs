//! The one error type of the command line's boundary: every command's failure that stops it
//! before it can report verdicts, each keeping its cause, and the one place it becomes an
//! exit code.

use gates_core::exit::ExitCode;
use std::path::{Path, PathBuf};

use crate::collect;
use crate::config::ConfigErrors;
use crate::output::report;

/// Errors that stop a command before it can report verdicts: one variant per boundary, each
/// keeping its cause as the source. [`AppError::exit_code`] is the one place they become exit
/// codes.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    Config(#[from] ConfigErrors),
    #[error(transparent)]
    UnknownEnvironment(#[from] crate::config::UnknownEnvironment),
    /// The command line asks for something that cannot be done (a filter that leaves nothing).
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Snapshot(#[from] collect::snapshot::SnapshotError),
    #[error(transparent)]
    SnapshotWrite(#[from] collect::snapshot_writer::SnapshotWriteError),
    #[error(transparent)]
    Reports(#[from] report::history::ReportsDirUnreadable),
    #[error(transparent)]
    Outputs(#[from] report::outputs::OutputError),
    #[error(transparent)]
    Adr(#[from] crate::commands::adr::document::AdrError),
    /// A file the command reads or writes itself (a report, the ADR, stdout).
    #[error("{}: cannot {doing}: {source}", path.display())]
    File {
        path: PathBuf,
        doing: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Chaos(#[from] gates_engine::chaos::ChaosError),
    #[error(transparent)]
    Check(#[from] gates_engine::check::CheckError),
    /// The verdicts could not be written as a PolicyReport (`--policy-report`).
    #[error(transparent)]
    PolicyReport(#[from] gates_engine::policy_report::PolicyReportError),
    /// The environments of a fleet run could not be listed.
    #[error(transparent)]
    Fleet(#[from] gates_engine::fleet::FleetError),
    /// `gates watch` could not start (no client for the cluster).
    #[error(transparent)]
    Watch(#[from] gates_engine::watch::WatchError),
    /// `gates watch` could not listen where it was told.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The built-in lab of `gates demo` did not start.
    #[cfg(feature = "lab")]
    #[error("cannot start the lab: {source}")]
    Lab {
        #[source]
        source: gates_lab::LabError,
    },
    #[error("cannot encode {what}: {source}")]
    Encode {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

impl AppError {
    pub fn exit_code(&self) -> ExitCode {
        match self {
            AppError::Config(_)
            | AppError::UnknownEnvironment(_)
            | AppError::Usage(_)
            | AppError::Snapshot(_)
            | AppError::SnapshotWrite(_)
            | AppError::Reports(_)
            | AppError::Outputs(_)
            | AppError::Adr(_)
            | AppError::File { .. }
            | AppError::Encode { .. } => ExitCode::CannotTell,
            AppError::Chaos(err) => err.exit_code(),
            AppError::Check(_)
            | AppError::Fleet(_)
            | AppError::PolicyReport(_)
            | AppError::Watch(_)
            | AppError::Listen { .. } => ExitCode::CannotTell,
            #[cfg(feature = "lab")]
            AppError::Lab { .. } => ExitCode::CannotTell,
        }
    }

    /// An error for `path` that could not be read or written.
    pub fn file(path: &Path, doing: &'static str) -> impl FnOnce(std::io::Error) -> AppError {
        let path = path.to_path_buf();
        move |source| AppError::File {
            path,
            doing,
            source,
        }
    }
}
