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

use super::spread::{self, Spread};
use super::{RepoContext, at, manifests_except, reads, talos_patches};
use crate::declared::yaml::Node;

/// Where a chart takes a controller's replicas, PDB and spread.
struct ChartKeys {
    chart: &'static str,
    label: (&'static str, &'static str),
    replicas: &'static [&'static str],
    pdb: Pdb,
    spread: SpreadKeys,
    /// What the chart does where the repository sets nothing (docs/reality.md has the
    /// source of each): the replicas, whether it renders a PDB, and whether its default
    /// affinity spreads the pods over hosts. `None`: gates does not model it.
    defaults: Defaults,
}

/// Where a controller's PodDisruptionBudget comes from.
enum Pdb {
    /// The chart renders one when this value is true. `fields`: the values that give it
    /// `minAvailable`/`maxUnavailable`; when the chart renders only the fields set (Traefik),
    /// a PDB enabled with neither is a policy/v1 PDB that allows no disruption.
    Value {
        enabled: &'static [&'static str],
        fields: &'static [&'static [&'static str]],
    },
    /// The component itself creates one while it is in use (Longhorn's csi-attacher and
    /// csi-provisioner, `minAvailable: 1`, while any volume is not detached), so the
    /// repository needs none, and a second one over the same pods makes evictions fail.
    Component(&'static str),
    /// Nothing makes one: a PodDisruptionBudget manifest in the repository must select the
    /// pods (by the live check's labels, which the chart gives them).
    Manifest,
}

/// Where a chart takes the pods' spread.
enum SpreadKeys {
    /// The pod `affinity` and `topologySpreadConstraints` values.
    Pod {
        affinity: &'static [&'static str],
        constraints: &'static [&'static str],
    },
    /// Longhorn's CSI `podAntiAffinityPreset`: `hard` is a required hostname anti-affinity,
    /// `soft` (the default) a preferred one (`csi/deployment_util.go`).
    LonghornPreset(&'static [&'static str]),
}

#[derive(Clone, Copy)]
struct Defaults {
    replicas: Option<i64>,
    pdb: Option<bool>,
    spread: Option<bool>,
}

/// One replica, no PDB, no affinity: the defaults of the Traefik, cert-manager and External
/// Secrets charts for the controllers the ADR lists.
const SINGLE: Defaults = Defaults {
    replicas: Some(1),
    pdb: Some(false),
    spread: Some(false),
};

/// Longhorn's CSI deployments: 3 replicas, a soft (preferred) hostname anti-affinity
/// (`csi/deployment.go`).
const LONGHORN_CSI: Defaults = Defaults {
    replicas: Some(3),
    pdb: None,
    spread: Some(false),
};

