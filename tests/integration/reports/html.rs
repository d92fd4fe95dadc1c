//! The HTML report in a real headless Chromium: the lab run's page and a captured lab
//! run's page show every lane and interval, a check page every gate and trial.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chaos_run_on_the_lab_writes_an_html_timeline_chromium_renders_and_metrics_prometheus_parses()
 {
    let dir = tempfile::tempdir().unwrap();
    let lab = gates_lab::Lab::start(gates_lab::LabOptions {
        scenario: "adr-007".into(),
        subnet: 197,
        speed: 40.0,
        state_dir: dir.path().join("state"),
        env_dir: Some(dir.path().join("env")),
        ..gates_lab::LabOptions::default()
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
    // outage past its budget, or time a recovery check out: exit 1 or 2); here the run only
    // has to end in a report, and the page must show what the report says.
    assert!(
        matches!(out.status.code(), Some(0..=2)) && stderr(&out).contains(".timeline.json"),
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
    assert_prediction_rendered(&html, &report);
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

/// A captured lab chaos run (`gates chaos lab --host worst`, speed 40) under fixtures/reports,
/// rendered into `dir`.
fn fixture_chaos_html(dir: &Path) -> (PathBuf, Value) {
    let stem_name = "chaos-lab-20261201T140155Z";
    for ext in ["json", "timeline.json"] {
        std::fs::copy(
            root().join(format!("fixtures/reports/{stem_name}.{ext}")),
            dir.join(format!("{stem_name}.{ext}")),
        )
        .unwrap();
    }
    let stem = dir.join(stem_name);
    let html = gates::output::report::html::chaos::write_beside(&stem).unwrap();
    (html, read_json(&stem.with_extension("json")))
}

#[test]
fn the_captured_lab_runs_timeline_and_prediction_render_in_chromium_and_are_screenshotted() {
    let dir = tempfile::tempdir().unwrap();
    let (html, report) = fixture_chaos_html(dir.path());
    assert_timeline_rendered(&html, &report);
    assert_prediction_rendered(&html, &report);
    // Kept for people to look at; the README's picture is of this page (`#timeline`).
    let out = root().join("target/report-screenshots");
    std::fs::create_dir_all(&out).unwrap();
    screenshot(&html, &out.join("chaos-page.png"), "1100,1150");
    std::fs::copy(&html, out.join("chaos-lab.html")).unwrap();
    // The README's picture: the timeline section alone, from this page.
    let only = dir.path().join("timeline-only.html");
    let page = std::fs::read_to_string(&html).unwrap();
    std::fs::write(
        &only,
        page.replace(
            "</style>",
            "header, section:not(#timeline), footer { display: none; }\n</style>",
        ),
    )
    .unwrap();
    let picture = out.join("chaos-timeline.png");
    screenshot(&only, &picture, "1100,840");
    if std::env::var_os("GATES_UPDATE_DOCS").is_some() {
        // `GATES_UPDATE_DOCS=1 cargo test --test integration captured_lab` refreshes it.
        std::fs::copy(&picture, root().join("docs/chaos-timeline.png")).unwrap();
    }
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
    assert!(page.contains("<title>gates chaos lab pve1: fail</title>"));
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
