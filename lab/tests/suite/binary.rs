//! The `gates-lab` binary: lists scenarios, refuses bad input with exit code 2, runs until
//! SIGTERM and leaves its files behind. It is started without `--subnet`, so it takes the
//! first free subnet from 127.77 on, as a user's `gates-lab` does; where it went is read from
//! the files it writes.

use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_gates-lab");

#[test]
fn lists_scenarios_and_rejects_unknown_ones() {
    let out = Command::new(BIN)
        .arg("--list-scenarios")
        .output()
        .expect("runs");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().any(|l| l == "adr-007") && text.lines().any(|l| l == "staging-today"),
        "{text}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(BIN)
        .args(["--scenario", "no-such", "--state-dir"])
        .arg(dir.path().join("s"))
        .arg("--write-env-dir")
        .arg(dir.path().join("e"))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown scenario"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[cfg(unix)]
#[test]
fn runs_until_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    let mut child = Command::new(BIN)
        .args(["--scenario", "staging-today", "--speed", "5", "--state-dir"])
        .arg(&state)
        .arg("--write-env-dir")
        .arg(dir.path().join("env"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !dir.path().join("env/lab.yaml").exists() {
        assert!(
            Instant::now() < deadline,
            "the lab did not write its files in time"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(state.join("kubeconfig").exists() && state.join("talosconfig").exists());
    let env: serde_json::Value = gates_lab::yaml::from_str(
        &std::fs::read_to_string(dir.path().join("env/lab.yaml")).expect("env"),
    )
    .expect("yaml");
    let vip: std::net::SocketAddr = env["api"]["endpoint"]
        .as_str()
        .and_then(|e| e.strip_prefix("https://"))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("the API endpoint in lab.yaml: {:?}", env["api"]));
    assert!(std::net::TcpStream::connect(vip).is_ok(), "API VIP listens");
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let exit = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(Instant::now() < deadline, "the lab did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success());
    assert!(state.join("ground-truth.json").exists());
}
