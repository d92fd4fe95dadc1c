//! A real Prometheus is the oracle for `capacity.basis: prometheus`: a week of the series
//! kubelet's cAdvisor endpoint exposes, as kube-prometheus-stack labels them (a quiet node, a
//! node that peaks at 90 % of its CPU every night, a node with a gap of 20 hours), is
//! backfilled with `promtool tsdb create-blocks-from openmetrics`, the real `prometheus`
//! serves it on loopback, and gates' collector and gate 5 judge it with the default queries;
//! then `gates check` of the lab's production environment (whose nodes the series name, eight
//! cores each) reads it through its environment file. Needs the binaries of `tools/prometheus/build.sh` (`tools/test` builds them).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gates_core::checks::capacity_headroom::{Params, evaluate};
use gates_core::checks::testing::{env, node, run, state, text};
use gates_core::config::{CapacityBasis, Environment, PrometheusLoad};
use gates_core::verdict::{Finding, Verdict};

use crate::support::root;

const MINUTE: i64 = 60;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Where `prometheus` and `promtool` are: `$GATES_PROMETHEUS_BIN` (which must hold them),
/// else `target/prometheus-bin/<version>` when both are built there. `None` (the test ends
/// saying why) only when `GATES_REQUIRE_PROMETHEUS` is not set: with it, as in `tools/test`,
/// missing binaries fail.
fn binaries() -> Option<PathBuf> {
    let complete = |dir: &Path| {
        ["prometheus", "promtool"]
            .iter()
            .all(|n| dir.join(n).is_file())
    };
    if let Some(dir) = std::env::var_os("GATES_PROMETHEUS_BIN").map(PathBuf::from) {
        assert!(
            complete(&dir),
            "GATES_PROMETHEUS_BIN={} lacks prometheus or promtool: run tools/prometheus/build.sh {}",
            dir.display(),
            dir.display()
        );
        return Some(dir);
    }
    let version = std::fs::read_to_string(root().join("tools/prometheus/VERSION")).unwrap();
    let dir = root().join("target/prometheus-bin").join(version.trim());
    if complete(&dir) {
        return Some(dir);
    }
    assert!(
        std::env::var_os("GATES_REQUIRE_PROMETHEUS").is_none(),
        "GATES_REQUIRE_PROMETHEUS is set but prometheus and promtool are not in {}: run tools/prometheus/build.sh or set GATES_PROMETHEUS_BIN",
        dir.display()
    );
    eprintln!(
        "not run: no prometheus and promtool in {} and GATES_PROMETHEUS_BIN is not set (build them with tools/prometheus/build.sh)",
        dir.display()
    );
    None
}

/// Seconds between two samples (kube-prometheus-stack scrapes cAdvisor every 10 s; a minute
/// keeps the file small and still gives `rate(...[5m])` four samples).
const SCRAPE: i64 = 60;

/// How long the samples run on after the test's `end`: longer than the test takes, so that the
/// command run by the test, whose window ends at its own clock's step, never finds its newest
/// step empty (a run that crossed a five-minute boundary failed so before).
const AFTER: i64 = 30 * 60;