/// Longhorn's CSI controllers are created by its driver deployer with the replica counts and
/// the anti-affinity preset of the chart's `csi` values; Longhorn makes the attacher's and
/// the provisioner's PDBs itself (`controller/kubernetes_pdb_controller.go`), none for the
/// resizer and the snapshotter.
const CHARTS: [ChartKeys; 9] = [
    ChartKeys {
        chart: "traefik",
        label: ("app.kubernetes.io/name", "traefik"),
        replicas: &["deployment", "replicas"],
        pdb: Pdb::Value {
            enabled: &["podDisruptionBudget", "enabled"],
            fields: &[
                &["podDisruptionBudget", "minAvailable"],
                &["podDisruptionBudget", "maxUnavailable"],
            ],
        },
        spread: SpreadKeys::Pod {
            affinity: &["affinity"],
            constraints: &["topologySpreadConstraints"],
        },
        defaults: SINGLE,
    },
    ChartKeys {
        chart: "cert-manager",
        label: ("app.kubernetes.io/component", "webhook"),
        replicas: &["webhook", "replicaCount"],
        pdb: Pdb::Value {
            enabled: &["webhook", "podDisruptionBudget", "enabled"],
            fields: &[],
        },
        spread: SpreadKeys::Pod {
            affinity: &["webhook", "affinity"],
            constraints: &["webhook", "topologySpreadConstraints"],
        },
        defaults: SINGLE,
    },
    ChartKeys {
        chart: "external-secrets",
        label: ("app.kubernetes.io/name", "external-secrets"),
        replicas: &["replicaCount"],
        pdb: Pdb::Value {
            enabled: &["podDisruptionBudget", "enabled"],
            fields: &[],
        },
        spread: SpreadKeys::Pod {
            affinity: &["affinity"],
            constraints: &["topologySpreadConstraints"],
        },
        defaults: SINGLE,
    },
    ChartKeys {
        chart: "external-secrets",
        label: ("app.kubernetes.io/name", "external-secrets-webhook"),
        replicas: &["webhook", "replicaCount"],
        pdb: Pdb::Value {
            enabled: &["webhook", "podDisruptionBudget", "enabled"],
            fields: &[],
        },
        spread: SpreadKeys::Pod {
            affinity: &["webhook", "affinity"],
            constraints: &["webhook", "topologySpreadConstraints"],
        },
        defaults: SINGLE,
    },
    ChartKeys {
        chart: "cilium",
        label: ("io.cilium/app", "operator"),
        replicas: &["operator", "replicas"],
        pdb: Pdb::Value {
            enabled: &["operator", "podDisruptionBudget", "enabled"],
            fields: &[],
        },
        spread: SpreadKeys::Pod {
            affinity: &["operator", "affinity"],
            constraints: &["operator", "topologySpreadConstraints"],
        },
        defaults: Defaults {
            replicas: Some(2),
            pdb: Some(false),
            spread: Some(true),
        },
    },
    ChartKeys {
        chart: "longhorn",
        label: ("app", "csi-attacher"),
        replicas: &["csi", "attacherReplicaCount"],
        pdb: Pdb::Component("Longhorn"),
        spread: SpreadKeys::LonghornPreset(&["csi", "podAntiAffinityPreset"]),
        defaults: LONGHORN_CSI,
    },
    ChartKeys {
        chart: "longhorn",
        label: ("app", "csi-provisioner"),
        replicas: &["csi", "provisionerReplicaCount"],
        pdb: Pdb::Component("Longhorn"),
        spread: SpreadKeys::LonghornPreset(&["csi", "podAntiAffinityPreset"]),
        defaults: LONGHORN_CSI,
    },
    ChartKeys {
        chart: "longhorn",
        label: ("app", "csi-resizer"),
        replicas: &["csi", "resizerReplicaCount"],
        pdb: Pdb::Manifest,
        spread: SpreadKeys::LonghornPreset(&["csi", "podAntiAffinityPreset"]),
        defaults: LONGHORN_CSI,
    },
    ChartKeys {
        chart: "longhorn",
        label: ("app", "csi-snapshotter"),
        replicas: &["csi", "snapshotterReplicaCount"],
        pdb: Pdb::Manifest,
        spread: SpreadKeys::LonghornPreset(&["csi", "podAntiAffinityPreset"]),
        defaults: LONGHORN_CSI,
    },
];

