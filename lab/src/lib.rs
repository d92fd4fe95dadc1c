//! gates-lab: a local, protocol-faithful simulation of Proxmox VE hosts, Talos nodes and a
//! Kubernetes API, driven by one deterministic world model. It serves real protocols on
//! loopback addresses only (127.0.0.0/8), so the `gates` harness reaches it exactly as it
//! reaches real infrastructure.

pub mod addr;
pub mod cli;
pub mod clock;
pub mod control;
pub mod export;
pub mod files;
pub mod ids;
pub mod ingress;
pub mod kube;
pub mod net;
pub mod power;
pub mod quantity;
pub mod reqlog;
pub mod resources;
pub mod runner;
pub mod scenario;
pub mod selector;
pub mod truth;
pub mod world;
pub mod yaml;

pub use runner::{Lab, LabError, LabFiles, LabOptions};

pub mod pki;
pub mod proxmox;
pub mod talos;
