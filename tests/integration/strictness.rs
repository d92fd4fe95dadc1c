//! Silence is not success: selections that select nothing, and `--require-all`.

use crate::support::*;

#[test]
fn a_filter_that_selects_nothing_exits_2_and_names_the_nearest_trials() {
    let (out, reports) = check("staging", &["target-staging.json"], &["distnct-hosts"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}\n{}", stdout(&out));
    assert!(
        err.contains("the filter `distnct-hosts` leaves no trial"),
        "{err}"
    );
    assert!(err.contains("gate1::staging::distinct-hosts"), "{err}");
    assert_eq!(
        std::fs::read_dir(reports.path()).unwrap().count(),
        0,
        "no report for a run that ran nothing"
    );
}

#[test]
fn an_exact_name_that_is_not_a_trial_exits_2() {
    let (out, _reports) = check(
        "staging",
        &["target-staging.json"],
        &["gate1::staging::distinct-host", "--exact"],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("`gate1::staging::distinct-host` with --exact leaves no trial"),
        "{err}"
    );
}

#[test]
fn a_skip_that_removes_every_trial_exits_2() {
    let (out, _reports) = check(
        "staging",
        &["target-staging.json"],
        &["--skip", "staging", "--list"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--skip `staging` leaves no trial"));
}

#[test]
fn require_all_blocks_promotion_on_a_skipped_gate_and_says_which() {
    let (out, reports) = check(
        "staging",
        &["target-staging.json", "target-staging-metrics.json"],
        &["--require-all"],
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}\n{}", stderr(&out));
    assert!(
        text.contains("Promotion: blocked (--require-all)"),
        "{text}"
    );
    assert!(text.contains("gate 4 was skipped"), "{text}");
    assert!(
        text.contains("gate4::staging::chaos-report was skipped: no chaos report for staging"),
        "{text}"
    );
    // kubectl output records no origin: read and judged, but it does not promote.
    assert!(
        text.contains("target-staging.json records no origin (kubectl output?): every verdict read from it may be of another cluster"),
        "{text}"
    );
    let json = std::fs::read_dir(reports.path())
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.path().extension().is_some_and(|x| x == "json"))
        .expect("a JSON report");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json.path()).unwrap()).unwrap();
    assert_eq!(report["promotion"]["ready"], false);
}

#[test]
fn require_all_with_a_filter_names_the_gates_left_out() {
    let (out, _reports) = check(
        "staging",
        &["target-staging.json", "target-staging-metrics.json"],
        &["gate1", "--require-all"],
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("gate 2 was not run (left out by the filter)"),
        "{text}"
    );
}

#[test]
fn without_require_all_the_same_run_exits_0() {
    let (out, _reports) = check(
        "staging",
        &["target-staging.json", "target-staging-metrics.json"],
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(!stdout(&out).contains("Promotion"));
}

/// A copy of a fixture with a provenance annotation, as `gates snapshot ENV` writes it.
fn with_provenance(fixture_name: &str, env: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(fixture(fixture_name)).unwrap();
    let mut list: serde_json::Value = serde_json::from_str(&text).unwrap();
    let provenance = serde_json::json!({
        "environment": env,
        "collected_at": "2026-11-29T20:00:00Z",
        "cluster": {"kube_system_uid": "0d1f4c2a-1111-4e7b-9c3a-5a1e2b3c4d5e"},
        "topology": {"digest": "", "control_planes": []}
    });
    list["metadata"]["annotations"]["gates.adr/provenance"] =
        serde_json::Value::from(provenance.to_string());
    let path = dir.join(format!("{env}-snapshot.json"));
    std::fs::write(&path, serde_json::to_string(&list).unwrap()).unwrap();
    path
}

#[test]
fn a_snapshot_of_another_environment_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let file = with_provenance("target-production.json", "production", dir.path());
    let reports = tempfile::tempdir().unwrap();
    let out = gates_with_config(reports.path())
        .args(["check", "staging", "--reports"])
        .arg(reports.path())
        .arg("--snapshot")
        .arg(&file)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("was written for environment production") && err.contains("not for staging"),
        "{err}"
    );
}

#[test]
fn kubectl_output_is_accepted_with_a_note_and_the_report_records_provenance() {
    let (out, reports) = check(
        "staging",
        &["target-staging.json", "target-staging-metrics.json"],
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("origin"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot be proved"),
        "{}",
        stderr(&out)
    );
    let json = std::fs::read_dir(reports.path())
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.path().extension().is_some_and(|x| x == "json"))
        .expect("a JSON report");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json.path()).unwrap()).unwrap();
    assert_eq!(report["provenance"]["environment"], "staging");
    assert_eq!(
        report["provenance"]["topology"]["digest"]
            .as_str()
            .unwrap()
            .len(),
        64
    );
}

