//! One concurrent sweep over a cluster's endpoints for their addresses, to find which
//! control-plane node holds the API VIP (its holder has the VIP as an extra address).
//! Every endpoint is asked directly; a failure stays with its endpoint.

use std::net::IpAddr;

use super::addresses::holds_address;
use super::client::TalosClient;
use super::error::TalosError;
use super::types::NodeAddress;

/// The addresses one endpoint reported, or why it could not say.
#[derive(Debug, Clone)]
pub struct EndpointAddresses {
    /// The endpoint as given (not normalised), so evidence matches the environment file.
    pub endpoint: String,
    pub addresses: Result<Vec<NodeAddress>, TalosError>,
}

impl EndpointAddresses {
    /// Whether this node has `ip`; `None` when its addresses could not be read.
    pub fn holds(&self, ip: IpAddr) -> Option<bool> {
        self.addresses
            .as_ref()
            .ok()
            .map(|addrs| holds_address(addrs, ip))
    }
}

impl TalosClient {
    /// Connects to every endpoint concurrently and lists its addresses. Results keep the
    /// order of `endpoints`.
    pub async fn addresses_of(&self, endpoints: &[String]) -> Vec<EndpointAddresses> {
        self.sweep(
            endpoints,
            |client, endpoint| async move {
                let addresses = match client.connect(&endpoint).await {
                    Ok(node) => node.addresses().await,
                    Err(err) => Err(err),
                };
                EndpointAddresses {
                    endpoint,
                    addresses,
                }
            },
            |endpoint, err| EndpointAddresses {
                endpoint,
                addresses: Err(err),
            },
        )
        .await
    }
}
