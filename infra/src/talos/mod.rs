//! Talos API (apid, port 50000): talosconfig reading and a per-node gRPC client.
pub mod proto;
