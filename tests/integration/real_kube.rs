//! Conformance against a real Kubernetes control plane: each lab scenario's objects are
//! loaded into a real kube-apiserver (real discovery, CRDs, RBAC, paging; the real
//! controller-manager computing workload and PDB status; kwok keeping nodes and pods alive),
//! and `gates check` there must give the verdicts it gives against the lab, and `gates
//! snapshot` an equivalent file. Talos and Proxmox still come from the lab. One control plane
//! serves every scenario in turn (emptied between them). Needs the binaries of
//! `tools/k8s/build.sh`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use gates_lab::{Lab, LabOptions};
use serde_json::Value;

use crate::control_plane::{self, ControlPlane, Identity, clear, load};
use crate::support::*;

/// The control plane of these tests listens on 127.140.9.1; the labs take 127.141.x.y
/// onwards, one subnet per scenario (the node-loss test has 127.155 and later).
const PLANE_SUBNET: u8 = 140;
const FIRST_LAB_SUBNET: u8 = 142;

async fn lab(scenario: &str, subnet: u8, dir: &Path) -> Lab {
    Lab::start(LabOptions {
        scenario: scenario.to_string(),
        subnet,
        speed: 1.0,
        state_dir: dir.to_path_buf(),
        env_dir: Some(dir.join("environments")),
        ..LabOptions::default()
    })
    .await
    .unwrap_or_else(|err| panic!("the lab starts on 127.{subnet}.x.y: {err}"))
}

/// Load environment `env` of the lab into the plane and wait until the real controllers and
/// kwok agree with the lab about every workload.
pub(crate) async fn load_env(plane: &ControlPlane, lab: &Lab, env: usize) {
    let objects = lab.shared.read(|w| gates_lab::export::manifests(w, env));
    let expected = load::expected_ready(&objects);
    load::load_manifests(plane, objects)
        .await
        .unwrap_or_else(|err| panic!("the lab's objects load: {err}"));
    load::wait_settled(plane, &expected, Duration::from_secs(90))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
}

/// A built-in scenario's world, built as a lab would build it (addresses on `FIRST_LAB_SUBNET`).
pub fn builtin_world(name: &str) -> gates_lab::world::World {
    let s = gates_lab::scenario::Scenario::load(name).expect("a built-in scenario");
    gates_lab::world::World::build(
        &s,
        gates_lab::addr::Plan::new(FIRST_LAB_SUBNET),
        gates_lab::clock::SimClock::new(1.0),
    )
    .expect("the world builds")
}

/// The scenario a built-in variant extends (`extends:`), if it is one.
pub fn base_of(scenario: &str) -> Option<String> {
    gates_lab::scenario::BUILTIN
        .iter()
        .find(|(name, _)| *name == scenario)
        .expect("a built-in scenario")
        .1
        .lines()
        .find_map(|l| l.strip_prefix("extends:"))
        .map(|b| b.trim().to_string())
}

/// The environments of a built-in scenario worth loading: all of a scenario of its own; of a
/// variant (`extends:`), those whose Kubernetes objects differ from the scenario it extends
/// (the others are compared with that scenario already).
fn environments_to_compare(scenario: &str) -> Vec<usize> {
    let variant = builtin_world(scenario);
    let all: Vec<usize> = (0..variant.envs.len()).collect();
    let Some(base) = base_of(scenario) else {
        return all;
    };
    let base = builtin_world(&base);
    let differ: Vec<usize> = all
        .into_iter()
        .filter(|&k| {
            k >= base.envs.len()
                || gates_lab::export::manifests(&variant, k)
                    != gates_lab::export::manifests(&base, k)
        })
        .collect();
    if differ.is_empty() { vec![0] } else { differ }
}