/// The week of samples, one every [`SCRAPE`] seconds, ending at `end`, for the three nodes of
/// the lab's `lab-production` (8 cores, 32 GiB): the first quiet at 0.4 cores, the second at
/// 7.2 (90 %) two hours a day, the third quiet with 20 hours missing. For each node one app
/// container (`container`, `image` set) and its pod's own cgroup (`container=""`, which the
/// default queries must not count twice), with the labels kubelet's ServiceMonitor gives.
fn openmetrics(end: i64) -> String {
    let start = end - 7 * DAY - HOUR;
    // Seconds before `end` modulo a day: the peak runs from 19 to 17 hours before each `end`,
    // so the newest sample is a quiet one, whatever the hour the test runs at.
    let peaking =
        |t: i64| ((end - t).rem_euclid(DAY)) > 17 * HOUR && (end - t).rem_euclid(DAY) <= 19 * HOUR;
    let gap = |t: i64| t > end - 4 * DAY && t <= end - 4 * DAY + 20 * HOUR;
    // The node with the gap ramps from 0.2 to 0.5 cores over each day, so that its quantile
    // falls between values and can be held to Prometheus's own.
    let cpu = |node: &str, t: i64| match node {
        "talos-prod-cp-02" if peaking(t) => 7.2,
        "talos-prod-cp-03" => 0.2 + 0.3 * (t.rem_euclid(DAY) as f64 / DAY as f64),
        _ => 0.4,
    };
    let nodes = ["talos-prod-cp-01", "talos-prod-cp-02", "talos-prod-cp-03"];
    // The samples run on past `end`, as a live Prometheus's would: the whole command judges
    // the window ending at its own clock's step, which may be a step or two later than `end`.
    let times = || {
        (0..)
            .map(move |k| start + k * SCRAPE)
            .take_while(move |&t| t <= end + AFTER)
    };
    let has = |node: &str, t: i64| node != "talos-prod-cp-03" || !gap(t);
    let labels = |node: &str, container: bool| {
        format!(
            "container=\"{}\",endpoint=\"https-metrics\",id=\"/kubepods/burstable/pod-{node}{}\",image=\"{}\",instance=\"10.0.50.1{}:10250\",job=\"kubelet\",metrics_path=\"/metrics/cadvisor\",namespace=\"apps\",node=\"{node}\",pod=\"app-{node}\",service=\"kube-prometheus-stack-kubelet\"",
            if container { "app" } else { "" },
            if container { "/app" } else { "" },
            if container {
                "registry.example/app:1"
            } else {
                ""
            },
            &node[node.len() - 1..],
        )
    };
    let mut out = String::new();
    out.push_str("# TYPE container_cpu_usage_seconds counter\n");
    for node in nodes {
        for container in [true, false] {
            let mut total = 0.0;
            for t in times() {
                total += cpu(node, t) * SCRAPE as f64;
                if has(node, t) {
                    out.push_str(&format!(
                        "container_cpu_usage_seconds_total{{{}}} {total} {t}\n",
                        labels(node, container)
                    ));
                }
            }
        }
    }
    out.push_str("# TYPE container_memory_working_set_bytes gauge\n");
    for node in nodes {
        for container in [true, false] {
            for t in times().filter(|&t| has(node, t)) {
                out.push_str(&format!(
                    "container_memory_working_set_bytes{{{}}} {} {t}\n",
                    labels(node, container),
                    2.0 * GIB
                ));
            }
        }
    }
    // node-exporter as kube-prometheus-stack scrapes it (no node name of its own: `instance`
    // is the pod's host-network address) and kube-state-metrics' kube_pod_info, which the
    // README's node-exporter query joins on (namespace, pod); the peaking node's eight CPUs
    // only (promtool's time grows with the series, so no more than one node's).
    let exporter = |node: &str| {
        format!(
            "endpoint=\"http-metrics\",instance=\"10.0.50.1{}:9100\",job=\"node-exporter\",namespace=\"monitoring\",pod=\"kps-prometheus-node-exporter-{node}\",service=\"kps-prometheus-node-exporter\"",
            &node[node.len() - 1..]
        )
    };
    out.push_str("# TYPE node_cpu_seconds counter\n");
    {
        let node = "talos-prod-cp-02";
        for cpu_index in 0..8 {
            let mut idle = 0.0;
            for t in times() {
                idle += (1.0 - cpu(node, t) / 8.0) * SCRAPE as f64;
                out.push_str(&format!(
                    "node_cpu_seconds_total{{cpu=\"{cpu_index}\",{},mode=\"idle\"}} {idle} {t}\n",
                    exporter(node)
                ));
            }
        }
    }
    out.push_str("# TYPE kube_pod_info gauge\n");
    {
        let node = "talos-prod-cp-02";
        for t in times() {
            out.push_str(&format!(
                "kube_pod_info{{created_by_kind=\"DaemonSet\",host_network=\"true\",job=\"kube-state-metrics\",namespace=\"monitoring\",node=\"{node}\",pod=\"kps-prometheus-node-exporter-{node}\"}} 1 {t}\n"
            ));
        }
    }
    out.push_str("# EOF\n");
    out
}

/// The node-exporter query the README gives for kube-prometheus-stack.
const NODE_EXPORTER_CPU: &str = r#"sum by (node) ((1 - rate(node_cpu_seconds_total{mode="idle"}[5m])) * on (namespace, pod) group_left(node) topk by (namespace, pod) (1, max by (node, namespace, pod) (kube_pod_info{node!=""})))"#;

