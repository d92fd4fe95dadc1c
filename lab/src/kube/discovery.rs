//! Discovery documents: /api, /apis, /apis/<group>, /api/v1 and /apis/<group>/<version>.

use crate::resources::{RESOURCES, groups};
use serde_json::{Value, json};

/// Which optional API groups an environment serves: metrics.k8s.io only with a metrics
/// server, longhorn.io only with Longhorn installed. Discovery and routing both follow it, so
/// discovery lists what is served and nothing else.
#[derive(Debug, Clone, Copy)]
pub struct Served {
    pub metrics: bool,
    pub longhorn: bool,
}

impl Served {
    pub fn group(&self, group: &str) -> bool {
        match group {
            "metrics.k8s.io" => self.metrics,
            "longhorn.io" => self.longhorn,
            _ => true,
        }
    }
}

/// A served subresource: its name, the (group, version, kind) it answers with, its verbs.
type Subresource = (
    &'static str,
    (&'static str, &'static str, &'static str),
    &'static [&'static str],
);

/// The subresources the lab serves, per (group, plural).
fn subresources(group: &str, plural: &str) -> Vec<Subresource> {
    match (group, plural) {
        ("", "pods") => vec![("eviction", ("policy", "v1", "Eviction"), &["create"])],
        _ => Vec::new(),
    }
}

pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_doc(name: &str, versions: &[&str]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

pub fn api_group_list(served: Served) -> Value {
    let groups: Vec<Value> = groups()
        .into_iter()
        .filter(|(g, _)| served.group(g))
        .map(|(g, vs)| group_doc(g, &vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn api_group(group: &str, served: Served) -> Option<Value> {
    if !served.group(group) {
        return None;
    }
    groups()
        .into_iter()
        .find(|(g, _)| *g == group)
        .map(|(g, vs)| {
            let mut doc = group_doc(g, &vs);
            if let Some(m) = doc.as_object_mut() {
                m.insert("kind".into(), json!("APIGroup"));
                m.insert("apiVersion".into(), json!("v1"));
            }
            doc
        })
}

pub fn resource_list(group: &str, version: &str, served: Served) -> Option<Value> {
    if !served.group(group) {
        return None;
    }
    let defs: Vec<_> = RESOURCES
        .iter()
        .filter(|d| d.group == group && d.version == version)
        .collect();
    if defs.is_empty() {
        return None;
    }
    let mut resources: Vec<Value> = Vec::new();
    for d in &defs {
        let mut r = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": d.verbs(),
        });
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            r["categories"] = json!(d.categories);
        }
        resources.push(r);
        for (sub, (g, v, kind), verbs) in subresources(d.group, d.plural) {
            resources.push(json!({
                "name": format!("{}/{sub}", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "group": g,
                "version": v,
                "kind": kind,
                "verbs": verbs,
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

/// Content type of aggregated discovery responses (apidiscovery.k8s.io/v2).
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether an Accept header asks for aggregated discovery v2 (client-go ≥ 1.30 and kube-rs's
/// `run_aggregated` do; both fall back to the legacy documents when it is not served).
pub fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').any(|part| {
        let params: Vec<&str> = part.split(';').map(str::trim).collect();
        params.contains(&"g=apidiscovery.k8s.io")
            && params.contains(&"v=v2")
            && params.contains(&"as=APIGroupDiscoveryList")
    })
}

/// The aggregated discovery document of `/api` (`core`) or `/apis`.
pub fn aggregated(core: bool, served: Served) -> Value {
    let group_names: Vec<(&str, Vec<&str>)> = if core {
        vec![("", vec!["v1"])]
    } else {
        groups()
            .into_iter()
            .filter(|(g, _)| served.group(g))
            .collect()
    };
    let items: Vec<Value> = group_names
        .into_iter()
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = RESOURCES
                        .iter()
                        .filter(|d| d.group == group && d.version == *v)
                        .map(|d| {
                            let mut r = json!({
                                "resource": d.plural,
                                "responseKind": {"group": d.group, "version": d.version, "kind": d.kind},
                                "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
                                "singularResource": d.singular,
                                "verbs": d.verbs(),
                            });
                            if !d.short_names.is_empty() {
                                r["shortNames"] = json!(d.short_names);
                            }
                            if !d.categories.is_empty() {
                                r["categories"] = json!(d.categories);
                            }
                            let subs: Vec<Value> = subresources(d.group, d.plural)
                                .into_iter()
                                .map(|(sub, (g, v, kind), verbs)| json!({
                                    "subresource": sub,
                                    "responseKind": {"group": g, "version": v, "kind": kind},
                                    "verbs": verbs,
                                }))
                                .collect();
                            if !subs.is_empty() {
                                r["subresources"] = json!(subs);
                            }
                            r
                        })
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            let meta = if group.is_empty() { json!({"creationTimestamp": null}) } else { json!({"name": group, "creationTimestamp": null}) };
            json!({"metadata": meta, "versions": versions})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}