/// The declared replicas of the controller, with the line that set them, for drift.
pub fn declared_replicas(
    ctx: &RepoContext<'_>,
    params: &Params,
) -> Result<Option<(i64, String)>, Finding> {
    let m = manifests_except(ctx.env, reads::CONTROLLERS, &|o| {
        not_this_controller(o, params)
    })?;
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

/// An object left unread whose kind, namespace and pod labels are known (no `${...}` in
/// them) and are not the controller's: a Deployment or StatefulSet the controller's selector
/// does not match, or an object of a kind the controller's trial does not judge. Whatever
/// its unknown fields hold, it is neither the controller nor its PodDisruptionBudget nor
/// the release that makes it.
fn not_this_controller(object: &Node, params: &Params) -> bool {
    use crate::declared::unread::holds_variable;
    let known = |path: &[&str]| object.get(path).is_none_or(|n| !holds_variable(n));
    match object.get_str(&["kind"]) {
        Some("Deployment" | "StatefulSet") => {
            known(&["kind"])
                && known(&["metadata", "namespace"])
                && known(&["spec", "template", "metadata", "labels"])
                && workloads(std::slice::from_ref(object), params).is_empty()
        }
        _ => false,
    }
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
    let m = manifests_except(ctx.env, reads::CONTROLLERS, &|o| {
        not_this_controller(o, params)
    })?;
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
    let m = match manifests_except(ctx.env, reads::CONTROLLERS, &|o| {
        not_this_controller(o, params)
    }) {
        Ok(m) => m,
        Err(finding) => return finding,
    };
    let mut said = Said::default();
    let min = params.min_replicas as i64;
    let found = workloads(&m.objects, params);
    for workload in &found {
        judge_workload(ctx, &m.objects, params, workload, &mut said);
    }
    let charts = match helm(ctx, params) {
        Ok(c) => c,
        Err(finding) => return finding,
    };
    for (values, keys) in &charts {
        let chart = Chart { values, keys, min };
        chart.judge_replicas_and_pdb(&m.objects, params, &mut said);
        chart.judge_spread(ctx, &mut said);
    }
    if found.is_empty() && charts.is_empty() {
        if let Some(finding) = talos_coredns(ctx, params) {
            return finding;
        }
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
    said.conclude(params, min)
}

/// What the trial found so far: what breaks the gate, what holds, and the chart values the
/// repository leaves to defaults gates does not model.
#[derive(Default)]
struct Said {
    problems: Vec<String>,
    evidence: Vec<String>,
    unknown: Vec<String>,
}

impl Said {
    fn conclude(self, params: &Params, min: i64) -> Finding {
        if !self.problems.is_empty() {
            Finding::fail(format!(
                "{} is not declared with {min} replicas, a PDB and a spread",
                params.name
            ))
            .with_evidence(self.problems.into_iter().chain(self.evidence))
        } else if !self.unknown.is_empty() {
            Finding::skip(format!(
                "not set in the repository, so the chart's defaults decide: {}",
                self.unknown.join(", ")
            ))
            .with_evidence(self.evidence)
        } else {
            Finding::pass(format!(
                "{} is declared with {min}+ replicas, a PDB and a spread",
                params.name
            ))
            .with_evidence(self.evidence)
        }
    }
}

/// A plain manifest's Deployment, StatefulSet or DaemonSet: its replicas, the PDBs over its
/// pods and its spread.
fn judge_workload(
    ctx: &RepoContext<'_>,
    objects: &[Node],
    params: &Params,
    workload: &Node,
    said: &mut Said,
) {
    let min = params.min_replicas as i64;
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
        said.problems.push(line)
    } else {
        said.evidence.push(line)
    }
    let labels = workload
        .get(&["spec", "template", "metadata", "labels"])
        .and_then(Node::string_map)
        .unwrap_or_default();
    let owner = Owner {
        namespace: workload.get_str(&["metadata", "namespace"]),
        name: workload.get_str(&["metadata", "name"]).unwrap_or("?"),
        site: &workload.site,
    };
    pdbs(
        objects,
        &owner,
        &labels,
        count,
        &mut said.problems,
        &mut said.evidence,
    );
    let spec = workload.get(&["spec", "template", "spec"]);
    match spread::of(
        spec.and_then(|s| s.get(&["affinity"])),
        spec.and_then(|s| s.get(&["topologySpreadConstraints"])),
        &ctx.settings.nodes.host_label,
    ) {
        Spread::Host(site, how) => said.evidence.push(at(&site, &format!("{name} spread"), how)),
        Spread::Soft(site, why) => said.problems.push(at(&site, &format!("{name} spread"), why)),
        Spread::None => said.problems.push(format!(
            "{}: {name} declares neither a required podAntiAffinity nor a topologySpreadConstraint over the host",
            workload.site
        )),
    }
}

/// One chart's values for the controller, with the table of where it takes each.
struct Chart<'a> {
    values: &'a Node,
    keys: &'static ChartKeys,
    min: i64,
}

