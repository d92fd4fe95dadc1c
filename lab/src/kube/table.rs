//! `meta.k8s.io/v1` Table responses, which kubectl asks for when it prints objects. Columns
//! follow the real server's for nodes, pods, events and PDBs (with the `-o wide` ones);
//! other kinds get Name and Age.

use crate::resources::{Res, ResourceDef};
use serde_json::{Value, json};
use std::sync::Arc;

fn age(created: Option<&str>, now: chrono::DateTime<chrono::Utc>) -> String {
    let Some(t) = created.and_then(|c| chrono::DateTime::parse_from_rfc3339(c).ok()) else {
        return "<unknown>".into();
    };
    let secs = (now - t.with_timezone(&chrono::Utc)).num_seconds().max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 3 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

fn col(name: &str, ty: &str, priority: i32) -> Value {
    json!({"name": name, "type": ty, "format": if name == "Name" {"name"} else {""}, "description": "", "priority": priority})
}

/// kubectl prints `<none>` for an empty cell.
fn or_none(v: &str) -> &str {
    if v.is_empty() { "<none>" } else { v }
}

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(|x| x.as_str()).unwrap_or("")
}

/// Objects as the `meta.k8s.io/v1` Table kubectl asks for (`as=Table`): the kind's columns
/// and one row per object.
pub fn table(
    def: &ResourceDef,
    items: &[Arc<Value>],
    rv: u64,
    cont: Option<String>,
    now: chrono::DateTime<chrono::Utc>,
) -> Value {
    let columns = columns(def);
    let rows: Vec<Value> = items.iter().map(|o| row(def, o, now)).collect();
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = cont {
        meta["continue"] = json!(c);
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "columnDefinitions": columns, "rows": rows})
}

/// The columns kubectl shows for a kind (wide-only ones at priority 1).
fn columns(def: &ResourceDef) -> Vec<Value> {
    match def.res {
        Res::Nodes => vec![
            col("Name", "string", 0),
            col("Status", "string", 0),
            col("Roles", "string", 0),
            col("Age", "string", 0),
            col("Version", "string", 0),
            col("Internal-IP", "string", 1),
            col("External-IP", "string", 1),
            col("OS-Image", "string", 1),
            col("Kernel-Version", "string", 1),
            col("Container-Runtime", "string", 1),
        ],
        Res::Pods => vec![
            col("Name", "string", 0),
            col("Ready", "string", 0),
            col("Status", "string", 0),
            col("Restarts", "string", 0),
            col("Age", "string", 0),
            col("IP", "string", 1),
            col("Node", "string", 1),
            col("Nominated Node", "string", 1),
            col("Readiness Gates", "string", 1),
        ],
        Res::Events => vec![
            col("Last Seen", "string", 0),
            col("Type", "string", 0),
            col("Reason", "string", 0),
            col("Object", "string", 0),
            col("Subobject", "string", 1),
            col("Source", "string", 1),
            col("Message", "string", 0),
            col("First Seen", "string", 1),
            col("Count", "string", 1),
            col("Name", "string", 1),
        ],
        Res::PodDisruptionBudgets => vec![
            col("Name", "string", 0),
            col("Min Available", "string", 0),
            col("Max Unavailable", "string", 0),
            col("Allowed Disruptions", "integer", 0),
            col("Age", "string", 0),
        ],
        _ => vec![col("Name", "string", 0), col("Age", "string", 0)],
    }
}

/// One row: the kind's cells and the object's metadata (without managed fields).
fn row(def: &ResourceDef, o: &Value, now: chrono::DateTime<chrono::Utc>) -> Value {
    let name = s(o, "/metadata/name");
    let a = age(
        o.pointer("/metadata/creationTimestamp")
            .and_then(|x| x.as_str()),
        now,
    );
    let cells = match def.res {
        Res::Nodes => node_cells(o, name, &a),
        Res::Pods => pod_cells(o, name, &a),
        Res::PodDisruptionBudgets => pdb_cells(o, name, &a),
        Res::Events => event_cells(o, name, now),
        _ => json!([name, a]),
    };
    let mut meta = o.get("metadata").cloned().unwrap_or(json!({}));
    if let Some(m) = meta.as_object_mut() {
        m.remove("managedFields");
    }
    json!({
        "cells": cells,
        "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta},
    })
}

