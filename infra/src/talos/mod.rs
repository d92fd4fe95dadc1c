//! Talos API (apid, port 50000): talosconfig reading and a per-node gRPC client over
//! mutual TLS.
mod addresses;
mod client;
mod config;
mod error;
mod keys;
pub mod proto;
mod sweep;
mod types;
mod views;
mod vip;

pub use addresses::{
    ADDRESS_STATUS_TYPE, AddressSpecError, NETWORK_NAMESPACE, holds_address, parse_address_spec,
};
pub use client::{TalosClient, TalosNode, TalosOptions};
pub use config::{
    APID_PORT, CredentialsError, EndpointAddr, EndpointError, TalosConfigError, TalosContext,
    TalosCredentials, candidate_paths, load_context, load_context_from, locate, parse_context,
    parse_endpoint,
};
pub use error::TalosError;
pub use keys::{PemError, normalize_private_key_pem};
pub use types::{
    EtcdAlarm, EtcdAlarmKind, EtcdMember, EtcdMemberStatus, NodeAddress, NodeVersion, ServiceState,
};
pub use views::EndpointEtcdView;
pub use vip::EndpointAddresses;
