//! `Status` error bodies shaped like the real API server's.

use crate::net::{Body, full};
use hyper::Response;
use serde_json::json;

pub fn status(
    code: u16,
    reason: &str,
    message: &str,
    details: Option<serde_json::Value>,
) -> Response<Body> {
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    if let Some(d) = details
        && let Some(m) = body.as_object_mut()
    {
        m.insert("details".into(), d);
    }
    json_response(code, &body)
}

pub fn json_response(code: u16, body: &serde_json::Value) -> Response<Body> {
    bytes_response(
        code,
        "application/json",
        serde_json::to_vec(body).unwrap_or_default(),
    )
}

pub fn bytes_response(code: u16, content_type: &str, bytes: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(full(bytes));
    *r.status_mut() =
        hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

pub fn unauthorized() -> Response<Body> {
    status(401, "Unauthorized", "Unauthorized", None)
}

pub fn not_found_path() -> Response<Body> {
    status(
        404,
        "NotFound",
        "the server could not find the requested resource",
        Some(json!({})),
    )
}

pub fn not_found(plural: &str, group: &str, name: &str) -> Response<Body> {
    let what = if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    };
    let mut details = json!({"name": name, "kind": plural});
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    status(
        404,
        "NotFound",
        &format!("{what} \"{name}\" not found"),
        Some(details),
    )
}

pub fn bad_request(message: &str) -> Response<Body> {
    status(400, "BadRequest", message, None)
}
