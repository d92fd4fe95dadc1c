//! Drift: where the cluster (live or a snapshot) and the repository disagree about what a
//! gate reads, one trial per gate check: the control-plane count, a controller's replicas,
//! the L2 policies' node selectors and Traefik's traffic policy here (each kind's
//! `DeclaredCheck` in `kinds` picks its own); PDBs, scheduling on
//! control planes, Longhorn's nodes and host labels in `drift_placement`; the VIP and the
//! talosconfig endpoints in `drift_addresses`. A disagreement fails with
//! both sides named; a side that could not be read is an error, an undeclared one a skip.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;

use crate::checks::support;
use crate::selector::Selector;
use crate::verdict::Finding;

use super::controllers::declared_replicas;
use super::ingress::TRAEFIK_ETP;
use super::live_workloads::live_workloads;
use super::traefik;
use super::{RepoContext, both, declared_nodes, manifests, reads};

pub(super) fn control_planes(ctx: &RepoContext<'_>) -> Finding {
    let nodes = match ctx.live.nodes.get("nodes") {
        Ok(nodes) => nodes,
        Err(finding) => return finding,
    };
    let declared = match declared_nodes(ctx.env) {
        Ok(d) => d,
        Err(finding) => return finding,
    };
    let live: Vec<&str> = nodes
        .iter()
        .filter(|n| support::is_control_plane(n))
        .map(|n| support::name(&n.metadata))
        .collect();
    let decl: Vec<String> = declared
        .iter()
        .filter(|n| n.control_plane == Some(true))
        .map(|n| format!("{} ({})", n.name(), n.vm.name.site))
        .collect();
    let evidence = both(
        format!("{} control plane(s): {}", live.len(), live.join(", ")),
        format!("{} control-plane VM(s): {}", decl.len(), decl.join(", ")),
    );
    if live.len() == decl.len() {
        Finding::pass(format!("{} control planes, live and declared", live.len()))
            .with_evidence(evidence)
    } else {
        Finding::fail(format!(
            "live {} control plane(s), declared {}",
            live.len(),
            decl.len()
        ))
        .with_evidence(evidence)
    }
}

pub(super) fn replicas(
    ctx: &RepoContext<'_>,
    params: &crate::checks::replicated_controller::Params,
) -> Finding {
    let declared = match declared_replicas(ctx, params) {
        Ok(Some(d)) => d,
        Ok(None) => {
            return Finding::skip(format!(
                "the repository declares no replicas for {}",
                params.name
            ));
        }
        Err(finding) => return finding,
    };
    let live: Vec<(String, i32)> = match live_workloads(ctx, params) {
        Ok(workloads) => workloads
            .into_iter()
            .map(|w| (w.name, w.replicas))
            .collect(),
        Err(finding) => return finding,
    };
    if live.is_empty() {
        return Finding::fail(format!(
            "the cluster runs no workload labelled like {}, which the repository declares",
            params.name
        ))
        .with_evidence([format!(
            "declared: {} replicas ({})",
            declared.0, declared.1
        )]);
    }
    let total: i64 = live.iter().map(|(_, n)| i64::from(*n)).sum();
    let evidence = both(
        live.iter()
            .map(|(n, r)| format!("{n} {r} replicas"))
            .collect::<Vec<_>>()
            .join(", "),
        format!("{} replicas ({})", declared.0, declared.1),
    );
    if total == declared.0 {
        Finding::pass(format!("{} replicas, live and declared", total)).with_evidence(evidence)
    } else {
        Finding::fail(format!("live {total} replicas, declared {}", declared.0))
            .with_evidence(evidence)
    }
}

fn ingress_services<'a>(ctx: &RepoContext<'a>) -> Result<Vec<&'a Service>, Finding> {
    let services = ctx.live.services.get("services")?;
    Ok(services
        .iter()
        .map(|s| &**s)
        .filter(|s| {
            ctx.settings.ingress.services.iter().any(|r| {
                r.namespace
                    .as_deref()
                    .is_none_or(|ns| s.metadata.namespace.as_deref() == Some(ns))
                    && Selector::from_labels(&r.selector).matches(support::labels(&s.metadata))
            })
        })
        .collect())
}

