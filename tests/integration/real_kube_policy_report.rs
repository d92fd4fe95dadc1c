//! `gates check --policy-report` against a real kube-apiserver with the wgpolicyk8s.io
//! v1alpha2 CRDs installed (as Kyverno's module ships them, from the Go module proxy): the
//! report is refused by RBAC with the fix named while the identity has only gates-reader,
//! written once `deploy/rbac/gates-policy-reports.yaml` is bound too (the API server validating
//! it against the CRD's schema), each result the trial's verdict, and a second run replaces the
//! first's results in place. `gates watch --policy-report` goes on without the CRDs, saying so
//! once and serving the report as down, writes the report once they are installed with the
//! results `check` writes, and rewrites the same object when a verdict changes, and only then.

use std::path::{Path, PathBuf};
use std::time::Duration;

use std::time::Instant;

use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use serde_json::Value;

use crate::control_plane::{self, ControlPlane, Identity, Kubelets, Timing, load};
use crate::real_kube::{load_env, real_env_dir};
use crate::support::*;
use crate::watch::Watch;

const PLANE_SUBNET: u8 = 170;
const LAB_SUBNET: u8 = 172;
/// The watch's test: its plane on 127.190.9.1, its lab from 127.192.
const WATCH_PLANE_SUBNET: u8 = 190;
const WATCH_LAB_SUBNET: u8 = 192;
const COREDNS: &str = "gate2::lab::replicated-controller::coredns";
const NOT_SERVED: &str =
    "does not serve wgpolicyk8s.io/v1alpha2 clusterpolicyreports: install the PolicyReport CRDs";
const REPORT_UP: &str = "gates_watch_policy_report_up";
const WRITTEN: &str = "gates_watch_policy_report_writes{result=\"written\"}";
const FAILED: &str = "gates_watch_policy_report_writes{result=\"failed\"}";
const EVALUATED: &str = "gates_watch_evaluation_timestamp_seconds{environment=\"lab\"}";

/// The CRDs' directory, from `tools/policy-reports/crds.sh` (the Go module cache).
fn policy_report_crds() -> Vec<Value> {
    let out = std::process::Command::new(root().join("tools/policy-reports/crds.sh"))
        .output()
        .expect("tools/policy-reports/crds.sh runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = PathBuf::from(stdout(&out).trim());
    [
        "wgpolicyk8s.io_clusterpolicyreports.yaml",
        "wgpolicyk8s.io_policyreports.yaml",
    ]
    .iter()
    .map(|file| {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        gates_core::yaml::from_str(&text).unwrap()
    })
    .collect()
}

fn yaml_file(path: &Path) -> Value {
    gates_core::yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `gates check lab --policy-report --format json` with `extra` arguments.
async fn check(env_dir: PathBuf, extra: &[&str]) -> (std::process::Output, Value) {
    check_with(env_dir, &[&["--policy-report"], extra].concat()).await
}

/// `gates check lab --format json` with `extra` arguments: its output and JSON record.
async fn check_with(env_dir: PathBuf, extra: &[&str]) -> (std::process::Output, Value) {
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let out = tokio::task::spawn_blocking(move || {
        let reports = tempfile::tempdir().unwrap();
        gates_with_config(reports.path())
            .arg("--env-dir")
            .arg(&env_dir)
            .args(["check", "lab", "--format", "json", "--reports"])
            .arg(reports.path())
            .args(&extra)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|err| panic!("JSON ({err}): {}\n{}", stdout(&out), stderr(&out)));
    (out, json)
}

async fn reports_api(plane: &ControlPlane) -> Api<DynamicObject> {
    let client = plane.client(Identity::Admin).await.unwrap();
    let (resource, _) =
        load::api_resource(&client, "wgpolicyk8s.io/v1alpha2", "ClusterPolicyReport")
            .await
            .unwrap();
    Api::all_with(client, &resource)
}

async fn read_report(plane: &ControlPlane) -> DynamicObject {
    reports_api(plane).await.get("gates-lab").await.unwrap()
}

/// The shipped policy-reports role, bound to the reader identity.
async fn bind_policy_reports(plane: &ControlPlane) {
    let admin = plane.client(Identity::Admin).await.unwrap();
    load::create(
        &admin,
        yaml_file(&root().join("deploy/rbac/gates-policy-reports.yaml")),
    )
    .await
    .unwrap();
    load::create(
        &admin,
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "gates-reader-policy-reports"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gates-policy-reports"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": Identity::Reader.user()}],
        }),
    )
    .await
    .unwrap();
}

