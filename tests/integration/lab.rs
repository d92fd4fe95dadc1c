//! `gates check` against the lab, over the lab's real HTTPS, gRPC and mTLS: every static
//! gate on the ADR's target, the expected failures on staging today, read-only behaviour
//! proven by the lab's request log, and error verdicts for bad credentials.

use std::path::{Path, PathBuf};
use std::process::Output;

use gates_lab::{Lab, LabOptions};
use serde_json::Value;

use crate::support::*;

/// Subnets 100..=119 are where these tests start looking (each test its own, so they run in
/// parallel); a lab moves to the next free subnet when its own is taken (a user's `gates lab`
/// or a second test run beside this one).
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

/// `gates --env-dir <lab envs> check ENV --format json` in a blocking task.
async fn check_json(env_dir: PathBuf, env: &str, extra: &[&str]) -> (Output, Value) {
    let env = env.to_string();
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let out = tokio::task::spawn_blocking(move || {
        let reports = tempfile::tempdir().unwrap();
        gates_with_config(reports.path())
            .arg("--env-dir")
            .arg(&env_dir)
            .args(["check", &env, "--format", "json", "--reports"])
            .arg(reports.path())
            .args(&extra)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
        panic!(
            "stdout is JSON ({err}):\n{}\n{}",
            stdout(&out),
            stderr(&out)
        )
    });
    (out, json)
}