/// A Node's row: Ready or NotReady, its roles, kubelet version, addresses, OS and runtime.
fn node_cells(o: &Value, name: &str, a: &str) -> Value {
    let ready = o
        .pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .map(|c| c["status"] == "True")
        .unwrap_or(false);
    let roles: Vec<&str> = o
        .pointer("/metadata/labels")
        .and_then(|l| l.as_object())
        .map(|l| {
            l.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .collect()
        })
        .unwrap_or_default();
    let ip = o
        .pointer("/status/addresses")
        .and_then(|a| a.as_array())
        .and_then(|a| a.iter().find(|x| x["type"] == "InternalIP"))
        .and_then(|x| x["address"].as_str())
        .unwrap_or("");
    let external = o
        .pointer("/status/addresses")
        .and_then(|a| a.as_array())
        .and_then(|a| a.iter().find(|x| x["type"] == "ExternalIP"))
        .and_then(|x| x["address"].as_str())
        .unwrap_or("<none>");
    json!([
        name,
        if ready { "Ready" } else { "NotReady" },
        if roles.is_empty() {
            "<none>".to_string()
        } else {
            roles.join(",")
        },
        a,
        s(o, "/status/nodeInfo/kubeletVersion"),
        or_none(ip),
        external,
        or_none(s(o, "/status/nodeInfo/osImage")),
        or_none(s(o, "/status/nodeInfo/kernelVersion")),
        or_none(s(o, "/status/nodeInfo/containerRuntimeVersion"))
    ])
}

/// A Pod's row: ready containers, status (Terminating, a waiting reason, or the phase),
/// restarts, address and node.
fn pod_cells(o: &Value, name: &str, a: &str) -> Value {
    let statuses = o
        .pointer("/status/containerStatuses")
        .and_then(|c| c.as_array())
        .cloned()
        .unwrap_or_default();
    let ready = statuses.iter().filter(|c| c["ready"] == true).count();
    let total = o
        .pointer("/spec/containers")
        .and_then(|c| c.as_array())
        .map(|c| c.len())
        .unwrap_or(0);
    let status = if o.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating".to_string()
    } else if let Some(w) = statuses
        .first()
        .and_then(|c| c.pointer("/state/waiting/reason"))
        .and_then(|r| r.as_str())
    {
        w.to_string()
    } else {
        s(o, "/status/phase").to_string()
    };
    json!([
        name,
        format!("{ready}/{total}"),
        status,
        statuses
            .iter()
            .filter_map(|c| c["restartCount"].as_i64())
            .sum::<i64>(),
        a,
        or_none(s(o, "/status/podIP")),
        or_none(s(o, "/spec/nodeName")),
        or_none(s(o, "/status/nominatedNodeName")),
        "<none>"
    ])
}

/// A PodDisruptionBudget's row: its bounds (`N/A` when unset) and allowed disruptions.
fn pdb_cells(o: &Value, name: &str, a: &str) -> Value {
    let show = |p: &str| {
        o.pointer(p)
            .map(|v| {
                if let Some(s) = v.as_str() {
                    s.to_string()
                } else {
                    v.to_string()
                }
            })
            .unwrap_or_else(|| "N/A".into())
    };
    json!([
        name,
        show("/spec/minAvailable"),
        show("/spec/maxUnavailable"),
        o.pointer("/status/disruptionsAllowed")
            .cloned()
            .unwrap_or(json!(0)),
        a
    ])
}

/// An Event's row: when last and first seen, type, reason, object, source and message.
fn event_cells(o: &Value, name: &str, now: chrono::DateTime<chrono::Utc>) -> Value {
    let last = age(o.pointer("/lastTimestamp").and_then(|x| x.as_str()), now);
    let first = age(o.pointer("/firstTimestamp").and_then(|x| x.as_str()), now);
    let object = format!(
        "{}/{}",
        s(o, "/involvedObject/kind").to_lowercase(),
        s(o, "/involvedObject/name")
    );
    json!([
        last,
        s(o, "/type"),
        s(o, "/reason"),
        object,
        s(o, "/involvedObject/fieldPath"),
        s(o, "/source/component"),
        s(o, "/message"),
        first,
        o.pointer("/count").cloned().unwrap_or(json!(1)).to_string(),
        name
    ])
}