/// Run `check --policy-report` until RBAC's cache sees the binding (before, the API answers
/// forbidden); what the last run said. Each run exits 2: the CRDs are not installed yet.
async fn until_bound(envs: &Path) -> String {
    let mut said = String::new();
    for _ in 0..20 {
        let (out, _) = check(envs.to_path_buf(), &[]).await;
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        said = stderr(&out);
        if !said.contains("forbidden") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    said
}

/// Each result as (rule, result), and each trial as (name, verdict), in order.
fn pairs(list: &Value, name: &str, verdict: &str) -> Vec<(String, String)> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r[name].as_str().unwrap().to_string(),
                r[verdict].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_report_needs_its_role_then_holds_each_verdict_and_is_replaced_in_place() {
    let Some((_one, plane)) = control_plane::start_one(PLANE_SUBNET).await else {
        return;
    };
    load::install_crds(&plane).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lab = start_lab("adr-007", LAB_SUBNET, dir.path()).await;
    load_env(&plane, &lab, 0).await;
    let envs = real_env_dir(&lab, &plane, Identity::Reader, dir.path(), None);
    let narrow = real_env_dir(&lab, &plane, Identity::Narrow, dir.path(), None);
    // The reader identity gets the shipped role too; the narrow one does not.
    bind_policy_reports(&plane).await;

    // Without the CRDs, the report cannot be written: an error naming what to install (once
    // RBAC's cache sees the binding; before, the API answers forbidden).
    let said = until_bound(&envs).await;
    assert!(said.contains(NOT_SERVED), "{said}");
    load::install(&plane, policy_report_crds()).await.unwrap();

    // An identity with gates-reader's rights but not this role may read, not write the
    // report: an error naming the role to bind, after the verdicts were reported.
    let (out, json) = check(narrow, &[]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(json["trials"].as_array().is_some_and(|t| !t.is_empty()));
    let said = stderr(&out);
    assert!(
        said.contains("ClusterPolicyReport gates-lab: forbidden")
            && said.contains("bind deploy/rbac/gates-policy-reports.yaml"),
        "{said}"
    );

    // With the role, the report is written (the CRDs' discovery may take a moment).
    let mut written = None;
    for _ in 0..20 {
        let (out, json) = check(envs.clone(), &[]).await;
        if stderr(&out).contains("policy report: ClusterPolicyReport gates-lab") {
            written = Some((out, json));
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (out, json) = written.expect("the report is written once the role is bound");
    // Written, the exit code is the verdicts' alone.
    let tally = &json["tally"];
    let verdicts_exit = if tally["errors"].as_u64() > Some(0) {
        2
    } else if tally["failed"].as_u64() > Some(0) {
        1
    } else {
        0
    };
    assert_eq!(out.status.code(), Some(verdicts_exit), "{}", stderr(&out));
    let first = read_report(&plane).await;
    let report = &first.data;
    assert_eq!(
        pairs(&report["results"], "rule", "result"),
        pairs(&json["trials"], "name", "verdict")
    );
    for (key, count) in [
        ("pass", "passed"),
        ("fail", "failed"),
        ("error", "errors"),
        ("skip", "skipped"),
    ] {
        assert_eq!(report["summary"][key], tally[count], "{key}");
    }
    // Nothing sent was pruned by the CRD's schema: gate, title, kind and time are there.
    let one = &report["results"][0];
    assert_eq!(one["source"], "gates");
    assert!(
        one["policy"].as_str().unwrap().starts_with("adr-007/gate"),
        "{one:#}"
    );
    assert!(!one["category"].as_str().unwrap().is_empty(), "{one:#}");
    assert_eq!(one["properties"]["environment"], "lab");
    assert!(one["timestamp"]["seconds"].as_i64().unwrap() > 0, "{one:#}");
    assert_eq!(
        first.metadata.labels.as_ref().unwrap()["app.kubernetes.io/managed-by"],
        "gates"
    );
    // A controller's result names its pods by their labels; a node check's is the cluster's.
    let result_of = |rule: &str| {
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["rule"] == rule)
            .unwrap_or_else(|| panic!("no result {rule}"))
            .clone()
    };
    assert_eq!(
        result_of("gate2::lab::replicated-controller::coredns")["resourceSelector"],
        serde_json::json!({"matchLabels": {"k8s-app": "kube-dns"}})
    );
    assert!(result_of("gate1::lab::control-plane-nodes")["resourceSelector"].is_null());

    // A second run (gate 1 only) replaces the first's results in place.
    let (_, json) = check(envs.clone(), &["gate1"]).await;
    let second = read_report(&plane).await;
    assert_eq!(second.metadata.uid, first.metadata.uid);
    assert_ne!(
        second.metadata.resource_version,
        first.metadata.resource_version
    );
    let results = pairs(&second.data["results"], "rule", "result");
    assert_eq!(results, pairs(&json["trials"], "name", "verdict"));
    assert!(
        results.iter().all(|(rule, _)| rule.starts_with("gate1::")),
        "{results:?}"
    );
}

/// A report's results without their timestamps (a watch's are its evaluation's time, a
/// check's its run's start), by rule.
fn untimed(report: &Value) -> Vec<Value> {
    let mut results: Vec<Value> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.as_object_mut().unwrap().remove("timestamp");
            r
        })
        .collect();
    results.sort_by_key(|r| r["rule"].as_str().unwrap().to_string());
    results
}

/// Each result's rule, result and message (or each trial's name, verdict and summary), sorted.
fn said_of(list: &Value, keys: [&str; 3]) -> Vec<[String; 3]> {
    let mut all: Vec<[String; 3]> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| keys.map(|k| r[k].as_str().unwrap_or_default().to_string()))
        .collect();
    all.sort();
    all
}

