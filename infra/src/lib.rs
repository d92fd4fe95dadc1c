//! Protocol clients for `gates`: the Talos API (gRPC over mutual TLS) and the Proxmox VE API.
pub mod talos;
