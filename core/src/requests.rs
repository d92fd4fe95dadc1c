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
    let app = spec
        .containers
        .iter()
        .map(|c| container_request(c, resource))
        .collect::<Result<Vec<_>, _>>()?;
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| {
            Ok((
                container_request(c, resource)?,
                is_sidecar(c.restart_policy.as_deref()),
            ))
        })
        .collect::<Result<Vec<_>, RequestError>>()?;
    Ok(containers(app, init) + overhead)
}

/// An amount the scheduler adds up over a pod's containers: one resource's [`Quantity`], or
/// the repository trials' CPU and memory together (each resource summed on its own).
pub trait Requested: Copy {
    const ZERO: Self;
    fn plus(self, other: Self) -> Self;
    fn larger(self, other: Self) -> Self;
}

impl Requested for Quantity {
    const ZERO: Quantity = Quantity::ZERO;
    fn plus(self, other: Quantity) -> Quantity {
        self + other
    }
    fn larger(self, other: Quantity) -> Quantity {
        self.max(other)
    }
}

/// An init container with `restartPolicy: Always` is a sidecar: it keeps running beside the
/// app containers and the init containers after it.
pub fn is_sidecar(restart_policy: Option<&str>) -> bool {
    restart_policy == Some("Always")
}

/// What the containers of a pod request together, by the sidecar KEP's rule the scheduler
/// follows (`AggregateContainerRequests` in k8s.io/component-helpers): the app containers
/// plus every sidecar, or the largest init step (an init container beside the sidecars
/// started before it), whichever is larger. `init` in order, each with whether it is a
/// sidecar. The live state and the repository's templates are both counted by it.
pub fn containers<T: Requested>(
    app: impl IntoIterator<Item = T>,
    init: impl IntoIterator<Item = (T, bool)>,
) -> T {
    let app = app.into_iter().fold(T::ZERO, T::plus);
    let mut sidecars = T::ZERO;
    let mut init_peak = T::ZERO;
    for (request, sidecar) in init {
        if sidecar {
            sidecars = sidecars.plus(request);
            init_peak = init_peak.larger(sidecars);
        } else {
            init_peak = init_peak.larger(sidecars.plus(request));
        }
    }
    app.plus(sidecars).larger(init_peak)
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
