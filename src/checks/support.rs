//! Helpers shared by several checks.