/// A real Prometheus on 127.0.0.1 over the backfilled week; stopped when dropped.
struct Server {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test's basic-auth user and password, and the bcrypt hash (cost 4) Prometheus's web
/// configuration holds for it (made with Python's `crypt.crypt(PASSWORD, METHOD_BLOWFISH)`).
const USER: &str = "gates";
const PASSWORD: &str = "gates-test-password";
const PASSWORD_BCRYPT: &str = "$2b$04$PxdW1ub89zPTiZoHqbKnyO/wbQgSSqemx8HNz1O6F2uLC4i0EOFBi";
/// base64 of `gates:gates-test-password`, for the readiness probe.
const PROBE_AUTH: &str = "Z2F0ZXM6Z2F0ZXMtdGVzdC1wYXNzd29yZA==";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(bin: &Path, end: i64) -> Server {
    let dir = tempfile::tempdir().unwrap();
    backfill(bin, end, &dir.path().join("data"), dir.path());
    launch(bin, dir, &[])
}

fn backfill(bin: &Path, end: i64, data: &Path, dir: &Path) {
    let samples = dir.join("week.om");
    std::fs::write(&samples, openmetrics(end)).unwrap();
    let began = Instant::now();
    let backfill = Command::new(bin.join("promtool"))
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&samples)
        .arg(data)
        .output()
        .unwrap();
    assert!(
        backfill.status.success(),
        "promtool backfill: {}",
        String::from_utf8_lossy(&backfill.stderr)
    );
    eprintln!(
        "prometheus: promtool backfilled the week in {:.1} s",
        began.elapsed().as_secs_f64()
    );
}