fn trial<'a>(json: &'a Value, name: &str) -> &'a Value {
    json["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no trial {name} in {json:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_static_gate_passes_on_the_adr_target_and_check_only_reads() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab("adr-007", 100, dir.path()).await;
    let envs = dir.path().join("environments");
    let junit = dir.path().join("lab.xml");
    let (out, json) = check_json(envs.clone(), "lab", &["--junit", junit.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "{json:#}");
    // The JUnit names the cluster its verdicts are about, every part read live.
    validate_junit(&junit);
    let xml = std::fs::read_to_string(&junit).unwrap();
    for (name, part) in [
        ("provenance.kube_system_uid", "kube_system_uid"),
        ("provenance.api_ca_sha256", "api_ca_sha256"),
    ] {
        let want = json["provenance"]["cluster"][part]
            .as_str()
            .unwrap_or_else(|| panic!("the JSON report has {part}: {:#}", json["provenance"]));
        assert!(
            xml.contains(&format!("<property name=\"{name}\" value=\"{want}\"/>")),
            "{name} {want} in\n{xml}"
        );
    }
    let members = json["provenance"]["cluster"]["etcd_members"]
        .as_array()
        .unwrap();
    assert_eq!(members.len(), 3, "{:#}", json["provenance"]);
    let digest = json["provenance"]["topology"]["digest"].as_str().unwrap();
    assert!(
        xml.contains(&format!(
            "<property name=\"provenance.topology_digest\" value=\"{digest}\"/>"
        )),
        "{xml}"
    );
    for name in [
        "gate1::lab::etcd-members",
        "gate1::lab::talos-endpoints",
        "gate1::lab::api-endpoint",
        "gate1::lab::distinct-hosts",
        "gate1::lab::failure-domains",
        "gate2::lab::replicated-controller::traefik",
        "gate3::lab::l2-announcement",
    ] {
        assert_eq!(
            trial(&json, name)["verdict"],
            "pass",
            "{:#}",
            trial(&json, name)
        );
    }
    assert!(
        trial(&json, "gate1::lab::distinct-hosts")["summary"]
            .as_str()
            .unwrap()
            .contains("as Proxmox confirms")
    );
    // The CSI attacher is protected by the PDB longhorn-manager makes while a volume is
    // attached, and the instance managers' PDBs, which never allow a disruption, are no
    // controller's.
    let attacher = trial(
        &json,
        "gate2::lab::replicated-controller::longhorn-csi-attacher",
    );
    assert_eq!(attacher["verdict"], "pass", "{attacher:#}");
    assert!(
        attacher.to_string().contains("managed by Longhorn"),
        "{attacher:#}"
    );
    let gate2: Vec<&Value> = json["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"].as_str().unwrap_or("").starts_with("gate2::"))
        .collect();
    assert!(
        gate2
            .iter()
            .all(|t| !t.to_string().contains("instance-manager")),
        "{gate2:#?}"
    );
    // The VIP's holder is read from the Talos addresses and named as the lab has it.
    let holder = lab
        .shared
        .read(|w| w.envs[0].vip_holder.map(|h| w.nodes[h].name.clone()))
        .expect("the lab's VIP has a holder");
    let api = trial(&json, "gate1::lab::api-endpoint").to_string();
    assert!(
        api.contains(&format!("the VIP is held by {holder} (")),
        "{api}"
    );
    let (out, json) = check_json(envs, "lab-production", &[]).await;
    assert_eq!(out.status.code(), Some(0), "{json:#}");
    assert_eq!(
        trial(&json, "gate5::lab-production::capacity-headroom")["verdict"],
        "pass"
    );
    // Production keeps the label Talos puts on control planes for other load balancers to
    // leave out: Cilium's announcer does not read it, so it is a warning, not a failure.
    let l2 = trial(&json, "gate3::lab-production::l2-announcement");
    assert_eq!(l2["verdict"], "pass", "{l2:#}");
    assert!(
        l2.to_string()
            .contains("node.kubernetes.io/exclude-from-external-load-balancers"),
        "{l2:#}"
    );

    // Every request the two runs made was a read, on every protocol.
    let requests = lab.log.snapshot();
    assert!(
        requests.len() > 20,
        "the runs reached the lab: {requests:?}"
    );
    let writes: Vec<_> = requests.iter().filter(|r| !r.read_only).collect();
    assert!(writes.is_empty(), "gates check wrote: {writes:#?}");
    let protocols: std::collections::BTreeSet<String> = requests
        .iter()
        .map(|r| format!("{:?}", r.protocol))
        .collect();
    for protocol in ["Kube", "Proxmox", "Talos"] {
        assert!(
            protocols.contains(protocol),
            "no {protocol} request in {protocols:?}"
        );
    }
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_switch_and_a_shared_datastore_fail_the_failure_domains_of_gates_1_and_5() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab("adr-007-shared-failure-domains", 107, dir.path()).await;
    let envs = dir.path().join("environments");
    // The switch comes from the environment file the lab writes, as an operator declares it.
    let written = std::fs::read_to_string(envs.join("lab.yaml")).unwrap();
    assert!(written.contains("\"pve2\": {switch: \"sw-a\""), "{written}");
    let (_, json) = check_json(envs.clone(), "lab", &[]).await;
    let staging = trial(&json, "gate1::lab::failure-domains");
    assert_eq!(staging["verdict"], "fail", "{staging:#}");
    assert_eq!(
        staging["summary"],
        "switch sw-a carries 2 of the 3 control planes (talos-lab-cp-01 on pve1, talos-lab-cp-02 on pve2): losing it loses etcd quorum"
    );
    // The disks come from Proxmox: the VM configs and /storage, which says rbd is shared.
    let (_, json) = check_json(envs, "lab-production", &[]).await;
    let production = trial(&json, "gate5::lab-production::failure-domains");
    assert_eq!(production["verdict"], "fail", "{production:#}");
    assert!(
        production["summary"]
            .as_str()
            .unwrap()
            .starts_with("shared datastore ceph-vm carries 2 of the 3 control planes (talos-prod-cp-01 on pve3, talos-prod-cp-02 on pve4)"),
        "{production:#}"
    );
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staging_today_in_the_lab_shows_the_open_items() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab("staging-today", 101, dir.path()).await;
    let (out, json) = check_json(dir.path().join("environments"), "lab", &[]).await;
    assert_eq!(out.status.code(), Some(1), "{json:#}");
    for name in [
        "gate1::lab::control-plane-nodes",
        "gate1::lab::etcd-members",
        "gate3::lab::l2-announcement",
        "gate2::lab::replicated-controller::traefik",
    ] {
        assert_eq!(
            trial(&json, name)["verdict"],
            "fail",
            "{:#}",
            trial(&json, name)
        );
    }
    // As in the snapshot of staging today: Traefik's Service already uses Cluster.
    assert_eq!(
        trial(&json, "gate3::lab::external-traffic-policy")["verdict"],
        "pass"
    );
    let l2 = trial(&json, "gate3::lab::l2-announcement").to_string();
    assert!(
        l2.contains("talos-test-cp-01"),
        "the node left out is named: {l2}"
    );
    // CoreDNS as Talos deploys it has no PDB; the message says how to give it one.
    let coredns = trial(&json, "gate2::lab::replicated-controller::coredns");
    assert_eq!(coredns["verdict"], "fail", "{coredns:#}");
    assert!(
        coredns
            .to_string()
            .contains("CoreDNS as Talos deploys it has no PodDisruptionBudget"),
        "{coredns:#}"
    );
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_proxmox_token_is_an_error_that_says_what_to_fix_and_stays_secret() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab("adr-007", 102, dir.path()).await;
    let token = dir.path().join("wrong-token");
    std::fs::write(&token, "00000000-0000-0000-0000-00000000beef\n").unwrap();
    let envs = dir.path().join("environments");
    let text = std::fs::read_to_string(envs.join("lab.yaml")).unwrap();
    let real = lab.files.proxmox_token.display().to_string();
    std::fs::write(
        envs.join("lab.yaml"),
        text.replace(&real, &token.display().to_string()),
    )
    .unwrap();
    let (out, json) = check_json(envs, "lab", &["host-sharing"]).await;
    assert_eq!(out.status.code(), Some(2), "{json:#}");
    let sharing = trial(&json, "gate1::lab::host-sharing");
    assert_eq!(sharing["verdict"], "error", "{sharing:#}");
    let summary = sharing["summary"].as_str().unwrap();
    assert!(
        summary.contains("401") || summary.to_lowercase().contains("auth"),
        "{summary}"
    );
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        !all.contains("beef"),
        "the token secret never appears: {all}"
    );
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_talosconfig_with_another_ca_gives_error_verdicts_naming_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab("adr-007", 103, dir.path()).await;
    // A second lab's talosconfig: valid credentials, but from another Talos CA.
    let other_dir = tempfile::tempdir().unwrap();
    let other = self::lab("adr-007", 104, other_dir.path()).await;
    let envs = dir.path().join("environments");
    let text = std::fs::read_to_string(envs.join("lab.yaml")).unwrap();
    let ours = lab.files.talosconfig.display().to_string();
    let theirs = other.files.talosconfig.display().to_string();
    std::fs::write(envs.join("lab.yaml"), text.replace(&ours, &theirs)).unwrap();
    let (out, json) = check_json(envs, "lab", &["etcd-members"]).await;
    assert_eq!(out.status.code(), Some(2), "{json:#}");
    let etcd = trial(&json, "gate1::lab::etcd-members");
    assert_eq!(etcd["verdict"], "error", "{etcd:#}");
    let body = etcd.to_string().to_lowercase();
    assert!(
        body.contains("ca") || body.contains("certificate"),
        "the reason names the certificate problem: {etcd:#}"
    );
    other.stop().await;
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_powered_off_control_plane_makes_etcd_an_error_naming_the_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab("adr-007", 105, dir.path()).await;
    let (vmid, node_ip) = lab.shared.read(|w| {
        let node = w
            .node_by_name("talos-lab-cp-02")
            .expect("the scenario has talos-lab-cp-02");
        (w.nodes[node].vmid, lab.plan.node_ip(node).to_string())
    });
    lab.shared.stop_vm(vmid).expect("the VM stops");
    let (out, json) = check_json(dir.path().join("environments"), "lab", &["etcd-members"]).await;
    // Not being able to ask a node is not a broken rule: error, never fail.
    assert_eq!(out.status.code(), Some(2), "{json:#}");
    assert_eq!(trial(&json, "gate1::lab::etcd-members")["verdict"], "error");
    let etcd = trial(&json, "gate1::lab::etcd-members").to_string();
    assert!(
        etcd.contains(&node_ip) && etcd.contains("did not answer"),
        "{etcd}"
    );
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_of_the_lab_gives_the_same_verdicts_offline() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab("staging-today", 106, dir.path()).await;
    let envs = dir.path().join("environments");
    let file = dir.path().join("snapshot.json");
    let (envs2, file2) = (envs.clone(), file.clone());
    let out = tokio::task::spawn_blocking(move || {
        let reports = tempfile::tempdir().unwrap();
        gates_with_config(reports.path())
            .arg("--env-dir")
            .arg(&envs2)
            .args(["snapshot", "lab", "-o"])
            .arg(&file2)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, live) = check_json(envs.clone(), "lab", &[]).await;
    lab.stop().await;
    // The lab is gone: the offline run reads only the file.
    let (_, offline) = check_json(envs, "lab", &["--snapshot", file.to_str().unwrap()]).await;
    let verdicts = |json: &Value| -> Vec<(String, String)> {
        json["trials"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["name"].as_str().unwrap().to_string(),
                    t["verdict"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(verdicts(&live), verdicts(&offline));
    assert!(
        verdicts(&offline).iter().any(|(_, v)| v == "fail"),
        "staging-today fails offline too"
    );
    // The Talos, API endpoint and Proxmox answers came from the file, not skipped.
    for name in [
        "gate1::lab::etcd-members",
        "gate1::lab::talos-endpoints",
        "gate1::lab::api-endpoint",
        "gate1::lab::host-sharing",
    ] {
        assert_ne!(
            trial(&offline, name)["verdict"],
            "skip",
            "{:#}",
            trial(&offline, name)
        );
    }
    // No credential of the lab is in the file.
    let text = std::fs::read_to_string(&file).unwrap();
    for secret in ["proxmox-token", "proxmox-audit-token"] {
        let value = std::fs::read_to_string(dir.path().join(secret)).unwrap();
        assert!(
            !text.contains(value.trim()),
            "{secret} leaked into the snapshot"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lab_whose_subnet_is_taken_moves_to_a_free_one_and_checks_there_unless_told_exactly() {
    let first_dir = tempfile::tempdir().unwrap();
    let first = lab("adr-007", 118, first_dir.path()).await;
    let dir = tempfile::tempdir().unwrap();
    let moved = lab("adr-007", first.plan.subnet, dir.path()).await;
    assert_ne!(moved.plan.subnet, first.plan.subnet, "the newcomer moves");
    // The environment files point at the subnet the lab got, so checks reach it there.
    let (out, json) = check_json(dir.path().join("environments"), "lab", &["distinct-hosts"]).await;
    assert_eq!(out.status.code(), Some(0), "{json:#}");
    let env = std::fs::read_to_string(dir.path().join("environments/lab.yaml")).unwrap();
    assert!(
        env.contains(&format!("127.{}.", moved.plan.subnet))
            && !env.contains(&format!("127.{}.", first.plan.subnet)),
        "{env}"
    );
    // Asked for exactly a taken subnet: refused, naming it and the way out.
    let exact = Lab::start(LabOptions {
        scenario: "adr-007".into(),
        subnet: first.plan.subnet,
        subnet_choice: gates_lab::addr::SubnetChoice::Exactly,
        state_dir: dir.path().join("exact"),
        ..LabOptions::default()
    })
    .await
    .expect_err("a taken subnet asked for exactly is refused");
    let message = exact.to_string();
    assert!(
        message.contains(&format!("127.{}.x.y is in use", first.plan.subnet))
            && message.contains("--subnet"),
        "{message}"
    );
    moved.stop().await;
    first.stop().await;
}
