//! The reports people look at and the tooling around them (issue 12): the HTML report in a
//! real headless Chromium (Debian's `chromium`, installed by `.ci/run`), the metrics through
//! Python's prometheus_client parsers, the Pushgateway push against a local server, history,
//! the ADR's rollout line, completions, the man page, validate, --version and the kube
//! overrides. The lab test uses subnet byte 197.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{STAGING_TODAY, check, fixture, gates_with_config, root, stderr, stdout};

// ---------------------------------------------------------------- tools the tests drive

/// Debian's chromium (`GATES_TEST_CHROMIUM` overrides); the test fails with the fix if absent.
fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("GATES_TEST_CHROMIUM") {
        return PathBuf::from(path);
    }
    for name in ["chromium", "chromium-browser"] {
        if let Some(dir) = std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .find(|d| d.join(name).is_file())
        {
            return dir.join(name);
        }
    }
    panic!(
        "no chromium on PATH: `apt-get install chromium` (.ci/run does), or set GATES_TEST_CHROMIUM"
    );
}

/// The test venv's Python (prometheus_client, check-jsonschema; made by .ci/run).
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("GATES_TEST_PYTHON") {
        return PathBuf::from(p);
    }
    let default = root().join("target/venv/bin/python");
    assert!(
        default.exists(),
        "no test Python: set GATES_TEST_PYTHON or run `python3 -m venv target/venv && \
         target/venv/bin/pip install prometheus-client check-jsonschema` (.ci/run does)"
    );
    default
}

/// Run a command, killing it and failing the test if it takes longer than `limit`.
fn bounded(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let until = Instant::now() + limit;
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("{cmd:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Headless Chromium with its own profile, no sandbox (root in CI) and every network name
/// unresolvable, so a page that tried to fetch anything would show it broken.
fn browser(profile: &Path) -> Command {
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--enable-logging=stderr",
        "--v=0",
        "--proxy-server=127.0.0.1:9",
        "--host-resolver-rules=MAP * ~NOTFOUND",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    cmd
}

/// Measures every interval, event and mark as the browser laid them out: its size, and
/// whether a hit test across its middle finds it (it is painted, on top, in the viewport).
const MEASURE: &str = r#"<script>
for (const el of document.querySelectorAll('rect.outage, rect.unknown, circle.event, g.mark line')) {
  const r = el.getBoundingClientRect();
  el.setAttribute('data-rendered', r.width.toFixed(1) + 'x' + r.height.toFixed(1));
  const hits = [0.1, 0.3, 0.5, 0.7, 0.9].map(f => document.elementFromPoint(r.left + r.width * f, r.top + r.height / 2));
  const own = hits.some(h => h && (h === el || el.contains(h)));
  el.setAttribute('data-hit', own ? 'self' : hits.map(h => h ? h.tagName : 'none').join(','));
}
document.body.setAttribute('data-measured', 'yes');
</script>"#;

/// The DOM after layout, with [`MEASURE`] run on a copy of the page; panics on a script error.
fn rendered_dom(html: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    let page = std::fs::read_to_string(html).unwrap();
    let copy = dir.path().join("measured.html");
    std::fs::write(&copy, page.replace("</body>", &format!("{MEASURE}</body>"))).unwrap();
    let mut cmd = browser(&dir.path().join("profile"));
    cmd.args(["--window-size=1200,3000", "--dump-dom"])
        .arg(format!("file://{}", copy.display()));
    let out = bounded(cmd, Duration::from_secs(120));
    let log = stderr(&out);
    assert!(out.status.success(), "chromium failed:\n{log}");
    assert!(!log.contains("Uncaught"), "a script error:\n{log}");
    let dom = stdout(&out);
    assert!(
        dom.contains("data-measured=\"yes\""),
        "the measuring script did not finish:\n{log}"
    );
    dom
}

fn screenshot(html: &Path, png: &Path, size: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = browser(&dir.path().join("profile"));
    cmd.arg(format!("--window-size={size}"))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", html.display()));
    let out = bounded(cmd, Duration::from_secs(120));
    assert!(out.status.success(), "chromium failed:\n{}", stderr(&out));
    let bytes = std::fs::read(png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let width = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let expected: u32 = size.split(',').next().unwrap().parse().unwrap();
    assert_eq!(width, expected);
    // A blank page of this size compresses to a few kilobytes.
    assert!(
        bytes.len() > 30_000,
        "the screenshot looks empty: {} bytes",
        bytes.len()
    );
}

/// Every start tag of `tag` whose attributes contain `marker`, as text.
fn tags<'a>(dom: &'a str, tag: &str, marker: &str) -> Vec<&'a str> {
    dom.match_indices(&format!("<{tag} "))
        .filter_map(|(at, _)| dom[at..].find('>').map(|end| &dom[at..at + end]))
        .filter(|t| t.contains(marker))
        .collect()
}

fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    Some(&tag[start..start + tag[start..].find('"')?])
}