/// The environment files of the lab, rewritten so that Kubernetes is the real control plane
/// (as `identity`) and the API endpoint is the real API server; Talos and Proxmox stay the
/// lab's. `basis` replaces the capacity basis when given.
pub fn real_env_dir(
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

/// `gates --env-dir DIR ARGS...` in a blocking task.
async fn gates_run(env_dir: PathBuf, args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        let reports = tempfile::tempdir().unwrap();
        gates_with_config(reports.path())
            .arg("--env-dir")
            .arg(&env_dir)
            .args(&args)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

/// `gates check ENV --format json [EXTRA...]`, reports in a temporary directory.
async fn check_json(env_dir: PathBuf, env: &str, extra: &[&str]) -> Value {
    let reports = tempfile::tempdir().unwrap();
    let mut args = vec![
        "check".to_string(),
        env.to_string(),
        "--format".into(),
        "json".into(),
        "--reports".into(),
        reports.path().display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = gates_run(env_dir, args).await;
    serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
        panic!(
            "stdout is JSON ({err}):\n{}\n{}",
            stdout(&out),
            stderr(&out)
        )
    })
}

/// `gates snapshot ENV -o FILE`, the file parsed.
async fn snapshot(env_dir: PathBuf, env: &str, file: &Path) -> Value {
    let args = vec![
        "snapshot".to_string(),
        env.to_string(),
        "-o".into(),
        file.display().to_string(),
    ];
    let out = gates_run(env_dir, args).await;
    assert!(
        out.status.success(),
        "gates snapshot {env} writes {}:\n{}\n{}",
        file.display(),
        stdout(&out),
        stderr(&out)
    );
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
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

/// Objects a real API server makes for itself, which the lab does not serve: the
/// `kubernetes` Service and the API server's identity Lease. Kept out of the comparison of
/// snapshots, deliberately.
fn the_servers_own(kind: &str, namespace: &str, name: &str) -> bool {
    (kind == "Service" && namespace == "default" && name == "kubernetes")
        || (kind == "Lease" && namespace == "kube-system" && name.starts_with("apiserver-"))
}

/// What a snapshot holds, by `apiVersion kind`: the `namespace/name` of each object.
fn inventory(list: &Value) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for item in list["items"].as_array().expect("a List") {
        let kind = item["kind"].as_str().unwrap_or("");
        let namespace = item["metadata"]["namespace"].as_str().unwrap_or("");
        let name = item["metadata"]["name"].as_str().unwrap_or("");
        if the_servers_own(kind, namespace, name) {
            continue;
        }
        out.entry(format!(
            "{} {kind}",
            item["apiVersion"].as_str().unwrap_or("")
        ))
        .or_default()
        .insert(format!("{namespace}/{name}"));
    }
    out
}

/// The metrics kinds: served by the lab, absent on the real plane (no metrics-server).
fn without_metrics(
    mut inventory: BTreeMap<String, BTreeSet<String>>,
) -> BTreeMap<String, BTreeSet<String>> {
    inventory.retain(|k, _| !k.starts_with("metrics.k8s.io/"));
    inventory
}

/// `gates snapshot` of the real plane holds the same objects as that of the lab (less the
/// metrics the real plane does not serve, which it records as absent), and `gates check`
/// over each file gives the verdicts of the live runs.
async fn assert_equivalent_snapshots(
    lab_envs: &Path,
    real_envs: &Path,
    env: &str,
    live: &[(String, String)],
    dir: &Path,
    scenario: &str,
) {
    let lab_file = dir.join(format!("{scenario}-{env}-lab.json"));
    let real_file = dir.join(format!("{scenario}-{env}-real.json"));
    let on_lab = snapshot(lab_envs.to_path_buf(), env, &lab_file).await;
    let on_real = snapshot(real_envs.to_path_buf(), env, &real_file).await;
    assert_eq!(
        without_metrics(inventory(&on_real)),
        without_metrics(inventory(&on_lab)),
        "scenario {scenario}, environment {env}: the snapshots hold different objects"
    );
    let absent = on_real["metadata"]["annotations"]
        .as_object()
        .and_then(|a| a.iter().find(|(k, _)| k.ends_with("absent")))
        .map(|(_, v)| v.to_string())
        .unwrap_or_default();
    assert!(
        absent.contains("metrics.k8s.io"),
        "the real snapshot records the metrics API as absent: {absent}"
    );
    for (envs, file, side) in [
        (lab_envs, &lab_file, "lab"),
        (real_envs, &real_file, "real"),
    ] {
        let json = check_json(
            envs.to_path_buf(),
            env,
            &["--snapshot", &file.display().to_string()],
        )
        .await;
        assert_eq!(
            verdicts(&json),
            live,
            "scenario {scenario}, environment {env}: check over the {side} snapshot differs from the live check\n{json:#}"
        );
    }
}

/// One real control plane for both parts, the CRDs installed in between: first what gates
/// says when they, the metrics API or a permission are missing, then every lab scenario.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_control_plane_gives_the_labs_verdicts_and_names_what_is_missing() {
    let Some((_one, plane)) = control_plane::start_one(PLANE_SUBNET).await else {
        return;
    };
    missing_crds_metrics_and_permissions_give_errors_naming_the_fix(&plane).await;
    every_lab_scenario_gives_the_same_verdicts_and_snapshot_as_on_the_lab(&plane).await;
}

