//! Node loss on a real control plane: a VM powered off in the lab stops its node's heartbeat
//! in the real cluster (kwok stops renewing its Lease), and the real node-lifecycle
//! controller, scheduler and disruption controller do the rest. Grace periods are shortened by
//! flags on both sides (the lab through the scenario's timings), and the real timeline is
//! compared with the lab's model of it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gates_lab::{Lab, LabOptions};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::Api;
use serde_json::Value;

use crate::control_plane::{self, ControlPlane, Identity, Kubelets, Timing, clear, load};

/// The plane of these tests listens on 127.155.9.1; its labs take 127.156 and 127.157.
const PLANE_SUBNET: u8 = 155;
const NODE_LOSS_LAB_SUBNET: u8 = 156;
const CHAOS_LAB_SUBNET: u8 = 157;

const GRACE: Duration = Duration::from_secs(6);
const TOLERATION: Duration = Duration::from_secs(6);

/// adr-007 with the node-monitor grace period and the eviction toleration shortened.
fn scenario(dir: &std::path::Path) -> String {
    let path = dir.join("adr-007-fast-eviction.yaml");
    std::fs::write(
        &path,
        format!(
            "name: adr-007-fast-eviction\nextends: adr-007\ntimings:\n  node_monitor_grace: {}s\n  toleration: {}s\n  boot: 5s\n",
            GRACE.as_secs(),
            TOLERATION.as_secs()
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// Keep each real node of environment `env` in step with its VM in the lab: a node whose
/// machine is down has no kubelet (its own kwok) and so no heartbeat, and gets one back when
/// it has booted.
pub fn bridge(lab: &Lab, plane: &ControlPlane, env: usize) -> tokio::task::JoinHandle<()> {
    let shared = lab.shared.clone();
    let kubelets = plane.node_kubelets.clone();
    tokio::spawn(async move {
        let mut known: BTreeMap<String, bool> = BTreeMap::new();
        loop {
            let up: Vec<(String, bool)> = shared.read(|w| {
                w.envs[env]
                    .nodes
                    .iter()
                    .map(|&n| (w.nodes[n].name.clone(), w.nodes[n].booted))
                    .collect()
            });
            for (name, booted) in up {
                if known.get(&name) == Some(&booted) {
                    continue;
                }
                if booted {
                    if let Err(err) = kubelets.start(&name) {
                        eprintln!("{err}");
                    }
                } else {
                    kubelets.stop(&name);
                }
                known.insert(name, booted);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

fn ready(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

fn tainted_unreachable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == "node.kubernetes.io/unreachable"))
}

fn running_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.status.as_ref().is_some_and(|s| {
            s.phase.as_deref() == Some("Running")
                && s.conditions
                    .as_ref()
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
}

fn owned_by_daemon_set(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .as_ref()
        .is_some_and(|os| os.iter().any(|o| o.kind == "DaemonSet"))
}

/// Seconds since the VM went off at which each thing was first seen.
#[derive(Debug, Default)]
struct Timeline {
    not_ready: Option<f64>,
    tainted: Option<f64>,
    evicted: Option<f64>,
    replaced: Option<f64>,
    pdbs_recomputed: Option<f64>,
}

/// One real control plane with shortened grace periods for both parts: first a VM powered
/// off by hand and the real controllers' timeline, then `gates chaos` against the same
/// combination.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_loss_on_a_real_control_plane_follows_the_labs_model_and_chaos_passes() {
    let Some(bin) = control_plane::binaries() else {
        return;
    };
    let _one = control_plane::ONE_AT_A_TIME.lock().await;
    let timing = Timing {
        node_monitor_grace: GRACE,
        toleration: TOLERATION,
        node_lease: Duration::from_secs(4),
        ..Timing::default()
    };
    let plane = ControlPlane::start(&bin, PLANE_SUBNET, timing, Kubelets::PerNode)
        .await
        .unwrap_or_else(|err| panic!("the real control plane starts: {err}"));
    load::install_crds(&plane).await.unwrap();
    a_powered_off_vm_is_marked_not_ready_evicted_and_replaced_by_the_real_controllers(&plane).await;
    clear::clear(&plane, Duration::from_secs(60))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    a_chaos_run_on_adr_007_passes_against_the_real_control_plane(&plane).await;
}

/// The lab on `subnet` with the fast-eviction scenario, its first environment loaded into
/// the plane and settled.
async fn lab_loaded(plane: &ControlPlane, subnet: u8, dir: &std::path::Path) -> Lab {
    let lab = Lab::start(LabOptions {
        scenario: scenario(dir),
        subnet,
        speed: 1.0,
        state_dir: dir.to_path_buf(),
        env_dir: Some(dir.join("environments")),
        ..LabOptions::default()
    })
    .await
    .unwrap_or_else(|err| panic!("the lab starts: {err}"));
    let objects = lab.shared.read(|w| gates_lab::export::manifests(w, 0));
    let expected = load::expected_ready(&objects);
    load::load_manifests(plane, objects).await.unwrap();
    load::wait_settled(plane, &expected, Duration::from_secs(90))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    lab
}

async fn a_powered_off_vm_is_marked_not_ready_evicted_and_replaced_by_the_real_controllers(
    plane: &ControlPlane,
) {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_loaded(plane, NODE_LOSS_LAB_SUBNET, dir.path()).await;
    let client = plane.client(Identity::Admin).await.unwrap();
    let bridge = bridge(&lab, plane, 0);

    let (victim, vmid) = lab.shared.read(|w| {
        let n = &w.nodes[w.envs[0].nodes[2]];
        (n.name.clone(), n.vmid)
    });
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    let pdbs: Api<PodDisruptionBudget> = Api::all(client.clone());
    let before: Vec<Pod> = pods.list(&Default::default()).await.unwrap().items;
    let on_victim: Vec<String> = before
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(victim.as_str()))
        .filter(|p| !owned_by_daemon_set(p))
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert!(!on_victim.is_empty(), "{victim} runs evictable pods");
    let healthy_before: i32 = before.iter().filter(|p| running_ready(p)).count() as i32;
    let mut last_difference: Vec<String> = Vec::new();

    let off = Instant::now();
    lab.shared.stop_vm(vmid).expect("the VM stops");
    let mut t = Timeline::default();
    let since = || off.elapsed().as_secs_f64();
    while off.elapsed() < Duration::from_secs(50) {
        let node = nodes.get(&victim).await.unwrap();
        if t.not_ready.is_none() && ready(&node).as_deref() != Some("True") {
            t.not_ready = Some(since());
        }
        if t.tainted.is_none() && tainted_unreachable(&node) {
            t.tainted = Some(since());
        }
        let now: Vec<Pod> = pods.list(&Default::default()).await.unwrap().items;
        let evicted = on_victim.iter().all(|name| {
            now.iter()
                .find(|p| p.metadata.name.as_deref() == Some(name))
                .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
        });
        if t.evicted.is_none() && evicted {
            t.evicted = Some(since());
        }
        // Replaced: every workload as ready as the lab's model has it now, once both evicted
        // (a StatefulSet's pod stays Terminating on the lost node in both, a Deployment's
        // replacement may find no node its anti-affinity allows).
        let lab_evicted = lab
            .shared
            .read(|w| w.truth.events.iter().any(|e| e.kind == "pod-evicted"));
        if t.evicted.is_some() && lab_evicted && t.replaced.is_none() {
            let expected = lab
                .shared
                .read(|w| load::expected_ready(&gates_lab::export::manifests(w, 0)));
            last_difference = load::unsettled_workloads(plane, &expected).await.unwrap();
            if last_difference.is_empty() {
                t.replaced = Some(since());
            }
        }
        if t.not_ready.is_some() && t.pdbs_recomputed.is_none() {
            let list = pdbs.list(&Default::default()).await.unwrap().items;
            let healthy: i32 = list
                .iter()
                .filter_map(|p| p.status.as_ref().map(|s| s.current_healthy))
                .sum();
            let expected: i32 = list
                .iter()
                .filter_map(|p| p.status.as_ref().map(|s| s.expected_pods))
                .sum();
            if healthy < expected || healthy_before == 0 {
                t.pdbs_recomputed = Some(since());
            }
        }
        if t.replaced.is_some() && t.pdbs_recomputed.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    bridge.abort();
    let truth = lab.ground_truth();
    let lab_at = |kind: &str| {
        let stopped = truth
            .events
            .iter()
            .find(|e| e.kind == "vm-stopped")
            .map(|e| e.sim_seconds)?;
        truth
            .events
            .iter()
            .find(|e| e.kind == kind && (e.subject == victim || kind == "pod-evicted"))
            .map(|e| e.sim_seconds - stopped)
    };
    let report = format!(
        "real: {t:?}\nlab: node-not-ready {:?}, pod-evicted {:?}",
        lab_at("node-not-ready"),
        lab_at("pod-evicted")
    );
    eprintln!("{report}");
    let not_ready = t
        .not_ready
        .unwrap_or_else(|| panic!("never NotReady: {report}"));
    assert!(t.tainted.is_some(), "never tainted unreachable: {report}");
    let evicted = t
        .evicted
        .unwrap_or_else(|| panic!("never evicted: {report}"));
    assert!(
        t.replaced.is_some(),
        "never as ready as the lab's model: {report}\n{}",
        last_difference.join("\n")
    );
    assert!(
        t.pdbs_recomputed.is_some(),
        "PDBs never recomputed: {report}"
    );
    // The real controllers follow the same rules as the lab's model: NotReady one grace
    // period after the last heartbeat, eviction one toleration later.
    let grace = GRACE.as_secs_f64();
    let toleration = TOLERATION.as_secs_f64();
    assert!(
        not_ready >= grace - 1.0 && not_ready <= grace + 6.0,
        "NotReady after {not_ready:.1}s, grace {grace}s: {report}"
    );
    assert!(
        evicted - not_ready >= toleration - 1.5 && evicted - not_ready <= toleration + 6.0,
        "evicted {:.1}s after NotReady, toleration {toleration}s: {report}",
        evicted - not_ready
    );
    let lab_not_ready = lab_at("node-not-ready").expect("the lab marks the node NotReady");
    assert!(
        (lab_not_ready - not_ready).abs() <= 6.0,
        "the lab's NotReady ({lab_not_ready:.1}s) is far from the real one: {report}"
    );
    lab.stop().await;
}

/// Chaos settings for real time: the host stays down past the shortened eviction, and the
/// API probe reaches the real API server (not on the lab's VMs, so it never goes down).
const CHAOS: &str = "chaos:\n  allowed: true\n  sample_interval: 500ms\n  outage: 25s\n  recovery_timeout: 120s\n  budgets:\n    api: { longest: 10s, total: 20s }\n    ingress: { longest: 25s, total: 40s }\n    workloads: { longest: 30s, total: 60s }\n";

/// `gates chaos` against the lab's Proxmox and Talos and the real control plane (as the
/// admin: the run takes a Lease), on a host that holds neither the API VIP nor the L2 lease,
/// passes; the real NotReady it records comes when the lab's model says it does.
async fn a_chaos_run_on_adr_007_passes_against_the_real_control_plane(plane: &ControlPlane) {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_loaded(plane, CHAOS_LAB_SUBNET, dir.path()).await;
    let bridge = bridge(&lab, plane, 0);
    let (host, victim) = lab.shared.read(|w| {
        let env = &w.envs[0];
        let busy = [env.vip_holder, env.lease.as_ref().and_then(|l| l.holder)];
        let n = *env
            .nodes
            .iter()
            .find(|&&n| w.nodes[n].is_control_plane() && !busy.contains(&Some(n)))
            .expect("a control plane holding neither the VIP nor the L2 lease");
        (
            w.hosts[w.nodes[n].host].name.clone(),
            w.nodes[n].name.clone(),
        )
    });
    let envs =
        crate::real_kube::real_env_dir(&lab, plane, Identity::Admin, dir.path(), Some("requests"));
    for entry in std::fs::read_dir(&envs).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            let text = match text.find("chaos:\n") {
                Some(at) => format!("{}{CHAOS}", &text[..at]),
                None => text,
            };
            std::fs::write(&path, text).unwrap();
        }
    }
    let reports = dir.path().join("reports");
    let env_dir = envs.clone();
    let host_arg = host.clone();
    let run = tokio::task::spawn_blocking(move || {
        crate::support::gates_with_config(&reports)
            .env("CI", "1")
            .env("GATES_LOCK_DIR", reports.join("locks"))
            .arg("--env-dir")
            .arg(&env_dir)
            .args(["chaos", "lab", "--host", &host_arg, "--reports"])
            .arg(&reports)
            .timeout(Duration::from_secs(240))
            .output()
            .unwrap()
    });
    let out = run.await.unwrap();
    bridge.abort();
    let (o, e) = (crate::support::stdout(&out), crate::support::stderr(&out));
    assert_eq!(
        out.status.code(),
        Some(0),
        "chaos on {host} against the real control plane:\nstdout:\n{o}\nstderr:\n{e}"
    );
    for trial in [
        "recovery",
        "no-manual-work",
        "etcd-quorum",
        "workloads::coredns",
    ] {
        crate::support::assert_trial(&o, &format!("gate4::lab::chaos::{trial}"), "ok");
    }
    // The real NotReady on the chaos timeline against the lab's model of the same outage.
    let reports = dir.path().join("reports");
    let report: Value = std::fs::read_dir(&reports)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("chaos-lab-") && name.ends_with("Z.json")
        })
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .expect("a chaos report");
    let timeline: Value = serde_json::from_str(
        &std::fs::read_to_string(reports.join(report["timeline_file"].as_str().unwrap())).unwrap(),
    )
    .unwrap();
    let at = |kind: &str, subject: &str| {
        timeline["events"].as_array().unwrap().iter().find_map(|e| {
            (e["kind"] == kind && (subject.is_empty() || e["subject"] == subject))
                .then(|| e["at"].as_f64().unwrap_or(f64::NAN))
        })
    };
    let stop = at("vm-stop-requested", "").expect("the stop is on the timeline");
    let not_ready = at("node-not-ready", &victim)
        .unwrap_or_else(|| panic!("{victim} NotReady is on the timeline: {timeline:#}"));
    let truth = lab.ground_truth();
    let lab_not_ready = {
        let stopped = truth.events.iter().find(|e| e.kind == "vm-stopped");
        let ready = truth
            .events
            .iter()
            .find(|e| e.kind == "node-not-ready" && e.subject == victim);
        stopped
            .zip(ready)
            .map(|(s, r)| r.sim_seconds - s.sim_seconds)
            .expect("the lab marks the node NotReady")
    };
    eprintln!(
        "chaos on {host}: real NotReady {:.1}s after the stop, the lab's model {lab_not_ready:.1}s",
        not_ready - stop
    );
    assert!(
        ((not_ready - stop) - lab_not_ready).abs() <= 6.0,
        "real NotReady {:.1}s after the stop, the lab's {lab_not_ready:.1}s",
        not_ready - stop
    );
    lab.stop().await;
}
