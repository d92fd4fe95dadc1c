//! The world's rules, each powering something off and asserting the consequence and its
//! timing. Runs on tokio's paused clock without servers, so simulated minutes take no real
//! time and every timestamp is exact.

use gates_lab::addr::Plan;
use gates_lab::clock::SimClock;
use gates_lab::resources::Res;
use gates_lab::scenario::Scenario;
use gates_lab::truth::TruthEvent;
use gates_lab::world::{Shared, World};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

fn world_of(scenario: Scenario) -> Arc<Shared> {
    let w = World::build(&scenario, Plan::new(1), SimClock::new(1.0)).expect("builds");
    let shared = Shared::new(w);
    tokio::spawn(shared.clone().drive());
    shared
}

fn world(name: &str) -> Arc<Shared> {
    world_of(Scenario::load(name).expect("scenario"))
}

/// Advance simulated (= paused tokio) time.
async fn advance(secs: u64) {
    tokio::time::sleep(Duration::from_secs(secs)).await;
}

fn events(shared: &Shared, kind: &str) -> Vec<TruthEvent> {
    shared.read(|w| {
        w.truth
            .events
            .iter()
            .filter(|e| e.kind == kind)
            .cloned()
            .collect()
    })
}

fn first_at(shared: &Shared, kind: &str) -> f64 {
    events(shared, kind)
        .first()
        .map(|e| e.sim_seconds)
        .unwrap_or_else(|| panic!("no {kind} event"))
}

fn obj(shared: &Shared, env: usize, res: Res, ns: &str, name: &str) -> Value {
    shared
        .read(|w| w.envs[env].store.get(res, ns, name).map(|o| (*o).clone()))
        .unwrap_or_else(|| panic!("{ns}/{name}"))
}

fn pdb_allowed(shared: &Shared, name: &str) -> i64 {
    obj(shared, 0, Res::PodDisruptionBudgets, "kube-system", name)["status"]["disruptionsAllowed"]
        .as_i64()
        .expect("allowed")
}