impl Chart<'_> {
    /// The chart's default for a value the repository does not set, where gates models it.
    fn default(&self, path: &[&str]) -> Option<Node> {
        let (keys, site) = (self.keys, self.values.site.clone());
        if path == keys.replicas {
            let n = keys.defaults.replicas?;
            return Some(Node::new(
                crate::declared::yaml::Value::Scalar(n.to_string(), true),
                site,
            ));
        }
        if matches!(keys.pdb, Pdb::Value { enabled, .. } if enabled == path) {
            let on = keys.defaults.pdb?;
            return Some(Node::new(
                crate::declared::yaml::Value::Scalar(on.to_string(), true),
                site,
            ));
        }
        None
    }

    /// One value judged by `ok`: as set, else by the chart's default, else unknown.
    fn judge_value(&self, path: &[&str], ok: &dyn Fn(&Node) -> bool, said: &mut Said) {
        let key = format!("{} values {}", self.keys.chart, path.join("."));
        match self.values.get(path) {
            Some(v) if ok(v) => said.evidence.push(at(&v.site, &key, v.show())),
            Some(v) => said.problems.push(at(&v.site, &key, v.show())),
            None => match self.default(path) {
                Some(d) => {
                    let line = at(
                        &self.values.site,
                        &key,
                        format!(
                            "{} (the chart's default; the repository does not set it)",
                            d.show()
                        ),
                    );
                    if ok(&d) {
                        said.evidence.push(line);
                    } else {
                        said.problems.push(line);
                    }
                }
                None => said.unknown.push(key),
            },
        }
    }

    fn judge_replicas_and_pdb(&self, objects: &[Node], params: &Params, said: &mut Said) {
        let (values, keys, min) = (self.values, self.keys, self.min);
        self.judge_value(
            keys.replicas,
            &|v| v.as_i64().is_some_and(|n| n >= min),
            said,
        );
        let replicas = values
            .get(keys.replicas)
            .and_then(Node::as_i64)
            .or(keys.defaults.replicas)
            .unwrap_or(min);
        let owner = Owner {
            namespace: params.namespace.as_deref(),
            name: &params.name,
            site: &values.site,
        };
        match keys.pdb {
            Pdb::Value { enabled, fields } => self.judge_pdb_value(enabled, fields, said),
            Pdb::Component(by) => {
                // The component's PDB; a second one in the repository makes evictions fail.
                let mut own = Vec::new();
                let mut none = Vec::new();
                pdbs(
                    objects,
                    &owner,
                    &params.selector,
                    replicas,
                    &mut none,
                    &mut own,
                );
                let extra: Vec<String> = own
                    .into_iter()
                    .chain(
                        none.into_iter()
                            .filter(|p| !p.contains("no PodDisruptionBudget")),
                    )
                    .collect();
                if extra.is_empty() {
                    said.evidence.push(at(
                        &values.site,
                        &format!("PodDisruptionBudget of {}", params.name),
                        format!("made by {by} itself (minAvailable: 1) while a volume is attached; the repository needs none"),
                    ));
                } else {
                    said.problems.push(format!(
                        "{by} makes the PodDisruptionBudget of {} itself; a second one in the repository makes every eviction of its pods fail (more than one PodDisruptionBudget): {}",
                        params.name,
                        extra.join("; ")
                    ));
                }
            }
            Pdb::Manifest => {
                let mut missing = Vec::new();
                pdbs(
                    objects,
                    &owner,
                    &params.selector,
                    replicas,
                    &mut missing,
                    &mut said.evidence,
                );
                said.problems.extend(
                    missing
                        .into_iter()
                        .map(|p| format!("{p} (the {} chart makes none)", keys.chart)),
                );
            }
        }
    }

    /// A PDB the chart renders when a value is true: on, and with a field that lets a pod go.
    fn judge_pdb_value(
        &self,
        enabled: &'static [&'static str],
        fields: &'static [&'static [&'static str]],
        said: &mut Said,
    ) {
        let values = self.values;
        self.judge_value(enabled, &|v| v.as_bool() == Some(true), said);
        // Rendered with only the fields set: enabled with neither is a policy/v1
        // PDB that allows no disruption (a falsy 0 is left out too).
        let on = values.get(enabled).and_then(Node::as_bool) == Some(true);
        let set = |path: &[&str]| {
            values
                .get(path)
                .is_some_and(|v| !v.is_null() && v.show() != "0" && !v.show().is_empty())
        };
        if on && !fields.is_empty() && !fields.iter().any(|f| set(f)) {
            said.problems.push(at(
                &values.get(enabled).map(|v| v.site.clone()).unwrap_or_else(|| values.site.clone()),
                &format!("{} values {}", self.keys.chart, enabled.join(".")),
                format!(
                    "true with neither {} set: the chart renders a PodDisruptionBudget with neither field, which allows no disruption, so every drain blocks (set maxUnavailable: 1)",
                    fields.iter().map(|f| f.join(".")).collect::<Vec<_>>().join(" nor ")
                ),
            ));
        }
    }

    fn judge_spread(&self, ctx: &RepoContext<'_>, said: &mut Said) {
        let (values, keys) = (self.values, self.keys);
        let spread = match &keys.spread {
            SpreadKeys::Pod {
                affinity,
                constraints,
            } => {
                let (a, c) = (values.get(affinity), values.get(constraints));
                if a.is_none() && c.is_none() {
                    None
                } else {
                    Some(spread::of(a, c, &ctx.settings.nodes.host_label))
                }
            }
            SpreadKeys::LonghornPreset(path) => values.get(path).map(|v| match v.as_str() {
                Some("hard") => Spread::Host(
                    v.site.clone(),
                    "hard: a required hostname anti-affinity".to_string(),
                ),
                _ => Spread::Soft(
                    v.site.clone(),
                    format!("{}: a preferred hostname anti-affinity, which the scheduler may drop: copies may share a host", v.show()),
                ),
            }),
        };
        let spread_key = match &keys.spread {
            SpreadKeys::Pod {
                affinity,
                constraints,
            } => format!(
                "{} values {} or {}",
                keys.chart,
                affinity.join("."),
                constraints.join(".")
            ),
            SpreadKeys::LonghornPreset(path) => {
                format!("{} values {}", keys.chart, path.join("."))
            }
        };
        match spread {
            Some(Spread::Host(site, how)) => said.evidence.push(at(&site, &spread_key, how)),
            Some(Spread::Soft(site, why)) => said.problems.push(at(&site, &spread_key, why)),
            Some(Spread::None) | None => match keys.defaults.spread {
                Some(true) => said.evidence.push(at(
                    &values.site,
                    &spread_key,
                    "not set: the chart's default requires one pod per node",
                )),
                Some(false) => said.problems.push(at(
                    &values.site,
                    &spread_key,
                    "not set: the chart's default sets no required anti-affinity or spread, so copies may share a host",
                )),
                None => said.unknown.push(spread_key),
            },
        }
    }
}

