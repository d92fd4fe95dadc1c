//! Go clients nobody here wrote, against the lab: the official Talos client library
//! (`github.com/siderolabs/talos/pkg/machinery`, what talosctl uses) through
//! `tools/talos-check`, and go-proxmox through `tools/proxmox-check`. Each program is built
//! with `go build` into `target/go/` (Go's build cache keeps rebuilds quick); without Go the
//! tests fail and say so. Their labs look for a free subnet from 95..=99 on.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Builds `tools/<name>` once per test process; the binary's path.
fn built(name: &'static str) -> PathBuf {
    static TALOS: OnceLock<PathBuf> = OnceLock::new();
    static PROXMOX: OnceLock<PathBuf> = OnceLock::new();
    let cell = if name == "talos-check" {
        &TALOS
    } else {
        &PROXMOX
    };
    cell.get_or_init(|| {
        let out = workspace().join("target/go").join(name);
        let status = std::process::Command::new(std::env::var("GO").unwrap_or("go".into()))
            .current_dir(workspace().join("tools").join(name))
            .args(["build", "-o"])
            .arg(&out)
            .arg(".")
            .status()
            .unwrap_or_else(|e| {
                panic!("cannot run `go build` for tools/{name} ({e}): install Go (.ci/run has it)")
            });
        assert!(status.success(), "go build of tools/{name} failed");
        out
    })
    .clone()
}

