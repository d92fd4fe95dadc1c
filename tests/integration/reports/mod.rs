//! The reports people look at and the tooling around them (issue 12): the HTML report in a
//! real headless Chromium (Debian's `chromium`, installed by tools/test-deps), the metrics through
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

mod adoption;
mod adr;
mod ci_examples;
mod history;
mod html;
mod metrics;
mod sarif;
mod validate_repo;

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
for (const el of document.querySelectorAll('#prediction tr[data-agrees]')) {
  const r = el.getBoundingClientRect();
  el.setAttribute('data-rendered', r.width.toFixed(1) + 'x' + r.height.toFixed(1));
}
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

/// The page shows the report's prediction beside the measurement: one row per probe and per
/// moved pod, each with the predicted and measured text in its cells and whether they agree,
/// laid out with a size on the page.
fn assert_prediction_rendered(html: &Path, report: &Value) {
    let prediction = &report["prediction"];
    assert!(
        prediction.is_object(),
        "the run's report holds a prediction: {}",
        report["prediction"]
    );
    let dom = rendered_dom(html);
    let section = &dom[dom
        .find("<section id=\"prediction\">")
        .expect("a prediction section")..];
    let section = &section[..section.find("</section>").unwrap()];
    let rows = |key: &str, attr_name: &str| {
        let list = prediction[key].as_array().unwrap();
        for row in list {
            let name = row[key.trim_end_matches('s')].as_str().unwrap();
            let marker = format!("{attr_name}=\"{}\"", dom_text(name));
            let found = tags(section, "tr", &marker);
            assert_eq!(found.len(), 1, "one row for {name}");
            let agrees = match row["agrees"].as_bool() {
                Some(true) => "yes",
                Some(false) => "no",
                None => "none",
            };
            assert_eq!(attr(found[0], "data-agrees"), Some(agrees), "{name}");
            assert!(
                attr(found[0], "data-rendered").is_some_and(|s| !s.starts_with("0.0x")),
                "laid out: {}",
                found[0]
            );
            let start = section.find(found[0]).unwrap();
            let row_html = &section[start..start + section[start..].find("</tr>").unwrap()];
            for text in [&row["predicted"], &row["measured"]] {
                let cell = format!("<td>{}</td>", dom_text(text.as_str().unwrap()));
                assert!(row_html.contains(&cell), "{cell} in {row_html}");
            }
        }
        list.len()
    };
    let probes = rows("probes", "data-prediction-probe");
    assert_eq!(
        probes,
        report["probes"].as_array().unwrap().len(),
        "every probe compared"
    );
    rows("pods", "data-prediction-pod");
}

/// Text as Chromium's serialised DOM shows it (quotes in text are not escaped there).
fn dom_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The samples prometheus_client's parsers read from the text, or their complaint.
pub(crate) fn parse_metrics(text: &str) -> Result<Vec<Value>, String> {
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
