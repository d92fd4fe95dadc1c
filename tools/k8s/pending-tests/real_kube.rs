//! Conformance against a real Kubernetes control plane: each lab scenario's objects are
//! loaded into a real kube-apiserver (real discovery, CRDs, RBAC, paging; the real
//! controller-manager computing workload and PDB status; kwok keeping nodes and pods alive),
//! and `gates check` there must give the verdicts it gives against the lab. Talos and Proxmox
//! still come from the lab. Needs the binaries of `tools/k8s/build.sh`.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use gates_lab::{Lab, LabOptions};
use serde_json::Value;

use crate::control_plane::{self, ControlPlane, Identity, Timing, load};
use crate::support::*;

/// Subnets 140..=159 belong to these tests.
async fn lab(scenario: &str, subnet: u8, dir: &Path) -> Lab {
    Lab::start(LabOptions {
        scenario: scenario.to_string(),
        generate_nodes: None,
        pods_per_node: None,
        subnet,
        speed: 1.0,
        state_dir: dir.to_path_buf(),
        env_dir: Some(dir.join("environments")),
    })
    .await
    .unwrap_or_else(|err| panic!("the lab starts on 127.{subnet}.x.y: {err}"))
}

/// A real control plane holding environment `env` of the lab, settled.
async fn plane_with(lab: &Lab, env: usize, bin: &Path, subnet: u8) -> ControlPlane {
    let plane = ControlPlane::start(bin, subnet, Timing::default())
        .await
        .unwrap_or_else(|err| panic!("the real control plane starts: {err}"));
    load::install_crds(&plane)
        .await
        .unwrap_or_else(|err| panic!("the CRDs install: {err}"));
    let objects = lab.shared.read(|w| gates_lab::export::manifests(w, env));
    let expected = load::expected_ready(&objects);
    load::load_manifests(&plane, objects)
        .await
        .unwrap_or_else(|err| panic!("the lab's objects load: {err}"));
    load::wait_settled(&plane, &expected, Duration::from_secs(60))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    plane
}

/// The environment files of the lab, rewritten so that Kubernetes is the real control plane
/// (as `identity`) and the API endpoint is the real API server; Talos and Proxmox stay the
/// lab's. `basis` replaces the capacity basis when given.
fn real_env_dir(
    lab: &Lab,
    plane: &ControlPlane,
    identity: Identity,
    dir: &Path,
    basis: Option<&str>,
) -> PathBuf {
    let out = dir.join(format!("real-{}", identity.user()));
    std::fs::create_dir_all(&out).unwrap();
    let names: Vec<String> = lab
        .shared
        .read(|w| w.envs.iter().map(|e| e.name().to_string()).collect());
    for (k, name) in names.iter().enumerate() {
        let kubeconfig = out.join(format!("{name}.kubeconfig"));
        std::fs::write(&kubeconfig, plane.kubeconfig_text(identity, name)).unwrap();
        let text =
            std::fs::read_to_string(dir.join("environments").join(format!("{name}.yaml"))).unwrap();
        let lab_kubeconfig = lab.files.kubeconfig.display().to_string();
        let mut text = text
            .replace(&lab_kubeconfig, &kubeconfig.display().to_string())
            .replace(&lab.api_url(k), &plane.url());
        if let Some(basis) = basis {
            text = text.replace("basis: usage", &format!("basis: {basis}"));
        }
        std::fs::write(out.join(format!("{name}.yaml")), text).unwrap();
    }
    out
}

/// The lab's own environment files with another capacity basis.
fn lab_env_dir(dir: &Path, basis: &str) -> PathBuf {
    let out = dir.join(format!("lab-{basis}"));
    std::fs::create_dir_all(&out).unwrap();
    for entry in std::fs::read_dir(dir.join("environments")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let text = text.replace("basis: usage", &format!("basis: {basis}"));
        std::fs::write(out.join(path.file_name().unwrap()), text).unwrap();
    }
    out
}

/// `gates --env-dir DIR ARGS...` in a blocking task, reports in a temporary directory.
async fn gates_in(env_dir: PathBuf, args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        let reports = tempfile::tempdir().unwrap();
        gates_with_config(reports.path())
            .arg("--env-dir")
            .arg(&env_dir)
            .args(&args)
            .arg("--reports")
            .arg(reports.path())
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

async fn check_json(env_dir: PathBuf, env: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "check".to_string(),
        env.to_string(),
        "--format".into(),
        "json".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = gates_in(env_dir, args).await;
    serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
        panic!(
            "stdout is JSON ({err}):\n{}\n{}",
            stdout(&out),
            stderr(&out)
        )
    })
}

/// Every trial's name and verdict, sorted.
fn verdicts(json: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = json["trials"]
        .as_array()
        .expect("trials")
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or("").to_string(),
                t["verdict"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

fn trial<'a>(json: &'a Value, name: &str) -> &'a Value {
    json["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no trial {name} in {json:#}"))
}

