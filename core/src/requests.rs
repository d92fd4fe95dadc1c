//! What the scheduler accounts for a pod: its pod-level request when set, else the larger of
//! the app containers plus the restartable init containers (sidecars) and the largest init
//! step, plus the pod's overhead. Gate 5's headroom and the host-loss model both place pods
//! by it, so it is computed here once.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use crate::quantity::{Quantity, QuantityError};
use crate::state::{Container, Pod};

/// A request that is not a quantity, named by where it is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The pod-level request or the overhead.
    #[error("{resource} request: {source}")]
    Pod {
        resource: String,
        #[source]
        source: QuantityError,
    },
    #[error("container {container}: {resource} request: {source}")]
    Container {
        container: String,
        resource: String,
        #[source]
        source: QuantityError,
    },
}

/// The request of `resource` (`cpu`, `memory`) the scheduler accounts for `pod`.
pub fn pod_request(pod: &Pod, resource: &str) -> Result<Quantity, RequestError> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(Quantity::ZERO);
    };
    let in_pod = |source| RequestError::Pod {
        resource: resource.to_string(),
        source,
    };
    let overhead = request_of(spec.overhead.as_ref(), resource).map_err(in_pod)?;
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref())
        && pod_level.contains_key(resource)
    {
        return Ok(request_of(Some(pod_level), resource).map_err(in_pod)? + overhead);
    }
    let mut app = Quantity::ZERO;
    for c in &spec.containers {
        app = app + container_request(c, resource)?;
    }
    let mut sidecars = Quantity::ZERO;
    let mut init_peak = Quantity::ZERO;
    for c in spec.init_containers.iter().flatten() {
        let r = container_request(c, resource)?;
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars = sidecars + r;
            init_peak = init_peak.max(sidecars);
        } else {
            init_peak = init_peak.max(sidecars + r);
        }
    }
    Ok((app + sidecars).max(init_peak) + overhead)
}

fn request_of(
    requests: Option<&BTreeMap<String, K8sQuantity>>,
    resource: &str,
) -> Result<Quantity, QuantityError> {
    match requests.and_then(|r| r.get(resource)) {
        None => Ok(Quantity::ZERO),
        Some(q) => Quantity::parse(&q.0),
    }
}

fn container_request(c: &Container, resource: &str) -> Result<Quantity, RequestError> {
    request_of(
        c.resources.as_ref().and_then(|r| r.requests.as_ref()),
        resource,
    )
    .map_err(|source| RequestError::Container {
        container: c.name.clone(),
        resource: resource.to_string(),
        source,
    })
}
