//! The load over a window (`capacity.basis: prometheus`): each node's CPU and memory from
//! Prometheus's HTTP API (`/api/v1/query_range`, one value per `step` over `window`), measured
//! by `gates_core::load` into `state.node_load`, and the statistic of every node whose load is
//! known into `state.node_metrics`, where gate 5 and the host-loss model read usage.
//!
//! Unreachable Prometheus, a refused query, a query that gives no series or series without the
//! node label are `Absent` with the setting to fix; a node the queries miss or whose window has
//! too many gaps is unknown in the judgements (`NodeLoad::of`), never judged on part of it.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::config::{Environment, PrometheusLoad};
use crate::state::{Collected, NodeMetrics};
use gates_core::load::{NodeLoad, NodeMeasure, Window, measure};

/// One series of a range query's answer: its labels and its `(milliseconds, value)` pairs.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    pub values: Vec<(i64, f64)>,
}

#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    #[serde(default)]
    result: Vec<RawSeries>,
}

#[derive(Deserialize)]
struct RawSeries {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    #[serde(default)]
    values: Vec<(f64, String)>,
}

/// Why a body is not a range query's series.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnswerError {
    #[error("the answer is not Prometheus's API JSON: {0}")]
    NotJson(String),
    /// What Prometheus said was wrong: its `errorType` and `error`.
    #[error("{kind}: {message}")]
    Refused { kind: String, message: String },
    #[error("the answer has no `data`")]
    NoData,
    #[error("the answer is a {0}, not the matrix a range query gives")]
    NotMatrix(String),
    #[error("value {0:?} is not a number")]
    NotANumber(String),
    #[error("time {0} is not a number")]
    BadTime(f64),
}

/// The series of a `/api/v1/query_range` answer, or what Prometheus said was wrong (its
/// `errorType` and `error`), or why the body is not such an answer. Values are Prometheus's
/// float text (`"0.25"`, `"NaN"`, `"+Inf"`); times are seconds with milliseconds.
pub fn decode(body: &[u8]) -> Result<Vec<Series>, AnswerError> {
    let answer: Answer =
        serde_json::from_slice(body).map_err(|err| AnswerError::NotJson(err.to_string()))?;
    if answer.status != "success" {
        return Err(AnswerError::Refused {
            kind: answer.error_type.unwrap_or_else(|| "error".to_string()),
            message: answer.error.unwrap_or_else(|| "(no message)".to_string()),
        });
    }
    let data = answer.data.ok_or(AnswerError::NoData)?;
    if data.result_type != "matrix" {
        return Err(AnswerError::NotMatrix(data.result_type));
    }
    data.result
        .into_iter()
        .map(|raw| {
            let values = raw
                .values
                .into_iter()
                .map(|(at, text)| {
                    let value = match text.as_str() {
                        "NaN" => f64::NAN,
                        "+Inf" => f64::INFINITY,
                        "-Inf" => f64::NEG_INFINITY,
                        _ => text
                            .parse::<f64>()
                            .map_err(|_| AnswerError::NotANumber(text.clone()))?,
                    };
                    if !at.is_finite() {
                        return Err(AnswerError::BadTime(at));
                    }
                    Ok(((at * 1000.0).round() as i64, value))
                })
                .collect::<Result<Vec<_>, AnswerError>>()?;
            Ok(Series {
                labels: raw.metric,
                values,
            })
        })
        .collect()
}

/// The window that ends at `end` (rounded down to a whole step, so runs close together read
/// the same steps).
pub fn window(spec: &PrometheusLoad, end: DateTime<Utc>) -> Window {
    let step_ms = spec.step.0.as_millis().max(1) as i64;
    let end_ms = end.timestamp_millis().div_euclid(step_ms) * step_ms;
    Window {
        start_ms: end_ms - spec.window.0.as_millis() as i64,
        end_ms,
        step_ms,
    }
}