fn node_ready(shared: &Shared, env: usize, name: &str) -> String {
    let n = obj(shared, env, Res::Nodes, "", name);
    n["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .map(|c| c["status"].as_str().unwrap_or("").to_string())
        .unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn losing_a_host_follows_the_real_timeline() {
    let w = world("adr-007");
    advance(10).await;
    // pve1 holds talos-lab-cp-01: the API VIP holder and the L2 lease holder of `lab`.
    let (vip, lease) = w.read(|w| {
        (
            w.envs[0].vip_holder.map(|h| w.nodes[h].name.clone()),
            w.envs[0]
                .lease
                .as_ref()
                .and_then(|l| l.holder)
                .map(|h| w.nodes[h].name.clone()),
        )
    });
    assert_eq!(vip.as_deref(), Some("talos-lab-cp-01"));
    assert_eq!(lease.as_deref(), Some("talos-lab-cp-01"));
    let cp01_pods: usize = w.read(|w| {
        w.envs[0]
            .pods
            .values()
            .filter(|p| p.node == Some(0))
            .count()
    });
    assert!(cp01_pods > 3);

    w.power_loss_host("pve1").expect("power loss");
    let t0 = first_at(&w, "host-power-lost");
    assert_eq!(first_at(&w, "machine-down"), t0);
    let reach = w.reachability();
    assert!(
        !reach.node_api[0] && !reach.apid[0],
        "the node's endpoints go dark at once"
    );
    assert!(!reach.vip[0], "VIP held by the dead node");
    assert!(!reach.ingress[0], "L2 lease held by the dead node");
    assert!(reach.vip[1], "production is on other hosts");
    // Longhorn: volumes with a replica on the dead node degrade at once.
    let vol = obj(
        &w,
        0,
        Res::LonghornVolumes,
        "longhorn-system",
        "pvc-3f1c2a4e-0b1d-4c55-9a51-2d7e8f0a1b01",
    );
    assert_eq!(vol["status"]["robustness"], "degraded");
    assert_eq!(
        node_ready(&w, 0, "talos-lab-cp-01"),
        "True",
        "before the grace period"
    );

    advance(16).await;
    let moved = events(&w, "lease-moved");
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].sim_seconds - t0, 15.0, "lease duration");
    assert_eq!(moved[0].subject, "talos-lab-cp-02");
    assert!(
        w.reachability().ingress[0],
        "Cluster: a live Traefik pod elsewhere takes the traffic"
    );

    advance(40).await;
    assert_eq!(
        first_at(&w, "node-not-ready") - t0,
        50.0,
        "node-monitor grace"
    );
    // The dead kubelet's heartbeat Lease stopped renewing; the live ones did not.
    let renew = |n: &str| {
        obj(&w, 0, Res::Leases, "kube-node-lease", n)["spec"]["renewTime"]
            .as_str()
            .expect("renewTime")
            .to_string()
    };
    assert!(renew("talos-lab-cp-01") < renew("talos-lab-cp-02"));
    assert_eq!(node_ready(&w, 0, "talos-lab-cp-01"), "Unknown");
    let node = obj(&w, 0, Res::Nodes, "", "talos-lab-cp-01");
    let taints: Vec<&str> = node["spec"]["taints"]
        .as_array()
        .expect("taints")
        .iter()
        .filter_map(|t| t["effect"].as_str())
        .collect();
    assert!(taints.contains(&"NoExecute"));
    // A controller with a pod there has one healthy pod left: no disruption allowed now.
    let coredns_on_cp01 = w.read(|w| {
        w.envs[0]
            .pods
            .values()
            .any(|p| p.node == Some(0) && p.name.starts_with("coredns-"))
    });
    assert!(
        coredns_on_cp01,
        "scenario places a CoreDNS replica on cp-01"
    );
    assert_eq!(pdb_allowed(&w, "coredns"), 0);

    advance(20).await;
    assert_eq!(
        first_at(&w, "vip-moved") - t0,
        60.0,
        "VIP failover after an ungraceful loss"
    );
    assert!(w.reachability().vip[0]);
    assert!(
        events(&w, "quorum-lost").is_empty(),
        "two of three members keep quorum"
    );

    // Toleration: pods are evicted 300 s after the taint and replaced elsewhere.
    advance(300).await;
    let evicted = events(&w, "pod-evicted");
    assert!(!evicted.is_empty());
    assert!(evicted.iter().all(|e| e.sim_seconds - t0 == 350.0));
    let created: Vec<TruthEvent> = events(&w, "pod-created");
    assert!(
        created
            .iter()
            .any(|e| e.subject.starts_with("kube-system/coredns-"))
    );
    assert!(
        created
            .iter()
            .all(|e| !e.detail.contains("talos-lab-cp-01"))
    );
    assert_eq!(
        pdb_allowed(&w, "coredns"),
        1,
        "replacement ready after pod start"
    );
    // The StatefulSet pod, if it was there, stays Terminating (no replacement).
    let sts_stuck = w.read(|w| {
        w.envs[0]
            .pods
            .values()
            .filter(|p| p.name == "whoami-db-0")
            .all(|p| p.node != Some(0) || p.deleting.is_some())
    });
    assert!(sts_stuck);

    // Ground truth outage intervals.
    let truth = w.read(|w| w.truth.clone());
    let api = &truth.targets["api/lab"].outages;
    assert_eq!(api.len(), 1);
    assert_eq!(api[0].duration_sim(), Some(60.0));
    let ing = &truth.targets["ingress/lab/whoami.lab.internal"].outages;
    assert_eq!(ing[0].duration_sim(), Some(15.0));
    assert!(truth.targets["api/lab-production"].outages.is_empty());
}

