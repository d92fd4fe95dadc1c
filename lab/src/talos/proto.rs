//! Stubs and messages of the Talos API subset (Talos's `machine` and `common` packages, COSI's
//! `cosi.resource`; wire-compatible with apid), built once in `gates-proto` (`proto/`) and
//! shared with the harness's clients.

pub use gates_proto::{common, cosi, google, machine};
