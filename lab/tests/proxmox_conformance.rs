//! proxmoxer (a Python Proxmox client nobody here wrote) against the lab's Proxmox API
//! (issue 4 item 13). Needs a Python with proxmoxer: `GATES_TEST_PYTHON`, else the
//! workspace's `target/venv/bin/python` (made by `.ci/run`). Without either the test fails.
//! Subnet byte 239 is reserved for this test.

mod proxmox_support;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use gates_lab::proxmox::VmStatus;
use proxmox_support::{TOKEN_ID, TOKEN_SECRET, fast, start};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxmoxer_authenticates_lists_and_stops_and_starts_a_vm() {
    let python = python();
    let cluster = start(239, fast()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = cluster.write_ca(dir.path());
    let secret = dir.path().join("proxmox-token");
    std::fs::write(&secret, format!("{TOKEN_SECRET}\n")).expect("secret");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance/proxmoxer_conformance.py");

    let child = tokio::process::Command::new(&python)
        .arg(&script)
        .args(["--host", "127.239.0.2", "--port", "8006"])
        .arg("--ca")
        .arg(&ca)
        .args(["--token-id", TOKEN_ID])
        .arg("--secret-file")
        .arg(&secret)
        .args(["--vmid", "101"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    let output = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("proxmoxer script timed out")
        .expect("script output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "proxmoxer conformance failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains("proxmoxer conformance passed"), "{stdout}");
    assert!(!stdout.contains(TOKEN_SECRET) && !stderr.contains(TOKEN_SECRET));

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
