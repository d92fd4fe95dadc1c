//! `gates history`: the last runs per gate and per chaos host, and their trend.

use super::*;

/// A copy of the captured chaos report as if run at `stamp` with the recovery and API
/// outage given, so several nightly runs can be laid out without running the lab each time.
fn nightly(dir: &Path, stamp: &str, recovery: f64, api_longest: f64) {
    let mut report = read_json(&root().join("fixtures/reports/chaos-lab-20261201T140155Z.json"));
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

/// The reports of real lab runs in fixtures/reports/history (see capture.sh there), grouped
/// as history should group them: per host, oldest first, the recovery time and each probe's
/// longest outage as the reports state them.
fn captured_runs() -> std::collections::BTreeMap<String, Vec<Value>> {
    let dir = root().join("fixtures/reports/history");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("chaos-lab-") && n.ends_with("Z.json"))
        .collect();
    names.sort();
    let mut hosts: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    for name in names {
        let report = read_json(&dir.join(name));
        hosts
            .entry(report["host"].as_str().unwrap().to_string())
            .or_default()
            .push(report);
    }
    hosts
}

fn recovery_of(report: &Value) -> f64 {
    report["moments"]["recovered"].as_f64().unwrap()
        - report["moments"]["restore"].as_f64().unwrap()
}

fn longest_of(report: &Value, probe: &str) -> f64 {
    report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["probe"] == probe)
        .unwrap()["longest"]
        .as_f64()
        .unwrap()
}

#[test]
fn history_of_real_lab_runs_at_different_speeds_shows_each_hosts_last_runs_and_their_trend() {
    let hosts = captured_runs();
    let pve1 = &hosts["pve1"];
    let pve2 = &hosts["pve2"];
    assert_eq!((pve1.len(), pve2.len()), (3, 3), "capture.sh's six runs");
    // What the captures measured, so the trend words below follow from the evidence: pve1's
    // last run (the lab four times slower) recovered later than both runs before it, and
    // pve2's last (four times faster) sooner.
    let earlier_max = |runs: &[Value]| runs[..2].iter().map(recovery_of).fold(0.0, f64::max);
    let earlier_min = |runs: &[Value]| runs[..2].iter().map(recovery_of).fold(f64::MAX, f64::min);
    assert!(recovery_of(&pve1[2]) > 1.1 * earlier_max(pve1) + 0.5);
    assert!(recovery_of(&pve2[2]) < 0.9 * earlier_min(pve2) - 0.5);

    let reports = root().join("fixtures/reports/history");
    let json_out = gates_with_config(Path::new("."))
        .args(["history", "lab", "--format", "json", "--reports"])
        .arg(&reports)
        .output()
        .unwrap();
    assert_eq!(json_out.status.code(), Some(0), "{}", stderr(&json_out));
    let history: Value = serde_json::from_str(&stdout(&json_out)).unwrap();
    let chaos = history["chaos"].as_array().unwrap();
    assert_eq!(chaos.len(), 2, "one history per host");
    for (host, runs) in [("pve1", pve1), ("pve2", pve2)] {
        let shown = chaos.iter().find(|h| h["host"] == host).unwrap();
        let shown_runs = shown["runs"].as_array().unwrap();
        assert_eq!(shown_runs.len(), runs.len(), "{host}");
        for (run, report) in shown_runs.iter().zip(runs) {
            assert_eq!(run["at"], report["started_at"], "oldest first");
            assert_eq!(run["verdict"], report["verdict"]);
            let recovery = run["recovery_seconds"].as_f64().unwrap();
            assert!((recovery - recovery_of(report)).abs() < 1e-6, "{host}");
            for probe in report["probes"].as_array().unwrap() {
                let name = probe["probe"].as_str().unwrap();
                assert_eq!(run["outages"][name]["longest"], probe["longest"], "{name}");
                assert_eq!(run["outages"][name]["total"], probe["total"], "{name}");
            }
        }
    }
    let pve1_shown = chaos.iter().find(|h| h["host"] == "pve1").unwrap();
    let pve2_shown = chaos.iter().find(|h| h["host"] == "pve2").unwrap();
    assert_eq!(pve1_shown["recovery_trend"], "rising");
    assert_eq!(pve2_shown["recovery_trend"], "falling");
    let api = |runs: &[Value]| -> Vec<f64> {
        runs.iter()
            .map(|r| longest_of(r, "api-vip-new-connection"))
            .collect()
    };
    let api1 = api(pve1);
    assert!(api1[2] > 1.1 * api1[0].max(api1[1]) + 0.5, "{api1:?}");
    assert_eq!(
        pve1_shown["outage_trend"]["api-vip-new-connection"], "rising",
        "{api1:?}"
    );

    // The text: per host a line per run with its recovery, and the trend.
    let out = gates_with_config(Path::new("."))
        .args(["history", "lab", "--last", "2", "--reports"])
        .arg(&reports)
        .output()
        .unwrap();
    let o = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{o}{}", stderr(&out));
    for (host, runs) in [("pve1", pve1), ("pve2", pve2)] {
        let block = &o[o.find(&format!("Chaos on host {host}:")).unwrap()..];
        let block = &block[..block.find("trend:").unwrap()];
        assert!(
            !block.contains(runs[0]["started_at"].as_str().unwrap()),
            "--last 2 leaves out the oldest: {block}"
        );
        for report in &runs[1..] {
            let line = block
                .lines()
                .find(|l| l.contains(report["started_at"].as_str().unwrap()))
                .unwrap_or_else(|| panic!("{host}: {block}"));
            assert!(
                line.ends_with(&format!("{:.1}s", recovery_of(report))),
                "{line}"
            );
        }
    }
    // Over the last two runs pve1's recovery still rises; pve2's falls.
    assert!(o.contains("Chaos on host pve1:"), "{o}");
    let trend_line = |host: &str| {
        let at = o.find(&format!("Chaos on host {host}:")).unwrap();
        o[at..]
            .lines()
            .find(|l| l.contains("trend:"))
            .unwrap()
            .to_string()
    };
    assert!(
        trend_line("pve1").contains("trend: recovery rising;"),
        "{o}"
    );
    assert!(trend_line("pve1").contains("api outage rising"), "{o}");
    assert!(
        trend_line("pve2").contains("trend: recovery falling;"),
        "{o}"
    );

    // Per gate, the last two check runs: staging-today's failing check, then adr-007's pass.
    assert!(o.contains("  gate 1  FAIL pass  Staging runs three"), "{o}");
    assert!(o.contains("  gate 4  skip skip  "), "{o}");
    let gates = history["gates"].as_array().unwrap();
    let gate1: Vec<&str> = gates[0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(gate1, ["pass", "pass", "fail", "pass"]);
}
