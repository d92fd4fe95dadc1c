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

/// The series of a `/api/v1/query_range` answer, or what Prometheus said was wrong (its
/// `errorType` and `error`), or why the body is not such an answer. Values are Prometheus's
/// float text (`"0.25"`, `"NaN"`, `"+Inf"`); times are seconds with milliseconds.
pub fn decode(body: &[u8]) -> Result<Vec<Series>, String> {
    let answer: Answer = serde_json::from_slice(body)
        .map_err(|err| format!("the answer is not Prometheus's API JSON: {err}"))?;
    if answer.status != "success" {
        return Err(format!(
            "{}: {}",
            answer.error_type.as_deref().unwrap_or("error"),
            answer.error.as_deref().unwrap_or("(no message)")
        ));
    }
    let data = answer.data.ok_or("the answer has no `data`")?;
    if data.result_type != "matrix" {
        return Err(format!(
            "the answer is a {}, not the matrix a range query gives",
            data.result_type
        ));
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
                            .map_err(|_| format!("value {text:?} is not a number"))?,
                    };
                    if !at.is_finite() {
                        return Err(format!("time {at} is not a number"));
                    }
                    Ok(((at * 1000.0).round() as i64, value))
                })
                .collect::<Result<Vec<_>, String>>()?;
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
) -> (Collected<Vec<NodeMetrics>>, Collected<NodeLoad>) {
    let load = match read(env, spec, end).await {
        Ok(load) => load,
        Err(why) => return (Collected::Absent(why.clone()), Collected::Absent(why)),
    };
    (
        Collected::Present(gates_core::load::node_metrics(&load)),
        Collected::Present(load),
    )
}

async fn read(
    env: &Environment,
    spec: &PrometheusLoad,
    end: DateTime<Utc>,
) -> Result<NodeLoad, String> {
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
            return Err(format!(
                "{key} gave no series over the window from {} (capacity.prometheus.url): is the query right for this Prometheus, and are its series kept for {}? The default reads kubelet's cAdvisor series as kube-prometheus-stack labels them (README, \"capacity.basis: prometheus\"); the query was: {query}",
                spec.url, spec.window
            ));
        }
        for s in series {
            let Some(node) = s.labels.get(&spec.node_label) else {
                return Err(format!(
                    "{key} gave a series without the label {} (capacity.prometheus.node_label): {:?}; aggregate by the label that holds the node name, e.g. `sum by ({}) (...)`",
                    spec.node_label, s.labels, spec.node_label
                ));
            };
            let entry = nodes.entry(node.clone()).or_default();
            let slot = if resource == "cpu" {
                &mut entry.cpu
            } else {
                &mut entry.memory
            };
            if slot.is_some() {
                return Err(format!(
                    "{key} gave more than one series for {}=\"{node}\"; aggregate by that label alone, e.g. `sum by ({}) (...)`",
                    spec.node_label, spec.node_label
                ));
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

fn client(env: &Environment, spec: &PrometheusLoad) -> Result<reqwest::Client, String> {
    let timeout: Duration = spec.timeout.into();
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .timeout(timeout)
        .connect_timeout(timeout)
        .tls_built_in_root_certs(false);
    if let Some(ca) = &spec.ca_file {
        let path = super::kube::resolve(&env.file, ca);
        let pem = std::fs::read(&path)
            .map_err(|err| format!("capacity.prometheus.ca_file {}: {err}", path.display()))?;
        for cert in reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|err| format!("capacity.prometheus.ca_file {}: {err}", path.display()))?
        {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder
        .build()
        .map_err(|err| format!("cannot build an HTTP client for Prometheus: {err}"))
}

/// How requests prove who they are; the secret is read from its file and never printed.
enum Auth {
    None,
    Basic { username: String, password: String },
    Bearer(String),
}

fn credentials(env: &Environment, spec: &PrometheusLoad) -> Result<Auth, String> {
    let secret = |key: &str, file: &std::path::Path| {
        let path = super::kube::resolve(&env.file, file);
        std::fs::read_to_string(&path)
            .map(|text| text.trim_end_matches(['\r', '\n']).to_string())
            .map_err(|err| {
                format!(
                    "capacity.prometheus.{key} {} cannot be read: {err}",
                    path.display()
                )
            })
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
    key: &str,
    query: &str,
    window: &Window,
) -> Result<Vec<Series>, String> {
    let mut url = reqwest::Url::parse(&format!(
        "{}/api/v1/query_range",
        spec.url.trim_end_matches('/')
    ))
    .map_err(|err| format!("capacity.prometheus.url `{}`: {err}", spec.url))?;
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
    let response = request.send().await.map_err(|err| {
        format!(
            "Prometheus at {} (capacity.prometheus.url in {}) did not answer: {}. Check the URL and that this machine reaches it (for a cluster's Prometheus, e.g. `kubectl -n monitoring port-forward svc/prometheus-operated 9090` and url: http://127.0.0.1:9090){}",
            spec.url,
            env.file.display(),
            super::kube::chain(&err),
            if spec.url.starts_with("https") && spec.ca_file.is_none() {
                "; an https URL needs capacity.prometheus.ca_file, the CA that signed its certificate"
            } else {
                ""
            }
        )
    })?;
    let status = response.status();
    let body = response.bytes().await.map_err(|err| {
        format!(
            "Prometheus at {} (capacity.prometheus.url) broke off its answer to {key}: {}",
            spec.url,
            super::kube::chain(&err)
        )
    })?;
    if matches!(status.as_u16(), 401 | 403) {
        return Err(format!(
            "Prometheus at {} (capacity.prometheus.url) answered {status} to {key}: {}",
            spec.url,
            match auth {
                Auth::None =>
                    "it wants credentials: set capacity.prometheus.username and password_file, or bearer_token_file",
                Auth::Basic { .. } =>
                    "check capacity.prometheus.username and the password in capacity.prometheus.password_file",
                Auth::Bearer(_) => "check the token in capacity.prometheus.bearer_token_file",
            }
        ));
    }
    match decode(&body) {
        Ok(series) if status.is_success() => Ok(series),
        Ok(_) => Err(format!(
            "Prometheus at {} (capacity.prometheus.url) answered {status} to {key}",
            spec.url
        )),
        Err(why) => Err(format!(
            "Prometheus at {} (capacity.prometheus.url) answered {status} to {key} ({query}): {why}",
            spec.url
        )),
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
        assert_eq!(why, "bad_data: parse error at char 5");
        let why = decode(br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#)
            .unwrap_err();
        assert!(why.contains("a vector, not the matrix"), "{why}");
        let why = decode(br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"x"]]}]}}"#)
            .unwrap_err();
        assert!(why.contains("value \"x\" is not a number"), "{why}");
        assert!(
            decode(b"<html>")
                .unwrap_err()
                .starts_with("the answer is not Prometheus's API JSON")
        );
    }

    #[test]
    fn the_window_ends_on_a_whole_step_and_spans_the_setting() {
        let mut spec: PrometheusLoad = serde_yaml_ng::from_str("url: http://p:9090").unwrap();
        spec.window = crate::config::Duration::from_secs(3600);
        let end = gates_core::load::time(1_733_400_123_456);
        let w = window(&spec, end);
        assert_eq!(w.end_ms, 1_733_400_000_000);
        assert_eq!(w.end_ms - w.start_ms, 3_600_000);
        assert_eq!(w.steps(), 13);
    }
}
