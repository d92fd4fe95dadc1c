//! `gates guard` against the lab: steady at once, waiting while a control plane is down and
//! giving up at its timeout naming what is not steady, steady again once the VM is back,
//! and refusing to judge an environment without the Talos section.

use std::path::Path;
use std::process::Output;

use gates_lab::{Lab, LabOptions};

use crate::support::*;

async fn lab(dir: &Path) -> Lab {
    Lab::start(LabOptions {
        scenario: "adr-007".into(),
        // Where this test starts looking; a taken subnet moves it on.
        subnet: 120,
        speed: 10.0,
        state_dir: dir.to_path_buf(),
        env_dir: Some(dir.join("environments")),
        ..LabOptions::default()
    })
    .await
    .unwrap_or_else(|err| panic!("the lab starts: {err}"))
}

/// `gates --env-dir DIR guard lab ARGS...` in a blocking task.
async fn guard(envs: &Path, args: &[&str]) -> Output {
    let envs = envs.to_path_buf();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let reports = tempfile::tempdir().unwrap();
        gates_with_config(reports.path())
            .arg("--env-dir")
            .arg(&envs)
            .arg("guard")
            .args(&args)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_waits_while_a_control_plane_is_down_and_passes_once_it_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab(dir.path()).await;
    let envs = dir.path().join("environments");
    // A dead endpoint answers nothing: each read gives up after a few seconds.
    let file = envs.join("lab.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("deadline: 3s\n{text}")).unwrap();

    let out = guard(&envs, &["lab", "--timeout", "60s", "--interval", "1s"]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("lab is steady after"),
        "{}",
        stdout(&out)
    );

    let vmid = lab
        .shared
        .read(|w| w.nodes[w.node_by_name("talos-lab-cp-02").unwrap()].vmid);
    lab.shared.stop_vm(vmid).expect("stops");
    let out = guard(&envs, &["lab", "--timeout", "4s", "--interval", "1s"]).await;
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}\n{}", stderr(&out));
    assert!(text.contains("lab is not steady after"), "{text}");
    assert!(
        text.contains("etcd-members:"),
        "the silent member is named: {text}"
    );

    lab.shared.start_vm(vmid).expect("starts");
    let out = guard(&envs, &["lab", "--timeout", "120s", "--interval", "1s"]).await;
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}\n{}", stderr(&out));
    assert!(text.contains("waiting for lab:"), "it waited first: {text}");
    assert!(text.contains("lab is steady after"), "{text}");

    // Without the Talos section there is nothing to judge etcd by: exit 2 at once.
    let text = std::fs::read_to_string(&file).unwrap();
    let mut in_talos = false;
    let without: Vec<&str> = text
        .lines()
        .filter(|l| {
            if !l.starts_with(' ') {
                in_talos = *l == "talos:";
            }
            !in_talos
        })
        .collect();
    assert!(
        without.len() < text.lines().count(),
        "the lab writes a talos section"
    );
    std::fs::write(&file, without.join("\n") + "\n").unwrap();
    let out = guard(&envs, &["lab", "--timeout", "60s"]).await;
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("cannot judge lab"),
        "{}",
        stderr(&out)
    );
    lab.stop().await;
}