/// An HTTP server on loopback that answers every connection one byte every 200 ms, forever:
/// no read ever times out, so only a total deadline ends the run.
fn drip_server() -> u16 {
    serve(false)
}

/// Like [`drip_server`], but `GET /api/v1/nodes` answers at once with an empty list.
fn serve(answer_nodes: bool) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                // Take the request first, as a server would, then answer at a drip.
                let mut seen = Vec::new();
                let mut buf = [0u8; 1024];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                if answer_nodes && seen.starts_with(b"GET /api/v1/nodes") {
                    let body = r#"{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}"#;
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    return;
                }
                let head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Drip: ";
                for byte in head.iter().chain(std::iter::repeat(&b'a')) {
                    if stream.write_all(&[*byte]).is_err() {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
            });
        }
    });
    port
}

/// An environment `drip` whose API drips, with a 3s deadline; returns its env dir.
fn drip_environment(dir: &std::path::Path) -> std::path::PathBuf {
    let port = serve(true);
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{port}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\nusers:\n- name: u\n  user: {{token: not-a-secret}}\n"),
    )
    .unwrap();
    let envs = dir.join("envs");
    std::fs::create_dir(&envs).unwrap();
    std::fs::write(
        envs.join("drip.yaml"),
        format!(
            "like: staging\ndeadline: 3s\nkube:\n  context: c\n  kubeconfig: {}\n  timeout: 2s\n",
            kubeconfig.display()
        ),
    )
    .unwrap();
    envs
}

#[test]
fn snapshot_refuses_an_incomplete_read_unless_allowed_and_records_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let envs = drip_environment(dir.path());
    let file = dir.path().join("drip.json");
    let reports = tempfile::tempdir().unwrap();
    let snapshot = |extra: &[&str]| {
        gates_with_config(reports.path())
            .arg("--env-dir")
            .arg(&envs)
            .args(["snapshot", "drip", "-o"])
            .arg(&file)
            .args(extra)
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap()
    };
    let out = snapshot(&[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("would be incomplete, so nothing was written"),
        "{err}"
    );
    assert!(err.contains("pods/v1"), "{err}");
    assert!(!err.contains("nodes/v1:"), "nodes were read: {err}");
    assert!(!file.exists());

    let out = snapshot(&["--allow-incomplete"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = gates_with_config(reports.path())
        .arg("--env-dir")
        .arg(&envs)
        .args(["check", "drip", "--format", "json", "--reports"])
        .arg(reports.path())
        .arg("--snapshot")
        .arg(&file)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("was written incomplete"), "{err}");
}

#[test]
fn a_dripping_api_is_cut_at_the_deadline_and_the_verdicts_say_which_phase() {
    let port = drip_server();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{port}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\nusers:\n- name: u\n  user: {{token: not-a-secret}}\n"),
    )
    .unwrap();
    let envs = dir.path().join("envs");
    std::fs::create_dir(&envs).unwrap();
    std::fs::write(
        envs.join("drip.yaml"),
        format!(
            "like: staging\ndeadline: 3s\nkube:\n  context: c\n  kubeconfig: {}\n  timeout: 2s\n",
            kubeconfig.display()
        ),
    )
    .unwrap();
    let reports = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let out = gates_with_config(reports.path())
        .arg("--env-dir")
        .arg(&envs)
        .args(["check", "drip", "--format", "json", "--reports"])
        .arg(reports.path())
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let summary = json["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "gate1::drip::control-plane-nodes")
        .expect("the trial ran")["summary"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        summary.contains("listing nodes/v1 did not finish within the deadline of 3s"),
        "{summary}"
    );
}

#[test]
fn the_rollout_block_is_coloured_like_the_libtest_lines_when_asked() {
    let (out, _reports) = check("staging", STAGING_TODAY, &["--color", "always"]);
    let text = stdout(&out);
    assert!(text.contains("\u{1b}[31mFAIL \u{1b}[0m"), "{text:?}");
    assert!(text.contains("\u{1b}[33mskip \u{1b}[0m"), "{text:?}");
    let (out, _reports) = check("staging", STAGING_TODAY, &["--color", "never"]);
    assert!(!stdout(&out).contains('\u{1b}'));
}

#[test]
fn a_snapshot_that_records_its_origin_is_no_promotion_blocker_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let file = with_provenance("target-staging.json", "staging", dir.path());
    let reports = tempfile::tempdir().unwrap();
    let out = gates_with_config(reports.path())
        .args(["check", "staging", "--require-all", "--reports"])
        .arg(reports.path())
        .arg("--snapshot")
        .arg(&file)
        .arg("--snapshot")
        .arg(fixture("target-staging-metrics.json"))
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(
        text.contains("Promotion: blocked"),
        "{text}{}",
        stderr(&out)
    );
    assert!(
        !text.contains("staging-snapshot.json records no origin"),
        "{text}"
    );
    assert!(
        text.contains("target-staging-metrics.json records no origin"),
        "{text}"
    );
}