/// For each environment of `scenario`: load it into a fresh real control plane and compare
/// `gates check` there, as the shipped read-only role, with `gates check` against the lab.
/// Capacity is judged on requests on both sides: the real plane serves no metrics API (a
/// test below shows the error that gives).
async fn same_verdicts_as_the_lab(scenario: &str, subnet: u8) {
    let Some(bin) = control_plane::binaries() else {
        return;
    };
    let _one = control_plane::ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let lab = lab(scenario, subnet, dir.path()).await;
    let envs: Vec<String> = lab
        .shared
        .read(|w| w.envs.iter().map(|e| e.name().to_string()).collect());
    let lab_envs = lab_env_dir(dir.path(), "requests");
    for (k, env) in envs.iter().enumerate() {
        let plane = plane_with(&lab, k, &bin, subnet).await;
        let real_envs = real_env_dir(&lab, &plane, Identity::Reader, dir.path(), Some("requests"));
        let on_lab = check_json(lab_envs.clone(), env, &[]).await;
        let on_real = check_json(real_envs, env, &[]).await;
        assert_eq!(
            verdicts(&on_real),
            verdicts(&on_lab),
            "scenario {scenario}, environment {env}: verdicts differ between the real control plane and the lab\nreal: {on_real:#}\nlab: {on_lab:#}"
        );
        let errors: Vec<_> = verdicts(&on_real)
            .into_iter()
            .filter(|(_, v)| v == "error")
            .collect();
        assert!(
            errors.is_empty(),
            "the read-only role lets every trial evaluate: {errors:?}\n{on_real:#}"
        );
        drop(plane);
    }
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adr_007_gives_the_same_verdicts_on_a_real_control_plane_as_on_the_lab() {
    same_verdicts_as_the_lab("adr-007", 140).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staging_today_gives_the_same_verdicts_on_a_real_control_plane_as_on_the_lab() {
    same_verdicts_as_the_lab("staging-today", 141).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_host_gives_the_same_verdicts_on_a_real_control_plane_as_on_the_lab() {
    same_verdicts_as_the_lab("adr-007-shared-host", 142).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_l2_policy_excluding_control_planes_gives_the_same_verdicts_on_a_real_control_plane() {
    same_verdicts_as_the_lab("adr-007-l2-excludes-control-planes", 143).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_replica_gives_the_same_verdicts_on_a_real_control_plane_as_on_the_lab() {
    same_verdicts_as_the_lab("adr-007-single-replica", 144).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdb_selecting_nothing_gives_the_same_verdicts_on_a_real_control_plane() {
    same_verdicts_as_the_lab("adr-007-pdb-selects-nothing", 145).await;
}

/// Without the Cilium and Longhorn CRDs, without a metrics API, and with a role that lacks
/// one resource, the real API server's answers become `error` verdicts that say what to fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_crds_metrics_and_permissions_on_a_real_control_plane_give_errors_naming_the_fix() {
    let Some(bin) = control_plane::binaries() else {
        return;
    };
    let _one = control_plane::ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let lab = lab("adr-007", 146, dir.path()).await;
    let plane = ControlPlane::start(&bin, 146, Timing::default())
        .await
        .unwrap_or_else(|err| panic!("the real control plane starts: {err}"));
    // Production's objects without the custom resources, and no CRDs installed.
    let objects: Vec<Value> = lab
        .shared
        .read(|w| gates_lab::export::manifests(w, 1))
        .into_iter()
        .filter(|o| {
            let v = o["apiVersion"].as_str().unwrap_or("");
            !v.starts_with("cilium.io/") && !v.starts_with("longhorn.io/")
        })
        .collect();
    let expected = load::expected_ready(&objects);
    load::load_manifests(&plane, objects).await.unwrap();
    load::wait_settled(&plane, &expected, Duration::from_secs(60))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    let env = lab.shared.read(|w| w.envs[1].name().to_string());

    let reader = real_env_dir(&lab, &plane, Identity::Reader, dir.path(), None);
    let json = check_json(reader, &env, &[]).await;
    let l2 = trial(&json, &format!("gate3::{env}::l2-announcement"));
    assert_eq!(l2["verdict"], "error", "{l2:#}");
    assert!(
        l2.to_string()
            .contains("ciliuml2announcementpolicies.cilium.io")
            && l2.to_string().contains("is Cilium installed"),
        "{l2:#}"
    );
    let disks = trial(&json, &format!("gate5::{env}::longhorn-disks"));
    assert_eq!(disks["verdict"], "error", "{disks:#}");
    assert!(
        disks.to_string().contains("is Longhorn installed?"),
        "{disks:#}"
    );
    let capacity = trial(&json, &format!("gate5::{env}::capacity-headroom"));
    assert_eq!(capacity["verdict"], "error", "{capacity:#}");
    assert!(
        capacity.to_string().contains("install metrics-server"),
        "{capacity:#}"
    );

    // The narrow identity may not list Nodes: the real server's 403 names the verb and the
    // resource, and gates passes it on.
    let narrow = real_env_dir(&lab, &plane, Identity::Narrow, dir.path(), Some("requests"));
    let json = check_json(narrow, &env, &[]).await;
    let forbidden: Vec<&Value> = json["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["verdict"] == "error")
        .collect();
    assert!(!forbidden.is_empty(), "{json:#}");
    let text = forbidden[0].to_string();
    for words in [
        "forbidden",
        "cannot list resource \\\"nodes\\\"",
        "gates-narrow",
    ] {
        assert!(text.contains(words), "`{words}` not in {text}");
    }
    drop(plane);
    lab.stop().await;
}
