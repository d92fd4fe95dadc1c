//! ReadWriteOnce Longhorn volumes through a host's loss, on tokio's paused clock: the
//! evicted pod stays Terminating on the dead node, its replacement cannot attach the volume
//! until it is gone, and Longhorn's node-down policy decides whether that waits for the host.

use gates_lab::addr::Plan;
use gates_lab::clock::SimClock;
use gates_lab::scenario::Scenario;
use gates_lab::world::{Shared, World};
use std::sync::Arc;
use std::time::Duration;

const VOLUME: &str = "pvc-3f1c2a4e-0b1d-4c55-9a51-2d7e8f0a1b01";

fn world(policy: Option<&str>) -> Arc<Shared> {
    let s = match policy {
        None => Scenario::load("adr-007-rwo-deployment").expect("scenario"),
        Some(p) => Scenario::from_yaml(
            "rwo",
            &format!(
                "name: rwo\nextends: adr-007-rwo-deployment\nset:\n  environments[name=lab].longhorn.settings:\n    node-down-pod-deletion-policy: {p}\n"
            ),
        )
        .expect("scenario"),
    };
    let w = World::build(&s, Plan::new(1), SimClock::new(1.0)).expect("builds");
    let shared = Shared::new(w);
    tokio::spawn(shared.clone().drive());
    shared
}

/// The pods of staging's workload `name`: (name, node, Terminating, Ready).
pub fn pods_of(w: &Shared, name: &str) -> Vec<(String, String, bool, bool)> {
    w.read(|w| {
        let e = &w.envs[0];
        let wi = e
            .workloads
            .iter()
            .position(|x| x.spec.name == name)
            .unwrap_or_else(|| panic!("no workload {name}"));
        e.pods
            .values()
            .filter(|p| p.workload == wi)
            .map(|p| {
                (
                    p.name.clone(),
                    p.node.map(|n| w.nodes[n].name.clone()).unwrap_or_default(),
                    p.deleting.is_some(),
                    p.api_ready,
                )
            })
            .collect()
    })
}

/// The database's pods, and the volume's node.
type Db = (Vec<(String, String, bool, bool)>, Option<String>);

fn db(w: &Shared) -> Db {
    let attached = w.read(|w| {
        let v = w.envs[0].volumes.iter().find(|v| v.name == VOLUME).unwrap();
        v.attached_to.map(|n| w.nodes[n].name.clone())
    });
    (pods_of(w, "whoami-db"), attached)
}

/// Power off the VM carrying `node`.
pub fn power_off(w: &Shared, node: &str) {
    let vmid = w.read(|w| w.nodes.iter().find(|n| n.name == node).unwrap().vmid);
    w.stop_vm(vmid).expect("stops");
}

async fn advance(secs: u64) {
    tokio::time::sleep(Duration::from_secs(secs)).await;
}

#[tokio::test(start_paused = true)]
async fn under_do_nothing_the_replacement_waits_for_the_volume_until_the_host_returns() {
    let w = world(None);
    advance(5).await;
    let (pods, attached) = db(&w);
    assert_eq!(pods.len(), 1, "{pods:?}");
    let node = pods[0].1.clone();
    assert_eq!(
        attached.as_deref(),
        Some(node.as_str()),
        "the volume follows the pod"
    );
    power_off(&w, &node);
    // Node-monitor grace (50 s) plus the toleration (300 s), then well past it.
    advance(50 + 300 + 120).await;
    let (pods, attached) = db(&w);
    let old: Vec<_> = pods.iter().filter(|p| p.1 == node).collect();
    let new: Vec<_> = pods.iter().filter(|p| p.1 != node).collect();
    assert!(
        old.len() == 1 && old[0].2,
        "the evicted pod stays Terminating: {pods:?}"
    );
    assert!(
        new.len() == 1 && !new[0].2 && !new[0].3,
        "the replacement is not Ready: {pods:?}"
    );
    assert_eq!(
        attached.as_deref(),
        Some(node.as_str()),
        "still attached to the dead node"
    );
    // The host comes back: the kubelet confirms the deletion, the volume detaches and the
    // replacement attaches it and starts.
    let vmid = w.read(|w| w.nodes.iter().find(|n| n.name == node).unwrap().vmid);
    w.start_vm(vmid).expect("starts");
    advance(120).await;
    let (pods, attached) = db(&w);
    assert_eq!(pods.len(), 1, "{pods:?}");
    assert!(pods[0].3, "the replacement runs: {pods:?}");
    assert_eq!(attached.as_deref(), Some(pods[0].1.as_str()));
}

#[tokio::test(start_paused = true)]
async fn a_delete_policy_lets_longhorn_force_delete_the_pod_and_the_replacement_start_elsewhere() {
    let w = world(Some("delete-both-statefulset-and-deployment-pod"));
    advance(5).await;
    let node = db(&w).0[0].1.clone();
    power_off(&w, &node);
    advance(50 + 300 + 60).await;
    let (pods, attached) = db(&w);
    assert_eq!(pods.len(), 1, "the old pod is gone from the API: {pods:?}");
    assert!(
        pods[0].1 != node && pods[0].3,
        "the replacement runs elsewhere: {pods:?}"
    );
    assert_eq!(attached.as_deref(), Some(pods[0].1.as_str()));
    let forced = w.read(|w| {
        w.truth
            .events
            .iter()
            .filter(|e| e.kind == "pod-force-deleted")
            .count()
    });
    assert_eq!(forced, 1);
}

#[tokio::test(start_paused = true)]
async fn a_policy_for_statefulsets_only_leaves_a_deployments_pod_terminating() {
    let w = world(Some("delete-statefulset-pod"));
    advance(5).await;
    let node = db(&w).0[0].1.clone();
    power_off(&w, &node);
    advance(50 + 300 + 60).await;
    let (pods, _) = db(&w);
    assert!(
        pods.iter().any(|p| p.1 == node && p.2) && pods.iter().all(|p| !p.3),
        "{pods:?}"
    );
}