/// What a PodDisruptionBudget must protect: a workload manifest, or a chart's pods.
struct Owner<'a> {
    /// `None`: any namespace (the live check names none).
    namespace: Option<&'a str>,
    name: &'a str,
    site: &'a crate::declared::site::Site,
}

fn pdbs(
    objects: &[Node],
    owner: &Owner<'_>,
    labels: &BTreeMap<String, String>,
    replicas: i64,
    problems: &mut Vec<String>,
    evidence: &mut Vec<String>,
) {
    let matching: Vec<&Node> = objects
        .iter()
        .filter(|o| {
            o.get_str(&["kind"]) == Some("PodDisruptionBudget")
                && owner
                    .namespace
                    .is_none_or(|ns| o.get_str(&["metadata", "namespace"]) == Some(ns))
        })
        .filter(|pdb| {
            pdb.get(&["spec", "selector"])
                .and_then(|s| serde_json::from_value::<LabelSelector>(s.to_json()).ok())
                .and_then(|s| Selector::compile(Some(&s), WhenNil::MatchesNothing).ok())
                .is_some_and(|s| s.matches(labels))
        })
        .collect();
    let name = owner.name;
    match matching.as_slice() {
        [] => problems.push(format!(
            "{}: no PodDisruptionBudget in the repository selects the pods of {name}",
            owner.site
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

/// CoreDNS is deployed by Talos unless a patch sets `cluster.coreDNS.disabled`: then its
/// replicas, PDB and spread are Talos's bootstrap manifest's, not the repository's.
fn talos_coredns(ctx: &RepoContext<'_>, params: &Params) -> Option<Finding> {
    if params.selector.get("k8s-app").map(String::as_str) != Some("kube-dns") {
        return None;
    }
    let patches = match talos_patches(ctx.env) {
        Ok(Some(p)) => p,
        Ok(None) => {
            return Some(Finding::skip(format!(
                "nothing in the repository for {} runs pods labelled k8s-app=kube-dns, and it has no Talos patches: CoreDNS is installed outside the repository (Talos deploys it by default); the live trial checks it",
                ctx.env.name
            )));
        }
        Err(finding) => return Some(finding),
    };
    let disabled = patches
        .patches
        .iter()
        .filter_map(|p| p.doc.get(&["cluster", "coreDNS", "disabled"]))
        .next_back();
    Some(match disabled {
        Some(v) if v.as_bool() == Some(true) => Finding::skip(format!(
            "{}, and nothing in the repository for {} deploys CoreDNS (pods labelled k8s-app=kube-dns): it is installed another way; the live trial checks it",
            at(&v.site, "cluster.coreDNS.disabled", v.show()),
            ctx.env.name
        )),
        _ => Finding::skip(format!(
            "CoreDNS (pods labelled k8s-app=kube-dns) is deployed by Talos for {} (no Talos patch sets cluster.coreDNS.disabled): its replicas, PDB and spread come from Talos's bootstrap manifest, not from the repository; the live trial checks them",
            ctx.env.name
        ))
        .with_evidence(patches.patches.iter().map(|p| p.file.clone()).collect::<std::collections::BTreeSet<_>>().into_iter().map(|f| format!("{f}: Talos patch read")).collect::<Vec<_>>()),
    })
}

/// What the repository declares about a controller's PodDisruptionBudget, for drift:
/// whether there is one, and the evidence line. `None`: nothing declares the controller, or
/// a chart's default decides.
pub fn declared_pdb(
    ctx: &RepoContext<'_>,
    params: &Params,
) -> Result<Option<(bool, String)>, Finding> {
    let m = manifests_except(ctx.env, reads::CONTROLLERS, &|o| {
        not_this_controller(o, params)
    })?;
    let pods: Vec<BTreeMap<String, String>> = workloads(&m.objects, params)
        .iter()
        .filter_map(|w| {
            w.get(&["spec", "template", "metadata", "labels"])
                .and_then(Node::string_map)
        })
        .collect();
    let manifest_pdbs = |labels: &[BTreeMap<String, String>]| -> Vec<String> {
        m.objects
            .iter()
            .filter(|o| o.get_str(&["kind"]) == Some("PodDisruptionBudget"))
            .filter(|o| {
                params
                    .namespace
                    .as_deref()
                    .is_none_or(|ns| o.get_str(&["metadata", "namespace"]) == Some(ns))
            })
            .filter(|pdb| {
                pdb.get(&["spec", "selector"])
                    .and_then(|s| serde_json::from_value::<LabelSelector>(s.to_json()).ok())
                    .and_then(|s| Selector::compile(Some(&s), WhenNil::MatchesNothing).ok())
                    .is_some_and(|s| labels.iter().any(|l| s.matches(l)))
            })
            .map(|pdb| {
                format!(
                    "PodDisruptionBudget {} ({})",
                    pdb.get_str(&["metadata", "name"]).unwrap_or("?"),
                    pdb.site
                )
            })
            .collect()
    };
    if !pods.is_empty() {
        let found = manifest_pdbs(&pods);
        return Ok(Some(if found.is_empty() {
            (
                false,
                format!(
                    "no PodDisruptionBudget manifest selects the pods of {}",
                    params.name
                ),
            )
        } else {
            (true, found.join(", "))
        }));
    }
    // The first chart that deploys the controller decides.
    if let Some((values, keys)) = helm(ctx, params)?.into_iter().next() {
        match keys.pdb {
            Pdb::Value { enabled, .. } => {
                return Ok(values.get(enabled).map(|v| {
                    (
                        v.as_bool() == Some(true),
                        at(
                            &v.site,
                            &format!("{} values {}", keys.chart, enabled.join(".")),
                            v.show(),
                        ),
                    )
                }));
            }
            // The component's own PDB exists only while it is in use: the cluster says.
            Pdb::Component(_) => return Ok(None),
            Pdb::Manifest => {
                let found = manifest_pdbs(std::slice::from_ref(&params.selector));
                return Ok(Some(if found.is_empty() {
                    (
                        false,
                        format!(
                            "no PodDisruptionBudget manifest selects {} (the {} chart makes none)",
                            params.name, keys.chart
                        ),
                    )
                } else {
                    (true, found.join(", "))
                }));
            }
        }
    }
    Ok(None)
}
