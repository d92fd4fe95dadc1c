//! The only writes the lab's API accepts: create and update of `coordination.k8s.io` Leases
//! (the chaos step takes one per environment so a second runner anywhere is refused). Same
//! answers as the real server: 201 on create, 409 `AlreadyExists` for a name taken, 404 for a
//! missing namespace or object, 409 `Conflict` for a stale `resourceVersion`.

use super::status::{bad_request, json_response, not_found, status};
use crate::net::Body;
use crate::resources::Res;
use hyper::Response;
use serde_json::{Value, json};

/// Create (`name` is None) or replace the Lease `ns/name` with `body`.
pub fn write_lease(
    api: &super::KubeApi,
    ns: Option<&str>,
    name: Option<&str>,
    body: &[u8],
) -> Response<Body> {
    let Some(ns) = ns else {
        return bad_request("Leases are namespaced: write them under /namespaces/NS/leases");
    };
    let mut obj: Value = match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => return bad_request("the body is not a JSON object"),
        Err(err) => return bad_request(&format!("the body is not JSON: {err}")),
    };
    let Some(obj_name) = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return bad_request("metadata.name is required");
    };
    if name.is_some_and(|n| n != obj_name) {
        return bad_request("the name in the body does not match the name in the path");
    }
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("namespace".into(), json!(ns));
    }
    let env = api.env;
    let wall = api.shared.clock.wall_now();
    api.shared.change(|w, _| {
        let store = &mut w.envs[env].store;
        if store.get(Res::Namespaces, "", ns).is_none() {
            return not_found("namespaces", "", ns);
        }
        let old = store.get(Res::Leases, ns, &obj_name);
        match (name, &old) {
            (None, Some(_)) => {
                return status(
                    409,
                    "AlreadyExists",
                    &format!("leases.coordination.k8s.io \"{obj_name}\" already exists"),
                    Some(json!({"name": obj_name, "group": "coordination.k8s.io", "kind": "leases"})),
                );
            }
            (Some(_), None) => return not_found("leases", "coordination.k8s.io", &obj_name),
            _ => {}
        }
        if let Some(old) = &old {
            let sent = obj.pointer("/metadata/resourceVersion").and_then(Value::as_str);
            let held = old.pointer("/metadata/resourceVersion").and_then(Value::as_str);
            if sent.is_some_and(|s| Some(s) != held) {
                return status(
                    409,
                    "Conflict",
                    &format!(
                        "Operation cannot be fulfilled on leases.coordination.k8s.io \"{obj_name}\": the object has been modified; please apply your changes to the latest version and try again"
                    ),
                    None,
                );
            }
        }
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            let (uid, created) = match &old {
                Some(old) => (
                    old.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
                    old.pointer("/metadata/creationTimestamp")
                        .cloned()
                        .unwrap_or(Value::Null),
                ),
                None => (
                    json!(crate::ids::uuid(&["lease", ns, &obj_name, &wall.to_rfc3339()])),
                    json!(wall.format("%Y-%m-%dT%H:%M:%SZ").to_string()),
                ),
            };
            meta.insert("uid".into(), uid);
            meta.insert("creationTimestamp".into(), created);
        }
        obj["apiVersion"] = json!("coordination.k8s.io/v1");
        obj["kind"] = json!("Lease");
        store.put(Res::Leases, obj.clone());
        let stored = store
            .get(Res::Leases, ns, &obj_name)
            .map(|o| (*o).clone())
            .unwrap_or(obj);
        json_response(if old.is_some() { 200 } else { 201 }, &stored)
    })
}
