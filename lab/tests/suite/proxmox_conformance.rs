//! proxmoxer (a Python Proxmox client nobody here wrote) against the lab's Proxmox API
//! (issue 4 item 13): once over the in-memory backend, once over the full lab. Needs a Python
//! with proxmoxer: `GATES_TEST_PYTHON`, else the workspace's `target/venv/bin/python` (made by
//! `.ci/run`). Without either the tests fail. They look for a free subnet from 239 and 240 on.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use crate::proxmox_support::{TOKEN_ID, TOKEN_SECRET, fast, start};
use gates_lab::addr::SubnetChoice;
use gates_lab::proxmox::VmStatus;
use gates_lab::{Lab, LabOptions};

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("GATES_TEST_PYTHON") {
        return PathBuf::from(p);
    }
    let default = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/venv/bin/python");
    assert!(
        default.exists(),
        "no Python with proxmoxer: set GATES_TEST_PYTHON or create the venv with \
         `python3 -m venv target/venv && target/venv/bin/pip install proxmoxer requests` \
         (from the workspace root; .ci/run does this)"
    );
    default
}

/// Runs the conformance script; panics with its output when it fails.
async fn run_script(
    host: &str,
    ca: &Path,
    token_id: &str,
    secret_file: &Path,
    vmid: &str,
) -> String {
    let python = python();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance/proxmoxer_conformance.py");
    let child = tokio::process::Command::new(&python)
        .arg(&script)
        .args([
            "--host",
            host,
            "--port",
            "8006",
            "--token-id",
            token_id,
            "--vmid",
            vmid,
        ])
        .arg("--ca")
        .arg(ca)
        .arg("--secret-file")
        .arg(secret_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    let output: Output = tokio::time::timeout(Duration::from_secs(180), child.wait_with_output())
        .await
        .expect("proxmoxer script timed out")
        .expect("script output");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "proxmoxer conformance failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains("proxmoxer conformance passed"), "{stdout}");
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxmoxer_against_the_in_memory_cluster() {
    let cluster = start(239, fast()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = cluster.write_ca(dir.path());
    let secret = dir.path().join("proxmox-token");
    std::fs::write(&secret, format!("{TOKEN_SECRET}\n")).expect("secret");

    let host = cluster.host_ip(2).to_string();
    let stdout = run_script(&host, &ca, TOKEN_ID, &secret, "101").await;
    assert!(!stdout.contains(TOKEN_SECRET));

    // The server saw what the script claims, and the VM ended up running again.
    assert_eq!(
        cluster.backend.vm(101).expect("vm").status,
        VmStatus::Running
    );
    let records = cluster.records.lock().expect("records").clone();
    for path in [
        "/api2/json/nodes/pve1/qemu/101/status/stop",
        "/api2/json/nodes/pve1/qemu/101/status/start",
    ] {
        assert!(
            records
                .iter()
                .any(|r| r.verb == "POST" && r.path == path && r.status == 200),
            "{path} not served"
        );
    }
    assert!(
        records
            .iter()
            .any(|r| r.path.contains("/tasks/UPID:") && r.status == 200)
    );
    assert!(records.iter().any(|r| r.status == 401));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxmoxer_against_the_full_lab() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lab = Lab::start(LabOptions {
        subnet: 240,
        subnet_choice: SubnetChoice::FirstFree,
        speed: 10.0,
        state_dir: dir.path().to_path_buf(),
        env_dir: None,
        ..LabOptions::default()
    })
    .await
    .expect("lab starts");
    let stdout = run_script(
        &lab.plan.host_ip(0).to_string(),
        &lab.files.proxmox_ca,
        gates_lab::runner::PROXMOX_TOKEN_ID,
        &lab.files.proxmox_token,
        "auto",
    )
    .await;
    assert!(
        stdout.contains("ok: stop task exit status is OK"),
        "{stdout}"
    );
    println!("{stdout}");
}
