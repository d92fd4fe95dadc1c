//! `POST /api/v1/namespaces/{ns}/pods/{name}/eviction`, the subresource `kubectl drain` uses:
//! the pod's PodDisruptionBudget decides, from its status, whether the pod may go (429
//! TooManyRequests when it may not, 500 when more than one PDB selects the pod), as the real
//! eviction handler does; an allowed eviction marks the pod for deletion in the world.

use std::collections::BTreeMap;
use std::sync::Arc;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use serde_json::{Value, json};

use super::status::{bad_request, json_response, not_found, status};
use super::{KubeApi, User};
use crate::net::Body;
use crate::resources::Res;
use crate::selector::labels_of;

/// Whether a PDB's `spec.selector` selects pods with `labels` (a null selector selects none).
fn selects(pdb: &Value, labels: &BTreeMap<String, String>) -> bool {
    let Some(selector) = pdb.pointer("/spec/selector").filter(|s| !s.is_null()) else {
        return false;
    };
    let match_labels = selector
        .get("matchLabels")
        .and_then(|m| m.as_object())
        .cloned()
        .unwrap_or_default();
    let expressions_ok = selector
        .get("matchExpressions")
        .and_then(|e| e.as_array())
        .is_none_or(|e| e.is_empty());
    expressions_ok
        && match_labels
            .iter()
            .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str())
}

impl KubeApi {
    pub(super) async fn evict(
        &self,
        req: Request<Incoming>,
        user: User,
        ns: &str,
        name: &str,
    ) -> Response<Body> {
        if req.method() != Method::POST {
            return status(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
                None,
            );
        }
        if user == User::ReadOnly {
            return status(
                403,
                "Forbidden",
                &format!(
                    "pods \"{name}\" is forbidden: User \"{}\" cannot create resource \"pods/eviction\" in API group \"\" in the namespace \"{ns}\"",
                    user.name()
                ),
                Some(json!({"name": name, "kind": "pods"})),
            );
        }
        let body = match req.into_body().collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => return bad_request("the request body could not be read"),
        };
        if let Some(refusal) = body_refusal(&body, name) {
            return refusal;
        }
        if !self.wait_for_quorum(|t| t.etcd_request_timeout).await {
            return status(500, "InternalError", "etcdserver: request timed out", None);
        }
        let (pod, pdbs) = self.shared.read(|w| {
            let store = &w.envs[self.env].store;
            (
                store.get(Res::Pods, ns, name),
                store
                    .list(Res::PodDisruptionBudgets)
                    .into_iter()
                    .filter(|((pns, _), _)| pns == ns)
                    .map(|(_, o)| o)
                    .collect::<Vec<_>>(),
            )
        });
        let Some(pod) = pod else {
            return not_found("pods", "", name);
        };
        if pod.pointer("/metadata/deletionTimestamp").is_none() {
            if let Some(refusal) = budget_refusal(&pdbs, &pod) {
                return refusal;
            }
            let key = (ns.to_string(), name.to_string());
            if self.shared.evict_pod(self.env, &key).is_err() {
                return not_found("pods", "", name);
            }
        }
        json_response(
            201,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        )
    }
}

/// A body that is not an Eviction for the pod the path names (an empty body is fine).
fn body_refusal(body: &[u8], name: &str) -> Option<Response<Body>> {
    if !body.is_empty() {
        let Ok(eviction) = serde_json::from_slice::<Value>(body) else {
            return Some(bad_request(
                "the request body is not a valid Eviction object",
            ));
        };
        if eviction
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .is_some_and(|n| n != name)
        {
            return Some(bad_request(
                "name in URL does not match name in Eviction object",
            ));
        }
    }
    None
}

/// Why the Eviction API refuses to evict a pod that is not yet Terminating: 429 when the one
/// PodDisruptionBudget covering it allows no disruption, 500 when more than one covers it.
fn budget_refusal(pdbs: &[Arc<Value>], pod: &Value) -> Option<Response<Body>> {
    let labels = labels_of(pod);
    let covering: Vec<_> = pdbs.iter().filter(|p| selects(p, &labels)).collect();
    match covering.as_slice() {
        [] => None,
        [pdb] => {
            let allowed = pdb
                .pointer("/status/disruptionsAllowed")
                .and_then(|v| v.as_i64())
                .unwrap_or(0);
            if allowed > 0 {
                return None;
            }
            let int = |p: &str| pdb.pointer(p).and_then(|v| v.as_i64()).unwrap_or(0);
            Some(status(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                Some(json!({"causes": [{
                    "reason": "DisruptionBudget",
                    "message": format!(
                        "The disruption budget {} needs {} healthy pods and has {} currently",
                        pdb.pointer("/metadata/name").and_then(|v| v.as_str()).unwrap_or(""),
                        int("/status/desiredHealthy"),
                        int("/status/currentHealthy")
                    ),
                }]})),
            ))
        }
        _ => Some(status(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            None,
        )),
    }
}
