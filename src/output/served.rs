//! What `gates watch` serves over HTTP, from its newest evaluation: `/metrics` (OpenMetrics),
//! `/healthz` (the process answers), `/readyz` (every source's first read is in), and `/` the
//! check page. Each request reads the newest evaluation as it is; nothing is computed twice.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};

use gates_engine::watch::Published;
use gates_engine::watch::policy_report::WriteStatus;

type Newest = tokio::sync::watch::Receiver<Option<Arc<Published>>>;

/// Serve `listener` until the task is dropped; `writes` is how the policy report's writes go
/// (with `--policy-report`).
pub async fn serve(
    listener: tokio::net::TcpListener,
    newest: Newest,
    writes: Option<tokio::sync::watch::Receiver<WriteStatus>>,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let newest = newest.clone();
        let writes = writes.clone();
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                    let published = newest.borrow().clone();
                    let writes = writes.as_ref().map(|w| *w.borrow());
                    async move {
                        Ok::<_, Infallible>(route(
                            request.uri().path(),
                            published.as_deref(),
                            writes.as_ref(),
                        ))
                    }
                });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The answer to a GET of `path`.
pub fn route(
    path: &str,
    published: Option<&Published>,
    writes: Option<&WriteStatus>,
) -> Response<Full<Bytes>> {
    match path {
        "/metrics" => answer(
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            crate::output::report::metrics::watch(published, writes, chrono::Utc::now()),
        ),
        "/healthz" => answer(StatusCode::OK, "text/plain; charset=utf-8", "ok\n".into()),
        "/readyz" => match published {
            Some(p) if p.ready => answer(
                StatusCode::OK,
                "text/plain; charset=utf-8",
                "ready\n".into(),
            ),
            _ => answer(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain; charset=utf-8",
                not_ready(published),
            ),
        },
        "/" => match published {
            Some(p) => answer(
                StatusCode::OK,
                "text/html; charset=utf-8",
                crate::output::report::html::check::render(&p.record),
            ),
            None => answer(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain; charset=utf-8",
                "no evaluation yet: gates watch is reading the cluster\n".into(),
            ),
        },
        _ => answer(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found: gates watch serves /, /metrics, /healthz and /readyz\n".into(),
        ),
    }
}

/// `not ready: waiting for the first read of pods/v1, talos`.
fn not_ready(published: Option<&Published>) -> String {
    let waiting: Vec<&str> = published
        .map(|p| {
            p.sources
                .iter()
                .filter(|s| !s.health.read)
                .map(|s| s.source.as_str())
                .collect()
        })
        .unwrap_or_default();
    if waiting.is_empty() {
        "not ready: no evaluation yet\n".to_string()
    } else {
        format!(
            "not ready: waiting for the first read of {}\n",
            waiting.join(", ")
        )
    }
}

fn answer(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}
