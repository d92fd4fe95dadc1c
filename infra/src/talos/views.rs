//! One concurrent sweep over a cluster's endpoints, for the etcd checks: every endpoint
//! is asked directly, and each answer or failure is kept per endpoint so a check can
//! name the endpoint that could not be reached instead of passing or failing blindly.

use super::client::TalosClient;
use super::error::TalosError;
use super::types::{EtcdAlarm, EtcdMember, EtcdMemberStatus, NodeVersion};

/// What one endpoint said. Each call can fail on its own; a failed connect fails all four
/// with the same error.
#[derive(Debug, Clone)]
pub struct EndpointEtcdView {
    /// The endpoint as given (not normalised), so evidence matches the environment file.
    pub endpoint: String,
    pub version: Result<NodeVersion, TalosError>,
    pub members: Result<Vec<EtcdMember>, TalosError>,
    pub status: Result<EtcdMemberStatus, TalosError>,
    pub alarms: Result<Vec<EtcdAlarm>, TalosError>,
}

impl EndpointEtcdView {
    /// The first error among the four calls, if any.
    pub fn first_error(&self) -> Option<&TalosError> {
        [
            self.version.as_ref().err(),
            self.members.as_ref().err(),
            self.status.as_ref().err(),
            self.alarms.as_ref().err(),
        ]
        .into_iter()
        .flatten()
        .next()
    }
}

impl TalosClient {
    /// Connects to every endpoint concurrently (one connection each) and reads version,
    /// etcd members, etcd status and alarms. Results keep the order of `endpoints`.
    pub async fn etcd_views(&self, endpoints: &[String]) -> Vec<EndpointEtcdView> {
        self.sweep(
            endpoints,
            |client, endpoint| async move { client.etcd_view(endpoint).await },
            failed,
        )
        .await
    }

    async fn etcd_view(&self, endpoint: String) -> EndpointEtcdView {
        let node = match self.connect(&endpoint).await {
            Ok(node) => node,
            Err(err) => return failed(endpoint, err),
        };
        let (version, members, status, alarms) = tokio::join!(
            node.version(),
            node.etcd_members(),
            node.etcd_status(),
            node.etcd_alarms()
        );
        EndpointEtcdView {
            endpoint,
            version,
            members,
            status,
            alarms,
        }
    }
}

fn failed(endpoint: String, err: TalosError) -> EndpointEtcdView {
    EndpointEtcdView {
        endpoint,
        version: Err(err.clone()),
        members: Err(err.clone()),
        status: Err(err.clone()),
        alarms: Err(err),
    }
}