/// The load over the window ending at `end`, and the node metrics it stands for.
pub async fn collect(
    env: &Environment,
    spec: &PrometheusLoad,
    end: DateTime<Utc>,
) -> (
    Collected<Vec<std::sync::Arc<NodeMetrics>>>,
    Collected<NodeLoad>,
) {
    let load = match read(env, spec, end).await {
        Ok(load) => load,
        Err(why) => {
            let why = why.to_string();
            return (Collected::Absent(why.clone()), Collected::Absent(why));
        }
    };
    (
        Collected::Present(
            gates_core::state::NodeMetrics::of_load(&load)
                .into_iter()
                .map(std::sync::Arc::new)
                .collect(),
        ),
        Collected::Present(load),
    )
}

/// Why the load over the window could not be read from Prometheus: each says which setting
/// to look at, and none holds a secret.
#[derive(Debug, thiserror::Error)]
pub enum PrometheusError {
    #[error(
        "{key} gave no series over the window from {url} (capacity.prometheus.url): is the query right for this Prometheus, and are its series kept for {window}? The default reads kubelet's cAdvisor series as kube-prometheus-stack labels them (README, \"capacity.basis: prometheus\"); the query was: {query}"
    )]
    NoSeries {
        key: &'static str,
        url: String,
        window: String,
        query: String,
    },
    #[error(
        "{key} gave a series without the label {label} (capacity.prometheus.node_label): {labels:?}; aggregate by the label that holds the node name, e.g. `sum by ({label}) (...)`"
    )]
    NoNodeLabel {
        key: &'static str,
        label: String,
        labels: BTreeMap<String, String>,
    },
    #[error(
        "{key} gave more than one series for {label}=\"{node}\"; aggregate by that label alone, e.g. `sum by ({label}) (...)`"
    )]
    TwoSeries {
        key: &'static str,
        label: String,
        node: String,
    },
    #[error("capacity.prometheus.ca_file {}: {detail}", path.display())]
    CaFile {
        path: std::path::PathBuf,
        detail: String,
    },
    #[error("cannot build an HTTP client for Prometheus: {0}")]
    Client(String),
    #[error("capacity.prometheus.{key} {} cannot be read: {source}", path.display())]
    Secret {
        key: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("capacity.prometheus.url `{url}`: {detail}")]
    BadUrl { url: String, detail: String },
    #[error(
        "Prometheus at {url} (capacity.prometheus.url in {}) did not answer: {chain}. Check the URL and that this machine reaches it (for a cluster's Prometheus, e.g. `kubectl -n monitoring port-forward svc/prometheus-operated 9090` and url: http://127.0.0.1:9090){}",
        file.display(),
        if *.needs_ca { "; an https URL needs capacity.prometheus.ca_file, the CA that signed its certificate" } else { "" }
    )]
    Unanswered {
        url: String,
        file: std::path::PathBuf,
        chain: String,
        needs_ca: bool,
    },
    #[error("Prometheus at {url} (capacity.prometheus.url) broke off its answer to {key}: {chain}")]
    BrokeOff {
        url: String,
        key: &'static str,
        chain: String,
    },
    #[error(
        "Prometheus at {url} (capacity.prometheus.url) answered {status} to {key}: {}",
        match .sent {
            AuthKind::None => "it wants credentials: set capacity.prometheus.username and password_file, or bearer_token_file",
            AuthKind::Basic => "check capacity.prometheus.username and the password in capacity.prometheus.password_file",
            AuthKind::Bearer => "check the token in capacity.prometheus.bearer_token_file",
        }
    )]
    Unauthorized {
        url: String,
        status: reqwest::StatusCode,
        key: &'static str,
        sent: AuthKind,
    },
    #[error("Prometheus at {url} (capacity.prometheus.url) answered {status} to {key}")]
    Status {
        url: String,
        status: reqwest::StatusCode,
        key: &'static str,
    },
    #[error(
        "Prometheus at {url} (capacity.prometheus.url) answered {status} to {key} ({query}): {source}"
    )]
    Answer {
        url: String,
        status: reqwest::StatusCode,
        key: &'static str,
        query: String,
        #[source]
        source: AnswerError,
    },
}

