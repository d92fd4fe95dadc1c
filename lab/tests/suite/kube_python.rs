//! The official Python Kubernetes client (`kubernetes`, nobody here wrote it) against the
//! lab: list consistency errors and a compacted watch, pod IPs in podCIDRs, discovery of
//! what is served, evictions refused by a PDB, and Events. Needs a Python with the client:
//! `GATES_TEST_PYTHON`, else the workspace's `target/venv/bin/python` (made by `.ci/run`);
//! without either the tests fail. Their labs look for a free subnet from 90..=94 on.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use gates_lab::addr::SubnetChoice;
use gates_lab::{Lab, LabOptions};

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("GATES_TEST_PYTHON") {
        return PathBuf::from(p);
    }
    let default = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/venv/bin/python");
    assert!(
        default.exists(),
        "no Python with the kubernetes client: set GATES_TEST_PYTHON or run \
         `python3 -m venv target/venv && target/venv/bin/pip install kubernetes` \
         (from the workspace root; .ci/run does this)"
    );
    default
}

/// Runs one check of the conformance script; panics with its output when it fails.
async fn check(kubeconfig: &Path, context: &str, check: &str, extra: &[&str]) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance/kube_python_conformance.py");
    let child = tokio::process::Command::new(python())
        .arg(&script)
        .arg(check)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--context", context])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python runs");
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("the check finished in time")
        .expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{check} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// adr-007 with a short watch history, so early revisions are compacted away; on the first
/// free subnet from 127.`from`.x.y on.
async fn lab_with_history(from: u8, history: usize, dir: &Path) -> Lab {
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/lab/adr-007.yaml"),
    )
    .expect("the adr-007 scenario");
    let scenario = dir.join("short-history.yaml");
    std::fs::write(&scenario, format!("{text}\nwatch_history: {history}\n")).expect("write");
    Lab::start(LabOptions {
        scenario: scenario.display().to_string(),
        subnet: from,
        subnet_choice: SubnetChoice::FirstFree,
        speed: 20.0,
        state_dir: dir.join("state"),
        env_dir: None,
        ..LabOptions::default()
    })
    .await
    .expect("the lab starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_gets_the_api_servers_errors_for_list_consistency_and_compacted_watches()
{
    let dir = tempfile::tempdir().expect("tempdir");
    let lab = lab_with_history(90, 50, dir.path()).await;
    let out = check(&lab.files.kubeconfig, "lab", "consistency", &[]).await;
    assert!(
        out.contains("ok: an Exact list at a compacted revision is 410 Gone"),
        "{out}"
    );
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_ips_lie_in_their_nodes_pod_cidr_and_discovery_lists_only_what_is_served() {
    let (lab, _dir) = common::start("adr-007", 91, 20.0).await;
    check(&lab.files.kubeconfig, "lab", "cidrs", &[]).await;
    let out = check(&lab.files.kubeconfig, "lab", "discovery", &[]).await;
    assert!(out.contains("discovered lists answer 200"), "{out}");
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eviction_the_pdb_forbids_is_429_and_an_allowed_one_replaces_the_pod() {
    // Real time: the replacement takes pod_start (5 s) to become Ready, longer than the
    // client takes between the two evictions.
    let (lab, _dir) = common::start("adr-007", 92, 1.0).await;
    let coredns: Vec<String> = lab.shared.read(|w| {
        w.envs[0]
            .pods
            .keys()
            .filter(|(ns, name)| ns == "kube-system" && name.starts_with("coredns-"))
            .map(|(_, name)| name.clone())
            .collect()
    });
    assert_eq!(coredns.len(), 2, "{coredns:?}");
    let kc = &lab.files.kubeconfig;
    // maxUnavailable 1: the first may go, the second then would break the budget.
    check(
        kc,
        "lab",
        "evict",
        &[
            "--namespace",
            "kube-system",
            "--pod",
            &coredns[0],
            "--expect",
            "201",
            "--pod",
            &coredns[1],
            "--expect",
            "429",
        ],
    )
    .await;
    // The evicted pod leaves; its Deployment makes a replacement that becomes Ready.
    common::eventually(20, "coredns has two ready pods again", || async {
        lab.shared.read(|w| {
            let pods: Vec<_> = w.envs[0]
                .pods
                .iter()
                .filter(|((ns, name), _)| ns == "kube-system" && name.starts_with("coredns-"))
                .collect();
            pods.len() == 2
                && !pods.iter().any(|((_, name), _)| *name == coredns[0])
                && pods.iter().all(|(_, p)| p.api_ready)
        })
    })
    .await;
    // With both Ready, the budget allows one disruption again.
    check(
        kc,
        "lab",
        "evict",
        &[
            "--namespace",
            "kube-system",
            "--pod",
            &coredns[1],
            "--expect",
            "201",
        ],
    )
    .await;
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_goes_not_ready_is_reported_as_a_kubernetes_event() {
    let (lab, _dir) = common::start("adr-007", 93, 20.0).await;
    let vmid = lab.shared.read(|w| {
        let n = w.node_by_name("talos-lab-cp-02").expect("node");
        w.nodes[n].vmid
    });
    lab.shared.stop_vm(vmid).expect("stop");
    // node-monitor-grace 40 s simulated: 2 s at speed 20.
    common::eventually(10, "the node is NotReady", || async {
        lab.shared.read(|w| {
            w.node_by_name("talos-lab-cp-02")
                .is_some_and(|n| !w.nodes[n].ready)
        })
    })
    .await;
    check(
        &lab.files.kubeconfig,
        "lab",
        "events",
        &["--node", "talos-lab-cp-02"],
    )
    .await;
    lab.stop().await;
}
