//! The integration tests of gates-infra, in one test binary (one link instead of one per file):
//! the Talos and Proxmox clients against real TLS servers on loopback.

mod common;
mod proxmox_client;
mod proxmox_mapping;
mod talos_client;
mod talosconfig;