#[tokio::test(start_paused = true)]
async fn two_hosts_down_lose_quorum_and_power_on_recovers() {
    let w = world("adr-007");
    w.power_loss_host("pve1").expect("pve1");
    advance(5).await;
    w.power_loss_host("pve2").expect("pve2");
    let lost = events(&w, "quorum-lost");
    assert_eq!(lost.len(), 1);
    assert!(!w.reachability().vip[0]);
    assert!(!w.read(|w| w.envs[0].quorum));
    // Production shares pve3 only: it keeps quorum.
    assert!(w.read(|w| w.envs[1].quorum));

    // Hosts come back after wake-on-LAN; VMs are started by hand; nodes boot.
    w.wake_host("pve1").expect("wake");
    assert!(w.start_vm(101).is_err(), "host still offline");
    advance(91).await;
    assert!(!events(&w, "host-online").is_empty());
    let t_start = w.read(|w| w.clock.now().as_secs_f64());
    w.start_vm(101).expect("start");
    advance(46).await;
    let up = first_at(&w, "quorum-regained");
    assert!(
        (up - t_start - 45.0).abs() < 0.01,
        "boot delay: {up} vs {t_start}"
    );
    advance(2).await;
    assert!(w.reachability().vip[0], "VIP back once quorum returns");
    assert_eq!(node_ready(&w, 0, "talos-lab-cp-01"), "True");
    advance(31).await;
    assert!(
        !events(&w, "longhorn-replica-rebuilt").is_empty(),
        "rebuild after the rebuild delay"
    );
}

#[tokio::test(start_paused = true)]
async fn graceful_shutdown_moves_the_vip_and_lease_quickly() {
    let w = world("adr-007");
    w.shutdown_vm(101).expect("shutdown");
    let t0 = first_at(&w, "vm-shutdown-requested");
    assert!(w.reachability().vip[0], "still up while shutting down");
    advance(15).await;
    assert_eq!(first_at(&w, "vm-off") - t0, 10.0);
    assert_eq!(first_at(&w, "lease-released") - t0, 10.0);
    assert_eq!(
        first_at(&w, "vip-moved") - t0,
        11.0,
        "a resigning holder hands over in about a second"
    );
    assert_eq!(first_at(&w, "lease-moved") - t0, 12.0);
}

