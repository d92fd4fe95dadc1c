//! `gates history`: the last runs per gate and per chaos host, and their trend.

use super::*;

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
