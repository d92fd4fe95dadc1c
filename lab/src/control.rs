//! The lab control endpoint (plain HTTP on 127.S.255.1:7000): ground truth, request log,
//! health. Read-only; tests drive the lab through the library instead.

use crate::kube::status::{bytes_response, json_response};
use crate::net::Handler;
use crate::reqlog::RequestLog;
use crate::world::Shared;
use std::sync::Arc;

pub fn handler(shared: Arc<Shared>, log: RequestLog) -> Handler {
    Arc::new(move |req, _info| {
        let shared = shared.clone();
        let log = log.clone();
        Box::pin(async move {
            match req.uri().path() {
                "/events" => {
                    let truth = shared.read(|w| w.truth.clone());
                    json_response(200, &serde_json::to_value(&truth).unwrap_or_default())
                }
                "/requests" => json_response(
                    200,
                    &serde_json::to_value(log.snapshot()).unwrap_or_default(),
                ),
                "/health" => bytes_response(200, "text/plain", b"ok\n".to_vec()),
                _ => bytes_response(
                    404,
                    "text/plain",
                    b"not found: try /events, /requests or /health\n".to_vec(),
                ),
            }
        })
    })
}