/// Which credentials a refused request carried (never the credentials themselves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthKind {
    None,
    Basic,
    Bearer,
}

async fn read(
    env: &Environment,
    spec: &PrometheusLoad,
    end: DateTime<Utc>,
) -> Result<NodeLoad, PrometheusError> {
    let client = client(env, spec)?;
    let auth = credentials(env, spec)?;
    let window = window(spec, end);
    let mut nodes: BTreeMap<String, NodeMeasure> = BTreeMap::new();
    for (resource, key) in gates_core::load::QUERY_KEYS {
        let query = if resource == "cpu" {
            &spec.queries.cpu
        } else {
            &spec.queries.memory
        };
        let series = query_range(&client, &auth, env, spec, key, query, &window).await?;
        if series.is_empty() {
            return Err(PrometheusError::NoSeries {
                key,
                url: spec.url.clone(),
                window: spec.window.to_string(),
                query: query.clone(),
            });
        }
        for s in series {
            let Some(node) = s.labels.get(&spec.node_label) else {
                return Err(PrometheusError::NoNodeLabel {
                    key,
                    label: spec.node_label.clone(),
                    labels: s.labels,
                });
            };
            let entry = nodes.entry(node.clone()).or_default();
            let slot = if resource == "cpu" {
                &mut entry.cpu
            } else {
                &mut entry.memory
            };
            if slot.is_some() {
                return Err(PrometheusError::TwoSeries {
                    key,
                    label: spec.node_label.clone(),
                    node: node.clone(),
                });
            }
            *slot = measure(&window, &s.values, spec.quantile);
        }
    }
    Ok(NodeLoad {
        url: spec.url.clone(),
        window,
        statistic: spec.quantile,
        max_gap_share: spec.max_gap_share,
        node_label: spec.node_label.clone(),
        nodes,
    })
}

fn client(env: &Environment, spec: &PrometheusLoad) -> Result<reqwest::Client, PrometheusError> {
    let timeout: Duration = spec.timeout.into();
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .timeout(timeout)
        .connect_timeout(timeout)
        .tls_built_in_root_certs(false);
    if let Some(ca) = &spec.ca_file {
        let path = super::kube::resolve(&env.file, ca);
        let unusable = |detail: String| PrometheusError::CaFile {
            path: path.clone(),
            detail,
        };
        let pem = std::fs::read(&path).map_err(|err| unusable(err.to_string()))?;
        for cert in
            reqwest::Certificate::from_pem_bundle(&pem).map_err(|err| unusable(err.to_string()))?
        {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder
        .build()
        .map_err(|err| PrometheusError::Client(err.to_string()))
}

/// How requests prove who they are; the secret is read from its file and never printed.
enum Auth {
    None,
    Basic { username: String, password: String },
    Bearer(String),
}

fn credentials(env: &Environment, spec: &PrometheusLoad) -> Result<Auth, PrometheusError> {
    let secret = |key: &'static str, file: &std::path::Path| {
        let path = super::kube::resolve(&env.file, file);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(text.trim_end_matches(['\r', '\n']).to_string()),
            Err(source) => Err(PrometheusError::Secret { key, path, source }),
        }
    };
    Ok(
        match (&spec.username, &spec.password_file, &spec.bearer_token_file) {
            (Some(username), Some(file), _) => Auth::Basic {
                username: username.clone(),
                password: secret("password_file", file)?,
            },
            (_, _, Some(file)) => Auth::Bearer(secret("bearer_token_file", file)?),
            _ => Auth::None,
        },
    )
}

