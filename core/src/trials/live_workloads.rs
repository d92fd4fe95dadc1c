//! The live workloads of a protected controller: the Deployments and StatefulSets, in the
//! controller's namespace when it names one, whose pod template its selector matches. The
//! replica and PodDisruptionBudget drift trials both compare against these.

use std::collections::BTreeMap;

use crate::checks::replicated_controller::Params;
use crate::checks::support;
use crate::selector::Selector;
use crate::verdict::Finding;

use super::RepoContext;

/// One live workload of a controller.
pub struct LiveWorkload {
    /// `namespace/name`.
    pub name: String,
    /// `spec.replicas`, 1 when unset (the API's default).
    pub replicas: i32,
    /// The pod template's labels.
    pub template: BTreeMap<String, String>,
}

/// The live workloads of `params`, or the finding that says the cluster's workloads could
/// not be read.
pub fn live_workloads(
    ctx: &RepoContext<'_>,
    params: &Params,
) -> Result<Vec<LiveWorkload>, Finding> {
    let deployments = ctx.live.deployments.get("deployments")?;
    let statefulsets = ctx.live.statefulsets.get("statefulsets")?;
    let want = Selector::from_labels(&params.selector);
    let deployed = deployments.iter().map(|d| {
        let spec = d.spec.as_ref();
        (
            &d.metadata,
            spec.and_then(|s| s.replicas),
            spec.and_then(|s| s.template.metadata.as_ref()?.labels.clone()),
        )
    });
    let stateful = statefulsets.iter().map(|s| {
        let spec = s.spec.as_ref();
        (
            &s.metadata,
            spec.and_then(|s| s.replicas),
            spec.and_then(|s| s.template.metadata.as_ref()?.labels.clone()),
        )
    });
    Ok(deployed
        .chain(stateful)
        .filter(|(meta, _, _)| in_namespace(params, meta.namespace.as_deref()))
        .map(|(meta, replicas, labels)| LiveWorkload {
            name: support::ns_name(meta),
            replicas: replicas.unwrap_or(1),
            template: labels.unwrap_or_default(),
        })
        .filter(|w| want.matches(&w.template))
        .collect())
}

/// Is an object in the controller's namespace (any, when the controller names none)?
pub fn in_namespace(params: &Params, namespace: Option<&str>) -> bool {
    params
        .namespace
        .as_deref()
        .is_none_or(|want| namespace == Some(want))
}
