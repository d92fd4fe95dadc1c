//! `gates check --policy-report` against a real kube-apiserver with the wgpolicyk8s.io
//! v1alpha2 CRDs installed (as Kyverno's module ships them, from the Go module proxy): the
//! report is refused by RBAC with the fix named while the identity has only gates-reader,
//! written once `deploy/rbac/gates-policy-reports.yaml` is bound too (the API server validating
//! it against the CRD's schema), each result the trial's verdict, and a second run replaces the
//! first's results in place.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::api::{Api, DynamicObject};
use serde_json::Value;

use crate::control_plane::{self, ControlPlane, Identity, Kubelets, Timing, load};
use crate::real_kube::{load_env, real_env_dir};
use crate::support::*;

const PLANE_SUBNET: u8 = 170;
const LAB_SUBNET: u8 = 172;

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
        serde_yaml_ng::from_str(&text).unwrap()
    })
    .collect()
}

fn yaml_file(path: &Path) -> Value {
    serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

async fn check(env_dir: PathBuf, extra: &[&str]) -> (std::process::Output, Value) {
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let out = tokio::task::spawn_blocking(move || {
        let reports = tempfile::tempdir().unwrap();
        gates_with_config(reports.path())
            .arg("--env-dir")
            .arg(&env_dir)
            .args([
                "check",
                "lab",
                "--policy-report",
                "--format",
                "json",
                "--reports",
            ])
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

async fn read_report(plane: &ControlPlane) -> DynamicObject {
    let client = plane.client(Identity::Admin).await.unwrap();
    let (resource, _) =
        load::api_resource(&client, "wgpolicyk8s.io/v1alpha2", "ClusterPolicyReport")
            .await
            .unwrap();
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    api.get("gates-lab").await.unwrap()
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
    let Some(bin) = control_plane::binaries() else {
        return;
    };
    let _one = control_plane::ONE_AT_A_TIME.lock().await;
    let plane = ControlPlane::start(&bin, PLANE_SUBNET, Timing::default(), Kubelets::Shared)
        .await
        .unwrap_or_else(|err| panic!("the real control plane starts: {err}"));
    load::install_crds(&plane).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lab = start_lab("adr-007", LAB_SUBNET, dir.path()).await;
    load_env(&plane, &lab, 0).await;
    let envs = real_env_dir(&lab, &plane, Identity::Reader, dir.path(), None);
    let narrow = real_env_dir(&lab, &plane, Identity::Narrow, dir.path(), None);
    // The reader identity gets the shipped role too; the narrow one does not.
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

    // Without the CRDs, the report cannot be written: an error naming what to install (once
    // RBAC's cache sees the binding; before, the API answers forbidden).
    let mut said = String::new();
    for _ in 0..20 {
        let (out, _) = check(envs.clone(), &[]).await;
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        said = stderr(&out);
        if !said.contains("forbidden") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        said.contains("does not serve wgpolicyk8s.io/v1alpha2 clusterpolicyreports: install the PolicyReport CRDs"),
        "{said}"
    );
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
