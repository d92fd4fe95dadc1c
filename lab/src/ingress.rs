//! The ingress LoadBalancer address: answers HTTP for the configured host names while the
//! world says the L2 lease holder is up and a Traefik pod can take the traffic.

use crate::kube::status::bytes_response;
use crate::net::{Handler, full};
use crate::reqlog::{Protocol, RequestLog};
use hyper::Response;
use std::sync::Arc;

/// A handler that serves `hosts` (Host header, port ignored) like a `whoami` backend.
pub fn handler(env_name: String, hosts: Vec<String>, log: RequestLog) -> Handler {
    let hosts = Arc::new(hosts);
    Arc::new(move |req, info| {
        let hosts = hosts.clone();
        let log = log.clone();
        let env_name = env_name.clone();
        Box::pin(async move {
            let host = req
                .headers()
                .get(hyper::header::HOST)
                .and_then(|h| h.to_str().ok())
                .or_else(|| req.uri().host())
                .map(|h| h.rsplit_once(':').map(|(a, _)| a).unwrap_or(h).to_string())
                .unwrap_or_default();
            let path = req
                .uri()
                .path_and_query()
                .map(|p| p.to_string())
                .unwrap_or_default();
            let resp = if hosts.iter().any(|h| h.eq_ignore_ascii_case(&host)) {
                let body = format!(
                    "Hostname: whoami\nIP: {}\nHost: {host}\nEnvironment: {env_name}\nRemoteAddr: {}\n",
                    info.server.ip(),
                    info.client
                );
                let mut r = Response::new(full(body));
                r.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
                );
                r
            } else {
                bytes_response(
                    404,
                    "text/plain; charset=utf-8",
                    b"404 page not found\n".to_vec(),
                )
            };
            log.record(
                Protocol::Ingress,
                info.client,
                info.server,
                req.method().as_str(),
                &path,
                resp.status().as_u16(),
            );
            resp
        })
    })
}
