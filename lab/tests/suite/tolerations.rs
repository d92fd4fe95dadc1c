//! Pods that tolerate every taint through a host's loss, on tokio's paused clock: the Cilium
//! operator as its chart deploys it is never evicted from a dead node, so it is not replaced.

use gates_lab::addr::Plan;
use gates_lab::clock::SimClock;
use gates_lab::resources::Res;
use gates_lab::scenario::Scenario;
use gates_lab::world::{Shared, World};
use std::time::Duration;

#[tokio::test(start_paused = true)]
async fn the_cilium_operator_tolerates_every_taint_and_stays_on_a_dead_node_unreplaced() {
    let s = Scenario::load("adr-007").expect("scenario");
    let w = Shared::new(World::build(&s, Plan::new(1), SimClock::new(1.0)).expect("builds"));
    tokio::spawn(w.clone().drive());
    tokio::time::sleep(Duration::from_secs(5)).await;
    let operator = |w: &Shared| super::attachment::pods_of(w, "cilium-operator");
    let before = operator(&w);
    assert_eq!(before.len(), 2, "{before:?}");
    // Its pods carry only the chart's toleration: the admission plugin adds no 300 s ones.
    let pod = w
        .read(|w| {
            w.envs[0]
                .store
                .get(Res::Pods, "kube-system", &before[0].0)
                .map(|o| (*o).clone())
        })
        .expect("the pod is served");
    assert_eq!(
        pod["spec"]["tolerations"],
        serde_json::json!([{"operator": "Exists"}]),
        "{pod:#}"
    );
    let node = before[0].1.clone();
    super::attachment::power_off(&w, &node);
    tokio::time::sleep(Duration::from_secs(50 + 300 + 120)).await;
    let after = operator(&w);
    assert_eq!(after.len(), 2, "no replacement: {after:?}");
    assert!(
        after.iter().any(|p| p.1 == node && !p.2),
        "the pod on the dead node is not evicted: {after:?}"
    );
    // A workload without that toleration leaves the node after grace and toleration.
    let evicted = w.read(|w| {
        w.truth
            .events
            .iter()
            .filter(|e| e.kind == "pod-evicted")
            .map(|e| e.subject.clone())
            .collect::<Vec<_>>()
    });
    assert!(!evicted.is_empty(), "others are evicted");
    assert!(
        evicted.iter().all(|s| !s.contains("cilium-operator")),
        "{evicted:?}"
    );
}