async fn run(bin: &Path, args: &[String]) -> Vec<Value> {
    let child = tokio::process::Command::new(bin)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the Go program runs");
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("it finished in time")
        .expect("output");
    assert!(
        out.status.success(),
        "{} failed: {}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "JSON from {} ({e}): {}",
            bin.display(),
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn find<'a>(results: &'a [Value], call: &str) -> &'a Value {
    results
        .iter()
        .find(|r| r["call"] == call)
        .unwrap_or_else(|| panic!("no {call} in {results:?}"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

async fn talos_check(lab: &gates_lab::Lab, endpoint: &str, extra: &[&str]) -> Vec<Value> {
    let mut args: Vec<String> = vec![
        "-talosconfig".into(),
        lab.files.talosconfig.display().to_string(),
        "-context".into(),
        "lab".into(),
        "-endpoint".into(),
        endpoint.into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    run(&built("talos-check"), &args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_talos_go_client_reads_the_lab_and_gets_talos_errors_for_wrong_requests() {
    let (lab, _dir) = common::start("adr-007", 95, 1.0).await;
    let cp1 = lab.plan.node_ip(0).to_string();
    let results = talos_check(&lab, &cp1, &[]).await;
    for call in [
        "version",
        "etcd-members",
        "etcd-status",
        "services",
        "addresses",
    ] {
        assert_eq!(find(&results, call)["code"], "OK", "{results:#?}");
    }
    let members = strings(&find(&results, "etcd-members")["data"]);
    for cp in ["talos-lab-cp-01", "talos-lab-cp-02", "talos-lab-cp-03"] {
        assert!(members.iter().any(|m| m == cp), "{members:?}");
    }
    let addresses = strings(&find(&results, "addresses")["data"]);
    assert!(
        addresses.iter().any(|a| *a == format!("eth0/{cp1}/24")),
        "{addresses:?}"
    );
    let by_id = strings(&find(&results, "id-query")["data"]);
    assert!(
        !by_id.is_empty() && by_id.iter().all(|a| a.starts_with("eth0/")),
        "{by_id:?}"
    );
    assert!(
        !addresses.iter().all(|a| a.starts_with("eth0/")),
        "lo is listed too"
    );
    let unsupported = find(&results, "unsupported-type");
    assert_eq!(unsupported["code"], "PermissionDenied", "{unsupported}");
    assert_eq!(
        find(&results, "unsupported-namespace")["code"],
        "PermissionDenied"
    );
    let fanned = find(&results, "cosi-nodes");
    assert_eq!(fanned["code"], "InvalidArgument", "{fanned}");
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_talos_go_client_waits_out_its_deadline_on_a_powered_off_node() {
    let (lab, _dir) = common::start("adr-007", 96, 1.0).await;
    lab.shared.stop_vm(102).expect("stop talos-lab-cp-02");
    common::eventually(5, "apid of the stopped VM stalls", || async {
        common::stalls(lab.apid_addr(1)).await
    })
    .await;
    let results = talos_check(
        &lab,
        &lab.plan.node_ip(1).to_string(),
        &["-timeout", "1500ms", "-calls", "version"],
    )
    .await;
    let version = find(&results, "version");
    // Dropped packets: the call hangs until its deadline, it is never refused at once.
    assert_eq!(version["code"], "DeadlineExceeded", "{version}");
    assert!(version["millis"].as_i64().unwrap_or(0) >= 1400, "{version}");
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_proxmox_reads_status_permissions_and_tasks_a_stop_takes_seconds_and_a_dead_host_stalls()
{
    let (lab, _dir) = common::start("adr-007", 97, 1.0).await;
    let args = |calls: &str| -> Vec<String> {
        vec![
            "-url".into(),
            format!("{}/api2/json", lab.proxmox_url(0)),
            "-token-id".into(),
            gates_lab::runner::PROXMOX_TOKEN_ID.into(),
            "-secret-file".into(),
            lab.files.proxmox_token.display().to_string(),
            "-ca-file".into(),
            lab.files.proxmox_ca.display().to_string(),
            "-node".into(),
            "pve3".into(),
            "-vmid".into(),
            "103".into(),
            "-calls".into(),
            calls.into(),
        ]
    };
    let bin = built("proxmox-check");
    let results = run(
        &bin,
        &args("version,nodes,node-status,permissions,vm,stop,tasks"),
    )
    .await;
    for r in &results {
        assert!(r.get("error").is_none(), "{r}");
    }
    let status = &find(&results, "node-status")["data"];
    assert!(status["cpus"].as_i64().unwrap_or(0) > 0, "{status}");
    assert!(status["memory_total"].as_i64().unwrap_or(0) > 0, "{status}");
    let perms = &find(&results, "permissions")["data"]["/"];
    assert_eq!(perms["VM.PowerMgmt"], true, "{perms}");
    let vm = &find(&results, "vm")["data"];
    assert_eq!(vm["qmpstatus"], "running", "{vm}");
    // A hard stop takes a few seconds (3 s here), not an instant.
    let stop = &find(&results, "stop")["data"];
    assert_eq!(stop["exitstatus"], "OK", "{stop}");
    let seconds = stop["seconds"].as_f64().unwrap_or(0.0);
    assert!((2.5..10.0).contains(&seconds), "{stop}");
    let tasks = find(&results, "tasks")["data"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        tasks
            .iter()
            .any(|t| t["type"] == "qmstop" && t["id"] == "103" && t["status"] == "OK"),
        "{tasks:?}"
    );

    // A host that lost power keeps its last statistics in /nodes, offline.
    lab.shared
        .power_loss_host("pve5")
        .expect("power loss on pve5");
    common::eventually(10, "pve5 is offline", || async {
        lab.shared
            .read(|w| w.hosts.iter().any(|h| h.name == "pve5" && !h.online))
    })
    .await;
    let results = run(&bin, &args("nodes")).await;
    let nodes = find(&results, "nodes")["data"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let pve5 = nodes.iter().find(|n| n["node"] == "pve5").expect("pve5");
    assert_eq!(pve5["status"], "offline", "{pve5}");
    assert!(pve5["maxmem"].as_u64().unwrap_or(0) > 0, "{pve5}");
    assert_eq!(pve5["uptime"], 0, "{pve5}");

    // Its own address drops packets: the client's call runs into its deadline. The listener
    // follows the power state a moment after the world does; wait until connects hang.
    let addr: std::net::SocketAddr = lab
        .proxmox_url(4)
        .trim_start_matches("https://")
        .parse()
        .expect("pve5's address");
    common::eventually(
        10,
        "pve5's address stalls instead of refusing",
        || async move {
            tokio::task::spawn_blocking(move || {
                std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_millis(300))
                    .err()
                    .is_some_and(|e| e.kind() == std::io::ErrorKind::TimedOut)
            })
            .await
            .unwrap_or(false)
        },
    )
    .await;
    let mut dead = args("version");
    dead[1] = format!("{}/api2/json", lab.proxmox_url(4));
    dead.extend(["-timeout".to_string(), "1s".to_string()]);
    let results = run(&bin, &dead).await;
    let version = find(&results, "version");
    assert!(
        version["error"]
            .as_str()
            .is_some_and(|e| e.contains("deadline exceeded")),
        "{version}"
    );
    assert!(version["millis"].as_i64().unwrap_or(0) >= 900, "{version}");
    lab.stop().await;
}
