//! `gates check ENV --repo PATH`: the gates evaluated on a GitOps repository, with no
//! cluster (a pull request), beside a snapshot, and against the lab (drift).

use std::path::Path;

use gates_lab::{Lab, LabOptions};
use serde_json::Value;

use crate::support::*;

fn repo(name: &str) -> String {
    root()
        .join("fixtures/repo")
        .join(name)
        .display()
        .to_string()
}

/// `gates check ENV --repo REPO EXTRA...` with reports in a temporary directory.
fn check_repo(env: &str, name: &str, extra: &[&str]) -> std::process::Output {
    let reports = tempfile::tempdir().unwrap();
    gates_with_config(reports.path())
        .args(["check", env, "--reports"])
        .arg(reports.path())
        .arg("--repo")
        .arg(repo(name))
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn staging_today_fails_gates_1_3_and_5_in_the_repository_naming_the_lines_the_adr_cites() {
    let out = check_repo("staging", "staging-today", &["::repo::"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}\n{}", stderr(&out));
    for name in [
        "gate1::staging::repo::control-plane-nodes",
        "gate1::staging::repo::distinct-hosts",
        "gate1::staging::repo::schedulable-control-plane",
        "gate3::staging::repo::l2-announcement",
        "gate3::production::repo::external-traffic-policy",
        "gate5::production::repo::longhorn-disks",
    ] {
        assert_trial(&text, name, "FAILED");
    }
    // Staging overrides the shared Local with Cluster; production inherits Local.
    assert_trial(&text, "gate3::staging::repo::external-traffic-policy", "ok");
    for cited in [
        "kubernetes/infrastructure/controllers/traefik/release.yaml:78: traefik/traefik spec.values.service.spec.externalTrafficPolicy: Local (set here; in effect for production)",
        "leave out talos-test-cp-01 (policy ingress-address (kubernetes/infrastructure/staging/network/ingress-address.yaml:19: spec.nodeSelector) requires kubernetes.io/hostname=talos-test-worker-01)",
        "terraform/variables_talos.tf:56: var.longhorn_node_roles default: [worker] leaves out talos-prod-cp-01, talos-prod-cp-02, talos-prod-cp-03",
        "terraform/modules/talos_vms/variables.tf:134: module.talos_vms.var.longhorn_roles default: [worker] leaves out",
    ] {
        assert!(text.contains(cited), "missing `{cited}` in:\n{text}");
    }
    assert!(!text.contains("drift::"), "no cluster was read:\n{text}");
    // The JUnit report holds every trial, production's gate 5 included.
    let reports = tempfile::tempdir().unwrap();
    let junit = reports.path().join("repo.xml");
    let out = gates_with_config(reports.path())
        .args(["check", "staging", "::repo::", "--reports"])
        .arg(reports.path())
        .arg("--repo")
        .arg(repo("staging-today"))
        .arg("--junit")
        .arg(&junit)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    validate_junit(&junit);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("name=\"gate5::production::repo::longhorn-disks\""),
        "{xml}"
    );
    assert!(
        xml.contains("terraform/modules/talos_vms/variables.tf:134"),
        "{xml}"
    );
}

#[test]
fn the_adr_007_repository_passes_every_repository_trial() {
    let out = check_repo("staging", "adr-007", &["::repo::"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}\n{}", stderr(&out));
    for name in [
        "gate1::staging::repo::control-plane-nodes",
        "gate1::staging::repo::distinct-hosts",
        "gate1::staging::repo::schedulable-control-plane",
        "gate1::staging::repo::vip",
        "gate1::staging::repo::talos-endpoints",
        "gate2::staging::repo::replicated-controller::traefik",
        "gate3::staging::repo::l2-announcement",
        "gate3::production::repo::external-traffic-policy",
        "gate5::production::repo::longhorn-disks",
        "gate2::staging::repo::replicated-controller::longhorn-csi-attacher",
        // Every workload counted: manifests, Traefik's and Longhorn's values, and Longhorn's
        // instance managers.
        "gate5::production::repo::capacity-headroom",
    ] {
        assert_trial(&text, name, "ok");
    }
}

/// `gates check staging --repo staging-today --snapshot FILES... --format json`, parsed.
fn check_beside(snapshots: &[&str]) -> Value {
    let reports = tempfile::tempdir().unwrap();
    let mut cmd = gates_with_config(reports.path());
    cmd.args(["check", "staging", "--reports"])
        .arg(reports.path())
        .arg("--repo")
        .arg(repo("staging-today"));
    for file in snapshots {
        cmd.args(["--snapshot", &fixture(file)]);
    }
    let out = cmd.args(["--format", "json"]).output().unwrap();
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

fn trial_of(json: &Value, name: &str) -> Value {
    json["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {json:#}"))
        .clone()
}

#[test]
fn beside_a_snapshot_drift_names_the_live_and_the_declared_side() {
    // A live Service on Local against the staging overlay's declared Cluster.
    let json = check_beside(&["traefik-local.json"]);
    let etp = trial_of(&json, "gate3::staging::drift::external-traffic-policy");
    assert_eq!(etp["verdict"], "fail", "{etp:#}");
    let text = etp.to_string();
    assert!(
        text.contains("live: traefik/traefik externalTrafficPolicy: Local"),
        "{text}"
    );
    assert!(
        text.contains(
            "declared: Cluster at kubernetes/infrastructure/staging/traefik-values.yaml:12"
        ),
        "{text}"
    );
}

#[test]
fn beside_the_staging_today_snapshot_live_and_declared_agree_where_the_adr_says_they_do() {
    // The ADR: staging's Traefik Service already uses Cluster, as its overlay declares.
    let json = check_beside(&["staging-today.json", "staging-today-crds.json"]);
    let etp = trial_of(&json, "gate3::staging::drift::external-traffic-policy");
    assert_eq!(etp["verdict"], "pass", "{etp:#}");
    let cps = trial_of(&json, "gate1::staging::drift::control-plane-nodes");
    assert_eq!(
        cps["verdict"], "pass",
        "one control plane live and declared: {cps:#}"
    );
    // The live trials still run from the snapshot.
    assert_eq!(
        trial_of(&json, "gate3::staging::l2-announcement")["verdict"],
        "fail"
    );
}

#[test]
fn a_repository_that_does_not_exist_is_bad_input_naming_it() {
    let out = check_repo("staging", "no-such-repo", &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no-such-repo not found (from --repo)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn list_shows_repository_trials_only_with_a_repository() {
    let reports = tempfile::tempdir().unwrap();
    let without = gates_with_config(reports.path())
        .args(["check", "staging", "--list"])
        .output()
        .unwrap();
    assert!(!stdout(&without).contains("::repo::"));
    let with = check_repo("staging", "adr-007", &["--list"]);
    let text = stdout(&with);
    assert!(
        text.contains("gate5::production::repo::longhorn-disks: test"),
        "{text}"
    );
    assert!(
        text.contains("gate3::staging::drift::external-traffic-policy: test"),
        "{text}"
    );
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lab_on_the_adr_target_drifts_from_the_staging_today_repository() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab("adr-007", 117, dir.path()).await;
    let envs = dir.path().join("environments");
    let staging_today = repo("staging-today");
    let out = tokio::task::spawn_blocking(move || {
        let reports = tempfile::tempdir().unwrap();
        gates_with_config(reports.path())
            .arg("--env-dir")
            .arg(&envs)
            .args(["check", "lab", "drift::", "--format", "json", "--reports"])
            .arg(reports.path())
            .arg("--repo")
            .arg(&staging_today)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let vip_ip = lab.plan.vip_ip(0);
    lab.stop().await;
    let json: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("JSON ({e}): {}\n{}", stdout(&out), stderr(&out)));
    let trial = |name: &str| {
        json["trials"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {json:#}"))
            .clone()
    };
    let cps = trial("gate1::lab::drift::control-plane-nodes");
    assert_eq!(cps["verdict"], "fail", "{cps:#}");
    assert_eq!(cps["summary"], "live 3 control plane(s), declared 1");
    let l2 = trial("gate3::lab::drift::l2-announcement");
    assert_eq!(l2["verdict"], "fail", "{l2:#}");
    assert!(
        l2.to_string()
            .contains("kubernetes/infrastructure/staging/network/ingress-address.yaml:19"),
        "{l2:#}"
    );
    assert_eq!(
        trial("gate3::lab::drift::external-traffic-policy")["verdict"],
        "pass"
    );
    // The lab lives on 127.0.0.0/8, not at the repository's addresses: both address drift
    // trials say so, naming the live and the declared side.
    let vip = trial("gate1::lab::drift::vip");
    assert_eq!(
        vip["summary"],
        format!("the API endpoint stands for {vip_ip}, the repository declares the VIP 10.0.50.10")
    );
    let endpoints = trial("gate1::lab::drift::talos-endpoints");
    assert_eq!(endpoints["verdict"], "fail", "{endpoints:#}");
    assert!(
        endpoints
            .to_string()
            .contains("declared: terraform/environments/staging.tfvars:10: talos_client_configuration.endpoints: [10.0.50.11]"),
        "{endpoints:#}"
    );
    assert_eq!(out.status.code(), Some(1));
}

/// Every Kustomization directory of both fixture repositories.
fn kustomization_dirs(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    if dir.join("kustomization.yaml").is_file() {
        out.push(dir.to_path_buf());
    }
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            kustomization_dirs(&path, out);
        }
    }
}

fn sorted(mut objects: Vec<Value>) -> Vec<Value> {
    objects.sort_by_key(|o| {
        format!(
            "{}/{}/{}",
            o["kind"].as_str().unwrap_or_default(),
            o["metadata"]["namespace"].as_str().unwrap_or_default(),
            o["metadata"]["name"].as_str().unwrap_or_default()
        )
    });
    objects
}

/// gates renders Kustomize itself to keep lines; `kubectl kustomize` is the reference for
/// the values. An old kubectl whose Kustomize lacks a field the fixtures use (Debian's 1.20
/// has Kustomize v2) cannot judge that directory and says so on stderr.
#[test]
fn the_positional_kustomize_renders_the_fixtures_as_kubectl_kustomize_does() {
    let Ok(version) = std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .output()
    else {
        eprintln!("kubectl is not installed (.ci/run installs it); nothing to compare with");
        return;
    };
    let version = String::from_utf8_lossy(&version.stdout).into_owned();
    // `Kustomize Version: v5.5.0`; kubectl before 1.24 does not print it and embeds
    // Kustomize v2, which predates `patches`.
    let major = version
        .lines()
        .find_map(|l| l.strip_prefix("Kustomize Version: v"))
        .and_then(|v| v.split('.').next()?.parse::<u32>().ok());
    if major.is_none_or(|m| m < 4) {
        eprintln!(
            "kubectl's Kustomize is older than v4 ({}); nothing to compare with",
            version.trim()
        );
        return;
    }
    let mut dirs = Vec::new();
    for name in [
        "staging-today",
        "adr-007",
        "kustomize-constructs",
        "home-ops-style",
        "argocd-style",
    ] {
        let repo_root = root().join("fixtures/repo").join(name);
        let mut found = Vec::new();
        kustomization_dirs(&repo_root, &mut found);
        dirs.extend(found.into_iter().map(|d| (repo_root.clone(), d)));
    }
    assert!(dirs.len() >= 20, "{dirs:?}");
    let mut compared = 0;
    for (repo_root, dir) in dirs {
        let rel = dir.strip_prefix(&repo_root).unwrap().display().to_string();
        let out = std::process::Command::new("kubectl")
            .arg("kustomize")
            .arg(&dir)
            .output()
            .unwrap();
        if !out.status.success() {
            eprintln!(
                "kubectl kustomize {rel}: cannot judge: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            continue;
        }
        let expected: Vec<Value> =
            gates_core::yaml::documents(&String::from_utf8(out.stdout).unwrap()).unwrap();
        let ours =
            gates::repo::kustomize::render(&repo_root, &rel).unwrap_or_else(|e| panic!("{e}"));
        let ours: Vec<Value> = ours.objects.iter().map(|o| o.to_json()).collect();
        assert_eq!(sorted(ours), sorted(expected), "{rel}");
        compared += 1;
    }
    eprintln!("{compared} Kustomization directories render alike");
}
