//! Response shapes of pveproxy (`research/proxmox.md` §1.1, §2): the `{"data": …}` envelope,
//! errors with a JSON `message` and the same text as HTTP reason phrase, empty bodies for auth
//! and proxy failures, `Connection: close` on every error.

use std::collections::BTreeMap;

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONNECTION, CONTENT_TYPE, EXPIRES, HeaderValue, PRAGMA, SERVER};
use http::{Response, StatusCode};
use http_body_util::Full;
use hyper::ext::ReasonPhrase;
use serde_json::{Value, json};

/// A complete response.
pub type Resp = Response<Full<Bytes>>;

fn base(status: u16, body: Bytes, json_body: bool) -> Resp {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = Response::new(Full::new(body));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(SERVER, HeaderValue::from_static("pve-api-daemon/3.0"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("max-age=0"));
    h.insert(PRAGMA, HeaderValue::from_static("no-cache"));
    let expires = chrono::Utc::now()
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string();
    if let Ok(v) = HeaderValue::from_str(&expires) {
        h.insert(EXPIRES, v);
    }
    if json_body {
        h.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/json;charset=UTF-8"),
        );
    }
    if status.as_u16() >= 400 {
        h.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

fn with_reason(mut resp: Resp, reason: &str) -> Resp {
    // The reason phrase is the message's first line; characters a status line cannot carry
    // are dropped rather than failing the response.
    let line: String = reason
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .filter(|c| *c == '\t' || (' '..='~').contains(c))
        .collect();
    if let Ok(phrase) = ReasonPhrase::try_from(line) {
        resp.extensions_mut().insert(phrase);
    }
    resp
}

/// 200 with `{"data": value}`.
pub fn data(value: Value) -> Resp {
    data_with(value, None)
}

/// 200 with `{"data": value, "total": n}` (task logs).
pub fn data_with(value: Value, total: Option<usize>) -> Resp {
    let mut body = json!({ "data": value });
    if let (Some(total), Some(obj)) = (total, body.as_object_mut()) {
        obj.insert("total".into(), json!(total));
    }
    base(200, Bytes::from(body.to_string()), true)
}

/// An API handler error: `{"data":null,"message":"text\n"}`, reason phrase = text.
pub fn error(status: u16, message: &str) -> Resp {
    let message = format!("{}\n", message.trim_end());
    let body = json!({ "data": null, "message": message });
    with_reason(base(status, Bytes::from(body.to_string()), true), &message)
}

/// 400 parameter verification failure with per-parameter `errors`.
pub fn param_errors(errors: BTreeMap<String, String>) -> Resp {
    let message = "Parameter verification failed.\n";
    let body = json!({ "data": null, "errors": errors, "message": message });
    with_reason(base(400, Bytes::from(body.to_string()), true), message)
}

/// A status with an empty body and a reason phrase (401 auth failures, 595 proxy failures).
pub fn empty(status: u16, reason: &str) -> Resp {
    with_reason(base(status, Bytes::new(), false), reason)
}

/// 501 for an unknown path or method.
pub fn not_implemented(method: &str, rel_path: &str) -> Resp {
    error(
        501,
        &format!("Method '{method} {rel_path}' not implemented"),
    )
}
