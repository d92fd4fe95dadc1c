//! Reading who a cluster is: the `kube-system` namespace's UID (one GET) and the SHA-256 of
//! the API server's CA from the environment's kubeconfig. Either may be unknown (no access,
//! no CA in the kubeconfig); provenance then records what it has.

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;

use crate::config::Environment;
use crate::state::provenance::{ClusterIdentity, ca_sha256};

/// What the kubeconfig alone says: the CA digest (no network).
pub fn offline(env: &Environment) -> ClusterIdentity {
    ClusterIdentity {
        api_ca_sha256: super::api::cluster_access(env)
            .ok()
            .and_then(|access| access.ca_pem)
            .and_then(|pem| ca_sha256(&pem)),
        ..ClusterIdentity::default()
    }
}

/// The CA digest and the `kube-system` UID, through the run's Kubernetes client if it has
/// one.
pub async fn live(env: &Environment, client: Option<&kube::Client>) -> ClusterIdentity {
    let mut identity = offline(env);
    if let Some(client) = client {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        identity.kube_system_uid = namespaces
            .get("kube-system")
            .await
            .ok()
            .and_then(|ns| ns.metadata.uid);
    }
    identity
}