/// Without the Cilium and Longhorn CRDs, without a metrics API, and with a role that lacks
/// one resource, the real API server's answers become `error` verdicts that say what to fix.
async fn missing_crds_metrics_and_permissions_give_errors_naming_the_fix(plane: &ControlPlane) {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab("adr-007", FIRST_LAB_SUBNET - 1, dir.path()).await;
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
    load::load_manifests(plane, objects).await.unwrap();
    load::wait_settled(plane, &expected, Duration::from_secs(60))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    let env = lab.shared.read(|w| w.envs[1].name().to_string());

    let reader = real_env_dir(&lab, plane, Identity::Reader, dir.path(), None);
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
    let narrow = real_env_dir(&lab, plane, Identity::Narrow, dir.path(), Some("requests"));
    let json = check_json(narrow, &env, &[]).await;
    // The CRDs are still missing here: only the errors that speak of a permission count.
    let forbidden: Vec<&Value> = json["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["verdict"] == "error" && t.to_string().contains("forbidden"))
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
    clear::clear(plane, Duration::from_secs(60))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    lab.stop().await;
}

/// Every built-in lab scenario, one after another on one real control plane: for each
/// environment worth loading, `gates check` as the shipped read-only role gives the verdicts
/// it gives on the lab, no trial is an `error` (the role suffices), and `gates snapshot` of
/// both holds the same objects and checks the same offline. Capacity is judged on requests on
/// both sides: the real plane serves no metrics API (a test below shows the error that gives).
async fn every_lab_scenario_gives_the_same_verdicts_and_snapshot_as_on_the_lab(
    plane: &ControlPlane,
) {
    load::install_crds(plane)
        .await
        .unwrap_or_else(|err| panic!("the CRDs install: {err}"));
    for (i, (scenario, _)) in gates_lab::scenario::BUILTIN.iter().enumerate() {
        let subnet = FIRST_LAB_SUBNET + i as u8;
        let dir = tempfile::tempdir().unwrap();
        let lab = lab(scenario, subnet, dir.path()).await;
        let names: Vec<String> = lab
            .shared
            .read(|w| w.envs.iter().map(|e| e.name().to_string()).collect());
        let lab_envs = lab_env_dir(dir.path(), "requests");
        for k in environments_to_compare(scenario) {
            let env = &names[k];
            let started = std::time::Instant::now();
            load_env(plane, &lab, k).await;
            let real_envs =
                real_env_dir(&lab, plane, Identity::Reader, dir.path(), Some("requests"));
            let on_lab = check_json(lab_envs.clone(), env, &[]).await;
            let on_real = check_json(real_envs.clone(), env, &[]).await;
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
            assert_equivalent_snapshots(
                &lab_envs,
                &real_envs,
                env,
                &verdicts(&on_lab),
                dir.path(),
                scenario,
            )
            .await;
            clear::clear(plane, Duration::from_secs(60))
                .await
                .unwrap_or_else(|err| panic!("{err}"));
            eprintln!(
                "real control plane: {scenario} {env} agrees with the lab ({:.1} s)",
                started.elapsed().as_secs_f64()
            );
        }
        lab.stop().await;
    }
}
