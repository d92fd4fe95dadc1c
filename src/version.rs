//! What `gates --version` says: the package version and the commit it was built from, so a
//! report or a bug can be traced to the exact code (stamped by build.rs).

/// `0.1.0 (85ec203 2026-12-01)`.
pub const LONG: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("GATES_COMMIT"), ")");
