//! Gate 2 on the repository: each protected controller declares at least two replicas, a
//! PodDisruptionBudget that selects its pods and lets one go, and anti-affinity or a
//! topology spread. Plain manifests are read directly; for the charts the ADR names, a small
//! table says which values set replicas, the PDB and the spread. A value a chart leaves to
//! its defaults is reported as unknown (skip), since the repository does not hold them.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::checks::replicated_controller::Params;
use crate::selector::{Selector, WhenNil};
use crate::verdict::Finding;

use super::{RepoContext, at, manifests};
use crate::repo::yaml::Node;

/// Where a chart takes a controller's replicas, PDB switch and spread.
struct ChartKeys {
    chart: &'static str,
    label: (&'static str, &'static str),
    replicas: &'static [&'static str],
    pdb: &'static [&'static str],
    spread: [&'static [&'static str]; 2],
}

const CHARTS: [ChartKeys; 5] = [
    ChartKeys {
        chart: "traefik",
        label: ("app.kubernetes.io/name", "traefik"),
        replicas: &["deployment", "replicas"],
        pdb: &["podDisruptionBudget", "enabled"],
        spread: [&["affinity"], &["topologySpreadConstraints"]],
    },
    ChartKeys {
        chart: "cert-manager",
        label: ("app.kubernetes.io/component", "webhook"),
        replicas: &["webhook", "replicaCount"],
        pdb: &["webhook", "podDisruptionBudget", "enabled"],
        spread: [
            &["webhook", "affinity"],
            &["webhook", "topologySpreadConstraints"],
        ],
    },
    ChartKeys {
        chart: "external-secrets",
        label: ("app.kubernetes.io/name", "external-secrets"),
        replicas: &["replicaCount"],
        pdb: &["podDisruptionBudget", "enabled"],
        spread: [&["affinity"], &["topologySpreadConstraints"]],
    },
    ChartKeys {
        chart: "external-secrets",
        label: ("app.kubernetes.io/name", "external-secrets-webhook"),
        replicas: &["webhook", "replicaCount"],
        pdb: &["webhook", "podDisruptionBudget", "enabled"],
        spread: [
            &["webhook", "affinity"],
            &["webhook", "topologySpreadConstraints"],
        ],
    },
    ChartKeys {
        chart: "cilium",
        label: ("io.cilium/app", "operator"),
        replicas: &["operator", "replicas"],
        pdb: &["operator", "podDisruptionBudget", "enabled"],
        spread: [
            &["operator", "affinity"],
            &["operator", "topologySpreadConstraints"],
        ],
    },
];

/// The declared replicas of the controller, with the line that set them, for drift.
pub fn declared_replicas(
    ctx: &RepoContext<'_>,
    params: &Params,
) -> Result<Option<(i64, String)>, Finding> {
    let m = manifests(ctx.env)?;
    if let Some(workload) = workloads(&m.objects, params).into_iter().next() {
        let replicas = workload.get(&["spec", "replicas"]);
        let count = replicas.and_then(Node::as_i64).unwrap_or(1);
        let site = replicas
            .map(|r| r.site.to_string())
            .unwrap_or_else(|| format!("{} (unset, so 1)", workload.site));
        return Ok(Some((count, site)));
    }
    for (hr, keys) in helm(ctx, params)? {
        if let Some(v) = hr
            .get(keys.replicas)
            .and_then(|v| v.as_i64().map(|n| (n, v.site.to_string())))
        {
            return Ok(Some(v));
        }
    }
    Ok(None)
}

fn workloads<'a>(objects: &'a [Node], params: &Params) -> Vec<&'a Node> {
    let want = Selector::from_labels(&params.selector);
    objects
        .iter()
        .filter(|o| matches!(o.get_str(&["kind"]), Some("Deployment" | "StatefulSet")))
        .filter(|o| {
            params
                .namespace
                .as_deref()
                .is_none_or(|ns| o.get_str(&["metadata", "namespace"]) == Some(ns))
        })
        .filter(|o| {
            o.get(&["spec", "template", "metadata", "labels"])
                .and_then(Node::string_map)
                .is_some_and(|labels| want.matches(&labels))
        })
        .collect()
}

fn helm<'a>(
    ctx: &RepoContext<'a>,
    params: &Params,
) -> Result<Vec<(&'a Node, &'static ChartKeys)>, Finding> {
    let m = manifests(ctx.env)?;
    let mut out = Vec::new();
    for hr in &m.helm_releases {
        let Some(keys) = CHARTS.iter().find(|k| {
            hr.chart.as_deref() == Some(k.chart)
                && params.selector.get(k.label.0).map(String::as_str) == Some(k.label.1)
        }) else {
            continue;
        };
        if params
            .namespace
            .as_deref()
            .is_some_and(|ns| ns != hr.namespace)
        {
            continue;
        }
        match &hr.values {
            Ok(values) => out.push((values, keys)),
            Err(err) => {
                return Err(Finding::error(format!(
                    "the values of HelmRelease {}/{} cannot be known: {err}",
                    hr.namespace, hr.name
                )));
            }
        }
    }
    Ok(out)
}

