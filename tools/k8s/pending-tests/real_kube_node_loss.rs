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
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::control_plane::launch::KWOK_MANAGED;
use crate::control_plane::{self, ControlPlane, Identity, Timing, load};

const GRACE: Duration = Duration::from_secs(6);
const TOLERATION: Duration = Duration::from_secs(6);

/// adr-007 with the node-monitor grace period and the eviction toleration shortened.
fn scenario(dir: &std::path::Path) -> String {
    let path = dir.join("adr-007-fast-eviction.yaml");
    std::fs::write(
        &path,
        format!(
            "name: adr-007-fast-eviction\nextends: adr-007\ntimings:\n  node_monitor_grace: {}s\n  toleration: {}s\n",
            GRACE.as_secs(),
            TOLERATION.as_secs()
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// Keep kwok's management of each real node in step with its VM in the lab: a node whose
/// machine is down loses the annotation (no kubelet, no heartbeat), and gets it back on boot.
fn bridge(lab: &Lab, client: kube::Client) -> tokio::task::JoinHandle<()> {
    let shared = lab.shared.clone();
    tokio::spawn(async move {
        let nodes: Api<Node> = Api::all(client);
        let mut known: BTreeMap<String, bool> = BTreeMap::new();
        loop {
            let up: Vec<(String, bool)> =
                shared.read(|w| w.nodes.iter().map(|n| (n.name.clone(), n.booted)).collect());
            for (name, booted) in up {
                if known.get(&name) == Some(&booted) {
                    continue;
                }
                let value = if booted {
                    Value::from(KWOK_MANAGED.1)
                } else {
                    Value::Null
                };
                let patch = json!({"metadata": {"annotations": {KWOK_MANAGED.0: value}}});
                if nodes
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .is_ok()
                    || !known.contains_key(&name)
                {
                    known.insert(name, booted);
                }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_powered_off_vm_is_marked_not_ready_evicted_and_replaced_by_the_real_controllers() {
    let Some(bin) = control_plane::binaries() else {
        return;
    };
    let _one = control_plane::ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let lab = Lab::start(LabOptions {
        scenario: scenario(dir.path()),
        generate_nodes: None,
        pods_per_node: None,
        subnet: 150,
        speed: 1.0,
        state_dir: dir.path().to_path_buf(),
        env_dir: Some(dir.path().join("environments")),
    })
    .await
    .unwrap_or_else(|err| panic!("the lab starts: {err}"));
    let timing = Timing {
        node_monitor_grace: GRACE,
        toleration: TOLERATION,
        node_lease: Duration::from_secs(4),
    };
    let plane = ControlPlane::start(&bin, 150, timing)
        .await
        .unwrap_or_else(|err| panic!("the real control plane starts: {err}"));
    load::install_crds(&plane).await.unwrap();
    let objects = lab.shared.read(|w| gates_lab::export::manifests(w, 0));
    let expected = load::expected_ready(&objects);
    load::load_manifests(&plane, objects).await.unwrap();
    load::wait_settled(&plane, &expected, Duration::from_secs(60))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    let client = plane.client(Identity::Admin).await.unwrap();
    let bridge = bridge(&lab, client.clone());

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
        let elsewhere = now
            .iter()
            .filter(|p| running_ready(p))
            .filter(|p| {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some(victim.as_str())
            })
            .filter(|p| !owned_by_daemon_set(p))
            .count();
        let needed = before
            .iter()
            .filter(|p| running_ready(p) && !owned_by_daemon_set(p))
            .count();
        if t.evicted.is_some() && t.replaced.is_none() && elsewhere >= needed {
            t.replaced = Some(since());
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
    assert!(t.replaced.is_some(), "never replaced: {report}");
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
    drop(plane);
    lab.stop().await;
}
