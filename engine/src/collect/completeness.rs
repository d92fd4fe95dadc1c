//! What a collection failed to read. A snapshot is evidence for every later offline run, so
//! a hole in it (a kind whose LIST timed out, a Proxmox VM config that did not load, a Talos
//! or API endpoint that did not answer) must not be written silently: `gates snapshot`
//! refuses unless `--allow-incomplete`, and then records the list in the file.
//!
//! A kind the cluster does not serve (a CRD that is not installed) is not a hole: it is what
//! the cluster is, and the checks that need it say so.

use serde_json::Value;

use super::kinds::Kind;
use super::registry::KindUnread;
use crate::state::{ApiState, Collected, ProxmoxState, TalosState};

/// Annotation on a snapshot written with `--allow-incomplete`: one missing part per line.
pub const INCOMPLETE_ANNOTATION: &str = "gates.adr/incomplete";

/// The prefix [`super::kube`] gives a kind the cluster does not serve (HTTP 404).
pub const NOT_SERVED: &str = "the cluster does not serve";

/// Every part that could not be read, one line each, naming what and why.
pub fn missing_parts(
    kinds: &[(Kind, Result<Vec<Value>, KindUnread>)],
    talos: &Collected<TalosState>,
    api: &Collected<ApiState>,
    proxmox: &Collected<ProxmoxState>,
) -> Vec<String> {
    let mut missing = Vec::new();
    for (kind, result) in kinds {
        if let Err(reason) = result
            && !reason.0.starts_with(NOT_SERVED)
        {
            missing.push(format!(
                "{}: {}",
                kind.coordinates().resource_name(),
                reason.0.replace('\n', " ")
            ));
        }
    }
    if let Collected::Absent(reason) = talos {
        missing.push(format!("Talos API: {reason}"));
    }
    if let Collected::Present(talos) = talos {
        for endpoint in &talos.endpoints {
            if let Err(reason) = &endpoint.view {
                missing.push(format!("Talos endpoint {}: {reason}", endpoint.endpoint));
            }
        }
    }
    if let Collected::Absent(reason) = api {
        missing.push(format!("API endpoint: {reason}"));
    }
    match proxmox {
        Collected::Absent(reason) => missing.push(format!("Proxmox: {reason}")),
        Collected::Present(state) => missing.extend(
            state
                .unread_vm_configs
                .iter()
                .map(|vm| format!("Proxmox config of {vm}")),
        ),
        Collected::NotApplicable(_) => {}
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none<T>() -> Collected<T> {
        Collected::NotApplicable("no section".into())
    }

    #[test]
    fn a_timed_out_list_and_an_unread_vm_config_are_missing_but_an_absent_crd_is_not() {
        let kinds = vec![
            (Kind::Node, Ok(vec![])),
            (
                Kind::Pod,
                Err(
                    "cannot reach the Kubernetes API while listing pods (page 3): timed out".into(),
                ),
            ),
            (
                Kind::L2AnnouncementPolicy,
                Err(KindUnread(format!(
                    "{NOT_SERVED} ciliuml2announcementpolicies (is Cilium installed?)"
                ))),
            ),
        ];
        let proxmox = Collected::Present(ProxmoxState {
            unread_vm_configs: vec!["VM 103 cp-3 on pve3: timed out".into()],
            ..Default::default()
        });
        let missing = missing_parts(&kinds, &none(), &none(), &proxmox);
        assert_eq!(missing.len(), 2, "{missing:?}");
        assert!(missing[0].starts_with("pods/v1: ") && missing[0].contains("page 3"));
        assert_eq!(
            missing[1],
            "Proxmox config of VM 103 cp-3 on pve3: timed out"
        );
    }

    #[test]
    fn a_complete_collection_misses_nothing() {
        let kinds = vec![(Kind::Node, Ok(vec![]))];
        assert!(missing_parts(&kinds, &none(), &none(), &none()).is_empty());
    }
}