pub fn evaluate(ctx: &RepoContext<'_>, params: &Params) -> Finding {
    let m = match manifests(ctx.env) {
        Ok(m) => m,
        Err(finding) => return finding,
    };
    let mut problems = Vec::new();
    let mut evidence = Vec::new();
    let mut unknown = Vec::new();
    let min = params.min_replicas as i64;
    let found = workloads(&m.objects, params);
    for workload in &found {
        let name = format!(
            "{}/{}",
            workload
                .get_str(&["metadata", "namespace"])
                .unwrap_or("default"),
            workload.get_str(&["metadata", "name"]).unwrap_or("?")
        );
        let replicas = workload.get(&["spec", "replicas"]);
        let count = replicas.and_then(Node::as_i64).unwrap_or(1);
        let line = match replicas {
            Some(r) => at(&r.site, &format!("{name} spec.replicas"), r.show()),
            None => format!("{}: {name} spec.replicas: unset (1)", workload.site),
        };
        if count < min {
            problems.push(line)
        } else {
            evidence.push(line)
        }
        let labels = workload
            .get(&["spec", "template", "metadata", "labels"])
            .and_then(Node::string_map)
            .unwrap_or_default();
        pdbs(
            &m.objects,
            workload,
            &labels,
            count,
            &mut problems,
            &mut evidence,
        );
        let spec = workload.get(&["spec", "template", "spec"]);
        match spec.and_then(|s| {
            s.get(&["affinity", "podAntiAffinity"])
                .or_else(|| s.get(&["topologySpreadConstraints"]))
        }) {
            Some(spread) => evidence.push(at(&spread.site, &format!("{name} spread"), "declared")),
            None => problems.push(format!(
                "{}: {name} declares neither podAntiAffinity nor topologySpreadConstraints",
                workload.site
            )),
        }
    }
    let charts = match helm(ctx, params) {
        Ok(c) => c,
        Err(finding) => return finding,
    };
    for (values, keys) in &charts {
        let check = |path: &[&str],
                     ok: &dyn Fn(&Node) -> bool,
                     problems: &mut Vec<String>,
                     evidence: &mut Vec<String>,
                     unknown: &mut Vec<String>| {
            let key = format!("{} values {}", keys.chart, path.join("."));
            match values.get(path) {
                Some(v) if ok(v) => evidence.push(at(&v.site, &key, v.show())),
                Some(v) => problems.push(at(&v.site, &key, v.show())),
                None => unknown.push(key),
            }
        };
        check(
            keys.replicas,
            &|v| v.as_i64().is_some_and(|n| n >= min),
            &mut problems,
            &mut evidence,
            &mut unknown,
        );
        check(
            keys.pdb,
            &|v| v.as_bool() == Some(true),
            &mut problems,
            &mut evidence,
            &mut unknown,
        );
        match keys.spread.iter().find_map(|p| values.get(p)) {
            Some(v) => evidence.push(at(
                &v.site,
                &format!("{} values spread", keys.chart),
                "declared",
            )),
            None => unknown.push(format!(
                "{} values {} or {}",
                keys.chart,
                keys.spread[0].join("."),
                keys.spread[1].join(".")
            )),
        }
    }
    if found.is_empty() && charts.is_empty() {
        return Finding::skip(format!(
            "nothing in the repository for {} runs pods labelled {} (installed another way, e.g. by Talos or a chart gates does not map)",
            ctx.env.name,
            params
                .selector
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    if !problems.is_empty() {
        Finding::fail(format!(
            "{} is not declared with {min} replicas, a PDB and a spread",
            params.name
        ))
        .with_evidence(problems.into_iter().chain(evidence))
    } else if !unknown.is_empty() {
        Finding::skip(format!(
            "not set in the repository, so the chart's defaults decide: {}",
            unknown.join(", ")
        ))
        .with_evidence(evidence)
    } else {
        Finding::pass(format!(
            "{} is declared with {min}+ replicas, a PDB and a spread",
            params.name
        ))
        .with_evidence(evidence)
    }
}

fn pdbs(
    objects: &[Node],
    workload: &Node,
    labels: &BTreeMap<String, String>,
    replicas: i64,
    problems: &mut Vec<String>,
    evidence: &mut Vec<String>,
) {
    let ns = workload.get_str(&["metadata", "namespace"]);
    let matching: Vec<&Node> = objects
        .iter()
        .filter(|o| {
            o.get_str(&["kind"]) == Some("PodDisruptionBudget")
                && o.get_str(&["metadata", "namespace"]) == ns
        })
        .filter(|pdb| {
            pdb.get(&["spec", "selector"])
                .and_then(|s| serde_json::from_value::<LabelSelector>(s.to_json()).ok())
                .and_then(|s| Selector::compile(Some(&s), WhenNil::MatchesNothing).ok())
                .is_some_and(|s| s.matches(labels))
        })
        .collect();
    let name = workload.get_str(&["metadata", "name"]).unwrap_or("?");
    match matching.as_slice() {
        [] => problems.push(format!(
            "{}: no PodDisruptionBudget in the repository selects the pods of {name}",
            workload.site
        )),
        [pdb] => {
            let allows = match (
                pdb.get(&["spec", "maxUnavailable"]),
                pdb.get(&["spec", "minAvailable"]),
            ) {
                (Some(v), _) => v
                    .as_i64()
                    .map(|n| n >= 1)
                    .unwrap_or_else(|| v.as_str().is_some_and(|s| s.ends_with('%') && s != "0%")),
                (None, Some(v)) => v.as_i64().is_some_and(|n| n < replicas),
                (None, None) => false,
            };
            let line = at(
                &pdb.site,
                &format!(
                    "PodDisruptionBudget {}",
                    pdb.get_str(&["metadata", "name"]).unwrap_or("?")
                ),
                pdb.get(&["spec"]).map(Node::show).unwrap_or_default(),
            );
            if allows {
                evidence.push(line)
            } else {
                problems.push(format!("{line} lets no pod of {name} go"))
            }
        }
        many => problems.push(format!(
            "{} PodDisruptionBudgets select the pods of {name}: {}",
            many.len(),
            many.iter()
                .map(|p| p.site.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}
