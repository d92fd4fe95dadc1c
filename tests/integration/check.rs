use crate::support::*;

#[test]
fn target_topology_passes_every_static_gate_on_staging() {
    let (out, _reports) = check(
        "staging",
        &["target-staging.json", "target-staging-metrics.json"],
        &[],
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}\n{}", stderr(&out));
    assert_trial(&text, "gate1::staging::control-plane-nodes", "ok");
    assert_trial(&text, "gate1::staging::distinct-hosts", "ok");
    assert_trial(
        &text,
        "gate2::staging::replicated-controller::coredns",
        "ok",
    );
    assert_trial(&text, "gate3::staging::l2-announcement", "ok");
    assert_trial(&text, "gate3::staging::external-traffic-policy", "ok");
    assert_trial(
        &text,
        "gate4::staging::chaos-report",
        "ignored (no chaos report for staging: run `gates chaos staging`)",
    );
    assert!(
        text.contains("Rollout: 3 of 4 gates pass for staging"),
        "{text}"
    );
}

#[test]
fn target_topology_passes_the_production_gates_with_metrics() {
    let (out, _reports) = check(
        "production",
        &["target-production.json", "target-production-metrics.json"],
        &[],
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}\n{}", stderr(&out));
    assert_trial(&text, "gate5::production::capacity-headroom", "ok");
    assert_trial(&text, "gate5::production::longhorn-disks", "ok");
    assert!(
        text.contains("Rollout: 2 of 2 gates pass for production"),
        "{text}"
    );
}