/// The page shows each probe's lane, each outage and unknown interval of the report, the
/// fault and restore marks, and every one of them laid out with a size and hit by a test at
/// its centre.
fn assert_timeline_rendered(html: &Path, report: &Value) {
    let page = std::fs::read_to_string(html).unwrap();
    for external in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(
            !page.contains(external),
            "the page fetches something: {external}"
        );
    }
    let dom = rendered_dom(html);
    let probes = report["probes"].as_array().unwrap();
    let lanes = tags(&dom, "g", "class=\"lane probe\"");
    assert_eq!(lanes.len(), probes.len(), "one lane per probe");
    let mut outages = 0;
    let mut unknown = 0;
    for probe in probes {
        let name = probe["probe"].as_str().unwrap();
        assert!(
            lanes.iter().any(|l| attr(l, "data-probe") == Some(name)),
            "no lane for {name}"
        );
        outages += probe["outages"].as_array().unwrap().len();
        unknown += probe["unknown"].as_array().unwrap().len();
    }
    assert!(outages > 0, "the run had outages to draw");
    let drawn = tags(&dom, "rect", "class=\"outage\"");
    assert_eq!(drawn.len(), outages, "every outage interval drawn");
    assert_eq!(tags(&dom, "rect", "class=\"unknown\"").len(), unknown);
    for rect in drawn.iter().chain(&tags(&dom, "rect", "class=\"unknown\"")) {
        let size = attr(rect, "data-rendered").unwrap();
        let (w, h) = size.split_once('x').unwrap();
        assert!(
            w.parse::<f64>().unwrap() >= 1.0 && h.parse::<f64>().unwrap() >= 5.0,
            "{rect}"
        );
        assert_eq!(attr(rect, "data-hit"), Some("self"), "hidden: {rect}");
    }
    for mark in ["fault", "restore", "recovered"] {
        let found = tags(&dom, "g", &format!("class=\"mark {mark}\""));
        assert_eq!(found.len(), 1, "a {mark} mark");
        let at: f64 = attr(found[0], "data-at").unwrap().parse().unwrap();
        let want = report["moments"][mark].as_f64().unwrap();
        assert!((at - want).abs() < 0.001, "{mark} at {at}, report {want}");
    }
    if !report["handovers"].as_array().unwrap().is_empty() {
        let handovers = tags(&dom, "circle", "class=\"event handovers\"");
        assert_eq!(
            handovers.len(),
            report["handovers"].as_array().unwrap().len()
        );
    }
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The samples prometheus_client's parsers read from the text, or their complaint.
fn parse_metrics(text: &str) -> Result<Vec<Value>, String> {
    let mut child = Command::new(python())
        .arg(root().join("tests/integration/py/parse_metrics.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    if !out.status.success() {
        return Err(stderr(&out));
    }
    Ok(stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect())
}

fn sample<'a>(samples: &'a [Value], name: &str, labels: &[(&str, &str)]) -> Option<&'a Value> {
    samples.iter().find(|s| {
        s["name"] == name
            && labels
                .iter()
                .all(|(k, v)| s["labels"][*k].as_str() == Some(*v))
    })
}

