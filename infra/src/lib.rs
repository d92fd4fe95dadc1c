//! Protocol clients for `gates`: the Talos API (gRPC over mutual TLS) and the Proxmox VE
//! API (HTTPS with an API token). Each boundary has its own error type whose messages say
//! what to fix; nothing here prints secrets.
pub mod proxmox;
pub mod retry;
pub mod talos;
mod transport;
pub mod yaml;

pub use retry::RetryPolicy;