/// Wait until the served `series` satisfies `want`; its value.
async fn until_metric(
    watch: &Watch,
    series: &str,
    want: impl Fn(f64) -> bool,
    within: Duration,
) -> f64 {
    let start = Instant::now();
    loop {
        if let Some(value) = watch.metric(series).await
            && want(value)
        {
            return value;
        }
        assert!(
            start.elapsed() < within,
            "{series} not as wanted after {within:?}:\n{}\nsaid:\n{}",
            watch.get("/metrics").await.1,
            watch.said()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_goes_on_without_the_crds_saying_so_once_then_keeps_the_report_current_in_place() {
    let Some(bin) = control_plane::binaries() else {
        return;
    };
    let _one = control_plane::ONE_AT_A_TIME.lock().await;
    let plane = ControlPlane::start(
        &bin,
        WATCH_PLANE_SUBNET,
        Timing::default(),
        Kubelets::Shared,
    )
    .await
    .unwrap_or_else(|err| panic!("the real control plane starts: {err}"));
    load::install_crds(&plane).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lab = start_lab("adr-007", WATCH_LAB_SUBNET, dir.path()).await;
    load_env(&plane, &lab, 0).await;
    let envs = real_env_dir(&lab, &plane, Identity::Reader, dir.path(), None);
    bind_policy_reports(&plane).await;
    // The binding in RBAC's cache before the watch starts, so the one reason its writes fail
    // is the CRDs'.
    let said = until_bound(&envs).await;
    assert!(said.contains(NOT_SERVED), "{said}");

    // Without the CRDs: the watch gets ready and serves, the report is down, and its write is
    // tried again every --interval (2 s) without saying so again.
    let reports = dir.path().join("reports");
    let watch = Watch::start_with(&envs, &reports, &["--policy-report"]);
    until_metric(&watch, FAILED, |n| n >= 3.0, Duration::from_secs(120)).await;
    assert_eq!(watch.metric(REPORT_UP).await, Some(0.0));
    assert_eq!(watch.metric(WRITTEN).await, Some(0.0));
    assert_eq!(watch.get("/readyz").await.0, 200);
    assert_eq!(watch.get("/healthz").await.0, 200);
    assert!(!watch.verdicts().await.is_empty());
    let said = watch.said();
    assert_eq!(said.matches(NOT_SERVED).count(), 1, "{said}");
    assert!(said.contains("the watch goes on"), "{said}");

    // The CRDs installed: the next try writes it, with the verdicts and messages a one-shot
    // check gives (the two read a moment apart, so a few tries while the controllers settle).
    load::install(&plane, policy_report_crds()).await.unwrap();
    until_metric(&watch, REPORT_UP, |up| up == 1.0, Duration::from_secs(30)).await;
    let api = reports_api(&plane).await;
    let mut agreed = None;
    let mut last = (Vec::new(), Vec::new());
    for _ in 0..10 {
        let watched = api.get("gates-lab").await.unwrap();
        let (_, json) = check_with(envs.clone(), &[]).await;
        let reported = said_of(&watched.data["results"], ["rule", "result", "message"]);
        let checked = said_of(&json["trials"], ["name", "verdict", "summary"]);
        if reported == checked {
            agreed = Some(watched);
            break;
        }
        last = (reported, checked);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let watched = agreed.unwrap_or_else(|| panic!("reported {:?}\nchecked {:?}", last.0, last.1));
    // What `check --policy-report` writes over it is the same report, the time of its results
    // aside: one shape, one object.
    let (out, _) = check(envs.clone(), &[]).await;
    assert!(
        stderr(&out).contains("policy report: ClusterPolicyReport gates-lab"),
        "{}",
        stderr(&out)
    );
    let checked = api.get("gates-lab").await.unwrap();
    assert_eq!(untimed(&checked.data), untimed(&watched.data));
    assert_eq!(checked.data["summary"], watched.data["summary"]);
    assert_eq!(checked.metadata.uid, watched.metadata.uid);

    // A PDB deleted through the API: the watch rewrites the same report, coredns's result
    // now fail.
    let written = watch.metric(WRITTEN).await.unwrap();
    crate::real_kube_watch::pdbs(&plane)
        .await
        .delete("coredns", &DeleteParams::default())
        .await
        .unwrap();
    let start = Instant::now();
    let failed = loop {
        let now = api.get("gates-lab").await.unwrap();
        let coredns = now.data["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["rule"] == COREDNS)
            .cloned()
            .unwrap_or_else(|| panic!("no result {COREDNS}"));
        if coredns["result"] == "fail" {
            break now;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{COREDNS} stayed {coredns:#} in the report; said:\n{}",
            watch.said()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(failed.metadata.uid, watched.metadata.uid);
    assert_ne!(
        failed.metadata.resource_version,
        checked.metadata.resource_version
    );
    assert!(watch.metric(WRITTEN).await.unwrap() > written);
    let all = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(all.items.len(), 1, "one report per environment");

    // Evaluations that change no verdict or message write nothing: the report stays as it
    // is while the watch goes on evaluating (the nodes' heartbeats, the polls).
    let evaluated = watch.metric(EVALUATED).await.unwrap();
    let written = watch.metric(WRITTEN).await.unwrap();
    let verdicts = watch.verdicts().await;
    until_metric(
        &watch,
        EVALUATED,
        |at| at > evaluated,
        Duration::from_secs(30),
    )
    .await;
    if watch.verdicts().await == verdicts {
        assert_eq!(watch.metric(WRITTEN).await, Some(written));
        assert_eq!(
            api.get("gates-lab")
                .await
                .unwrap()
                .metadata
                .resource_version,
            failed.metadata.resource_version
        );
    }

    let (code, said) = watch.terminate();
    assert_eq!(code, Some(0), "{said}");
    // Said once each: the failure, and the recovery; no line per write.
    assert_eq!(said.matches(NOT_SERVED).count(), 1, "{said}");
    assert_eq!(
        said.matches("policy report: ClusterPolicyReport gates-lab written again")
            .count(),
        1,
        "{said}"
    );
    assert_eq!(said.matches("policy report:").count(), 2, "{said}");
    drop(lab);
}