// ---------------------------------------------------------------- HTML

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chaos_run_on_the_lab_writes_an_html_timeline_chromium_renders_and_metrics_prometheus_parses()
 {
    let dir = tempfile::tempdir().unwrap();
    let lab = gates_lab::Lab::start(gates_lab::LabOptions {
        scenario: "adr-007".into(),
        generate_nodes: None,
        subnet: 197,
        speed: 40.0,
        state_dir: dir.path().join("state"),
        env_dir: Some(dir.path().join("env")),
    })
    .await
    .expect("the lab starts");
    let config = dir.path().join("gates");
    copy_shipped_config(&config);
    let reports = dir.path().join("reports");
    let metrics = dir.path().join("textfile/gates.prom");
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("gates"));
    cmd.current_dir(dir.path())
        .env("NO_COLOR", "1")
        .env("CI", "1")
        .arg("--config")
        .arg(&config)
        .arg("--env-dir")
        .arg(dir.path().join("env"))
        .args(["chaos", "lab", "--host", "worst", "--reports"])
        .arg(&reports)
        .arg("--metrics")
        .arg(&metrics);
    let out = tokio::task::spawn_blocking(move || bounded(cmd, Duration::from_secs(120)))
        .await
        .unwrap();
    lab.stop().await;
    // The verdict itself is the chaos tests' business (a loaded machine can stretch an
    // outage past its budget); here it only has to be a verdict, and the page must show it.
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let json = std::fs::read_dir(&reports)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("chaos-lab-") && n.ends_with("Z.json")
        })
        .expect("a chaos report");
    let html = json.with_extension("html");
    assert!(
        stderr(&out).contains(&format!("report: {}", html.display())),
        "{}",
        stderr(&out)
    );
    let report = read_json(&json);
    assert_timeline_rendered(&html, &report);
    let png = dir.path().join("timeline.png");
    screenshot(&html, &png, "1100,900");

    let text = std::fs::read_to_string(&metrics).unwrap();
    let samples = parse_metrics(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let host = report["host"].as_str().unwrap();
    let base = [("environment", "lab"), ("host", host), ("gate", "4")];
    let api = report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["probe"] == "api-vip-new-connection")
        .unwrap();
    let mut labels = base.to_vec();
    labels.push(("probe", "api-vip-new-connection"));
    let longest = sample(&samples, "gates_chaos_outage_longest_seconds", &labels).unwrap();
    assert_eq!(longest["value"].as_f64(), api["longest"].as_f64());
    let recovery = sample(&samples, "gates_chaos_recovery_seconds", &base).unwrap();
    let moments = &report["moments"];
    let want = moments["recovered"].as_f64().unwrap() - moments["restore"].as_f64().unwrap();
    assert!((recovery["value"].as_f64().unwrap() - want).abs() < 0.002);
    let mut reached = base.to_vec();
    reached.push(("verdict", report["verdict"].as_str().unwrap()));
    assert_eq!(
        sample(&samples, "gates_chaos_verdict", &reached).unwrap()["value"],
        1.0
    );
    assert!(sample(&samples, "gates_chaos_duration_seconds", &base).is_some());
}

fn copy_shipped_config(to: &Path) {
    for sub in ["environments", "adr-007"] {
        std::fs::create_dir_all(to.join(sub)).unwrap();
        for entry in std::fs::read_dir(root().join("gates").join(sub)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".yaml") && !name.starts_with("lab") {
                std::fs::copy(&path, to.join(sub).join(name)).unwrap();
            }
        }
    }
}

/// The captured demo run under fixtures/reports, rendered into `dir`.
fn fixture_chaos_html(dir: &Path) -> (PathBuf, Value) {
    let stem_name = "chaos-lab-20261201T101743Z";
    for ext in ["json", "timeline.json"] {
        std::fs::copy(
            root().join(format!("fixtures/reports/{stem_name}.{ext}")),
            dir.join(format!("{stem_name}.{ext}")),
        )
        .unwrap();
    }
    let stem = dir.join(stem_name);
    let html = gates::report::html::chaos::write_beside(&stem).unwrap();
    (html, read_json(&stem.with_extension("json")))
}

