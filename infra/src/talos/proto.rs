//! Generated code for our Talos API subset, wire-compatible with apid: built once in
//! `gates-proto` (`proto/`) and shared with the lab.

pub use gates_proto::{common, cosi, google, machine};