#[tokio::test(start_paused = true)]
async fn staging_today_loses_ingress_with_its_only_announcing_node() {
    let w = world("staging-today");
    assert!(
        w.reachability().ingress[0],
        "worker holds the lease and runs Traefik"
    );
    w.power_loss_host("pve2").expect("worker's host");
    advance(20).await;
    assert!(!w.reachability().ingress[0]);
    let none = events(&w, "lease-no-candidate");
    assert_eq!(none.len(), 1, "no other node is selected by the policy");
    // With one control plane, losing it loses etcd quorum and the API.
    w.power_loss_host("pve1").expect("cp's host");
    assert!(!w.reachability().vip[0]);
    assert_eq!(events(&w, "quorum-lost").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn local_traffic_policy_needs_traefik_on_the_holder() {
    // adr-007 with Traefik at one replica and ETP Local: when the holder is not where Traefik
    // runs, the announced address drops traffic.
    let mut s = Scenario::load("adr-007").expect("scenario");
    let env = &mut s.environments[0];
    env.ingress
        .as_mut()
        .expect("ingress")
        .external_traffic_policy = "Local".into();
    env.workloads
        .iter_mut()
        .find(|w| w.name == "traefik")
        .expect("traefik")
        .replicas = 1;
    let w = world_of(s);
    let (holder, traefik_node) = w.read(|w| {
        let e = &w.envs[0];
        let t = e
            .pods
            .values()
            .find(|p| p.name.starts_with("traefik-"))
            .and_then(|p| p.node);
        (e.lease.as_ref().and_then(|l| l.holder), t)
    });
    assert_eq!(w.reachability().ingress[0], holder == traefik_node);
    if holder == traefik_node {
        // Move the lease away from Traefik: power off the holder's host. Traefik goes with it.
        let host = w.read(|w| w.hosts[w.nodes[holder.expect("holder")].host].name.clone());
        w.power_loss_host(&host).expect("power loss");
        advance(16).await;
        assert!(
            !w.reachability().ingress[0],
            "new holder has no local Traefik pod"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_stopped_vm_comes_back_before_eviction_keeps_its_pods() {
    let w = world("adr-007");
    let before: Vec<String> = w.read(|w| {
        w.envs[0]
            .pods
            .values()
            .filter(|p| p.node == Some(1))
            .map(|p| p.name.clone())
            .collect()
    });
    w.stop_vm(102).expect("stop");
    // Past the node-monitor grace (50 s).
    advance(55).await;
    assert_eq!(node_ready(&w, 0, "talos-lab-cp-02"), "Unknown");
    w.start_vm(102).expect("start");
    advance(60).await;
    assert_eq!(node_ready(&w, 0, "talos-lab-cp-02"), "True");
    advance(400).await;
    assert!(
        events(&w, "pod-evicted").is_empty(),
        "back before the toleration expired"
    );
    let after: Vec<String> = w.read(|w| {
        w.envs[0]
            .pods
            .values()
            .filter(|p| p.node == Some(1))
            .map(|p| p.name.clone())
            .collect()
    });
    assert_eq!(before, after);
    assert!(w.read(|w| w.envs[0].pods.values().all(|p| p.running)));
    // The containers restarted with the node.
    let pod = w
        .read(|w| {
            w.envs[0]
                .pods
                .values()
                .find(|p| p.node == Some(1))
                .map(|p| (p.namespace.clone(), p.name.clone()))
        })
        .expect("a pod on cp-02");
    let obj = obj(&w, 0, Res::Pods, &pod.0, &pod.1);
    assert_eq!(obj["status"]["containerStatuses"][0]["restartCount"], 1);
}

#[tokio::test(start_paused = true)]
async fn replacements_wait_pending_when_the_survivors_are_full() {
    // Three 900m whoami pods on 2-CPU nodes: two survivors cannot take a third one.
    let mut s = Scenario::load("adr-007").expect("scenario");
    let whoami = s.environments[0]
        .workloads
        .iter_mut()
        .find(|w| w.name == "whoami")
        .expect("whoami");
    whoami.replicas = 3;
    whoami.requests.cpu = "900m".into();
    let w = world_of(s);
    let on: Vec<Option<usize>> = w.read(|w| {
        w.envs[0]
            .pods
            .values()
            .filter(|p| p.name.starts_with("whoami-") && !p.name.starts_with("whoami-db"))
            .map(|p| p.node)
            .collect()
    });
    assert_eq!(on.len(), 3);
    assert!(
        on.iter().all(|n| n.is_some()),
        "all three fit at first: {on:?}"
    );

    w.power_loss_host("pve3").expect("power loss");
    // Past the grace (50 s) and the toleration (300 s): evicted, replacements placed.
    advance(360).await;
    let pending: Vec<String> = w.read(|w| {
        w.envs[0]
            .pods
            .values()
            .filter(|p| p.node.is_none())
            .map(|p| p.name.clone())
            .collect()
    });
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert!(pending[0].starts_with("whoami-"));
    let pod = obj(&w, 0, Res::Pods, "whoami", &pending[0]);
    assert_eq!(pod["status"]["phase"], "Pending");
    assert_eq!(pod["status"]["conditions"][0]["reason"], "Unschedulable");
    let dep = obj(&w, 0, Res::Deployments, "whoami", "whoami");
    assert_eq!(dep["status"]["readyReplicas"], 2);

    // The host comes back: the pending pod is placed on the returning node.
    w.wake_host("pve3").expect("wake");
    advance(91).await;
    w.start_vm(103).expect("start");
    advance(60).await;
    let scheduled = events(&w, "pod-scheduled");
    assert!(
        scheduled
            .iter()
            .any(|e| e.subject.ends_with(&pending[0]) && e.detail == "on talos-lab-cp-03"),
        "{scheduled:?}"
    );
    let dep = obj(&w, 0, Res::Deployments, "whoami", "whoami");
    assert_eq!(dep["status"]["readyReplicas"], 3);
}