#[test]
fn the_captured_demo_runs_timeline_renders_every_lane_and_interval_and_is_screenshotted() {
    let dir = tempfile::tempdir().unwrap();
    let (html, report) = fixture_chaos_html(dir.path());
    assert_timeline_rendered(&html, &report);
    // Kept for people to look at; the README's picture is of this page (`#timeline`).
    let out = root().join("target/report-screenshots");
    std::fs::create_dir_all(&out).unwrap();
    screenshot(&html, &out.join("chaos-page.png"), "1100,1150");
    std::fs::copy(&html, out.join("chaos-lab.html")).unwrap();
    // Printed: Chromium's print path lays the page out for paper (the print style) as a PDF.
    let profile = tempfile::tempdir().unwrap();
    let pdf = dir.path().join("chaos.pdf");
    let mut cmd = browser(profile.path());
    cmd.arg(format!("--print-to-pdf={}", pdf.display()))
        .arg("--no-pdf-header-footer")
        .arg(format!("file://{}", html.display()));
    let printed = bounded(cmd, Duration::from_secs(120));
    assert!(printed.status.success(), "{}", stderr(&printed));
    let bytes = std::fs::read(&pdf).unwrap();
    assert!(
        bytes.starts_with(b"%PDF") && bytes.len() > 20_000,
        "{} bytes",
        bytes.len()
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<title>gates chaos lab pve1: pass</title>"));
    assert!(
        page.contains("VIP talos-lab-cp-01 -&gt; nobody"),
        "handover labels"
    );
    assert!(page.contains("@media print"), "a print style");
}

#[test]
fn a_check_run_writes_an_html_page_beside_its_junit_with_every_gate_and_trial() {
    let (out, reports) = check("staging", STAGING_TODAY, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let json = std::fs::read_dir(reports.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    let run = read_json(&json);
    let html = json.with_extension("html");
    assert!(json.with_extension("xml").exists());
    let dom = rendered_dom(&html);
    let gates = run["gates"].as_array().unwrap();
    assert_eq!(tags(&dom, "tr", "data-gate=").len(), gates.len());
    for trial in run["trials"].as_array().unwrap() {
        let name = trial["name"].as_str().unwrap();
        let row = tags(&dom, "tr", &format!("data-trial=\"{name}\""));
        assert_eq!(row.len(), 1, "{name}");
        assert_eq!(attr(row[0], "data-verdict"), trial["verdict"].as_str());
    }
    let passing = gates.iter().filter(|g| g["verdict"] == "pass").count();
    assert!(dom.contains(&format!(
        "Rollout: {passing} of {} gates pass for staging",
        gates.len()
    )));
    // A failure's evidence is open on the page, not folded away.
    assert!(dom.contains("<details open=\"\"><summary>evidence</summary>"));
}

// ---------------------------------------------------------------- metrics

/// A one-request HTTP server on 127.0.0.1 that answers `status` and hands back the request.
fn one_request_server(status: &'static str) -> (String, std::thread::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            let n = stream.read(&mut buf).unwrap();
            request.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&request).into_owned();
            if let Some(head_end) = text.find("\r\n\r\n") {
                let length = text[..head_end]
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().unwrap())
                    })
                    .unwrap_or(0);
                if request.len() >= head_end + 4 + length {
                    break;
                }
            }
            if n == 0 {
                break;
            }
        }
        let body = if status.starts_with('2') {
            ""
        } else {
            "bad metric\n"
        };
        write!(
            stream,
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        String::from_utf8_lossy(&request).into_owned()
    });
    (url, handle)
}