/// `prometheus` on `dir`/data, with `extra` flags, once it answers `/-/ready` (which asks for
/// no credentials of its own: the probe sends the test's basic auth, which is ignored when
/// none is configured).
fn launch(bin: &Path, dir: tempfile::TempDir, extra: &[String]) -> Server {
    let data = dir.path().join("data");
    let config = dir.path().join("prometheus.yml");
    std::fs::write(&config, "global:\n  scrape_interval: 1m\n").unwrap();
    let port = free_port();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let child = Command::new(bin.join("prometheus"))
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg("--storage.tsdb.retention.time=30d")
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let server = Server {
        child,
        url: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = stream.write_all(
                format!("GET /-/ready HTTP/1.0\r\nAuthorization: Basic {PROBE_AUTH}\r\n\r\n")
                    .as_bytes(),
            );
            let mut answer = String::new();
            let _ = std::io::Read::read_to_string(&mut stream, &mut answer);
            if answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200") {
                return server;
            }
        }
        assert!(
            Instant::now() < deadline,
            "prometheus was not ready within 60 s: {}",
            std::fs::read_to_string(server._dir.path().join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn prometheus_env(url: &str, quantile: &str) -> (Environment, PrometheusLoad) {
    let mut env = env();
    env.capacity.basis = CapacityBasis::Prometheus;
    let spec: PrometheusLoad = gates_core::yaml::from_str(&format!(
        "{{url: '{url}', window: 7d, step: 5m, quantile: {quantile}, max_gap_share: 0.05}}"
    ))
    .unwrap();
    env.capacity.prometheus = Some(spec.clone());
    (env, spec)
}

/// Gates' collection from the server, then gate 5 over the named nodes (4 cores, 8 GiB each).
async fn gate5(env: &Environment, spec: &PrometheusLoad, end: i64, nodes: &[&str]) -> Finding {
    let end = gates_core::load::time(end * 1000);
    let (node_metrics, node_load) = gates::collect::prometheus::collect(env, spec, end).await;
    let state = state()
        .nodes(nodes.iter().map(|n| {
            node(n)
                .host(&format!("pve{}", &n[n.len() - 1..]))
                .ready()
                .build()
        }))
        .with(|s| {
            s.node_metrics = node_metrics;
            s.node_load = node_load;
        })
        .build();
    run(env, &state, &Params {}, evaluate)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_week_passes_the_quiet_node_fails_the_nightly_peak_and_errs_on_the_gap() {
    let Some(bin) = binaries() else { return };
    let started = Instant::now();
    // A step before the clock's: the command run at the end judges a window a step or two
    // later than the library calls, always, as a run that crosses a boundary would.
    let end = chrono::Utc::now().timestamp() / 300 * 300 - 300;
    let server = start(&bin, end);
    let ready = started.elapsed();

    let (p95, spec) = prometheus_env(&server.url, "0.95");
    let f = gate5(&p95, &spec, end, &["talos-prod-cp-01"]).await;
    assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
    let all = text(&f);
    // What was measured over which window: p95 of 0.4 cores, memory 2 GiB, every step.
    assert!(
        all.contains("used = max(requests, p95 of the load over the window)"),
        "{all}"
    );
    assert!(
        all.contains("talos-prod-cp-01: cpu p95 400m cores"),
        "{all}"
    );
    assert!(all.contains("memory p95 2Gi"), "{all}");
    assert!(all.contains("2017 of 2017 steps"), "{all}");

    // The peaking node: its newest sample is quiet, the p95 and the max are not.
    for (statistic, quantile) in [("p95", "0.95"), ("max", "max")] {
        let (env, spec) = prometheus_env(&server.url, quantile);
        let f = gate5(&env, &spec, end, &["talos-prod-cp-02"]).await;
        assert_eq!(f.verdict, Verdict::Fail, "{statistic}: {}", text(&f));
        let all = text(&f);
        assert!(
            all.contains(&format!(
                "talos-prod-cp-02: cpu {statistic} 7.2 cores (peak 7.2 cores at "
            )),
            "{all}"
        );
    }
    // A quantile the peak does not reach judges it as one quiet sample would: it passes.
    let (median, spec) = prometheus_env(&server.url, "0.5");
    assert_eq!(
        gate5(&median, &spec, end, &["talos-prod-cp-02"])
            .await
            .verdict,
        Verdict::Pass
    );
    // The peak's time is one of the nightly hours, 17 to 19 hours before the end.
    let (_, node_load) =
        gates::collect::prometheus::collect(&p95, &spec, gates_core::load::time(end * 1000)).await;
    let load = node_load.present().expect("the load was read");
    let peak = load.nodes["talos-prod-cp-02"]
        .cpu
        .as_ref()
        .unwrap()
        .peak_at
        .timestamp();
    let before_end = (end - peak).rem_euclid(DAY);
    assert!(
        (17 * HOUR..=19 * HOUR).contains(&before_end),
        "peak {before_end} s before the end"
    );

    // The node with a 20-hour gap (12 % of the week, 5 % allowed): an error naming it.
    let (_, spec) = prometheus_env(&server.url, "0.95");
    let f = gate5(&p95, &spec, end, &["talos-prod-cp-03"]).await;
    assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
    assert!(f.summary.contains("talos-prod-cp-03"), "{}", f.summary);
    assert!(
        f.summary.contains("capacity.prometheus.queries.cpu lacks"),
        "{}",
        f.summary
    );
    assert!(
        f.summary
            .contains("more than capacity.prometheus.max_gap_share 0.05 allows: no value from "),
        "{}",
        f.summary
    );

    // All three at once: the peak fails, and the gap stays in the evidence, never a pass.
    let f = gate5(
        &p95,
        &spec,
        end,
        &["talos-prod-cp-01", "talos-prod-cp-02", "talos-prod-cp-03"],
    )
    .await;
    assert_eq!(f.verdict, Verdict::Fail, "{}", text(&f));
    assert!(
        text(&f).contains("talos-prod-cp-03: load unknown: capacity.prometheus.queries.cpu lacks"),
        "{}",
        text(&f)
    );

    // The README's node-exporter query measures the same CPU as the default.
    let mut exporter = spec.clone();
    exporter.queries.cpu = NODE_EXPORTER_CPU.into();
    assert!(
        std::fs::read_to_string(root().join("README.md"))
            .unwrap()
            .contains(NODE_EXPORTER_CPU),
        "the README shows the node-exporter query this test runs"
    );
    let at_end = gates_core::load::time(end * 1000);
    let (_, by_exporter) = gates::collect::prometheus::collect(&p95, &exporter, at_end).await;
    let (_, by_cadvisor) = gates::collect::prometheus::collect(&p95, &spec, at_end).await;
    let (by_exporter, by_cadvisor) = (
        by_exporter.present().unwrap(),
        by_cadvisor.present().unwrap(),
    );
    let with_cpu: Vec<&String> = by_exporter
        .nodes
        .iter()
        .filter_map(|(node, m)| m.cpu.as_ref().map(|_| node))
        .collect();
    assert_eq!(with_cpu, ["talos-prod-cp-02"]);
    let (e, c) = (
        by_exporter.nodes["talos-prod-cp-02"].cpu.as_ref().unwrap(),
        by_cadvisor.nodes["talos-prod-cp-02"].cpu.as_ref().unwrap(),
    );
    assert!(
        (e.value - c.value).abs() < 1e-6 && (e.peak - c.peak).abs() < 1e-6,
        "{e:?} {c:?}"
    );
    assert_eq!((e.samples, e.peak_at), (c.samples, c.peak_at));

    // Gates' quantile and peak over the window are Prometheus's quantile_over_time and
    // max_over_time over the same steps (the subquery's range one millisecond longer than the
    // window, as a range is left-open and the window counts its first step).
    for function in ["quantile_over_time(0.95, ", "max_over_time("] {
        let expr = format!(
            "{function}({})[{}ms:5m])",
            gates_core::config::DEFAULT_CPU_QUERY,
            7 * DAY * 1000 + 1
        );
        let answer: serde_json::Value = reqwest::Client::new()
            .get(format!("{}/api/v1/query", server.url))
            .query(&[("query", expr.as_str()), ("time", &end.to_string())])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let results = answer["data"]["result"]
            .as_array()
            .unwrap_or_else(|| panic!("{answer:#}"));
        assert_eq!(results.len(), 3, "{answer:#}");
        for r in results {
            let node = r["metric"]["node"].as_str().unwrap();
            let theirs: f64 = r["value"][1].as_str().unwrap().parse().unwrap();
            let cpu = by_cadvisor.nodes[node].cpu.as_ref().unwrap();
            let ours = if function.starts_with("max") {
                cpu.peak
            } else {
                cpu.value
            };
            assert!(
                (ours - theirs).abs() < 1e-9,
                "{function}) of {node}: gates {ours}, Prometheus {theirs}"
            );
        }
    }

    // A node Prometheus has no series for: an error naming both queries and the node.
    let f = gate5(&p95, &spec, end, &["talos-prod-cp-01", "talos-prod-cp-04"]).await;
    assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
    assert!(
        f.summary.contains(
            "capacity.prometheus.queries.cpu gave no series with node=\"talos-prod-cp-04\""
        ),
        "{}",
        f.summary
    );

    // A query that gives nothing at all: an error naming the setting.
    let mut empty = spec.clone();
    empty.queries.cpu = "sum by (node) (rate(no_such_series_total[5m]))".into();
    let f = gate5(&p95, &empty, end, &["talos-prod-cp-01"]).await;
    assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
    assert!(
        f.summary
            .contains("capacity.prometheus.queries.cpu gave no series over the window"),
        "{}",
        f.summary
    );

    // A query Prometheus refuses: its own message, with the setting.
    let mut bad = spec.clone();
    bad.queries.memory = "sum by (node) (".into();
    let f = gate5(&p95, &bad, end, &["talos-prod-cp-01"]).await;
    assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
    assert!(
        f.summary
            .contains("answered 400 Bad Request to capacity.prometheus.queries.memory"),
        "{}",
        f.summary
    );

    // The whole command on the lab: its production environment's file, on this basis.
    let lab_started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let lab = gates_lab::Lab::start(gates_lab::LabOptions {
        scenario: "adr-007".to_string(),
        subnet: 125,
        speed: 1.0,
        state_dir: dir.path().to_path_buf(),
        env_dir: Some(dir.path().join("environments")),
        ..gates_lab::LabOptions::default()
    })
    .await
    .unwrap_or_else(|err| panic!("the lab starts: {err}"));
    let file = dir.path().join("environments/lab-production.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("basis: usage"), "{text}");
    std::fs::write(
        &file,
        text.replace(
            "basis: usage",
            &format!(
                "basis: prometheus\n  prometheus:\n    url: {}\n    window: 7d\n    quantile: 0.95",
                server.url
            ),
        ),
    )
    .unwrap();
    let envs = dir.path().join("environments");
    let out = tokio::task::spawn_blocking(move || {
        let reports = tempfile::tempdir().unwrap();
        crate::support::gates_with_config(reports.path())
            .arg("--env-dir")
            .arg(&envs)
            .args([
                "check",
                "lab-production",
                "gate5",
                "--format",
                "json",
                "--reports",
            ])
            .arg(reports.path())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|err| panic!("JSON ({err}): {}", String::from_utf8_lossy(&out.stderr)));
    let capacity = json["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "gate5::lab-production::capacity-headroom")
        .unwrap_or_else(|| panic!("no capacity trial: {json:#}"))
        .to_string();
    assert!(capacity.contains("\"verdict\":\"fail\""), "{capacity}");
    for expected in [
        "keep less than 33.3% of CPU or memory free: talos-prod-cp-02",
        "p95 of the load over the window",
        "talos-prod-cp-01: cpu p95 400m cores",
        "talos-prod-cp-02: cpu p95 7.2 cores (peak 7.2 cores at ",
        "talos-prod-cp-03: load unknown: capacity.prometheus.queries.cpu lacks",
    ] {
        assert!(capacity.contains(expected), "{expected:?} in {capacity}");
    }
    // The host-loss model cannot tell where the unmeasured node takes moved pods: exit 2.
    let host_loss = json["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "gate5::lab-production::host-loss")
        .unwrap()
        .to_string();
    assert!(host_loss.contains("\"verdict\":\"error\""), "{host_loss}");
    assert!(
        host_loss.contains("the load of talos-prod-cp-03 (taking moved pods) over the window is unknown: capacity.prometheus.queries.cpu lacks 240 of 2017 steps"),
        "{host_loss}"
    );
    assert_eq!(out.status.code(), Some(2), "{json:#}");
    drop(lab);
    let lab_took = lab_started.elapsed();

    eprintln!(
        "prometheus: the lab's gates check {:.1} s",
        lab_took.as_secs_f64()
    );
    eprintln!(
        "prometheus: backfill and start {:.1} s, all judgements {:.1} s",
        ready.as_secs_f64(),
        (started.elapsed() - ready - lab_took).as_secs_f64()
    );
}

#[tokio::test]
async fn an_unreachable_prometheus_is_an_error_naming_the_url_setting_and_the_fix() {
    // Nothing listens on a port just freed; no Prometheus binary is needed.
    let url = format!("http://127.0.0.1:{}", free_port());
    let (env, spec) = prometheus_env(&url, "max");
    let f = gate5(&env, &spec, 1_733_400_000, &["talos-prod-cp-01"]).await;
    assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
    assert!(
        f.summary
            .contains(&format!("Prometheus at {url} (capacity.prometheus.url in ")),
        "{}",
        f.summary
    );
    assert!(f.summary.contains("did not answer"), "{}", f.summary);
    assert!(f.summary.contains("port-forward"), "{}", f.summary);
}

#[tokio::test]
async fn basic_auth_reaches_a_prometheus_that_asks_for_it_and_a_wrong_password_is_named_never_printed()
 {
    let Some(bin) = binaries() else { return };
    let dir = tempfile::tempdir().unwrap();
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        format!("basic_auth_users:\n  {USER}: {PASSWORD_BCRYPT}\n"),
    )
    .unwrap();
    let server = launch(&bin, dir, &[format!("--web.config.file={}", web.display())]);
    let secrets = tempfile::tempdir().unwrap();
    let (right, wrong) = (secrets.path().join("right"), secrets.path().join("wrong"));
    std::fs::write(&right, format!("{PASSWORD}\n")).unwrap();
    std::fs::write(&wrong, "not-the-password-4711\n").unwrap();
    let (env, spec) = prometheus_env(&server.url, "0.95");
    let end = gates_core::load::time(chrono::Utc::now().timestamp_millis());
    let summary = |spec: PrometheusLoad| {
        let env = env.clone();
        async move {
            match gates::collect::prometheus::collect(&env, &spec, end)
                .await
                .1
            {
                gates_core::state::Collected::Absent(why) => why,
                other => panic!("an empty Prometheus gives no load: {other:?}"),
            }
        }
    };
    // No credentials: the answer names the settings to set.
    let why = summary(spec.clone()).await;
    assert!(
        why.contains(
            "answered 401 Unauthorized to capacity.prometheus.queries.cpu: it wants credentials"
        ),
        "{why}"
    );
    // The right password gets through: the empty server has no series.
    let mut with = spec.clone();
    with.username = Some(USER.into());
    with.password_file = Some(right);
    let why = summary(with.clone()).await;
    assert!(
        why.contains("capacity.prometheus.queries.cpu gave no series over the window"),
        "{why}"
    );
    // A wrong one is named by its setting, and neither password is printed.
    with.password_file = Some(wrong);
    let why = summary(with).await;
    assert!(why.contains("answered 401 Unauthorized to capacity.prometheus.queries.cpu: check capacity.prometheus.username and the password in capacity.prometheus.password_file"), "{why}");
    assert!(
        !why.contains("not-the-password-4711") && !why.contains(PASSWORD),
        "{why}"
    );
}
