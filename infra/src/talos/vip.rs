//! One concurrent sweep over a cluster's endpoints for their addresses, to find which
//! control-plane node holds the API VIP (its holder has the VIP as an extra address).
//! Every endpoint is asked directly; a failure stays with its endpoint.

use std::net::IpAddr;

use tokio::task::JoinSet;

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
        let mut set = JoinSet::new();
        for (index, endpoint) in endpoints.iter().enumerate() {
            let client = self.clone();
            let endpoint = endpoint.clone();
            set.spawn(async move {
                let addresses = match client.connect(&endpoint).await {
                    Ok(node) => node.addresses().await,
                    Err(err) => Err(err),
                };
                (index, addresses)
            });
        }
        let mut found: Vec<Option<Result<Vec<NodeAddress>, TalosError>>> =
            vec![None; endpoints.len()];
        while let Some(joined) = set.join_next().await {
            if let Ok((index, addresses)) = joined {
                found[index] = Some(addresses);
            }
        }
        found
            .into_iter()
            .zip(endpoints)
            .map(|(addresses, endpoint)| EndpointAddresses {
                endpoint: endpoint.clone(),
                addresses: addresses.unwrap_or_else(|| {
                    Err(TalosError::Unreachable {
                        endpoint: endpoint.clone(),
                        detail: "the query task was aborted".into(),
                    })
                }),
            })
            .collect()
    }
}