#[test]
fn staging_today_shows_each_open_item_as_a_failure_with_evidence() {
    let (out, _reports) = check("staging", STAGING_TODAY, &[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}\n{}", stderr(&out));
    // One control-plane node and one worker.
    assert_trial(&text, "gate1::staging::control-plane-nodes", "FAILED");
    assert!(text.contains("talos-test-cp-01"), "{text}");
    // The L2 policy selects only talos-test-worker-01.
    assert_trial(&text, "gate3::staging::l2-announcement", "FAILED");
    assert!(
        text.contains("ingress-address"),
        "the failing policy is named:\n{text}"
    );
    // Staging's Traefik Service already uses Cluster (the ADR's implementation status); the
    // shared values' Local is what traefik-local.json shows.
    assert_trial(&text, "gate3::staging::external-traffic-policy", "ok");
    // Controllers with one replica, e.g. Traefik with the chart default.
    assert_trial(
        &text,
        "gate2::staging::replicated-controller::traefik",
        "FAILED",
    );
    assert!(
        text.contains("traefik/traefik-"),
        "the pod is named:\n{text}"
    );
    assert!(
        text.contains("Rollout: 0 of 4 gates pass for staging"),
        "{text}"
    );
}

#[test]
fn staging_today_without_metrics_or_production_gates_has_no_errors() {
    let (out, _reports) = check("staging", STAGING_TODAY, &["--format", "json"]);
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    assert_eq!(json["tally"]["errors"], 0, "{json:#}");
    assert!(json["tally"]["failed"].as_u64().unwrap() >= 4, "{json:#}");
}

#[test]
fn longhorn_only_on_workers_fails_on_staging_today_as_production_would() {
    // Gate 5 applies to production; check the same snapshot as production to see the
    // Terraform item of the ADR (Longhorn only on workers).
    let (out, _reports) = check("production", STAGING_TODAY, &["longhorn-disks"]);
    let text = stdout(&out);
    assert_trial(&text, "gate5::production::longhorn-disks", "FAILED");
    assert!(text.contains("talos-test-cp-01"), "{text}");
}

#[test]
fn two_nodes_on_one_host_fail_naming_both() {
    let (out, _reports) = check("staging", &["two-nodes-one-host.json"], &["distinct-hosts"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert_trial(&text, "gate1::staging::distinct-hosts", "FAILED");
    assert!(
        text.contains("talos-stag-cp-01") && text.contains("talos-stag-cp-02"),
        "{text}"
    );
    assert!(text.contains("pve1"), "{text}");
}

#[test]
fn l2_policy_excluding_control_planes_names_the_expression() {
    let (out, _reports) = check(
        "staging",
        &["l2-excludes-control-plane.json"],
        &["l2-announcement"],
    );
    let text = stdout(&out);
    assert_trial(&text, "gate3::staging::l2-announcement", "FAILED");
    assert!(text.contains("DoesNotExist"), "{text}");
}

#[test]
fn a_controller_with_one_replica_fails() {
    let (out, _reports) = check("staging", &["controller-one-replica.json"], &["gate2"]);
    let text = stdout(&out);
    assert_trial(
        &text,
        "gate2::staging::replicated-controller::coredns",
        "FAILED",
    );
    assert_trial(
        &text,
        "gate2::staging::replicated-controller::traefik",
        "ok",
    );
}

#[test]
fn a_pdb_that_selects_nothing_fails() {
    let (out, _reports) = check(
        "staging",
        &["pdb-selects-nothing.json"],
        &["replicated-controller::traefik"],
    );
    let text = stdout(&out);
    assert_trial(
        &text,
        "gate2::staging::replicated-controller::traefik",
        "FAILED",
    );
    assert!(text.contains("traefik/traefik"), "{text}");
}

#[test]
fn traefik_local_fails_with_the_reason() {
    let (out, _reports) = check(
        "staging",
        &["traefik-local.json"],
        &["external-traffic-policy"],
    );
    let text = stdout(&out);
    assert_trial(&text, "gate3::staging::external-traffic-policy", "FAILED");
    assert!(text.contains("Local"), "{text}");
}

#[test]
fn list_names_every_trial_without_reading_anything() {
    let reports = tempfile::tempdir().unwrap();
    let out = gates_with_config(reports.path())
        .args(["check", "staging", "--list"])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    for name in [
        "gate1::staging::control-plane-nodes: test",
        "gate2::staging::replicated-controller::cilium-operator: test",
        "gate2::staging::replicated-controller::external-secrets-webhook: test",
        "gate3::staging::external-traffic-policy: test",
        "gate4::staging::chaos-report: test",
    ] {
        assert!(text.contains(name), "missing {name} in:\n{text}");
    }
    assert!(
        !text.contains("gate5::"),
        "gate 5 applies to production only:\n{text}"
    );
    assert_eq!(
        std::fs::read_dir(reports.path()).unwrap().count(),
        0,
        "--list writes no report"
    );
}

#[test]
fn exact_filter_runs_one_trial() {
    let (out, _reports) = check(
        "staging",
        STAGING_TODAY,
        &["gate1::staging::distinct-hosts", "--exact"],
    );
    let text = stdout(&out);
    assert!(text.contains("running 1 test"), "{text}");
    assert_trial(&text, "gate1::staging::distinct-hosts", "FAILED");
}

#[test]
fn unknown_environment_is_bad_input() {
    let (out, _reports) = check("stagign", STAGING_TODAY, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("did you mean `staging`?"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn unreadable_snapshot_is_bad_input_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\"kind\": \"List\",\n \"items\": [\n}").unwrap();
    let reports = tempfile::tempdir().unwrap();
    let out = gates_with_config(reports.path())
        .args(["check", "staging", "--snapshot"])
        .arg(&broken)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("broken.json:3:1"), "{err}");
}

#[test]
fn a_snapshot_with_a_broken_infra_record_is_bad_input_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("edited.json");
    std::fs::write(
        &file,
        r#"{"apiVersion": "v1", "kind": "List", "items": [],
            "metadata": {"annotations": {"gates.adr/infra": "{\"talos\": 3}"}}}"#,
    )
    .unwrap();
    let reports = tempfile::tempdir().unwrap();
    let out = gates_with_config(reports.path())
        .args(["check", "staging", "--snapshot"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("edited.json: annotation gates.adr/infra is not what `gates snapshot` writes"),
        "{err}"
    );
}

#[test]
fn unreachable_cluster_gives_error_verdicts_not_pass_or_fail() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    // Port 9 on loopback: nothing listens there, so every list is refused.
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:9\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {token: not-a-secret}\n",
    )
    .unwrap();
    let envs = dir.path().join("envs");
    std::fs::create_dir(&envs).unwrap();
    std::fs::write(
        envs.join("offline.yaml"),
        format!(
            "like: staging\nkube:\n  context: c\n  kubeconfig: {}\n  timeout: 2s\n",
            kubeconfig.display()
        ),
    )
    .unwrap();
    let reports = tempfile::tempdir().unwrap();
    let out = gates_with_config(reports.path())
        .arg("--env-dir")
        .arg(&envs)
        .args(["check", "offline", "--format", "json", "--reports"])
        .arg(reports.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let trials = json["trials"].as_array().unwrap();
    // Trials that need the cluster error; those needing sections the environment lacks skip.
    let evaluated: Vec<_> = trials.iter().filter(|t| t["verdict"] != "skip").collect();
    assert!(evaluated.len() >= 15, "{json:#}");
    for trial in evaluated {
        assert_eq!(trial["verdict"], "error", "{trial:#}");
        assert!(
            trial["summary"]
                .as_str()
                .unwrap()
                .contains("the Kubernetes API cannot be used (it does not answer;"),
            "{trial:#}"
        );
    }
    // The whole reason once, first, on stderr: not once per trial.
    let err = stderr(&out);
    assert_eq!(
        err.matches("cannot reach the Kubernetes API").count(),
        1,
        "{err}"
    );
    assert!(
        err.starts_with("error: the Kubernetes API of offline cannot be used: cannot reach the Kubernetes API while listing"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("not-a-secret"));
    assert!(!err.contains("not-a-secret"));
}

#[test]
fn a_missing_kubeconfig_is_said_once_with_its_fix_and_each_trial_refers_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let envs = dir.path().join("envs");
    std::fs::create_dir(&envs).unwrap();
    let missing = dir.path().join("no-such-kubeconfig");
    std::fs::write(envs.join("nokube.yaml"), "like: staging\n").unwrap();
    let reports = tempfile::tempdir().unwrap();
    let out = gates_with_config(reports.path())
        .env("KUBECONFIG", &missing)
        .arg("--env-dir")
        .arg(&envs)
        .args(["check", "nokube", "--reports"])
        .arg(reports.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let all = format!("{}{}", stderr(&out), String::from_utf8_lossy(&out.stdout));
    let path = missing.display().to_string();
    assert_eq!(
        all.matches(&path).count(),
        1,
        "the kubeconfig's path once: {all}"
    );
    let briefly = all
        .matches("the Kubernetes API cannot be used (no readable kubeconfig;")
        .count();
    assert!(
        briefly >= 15,
        "each trial refers to it briefly ({briefly}): {all}"
    );
}

#[test]
fn kinds_gates_does_not_read_are_ignored_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let extra = dir.path().join("extra.yaml");
    std::fs::write(
        &extra,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: default}\ndata: {a: b}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: default}\n",
    )
    .unwrap();
    let (out, _reports) = check(
        "staging",
        &[
            "target-staging.json",
            "target-staging-metrics.json",
            extra.to_str().unwrap(),
        ],
        &["gate1"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("note: ignored objects of kind ConfigMap (v1)"),
        "{err}"
    );
    assert!(err.contains("kind Namespace"), "{err}");
}