#[test]
fn check_metrics_go_to_the_textfile_and_the_pushgateway_and_parse_as_openmetrics() {
    let (url, server) = one_request_server("200 OK");
    let dir = tempfile::tempdir().unwrap();
    let metrics = dir.path().join("gates.prom");
    let (out, _reports) = check(
        "staging",
        STAGING_TODAY,
        &[
            "--metrics",
            metrics.to_str().unwrap(),
            "--pushgateway",
            &url,
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let request = server.join().unwrap();
    let (head, body) = request.split_once("\r\n\r\n").unwrap();
    assert!(
        head.starts_with("PUT /metrics/job/gates/environment/staging/command/check HTTP/1.1"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    let text = std::fs::read_to_string(&metrics).unwrap();
    assert_eq!(body, text, "the same text pushed and written");
    let samples = parse_metrics(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let gate1 = [
        ("environment", "staging"),
        ("gate", "1"),
        ("verdict", "fail"),
    ];
    assert_eq!(
        sample(&samples, "gates_gate_verdict", &gate1).unwrap()["value"],
        1.0
    );
    let trial = [
        ("trial", "gate1::staging::control-plane-nodes"),
        ("verdict", "fail"),
    ];
    assert_eq!(
        sample(&samples, "gates_trial_verdict", &trial).unwrap()["value"],
        1.0
    );
    assert!(sample(&samples, "gates_check_duration_seconds", &[]).is_some());
    assert!(!dir.path().join("gates.prom.tmp").exists());
}

#[test]
fn a_pushgateway_that_refuses_the_push_is_an_error_naming_its_answer() {
    let (url, server) = one_request_server("400 Bad Request");
    let (out, _reports) = check("staging", STAGING_TODAY, &["--pushgateway", &url]);
    server.join().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("answered 400 Bad Request: bad metric"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn metrics_text_a_parser_rejects_is_caught_by_the_parser_used_here() {
    // The parser is strict: a sample outside its family is refused.
    let bad = "# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na 2\n# EOF\n";
    assert!(parse_metrics(bad).is_err());
    let text = gates::report::metrics::chaos(
        &serde_json::from_str(
            &std::fs::read_to_string(
                root().join("fixtures/reports/chaos-lab-20261201T101743Z.json"),
            )
            .unwrap(),
        )
        .unwrap(),
    );
    let samples = parse_metrics(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let probe = [
        ("probe", "ingress::whoami.lab.internal"),
        ("bound", "longest"),
    ];
    assert_eq!(
        sample(&samples, "gates_chaos_outage_budget_seconds", &probe).unwrap()["value"],
        1.45
    );
}

// ---------------------------------------------------------------- history

/// A copy of the captured chaos report as if run at `stamp` with the recovery and API
/// outage given, so several nightly runs can be laid out without running the lab each time.
fn nightly(dir: &Path, stamp: &str, recovery: f64, api_longest: f64) {
    let mut report = read_json(&root().join("fixtures/reports/chaos-lab-20261201T101743Z.json"));
    let restore = report["moments"]["restore"].as_f64().unwrap();
    report["moments"]["recovered"] = (restore + recovery).into();
    report["started_at"] = format!(
        "{}-{}-{}T{}:{}:{}.000Z",
        &stamp[..4],
        &stamp[4..6],
        &stamp[6..8],
        &stamp[9..11],
        &stamp[11..13],
        &stamp[13..15]
    )
    .into();
    for probe in report["probes"].as_array_mut().unwrap() {
        if probe["probe"] == "api-vip-new-connection" {
            probe["longest"] = api_longest.into();
        }
    }
    std::fs::write(
        dir.join(format!("chaos-lab-{stamp}.json")),
        serde_json::to_string(&report).unwrap(),
    )
    .unwrap();
}

#[test]
fn history_shows_the_last_runs_per_gate_and_host_with_a_rising_recovery() {
    let dir = tempfile::tempdir().unwrap();
    for (i, (recovery, api)) in [(5.0, 3.1), (5.4, 3.0), (5.2, 3.2), (9.5, 3.1)]
        .into_iter()
        .enumerate()
    {
        nightly(
            dir.path(),
            &format!("2026112{}T023000Z", i + 1),
            recovery,
            api,
        );
    }
    std::fs::copy(
        root().join("fixtures/reports/lab-20261201T101742Z.json"),
        dir.path().join("lab-20261201T101742Z.json"),
    )
    .unwrap();
    // Another environment's and the timeline files are not this history.
    std::fs::copy(
        root().join("fixtures/reports/lab-production-20261201T101743Z.json"),
        dir.path().join("lab-production-20261201T101743Z.json"),
    )
    .unwrap();
    let reports = dir.path().to_str().unwrap();
    let out = gates_with_config(dir.path())
        .args(["history", "lab", "--last", "3", "--reports", reports])
        .output()
        .unwrap();
    let o = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{o}{}", stderr(&out));
    assert!(o.contains("Chaos on host pve1:"), "{o}");
    assert!(o.contains("trend: recovery rising;"), "{o}");
    assert!(o.contains("api outage steady"), "{o}");
    assert!(!o.contains("2026-11-21T02:30"), "only the last 3 runs: {o}");
    assert!(o.contains("  gate 1  pass  Staging runs three"), "{o}");
    assert!(
        !o.contains("gate 5"),
        "lab-production's gate 5 is not lab's: {o}"
    );

    let out = gates_with_config(dir.path())
        .args(["history", "lab", "--format", "json", "--reports", reports])
        .output()
        .unwrap();
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let host = &json["chaos"][0];
    assert_eq!(host["host"], "pve1");
    assert_eq!(host["runs"].as_array().unwrap().len(), 4);
    assert_eq!(host["recovery_trend"], "rising");
    assert_eq!(host["runs"][3]["recovery_seconds"].as_f64(), Some(9.5));
}

#[test]
fn history_of_an_unreadable_report_names_the_file_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("chaos-lab-20261121T023000Z.json"),
        "{\"host\":",
    )
    .unwrap();
    let out = gates_with_config(dir.path())
        .args(["history", "lab", "--reports"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("chaos-lab-20261121T023000Z.json:1:"),
        "{}",
        stderr(&out)
    );
}

// ---------------------------------------------------------------- the ADR

fn adr_copy(dir: &Path) -> PathBuf {
    let copy = dir.join("adr-007.txt");
    std::fs::copy(
        root().join("fixtures/adr/adr-007-talos-production-topology.txt"),
        &copy,
    )
    .unwrap();
    copy
}

/// Check reports of staging (today's snapshot) and production (the target snapshot).
fn staging_and_production_reports(dir: &Path) {
    let mut cmd = gates_with_config(dir);
    cmd.args(["check", "staging", "--reports"]).arg(dir);
    for s in STAGING_TODAY {
        cmd.arg("--snapshot").arg(fixture(s));
    }
    assert_eq!(cmd.output().unwrap().status.code(), Some(1));
    let mut cmd = gates_with_config(dir);
    cmd.args(["check", "production", "--reports"]).arg(dir);
    for s in ["target-production.json", "target-production-metrics.json"] {
        cmd.arg("--snapshot").arg(fixture(s));
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn adr_dry_run_prints_the_diff_of_the_rollout_line_and_markers_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    staging_and_production_reports(dir.path());
    let copy = adr_copy(dir.path());
    let before = std::fs::read_to_string(&copy).unwrap();
    let out = gates_with_config(dir.path())
        .args(["adr", "staging", "production", "--dry-run", "--update"])
        .arg(&copy)
        .arg("--reports")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let shown = copy.display();
    let line = |text: &str| {
        before
            .lines()
            .position(|l| l == text)
            .map(|i| i + 1)
            .unwrap_or_else(|| panic!("no line `{text}`"))
    };
    let rollout = line("0 of 5 gates");
    let gate5 = line("  • Production runs on three hosts with the capacity margin measured. open");
    assert_eq!(
        stdout(&out),
        format!(
            "--- {shown}\n+++ {shown}\n@@ -{rollout},1 +{rollout},1 @@\n-0 of 5 gates\n+1 of 5 gates\n\
             @@ -{gate5},1 +{gate5},1 @@\n-  • Production runs on three hosts with the capacity margin measured. open\n\
             +  • Production runs on three hosts with the capacity margin measured. done\n"
        )
    );
    let e = stderr(&out);
    assert!(
        e.contains("gate 3 open: ") && e.contains("staging fail"),
        "{e}"
    );
    assert!(e.contains("production pass"), "{e}");
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), before);
}

#[test]
fn adr_in_ci_shows_the_diff_without_writing_and_writes_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    staging_and_production_reports(dir.path());
    let copy = adr_copy(dir.path());
    let before = std::fs::read_to_string(&copy).unwrap();
    let run = |ci: bool, extra: &[&str]| {
        let mut cmd = gates_with_config(dir.path());
        if ci {
            cmd.env("CI", "true");
        } else {
            cmd.env_remove("CI");
        }
        cmd.args(["adr", "production", "--update"])
            .arg(&copy)
            .arg("--reports")
            .arg(dir.path())
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(true, &[]);
    assert!(
        stderr(&out).contains("CI is set; pass --write"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), before);
    let out = run(true, &["--write"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let after = std::fs::read_to_string(&copy).unwrap();
    assert_eq!(
        after,
        before.replace("0 of 5 gates", "1 of 5 gates").replace(
            "capacity margin measured. open",
            "capacity margin measured. done"
        )
    );
    // Gate 3 applies to every environment: production alone does not decide it.
    assert!(
        stderr(&out).contains("gate 3 kept: no report given for staging"),
        "{}",
        stderr(&out)
    );
    let again = run(false, &[]);
    assert!(
        stderr(&again).contains("already up to date"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn adr_refuses_when_a_gate_title_differs_from_its_gate_file() {
    let dir = tempfile::tempdir().unwrap();
    staging_and_production_reports(dir.path());
    let copy = adr_copy(dir.path());
    let text = std::fs::read_to_string(&copy)
        .unwrap()
        .replace("The controllers above run", "The controllers run");
    std::fs::write(&copy, &text).unwrap();
    let out = gates_with_config(dir.path())
        .env_remove("CI")
        .args(["adr", "staging", "production", "--update"])
        .arg(&copy)
        .arg("--reports")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(
        e.contains("gate 2 reads `The controllers run two replicas")
            && e.contains("2-controllers.yaml")
            && e.contains("nothing was written"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), text);
}

// ---------------------------------------------------------------- adoption

#[test]
fn bash_completion_offers_the_subcommands_and_check_options() {
    let script = stdout(
        &gates_with_config(Path::new("."))
            .args(["completions", "bash"])
            .output()
            .unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gates.bash");
    std::fs::write(&file, script).unwrap();
    let complete = |words: &str| {
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source {}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
                 COMP_LINE=\"{words}\"; COMP_POINT=${{#COMP_LINE}}; _gates gates; echo \"${{COMPREPLY[@]}}\"",
                file.display()
            ))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    let subcommands = complete("gates ''");
    for word in [
        "check",
        "chaos",
        "history",
        "adr",
        "validate",
        "completions",
        "man",
    ] {
        assert!(
            subcommands.split_whitespace().any(|w| w == word),
            "{word}: {subcommands}"
        );
    }
    let options = complete("gates check --");
    for flag in [
        "--metrics",
        "--pushgateway",
        "--kubeconfig",
        "--context",
        "--junit",
    ] {
        assert!(
            options.split_whitespace().any(|w| w == flag),
            "{flag}: {options}"
        );
    }
}

#[test]
fn the_man_page_is_roff_naming_every_subcommand() {
    let out = gates_with_config(Path::new("."))
        .arg("man")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let page = stdout(&out);
    assert!(
        page.starts_with(".ie \\n(.g .ds Aq") || page.contains(".TH gates"),
        "{page}"
    );
    for word in [
        "check",
        "chaos",
        "recover",
        "history",
        "adr",
        "validate",
        "\\-\\-kubeconfig",
    ] {
        assert!(page.contains(word), "{word}");
    }
}

#[test]
fn version_names_the_commit() {
    let out = gates_with_config(Path::new("."))
        .arg("--version")
        .output()
        .unwrap();
    let text = stdout(&out);
    let inner = text
        .trim()
        .strip_prefix(&format!("gates {} (", env!("CARGO_PKG_VERSION")))
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{text}"));
    let commit = inner.split_whitespace().next().unwrap();
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(root())
        .output()
        .ok()
        .filter(|o| o.status.success());
    match head {
        // Built from this checkout: the commit is HEAD's, or the one given in GATES_COMMIT.
        Some(head) if std::env::var_os("GATES_COMMIT").is_none() => {
            let head = stdout(&head);
            assert!(
                head.trim().starts_with(commit) || commit.starts_with(head.trim()),
                "{text} vs {head}"
            );
        }
        _ => assert!(!commit.is_empty()),
    }
}

#[test]
fn validate_passes_the_shipped_configuration_without_touching_anything() {
    let out = gates_with_config(Path::new("."))
        .arg("validate")
        .output()
        .unwrap();
    let o = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{o}{}", stderr(&out));
    assert!(o.contains("5 gates,"), "{o}");
    assert!(o.contains("  staging: ok (gates 1, 2, 3, 4"), "{o}");
    assert!(o.contains("  production: ok (gates 3, 5"), "{o}");
}

#[test]
fn validate_names_the_file_and_key_of_a_missing_kubeconfig_and_an_unknown_context() {
    let dir = tempfile::tempdir().unwrap();
    copy_shipped_config(dir.path());
    let env = dir.path().join("environments/staging.yaml");
    let text = std::fs::read_to_string(&env).unwrap().replace(
        "  # kubeconfig: ~/.kube/staging.yaml        # optional",
        "  kubeconfig: missing.kubeconfig",
    );
    std::fs::write(&env, text).unwrap();
    // production names a kubeconfig that exists but lacks production's context.
    std::fs::write(dir.path().join("kc.yaml"), kubeconfig("elsewhere")).unwrap();
    let production = dir.path().join("environments/production.yaml");
    let text = std::fs::read_to_string(&production).unwrap().replacen(
        "kube:\n",
        "kube:\n  kubeconfig: ../kc.yaml\n",
        1,
    );
    std::fs::write(&production, text).unwrap();
    let out = crate::support::gates(dir.path())
        .arg("--config")
        .arg(dir.path())
        .arg("validate")
        .output()
        .unwrap();
    let o = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{o}{}", stderr(&out));
    assert!(
        o.contains("staging.yaml: kube.kubeconfig:")
            && o.contains("missing.kubeconfig does not exist"),
        "{o}"
    );
    assert!(
        o.contains("production.yaml: kube.context: `admin@production` is not a context")
            && o.contains("(it has: elsewhere)"),
        "{o}"
    );
}

fn kubeconfig(context: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: https://127.0.0.1:1}}\n\
         users:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: {context}\n  context: {{cluster: c, user: u}}\n\
         current-context: {context}\n"
    )
}

#[test]
fn kubeconfig_and_context_flags_override_the_environment_file() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kc.yaml");
    std::fs::write(&kc, kubeconfig("elsewhere")).unwrap();
    let out = gates_with_config(dir.path())
        .args([
            "check",
            "staging",
            "gate1::staging::control-plane-nodes",
            "--exact",
            "--reports",
        ])
        .arg(dir.path())
        .arg("--kubeconfig")
        .arg(&kc)
        .args(["--context", "not-there"])
        .output()
        .unwrap();
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(all.contains("kubeconfig context `not-there`"), "{all}");
    // Without --context, the file's context (admin@staging) is not in this kubeconfig either.
    let out = gates_with_config(dir.path())
        .args([
            "check",
            "staging",
            "gate1::staging::control-plane-nodes",
            "--exact",
            "--reports",
        ])
        .arg(dir.path())
        .arg("--kubeconfig")
        .arg(&kc)
        .output()
        .unwrap();
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(all.contains("kubeconfig context `admin@staging`"), "{all}");
}

// ---------------------------------------------------------------- CI examples

/// check-jsonschema (in the test venv) against the GitHub workflow and GitLab CI schemas it
/// vendors.
fn assert_schema_valid(schema: &str, file: &str) {
    let out = bounded(
        {
            let mut cmd = Command::new(python());
            cmd.args(["-m", "check_jsonschema", "--builtin-schema", schema])
                .arg(root().join("examples/ci").join(file));
            cmd
        },
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "{file} against {schema}:\n{}{}",
        stdout(&out),
        stderr(&out)
    );
}

fn example(name: &str) -> serde_yaml_ng::Value {
    let text = std::fs::read_to_string(root().join("examples/ci").join(name)).unwrap();
    serde_yaml_ng::from_str(&text).unwrap()
}

#[test]
fn the_github_workflow_validates_publishes_a_test_report_and_keeps_secrets_out_of_scripts() {
    assert_schema_valid(
        "vendor.github-workflows",
        "github-actions-nightly-chaos.yml",
    );
    let workflow = example("github-actions-nightly-chaos.yml");
    let permissions = workflow["permissions"]
        .as_mapping()
        .expect("top-level permissions");
    for (scope, level) in permissions {
        let (scope, level) = (scope.as_str().unwrap(), level.as_str().unwrap());
        assert!(
            level == "read" || (scope == "checks" && level == "write"),
            "{scope}: {level} is more than the workflow needs"
        );
    }
    let steps = workflow["jobs"]["chaos"]["steps"].as_sequence().unwrap();
    let uses = |prefix: &str| {
        steps
            .iter()
            .position(|s| s["uses"].as_str().is_some_and(|u| u.starts_with(prefix)))
    };
    assert_eq!(
        steps[uses("actions/checkout").unwrap()]["with"]["persist-credentials"].as_bool(),
        Some(false)
    );
    assert!(uses("actions/cache").is_some(), "the build is cached");
    let report = &steps[uses("mikepenz/action-junit-report").expect("a JUnit test report")];
    assert_eq!(report["if"].as_str(), Some("always()"));
    assert!(
        report["with"]["report_paths"]
            .as_str()
            .unwrap()
            .contains(".xml")
    );
    let upload = &steps[uses("actions/upload-artifact").unwrap()];
    assert!(
        upload["with"]["path"]
            .as_str()
            .unwrap()
            .contains("reports/*.html")
    );
    for step in steps {
        let run = step["run"].as_str().unwrap_or_default();
        assert!(
            !run.contains("${{"),
            "an expression pasted into a script: {run}"
        );
    }
    let cleanup = steps
        .iter()
        .rposition(|s| {
            s["run"]
                .as_str()
                .is_some_and(|r| r.contains("rm -rf .secrets"))
        })
        .expect("a step removing the credential files");
    assert_eq!(steps[cleanup]["if"].as_str(), Some("always()"));
    let last_gates = steps
        .iter()
        .rposition(|s| s["run"].as_str().is_some_and(|r| r.contains("gates ")))
        .unwrap();
    assert!(
        cleanup > last_gates,
        "credentials removed after the last gates step"
    );
}

#[test]
fn the_gitlab_snippet_validates_keeps_the_stages_and_reports_check_and_chaos() {
    assert_schema_valid("vendor.gitlab-ci", "gitlab-ci-nightly-chaos.yml");
    let ci = example("gitlab-ci-nightly-chaos.yml");
    assert!(
        ci.get("stages").is_none(),
        "an include must not replace the project's stages"
    );
    let chaos = &ci["chaos:staging"];
    let junit: Vec<&str> = chaos["artifacts"]["reports"]["junit"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(
        junit.contains(&"reports/check-staging.xml")
            && junit.contains(&"reports/chaos-staging.xml")
    );
    let minutes = |v: &serde_yaml_ng::Value| -> u64 {
        let text = v.as_str().unwrap().replace(' ', "");
        humantime::parse_duration(&text).unwrap().as_secs() / 60
    };
    let job = minutes(&chaos["timeout"]);
    let script = minutes(&chaos["variables"]["RUNNER_SCRIPT_TIMEOUT"]);
    let after = minutes(&chaos["variables"]["RUNNER_AFTER_SCRIPT_TIMEOUT"]);
    let inner = minutes(&ci["variables"]["GATES_CHAOS_LIMIT"]);
    // A whole-host run waits for the host to boot: an hour at least, and every limit
    // nested so gates, then recover, then after_script each get their turn.
    assert!(
        inner >= 60 && inner < script && script + after <= job,
        "{inner} {script} {after} {job}"
    );
    assert!(
        chaos["after_script"][0]
            .as_str()
            .unwrap()
            .contains("gates recover staging")
    );
    let script_lines: Vec<&str> = chaos["script"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|s| s.as_str())
        .collect();
    let run = script_lines
        .iter()
        .position(|l| l.contains("gates chaos staging"))
        .unwrap();
    assert!(script_lines[run].contains("timeout --signal=TERM"));
    assert!(
        script_lines[run + 1..]
            .iter()
            .any(|l| l.contains("gates recover staging"))
    );
}