async fn query_range(
    client: &reqwest::Client,
    auth: &Auth,
    env: &Environment,
    spec: &PrometheusLoad,
    key: &'static str,
    query: &str,
    window: &Window,
) -> Result<Vec<Series>, PrometheusError> {
    let mut url = reqwest::Url::parse(&format!(
        "{}/api/v1/query_range",
        spec.url.trim_end_matches('/')
    ))
    .map_err(|err| PrometheusError::BadUrl {
        url: spec.url.clone(),
        detail: err.to_string(),
    })?;
    let seconds = |ms: i64| format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000));
    url.query_pairs_mut()
        .append_pair("query", query)
        .append_pair("start", &seconds(window.start_ms))
        .append_pair("end", &seconds(window.end_ms))
        .append_pair("step", &seconds(window.step_ms));
    let request = match auth {
        Auth::None => client.get(url),
        Auth::Basic { username, password } => client.get(url).basic_auth(username, Some(password)),
        Auth::Bearer(token) => client.get(url).bearer_auth(token),
    };
    let response = request
        .send()
        .await
        .map_err(|err| PrometheusError::Unanswered {
            url: spec.url.clone(),
            file: env.file.clone(),
            chain: super::kube::chain(&err),
            needs_ca: spec.url.starts_with("https") && spec.ca_file.is_none(),
        })?;
    let status = response.status();
    let body = response
        .bytes()
        .await
        .map_err(|err| PrometheusError::BrokeOff {
            url: spec.url.clone(),
            key,
            chain: super::kube::chain(&err),
        })?;
    if matches!(status.as_u16(), 401 | 403) {
        return Err(PrometheusError::Unauthorized {
            url: spec.url.clone(),
            status,
            key,
            sent: match auth {
                Auth::None => AuthKind::None,
                Auth::Basic { .. } => AuthKind::Basic,
                Auth::Bearer(_) => AuthKind::Bearer,
            },
        });
    }
    match decode(&body) {
        Ok(series) if status.is_success() => Ok(series),
        Ok(_) => Err(PrometheusError::Status {
            url: spec.url.clone(),
            status,
            key,
        }),
        Err(source) => Err(PrometheusError::Answer {
            url: spec.url.clone(),
            status,
            key,
            query: query.to_string(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_answer_decodes_into_series_with_millisecond_times_and_float_values() {
        let body = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"node":"cp-1"},"values":[[1733400000,"0.25"],[1733400300.5,"NaN"],[1733400600,"+Inf"]]}]}}"#;
        let series = decode(body).unwrap();
        assert_eq!(series.len(), 1);
        assert_eq!(series[0].labels["node"], "cp-1");
        assert_eq!(series[0].values[0], (1_733_400_000_000, 0.25));
        assert_eq!(series[0].values[1].0, 1_733_400_300_500);
        assert!(series[0].values[1].1.is_nan());
        assert_eq!(series[0].values[2].1, f64::INFINITY);
    }

    #[test]
    fn prometheuss_own_error_and_a_vector_answer_are_said_not_taken_for_no_series() {
        let why =
            decode(br#"{"status":"error","errorType":"bad_data","error":"parse error at char 5"}"#)
                .unwrap_err();
        assert_eq!(why.to_string(), "bad_data: parse error at char 5");
        let why = decode(br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#)
            .unwrap_err();
        assert_eq!(why, AnswerError::NotMatrix("vector".to_string()));
        assert!(
            why.to_string().contains("a vector, not the matrix"),
            "{why}"
        );
        let why = decode(br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"x"]]}]}}"#)
            .unwrap_err();
        assert!(
            why.to_string().contains("value \"x\" is not a number"),
            "{why}"
        );
        assert!(
            decode(b"<html>")
                .unwrap_err()
                .to_string()
                .starts_with("the answer is not Prometheus's API JSON")
        );
    }

    #[test]
    fn the_window_ends_on_a_whole_step_and_spans_the_setting() {
        let mut spec: PrometheusLoad = gates_core::yaml::from_str("url: http://p:9090").unwrap();
        spec.window = crate::config::Duration::from_secs(3600);
        let end = gates_core::load::time(1_733_400_123_456);
        let w = window(&spec, end);
        assert_eq!(w.end_ms, 1_733_400_000_000);
        assert_eq!(w.end_ms - w.start_ms, 3_600_000);
        assert_eq!(w.steps(), 13);
    }
}