pub(super) fn traffic_policy(ctx: &RepoContext<'_>) -> Finding {
    let m = match manifests(ctx.env, reads::TRAFFIC_POLICY) {
        Ok(m) => m,
        Err(finding) => return finding,
    };
    let mut declared = Vec::new();
    for hr in traefik(&m.helm_releases) {
        match &hr.values {
            Ok(values) => {
                if let Some(v) = values.get(&TRAEFIK_ETP) {
                    declared.push((
                        v.show(),
                        format!("{} ({}/{})", v.site, hr.namespace, hr.name),
                    ));
                }
            }
            Err(err) => {
                return Finding::error(format!(
                    "the values of HelmRelease {}/{} cannot be known: {err}",
                    hr.namespace, hr.name
                ));
            }
        }
    }
    if declared.is_empty() {
        return Finding::skip("the repository declares no externalTrafficPolicy for Traefik");
    }
    let services = match ingress_services(ctx) {
        Ok(s) => s,
        Err(finding) => return finding,
    };
    if services.is_empty() {
        return Finding::fail("the cluster has no ingress Service, which the repository declares")
            .with_evidence(
                declared
                    .iter()
                    .map(|(v, at)| format!("declared: {v} at {at}")),
            );
    }
    let live: Vec<(String, String)> = services
        .iter()
        .map(|s| {
            (
                s.spec
                    .as_ref()
                    .and_then(|s| s.external_traffic_policy.clone())
                    .unwrap_or_else(|| "Cluster".to_string()),
                support::ns_name(&s.metadata),
            )
        })
        .collect();
    let evidence: Vec<String> = live
        .iter()
        .map(|(v, s)| format!("live: {s} externalTrafficPolicy: {v}"))
        .chain(
            declared
                .iter()
                .map(|(v, at)| format!("declared: {v} at {at}")),
        )
        .collect();
    let agree = live
        .iter()
        .all(|(l, _)| declared.iter().all(|(d, _)| d == l));
    if agree {
        Finding::pass(format!(
            "externalTrafficPolicy {} live and declared",
            live[0].0
        ))
        .with_evidence(evidence)
    } else {
        Finding::fail(format!(
            "live {}, declared {}",
            live.iter()
                .map(|(v, _)| v.as_str())
                .collect::<Vec<_>>()
                .join("/"),
            declared
                .iter()
                .map(|(v, _)| v.as_str())
                .collect::<Vec<_>>()
                .join("/")
        ))
        .with_evidence(evidence)
    }
}

pub(super) fn l2_policies(ctx: &RepoContext<'_>) -> Finding {
    let m = match manifests(ctx.env, reads::L2) {
        Ok(m) => m,
        Err(finding) => return finding,
    };
    let policies = match ctx.live.l2_policies.get("CiliumL2AnnouncementPolicies") {
        Ok(p) => p,
        Err(finding) => return finding,
    };
    let declared: BTreeMap<&str, (serde_json::Value, String)> = m
        .of_kind("CiliumL2AnnouncementPolicy")
        .map(|p| {
            let selector = p.get(&["spec", "nodeSelector"]);
            (
                p.get_str(&["metadata", "name"]).unwrap_or("?"),
                (
                    selector
                        .map(|s| s.to_json())
                        .unwrap_or(serde_json::Value::Null),
                    selector
                        .map(|s| s.site.to_string())
                        .unwrap_or_else(|| p.site.to_string()),
                ),
            )
        })
        .collect();
    let live: BTreeMap<&str, serde_json::Value> = policies
        .iter()
        .map(|p| {
            (
                support::name(&p.metadata),
                serde_json::to_value(&p.spec.node_selector).unwrap_or_default(),
            )
        })
        .collect();
    let mut problems = Vec::new();
    let mut evidence = Vec::new();
    for name in declared
        .keys()
        .chain(live.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        match (live.get(name), declared.get(name)) {
            (Some(l), Some((d, at))) if normal(l) == normal(d) => {
                evidence.push(format!("{name}: nodeSelector {l} live and declared ({at})"))
            }
            (Some(l), Some((d, at))) => problems.push(format!(
                "{name}: live nodeSelector {l}, declared {d} ({at})"
            )),
            (Some(_), None) => problems.push(format!("{name}: live, not in the repository")),
            (None, Some((_, at))) => {
                problems.push(format!("{name}: declared ({at}), not in the cluster"))
            }
            (None, None) => {}
        }
    }
    if problems.is_empty() {
        Finding::pass("the L2 announcement policies match the repository").with_evidence(evidence)
    } else {
        Finding::fail("the L2 announcement policies differ from the repository")
            .with_evidence(problems.into_iter().chain(evidence))
    }
}

/// Null and an empty selector mean the same here: every node.
fn normal(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(map)
            if map.values().all(|v| {
                v.is_null()
                    || v.as_object().is_some_and(|o| o.is_empty())
                    || v.as_array().is_some_and(|a| a.is_empty())
            }) =>
        {
            serde_json::Value::Null
        }
        other => other.clone(),
    }
}
