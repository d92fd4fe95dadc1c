//! `gates predict` against the lab: the ADR's target survives the loss of every host, and each
//! broken scenario names the host whose loss is not survivable and why. The lab is reached only
//! over its protocols, with the files it wrote.

use std::path::{Path, PathBuf};
use std::process::Output;

use gates_lab::{Lab, LabOptions};
use serde_json::Value;

use crate::support::*;

/// Subnets 130..=139 belong to these tests (each test its own, so they run in parallel).
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

/// `gates --env-dir <lab envs> predict ENV --format json [extra]` in a blocking task.
async fn predict(env_dir: PathBuf, env: &str, extra: &[&str]) -> (Output, Value) {
    let env = env.to_string();
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let out = tokio::task::spawn_blocking(move || {
        let reports = tempfile::tempdir().unwrap();
        gates_with_config(reports.path())
            .arg("--env-dir")
            .arg(&env_dir)
            .args(["predict", &env, "--format", "json"])
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

fn host<'a>(json: &'a Value, name: &str) -> &'a Value {
    json["prediction"]["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["host"] == name)
        .unwrap_or_else(|| panic!("no host {name} in {json:#}"))
}

fn outcomes(json: &Value) -> Vec<(String, String)> {
    json["prediction"]["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["host"].as_str().unwrap().to_string(),
                h["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn reasons(host: &Value) -> String {
    host["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}: {}",
                r["severity"].as_str().unwrap(),
                r["text"].as_str().unwrap()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_host_loss_of_the_adr_target_is_survivable_and_the_vip_host_is_worst() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab("adr-007", 130, dir.path()).await;
    let envs = dir.path().join("environments");
    let (out, json) = predict(envs.clone(), "lab", &[]).await;
    assert_eq!(out.status.code(), Some(0), "{json:#}\n{}", stderr(&out));
    let hosts = outcomes(&json);
    assert_eq!(
        hosts.iter().map(|(h, _)| h.as_str()).collect::<Vec<_>>(),
        ["pve1", "pve2", "pve3"]
    );
    for (name, outcome) in &hosts {
        assert!(
            outcome == "survives" || outcome == "degraded",
            "{name}: {}",
            reasons(host(&json, name))
        );
    }
    // The host of the VIP's holder expects the VIP failover, and is the worst.
    let holder = lab
        .shared
        .read(|w| w.envs[0].vip_holder.map(|h| w.nodes[h].name.clone()))
        .expect("the lab's VIP has a holder");
    let worst = json["prediction"]["worst"].as_str().unwrap();
    let worst_host = host(&json, worst);
    assert!(
        worst_host["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == &holder),
        "worst {worst} runs {holder}: {json:#}"
    );
    assert!(
        reasons(worst_host).contains(&format!("the API VIP moves from {holder}")),
        "{}",
        reasons(worst_host)
    );
    // Pods move to named survivors after the toleration of the unreachable taint.
    let pods = worst_host["pods"].as_array().unwrap();
    assert!(
        pods.iter()
            .any(|p| p["outcome"] == "placed" && p["after_seconds"] == 300),
        "{pods:#?}"
    );

    let (out, json) = predict(envs.clone(), "lab-production", &[]).await;
    assert_eq!(out.status.code(), Some(0), "{json:#}");
    assert_eq!(
        outcomes(&json)
            .iter()
            .map(|(h, _)| h.as_str())
            .collect::<Vec<_>>(),
        ["pve3", "pve4", "pve5"]
    );

    // The table names each host and the worst one.
    let text = tokio::task::spawn_blocking(move || {
        let reports = tempfile::tempdir().unwrap();
        gates_with_config(reports.path())
            .arg("--env-dir")
            .arg(&envs)
            .args(["predict", "lab"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(text.status.code(), Some(0));
    let text = stdout(&text);
    assert!(text.contains("host  outcome"), "{text}");
    assert!(
        text.contains(&format!(
            "Prediction for lab: 3 of 3 host losses survivable; worst: {worst}"
        )),
        "{text}"
    );
    lab.stop().await;
}

/// `scenario`'s lab, where every host's loss must be lost with reasons containing `says`.
async fn every_host_loss_is_lost(scenario: &str, subnet: u8, says: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab(scenario, subnet, dir.path()).await;
    let (out, json) = predict(dir.path().join("environments"), "lab", &[]).await;
    assert_eq!(out.status.code(), Some(1), "{json:#}");
    for (name, outcome) in outcomes(&json) {
        let why = reasons(host(&json, &name));
        assert_eq!(outcome, "lost", "{name}: {why}");
        assert!(says.iter().all(|s| why.contains(s)), "{name}: {why}");
    }
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_survivors_make_every_host_loss_fatal_for_insufficient_memory() {
    every_host_loss_is_lost(
        "adr-007-full-survivors",
        131,
        &[
            "Deployment whoami/whoami: pod whoami/whoami-",
            "cannot be rescheduled: 0/3 nodes are available:",
            "2 Insufficient memory",
        ],
    )
    .await;
}

/// The sidecars take the room: whoami's 2Gi app containers would fit on the survivors, the
/// pods with their 2Gi sidecars do not, and the scheduler counts both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sidecar_beside_each_pod_counts_so_every_host_loss_is_fatal_for_insufficient_memory() {
    every_host_loss_is_lost(
        "adr-007-sidecar-fills-survivors",
        138,
        &[
            "Deployment whoami/whoami: pod whoami/whoami-",
            "2 Insufficient memory",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anti_affinity_with_nowhere_to_go_makes_every_host_loss_fatal() {
    every_host_loss_is_lost(
        "adr-007-anti-affinity-nowhere",
        132,
        &[
            "Deployment kube-system/cilium-operator: pod kube-system/cilium-operator-",
            "2 node(s) didn't match pod anti-affinity rules",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_of_a_volumes_last_replica_is_named_and_only_that_host() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab("adr-007-last-replica", 133, dir.path()).await;
    let volume = "pvc-3f1c2a4e-0b1d-4c55-9a51-2d7e8f0a1b02";
    let (replica_node, replica_host) = lab.shared.read(|w| {
        let v = w.envs[0]
            .volumes
            .iter()
            .find(|v| v.name == volume)
            .expect("the scenario has the volume");
        assert_eq!(v.replicas.len(), 1);
        let node = &w.nodes[v.replicas[0].node];
        (node.name.clone(), w.hosts[node.host].name.clone())
    });
    let (out, json) = predict(dir.path().join("environments"), "lab", &[]).await;
    assert_eq!(out.status.code(), Some(1), "{json:#}");
    for (name, outcome) in outcomes(&json) {
        let lost_host = host(&json, &name);
        if name == replica_host {
            assert_eq!(outcome, "lost");
            assert_eq!(
                lost_host["reasons"][0]["text"],
                format!("Longhorn volume {volume} loses its last replica (on {replica_node})")
            );
        } else {
            assert_ne!(outcome, "lost", "{name}: {}", reasons(lost_host));
        }
    }
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_l2_policy_on_one_node_makes_only_its_hosts_loss_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab("adr-007-l2-one-node", 134, dir.path()).await;
    let envs = dir.path().join("environments");
    let (out, json) = predict(envs.clone(), "lab", &[]).await;
    assert_eq!(out.status.code(), Some(1), "{json:#}");
    let pve1 = host(&json, "pve1");
    assert_eq!(pve1["outcome"], "lost");
    assert_eq!(
        pve1["reasons"][0]["text"],
        "Service traefik/traefik loses its ingress address: the L2 policies announcing it (ingress-address) select no surviving Ready node (they select talos-lab-cp-01 (pve1))"
    );
    for name in ["pve2", "pve3"] {
        assert_ne!(host(&json, name)["outcome"], "lost");
    }
    // One host at a time: pve2 alone is survivable.
    let (out, json) = predict(envs, "lab", &["--host", "pve2"]).await;
    assert_eq!(out.status.code(), Some(0), "{json:#}");
    assert_eq!(outcomes(&json).len(), 1);
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loss_of_a_switch_or_datastore_under_two_control_planes_loses_etcd_quorum() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab("adr-007-shared-failure-domains", 135, dir.path()).await;
    let envs = dir.path().join("environments");
    // pve1 and pve2 hang on sw-a (and pve4, with no lab node): both lab control planes there
    // go at once.
    let (out, json) = predict(envs.clone(), "lab", &["--domain", "switch:sw-a"]).await;
    assert_eq!(out.status.code(), Some(1), "{json:#}");
    let lost = host(&json, "switch sw-a (pve1, pve2, pve4)");
    assert_eq!(lost["outcome"], "lost", "{json:#}");
    assert!(reasons(lost).contains("quorum"), "{}", reasons(lost));
    // sw-b carries one control plane: survivable.
    let (out, json) = predict(envs.clone(), "lab", &["--domain", "switch:sw-b"]).await;
    assert_eq!(out.status.code(), Some(0), "{json:#}");
    // Two of production's control-plane VMs keep their disks on the Ceph datastore.
    let (out, json) = predict(
        envs.clone(),
        "lab-production",
        &["--domain", "datastore:ceph-vm"],
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{json:#}");
    let lost = host(
        &json,
        "datastore ceph-vm (talos-prod-cp-01, talos-prod-cp-02)",
    );
    assert_eq!(lost["outcome"], "lost", "{json:#}");
    // A name no host declares, or a storage that is each host's own, is a usage error.
    for (domain, words) in [
        (
            "switch:sw-z",
            "no host of proxmox.hosts has switch sw-z (declared: sw-a, sw-b, sw-c)",
        ),
        ("datastore:local-lvm", "storage local-lvm is not shared"),
        (
            "rack:r1",
            "expected KIND:NAME with KIND switch, power or datastore",
        ),
    ] {
        let envs = envs.clone();
        let out = tokio::task::spawn_blocking(move || {
            let reports = tempfile::tempdir().unwrap();
            gates_with_config(reports.path())
                .arg("--env-dir")
                .arg(&envs)
                .args(["predict", "lab", "--domain", domain])
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        assert_eq!(out.status.code(), Some(2), "{domain}: {}", stderr(&out));
        assert!(stderr(&out).contains(words), "{domain}: {}", stderr(&out));
    }
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_of_every_host_is_predicted_and_named_beside_the_power_loss() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab("adr-007", 136, dir.path()).await;
    let envs = dir.path().join("environments");
    let (out, json) = predict(envs.clone(), "lab", &["--fault", "partition"]).await;
    assert_eq!(out.status.code(), Some(0), "{json:#}\n{}", stderr(&out));
    assert_eq!(json["prediction"]["fault"], "partition", "{json:#}");
    let hosts = outcomes(&json);
    assert_eq!(hosts.len(), 3, "{json:#}");
    for (name, outcome) in &hosts {
        assert!(
            outcome == "survives" || outcome == "degraded",
            "{name}: {}",
            reasons(host(&json, name))
        );
    }
    // The VIP holder is cut off: the VIP moves on its etcd session's timing, as after power
    // loss, and its etcd member is a minority.
    let holder = lab
        .shared
        .read(|w| w.envs[0].vip_holder.map(|h| w.nodes[h].name.clone()))
        .expect("the lab's VIP has a holder");
    let worst = host(&json, json["prediction"]["worst"].as_str().unwrap());
    let text = reasons(worst);
    assert!(
        text.contains(&format!("the API VIP moves from {holder}"))
            && text.contains("as after power loss")
            && text.contains(&format!("etcd member {holder} cut off: a minority")),
        "{text}"
    );
    // The pods of the cut-off nodes are placed as after power loss.
    let (_, power) = predict(envs.clone(), "lab", &[]).await;
    assert_eq!(power["prediction"]["fault"], "power");
    let moves = |j: &Value, h: &str| host(j, h)["pods"].clone();
    for (name, _) in &hosts {
        assert_eq!(moves(&json, name), moves(&power, name), "{name}");
    }

    let (text, bad) = tokio::task::spawn_blocking(move || {
        let run = |args: &[&str]| {
            let reports = tempfile::tempdir().unwrap();
            gates_with_config(reports.path())
                .arg("--env-dir")
                .arg(&envs)
                .args(args)
                .output()
                .unwrap()
        };
        (
            run(&["predict", "lab", "--fault", "partition"]),
            run(&["predict", "lab", "--fault", "flood"]),
        )
    })
    .await
    .unwrap();
    assert_eq!(text.status.code(), Some(0));
    let text = stdout(&text);
    assert!(
        text.contains("\nPartition of pve1 (")
            && text.contains("Prediction for lab (partition): 3 of 3 host partitions survivable"),
        "{text}"
    );
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("invalid value 'flood' for '--fault <FAULT>'")
            && stderr(&bad).contains("[possible values: power, partition]"),
        "{}",
        stderr(&bad)
    );
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_pod_holding_its_read_write_once_volume_is_lost_until_the_links_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab("adr-007-rwo-deployment", 137, dir.path()).await;
    let envs = dir.path().join("environments");
    let (out, json) = predict(envs.clone(), "lab", &["--fault", "partition"]).await;
    assert_eq!(out.status.code(), Some(1), "{json:#}\n{}", stderr(&out));
    assert_eq!(json["prediction"]["fault"], "partition");
    let lost: Vec<_> = outcomes(&json)
        .into_iter()
        .filter(|(_, o)| o == "lost")
        .collect();
    assert_eq!(lost.len(), 1, "{json:#}");
    let text = reasons(host(&json, &lost[0].0));
    assert!(
        text.contains("uses ReadWriteOnce Longhorn volume")
            && text.contains("the pod stays Terminating on the cut-off node")
            && text.contains("restore the network, or power the node off"),
        "{text}"
    );
    // The power loss of the same host is lost too, with the force delete as its fix.
    let (_, power) = predict(envs, "lab", &[]).await;
    let power_text = reasons(host(&power, &lost[0].0));
    assert_eq!(host(&power, &lost[0].0)["outcome"], "lost");
    assert!(
        power_text.contains("until someone force-deletes it"),
        "{power_text}"
    );
    lab.stop().await;
}
