//! A host's partition beside its power loss, on the same states: where the outcome differs
//! (Longhorn force-deleting a StatefulSet pod that still runs, pods running twice) and where it
//! does not (etcd's quorum, the VIP's and the L2 lease's timings, a held volume).

use std::net::{IpAddr, Ipv4Addr};

use super::Fault;
use super::Outcome;
use super::testing::*;
use super::tests::{reasons, rwo_state, three, with_ingress};
use crate::exit::ExitCode;
use crate::state::{
    ApiState, Collected, EtcdMemberView, EtcdView, State, TalosEndpoint, TalosState,
};

const VIP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 10));

fn both(env: &crate::config::Environment, s: &State) -> (super::Prediction, super::Prediction) {
    (
        run_fault(env, s, Fault::Power),
        run_fault(env, s, Fault::Partition),
    )
}

/// cp-1..3 as etcd members answering over the Talos API, cp-1 holding the API VIP.
fn with_vip_on_cp1(mut s: State) -> State {
    let members: Vec<EtcdMemberView> = (1..=3)
        .map(|i| EtcdMemberView {
            id: format!("{i:016x}"),
            hostname: format!("cp-{i}"),
            ..Default::default()
        })
        .collect();
    s.talos = Collected::Present(TalosState {
        endpoints: (1..=3u8)
            .map(|i| {
                let own = IpAddr::V4(Ipv4Addr::new(10, 0, 0, i));
                TalosEndpoint {
                    endpoint: own.to_string(),
                    view: Ok(EtcdView {
                        members: members.clone(),
                        member_id: format!("{i:016x}"),
                        ..Default::default()
                    }),
                    addresses: Ok(if i == 1 { vec![own, VIP] } else { vec![own] }),
                }
            })
            .collect(),
        ..Default::default()
    });
    s.api = Collected::Present(ApiState {
        vip_endpoint: Some("https://10.0.0.10:6443".into()),
        vip_addresses: vec![VIP],
        kubeconfig_server: Ok("https://10.0.0.10:6443".into()),
        readyz: Ok(()),
        readyz_status: Some(200),
    });
    s
}

#[test]
fn the_prediction_names_the_fault_it_predicted_in_its_json_and_its_text() {
    let s = state().nodes(three()).build();
    let (power, partition) = both(&env(), &s);
    let json = |p: &super::Prediction| serde_json::to_value(p).unwrap()["fault"].clone();
    assert_eq!(json(&power), "power");
    assert_eq!(json(&partition), "partition");
    let text = super::render::text(&partition, "lab");
    assert!(text.contains("\nPartition of pve1 (survives):"), "{text}");
    assert!(
        text.contains("Prediction for lab (partition): 3 of 3 host partitions survivable"),
        "{text}"
    );
    let text = super::render::text(&power, "lab");
    assert!(text.contains("\nLoss of pve1 (survives):"), "{text}");
    assert!(
        text.contains("Prediction for lab: 3 of 3 host losses survivable"),
        "{text}"
    );
}

#[test]
fn a_cut_off_deployment_pod_keeps_running_beside_its_replacement_which_power_loss_does_not() {
    let web = pod("web", "web-1")
        .on("cp-1")
        .requests("100m", "128Mi")
        .build()
        .owned("ReplicaSet", "web-abc")
        .evictable();
    let s = state().nodes(three()).pods([web]).build();
    let (power, partition) = both(&env(), &s);
    // Placed alike: after the same toleration, on the same node.
    let placed = |p: &super::Prediction| p.host("pve1").unwrap().pods[0].describe();
    assert_eq!(placed(&power), placed(&partition));
    assert!(!reasons(&power, "pve1").contains("still running"));
    assert!(
        reasons(&partition, "pve1").lines().any(|l| l
            == "survives: still running on the cut-off nodes beside their replacements, two copies each until the links come back and the kubelet stops the old ones: web/web-1"),
        "{}",
        reasons(&partition, "pve1")
    );
    assert_eq!(
        power.host("pve1").unwrap().outcome,
        partition.host("pve1").unwrap().outcome
    );
}

#[test]
fn a_statefulset_pod_waits_for_its_cut_off_node_as_for_a_dead_one_and_must_not_be_force_deleted() {
    let db = pod("db", "db-0")
        .on("cp-1")
        .build()
        .owned("StatefulSet", "db")
        .evictable();
    let s = state().nodes(three()).pods([db]).build();
    let (power, partition) = both(&env(), &s);
    let host = |p: &super::Prediction| p.host("pve1").unwrap().clone();
    // Not made again in either case: the same move and the same outcome.
    assert_eq!(
        host(&power).pods[0].describe(),
        host(&partition).pods[0].describe()
    );
    assert_eq!(host(&power).outcome, host(&partition).outcome);
    let text = reasons(&partition, "pve1");
    assert!(
        text.contains("StatefulSet pods not made again until the links come back")
            && text.contains("runs two pods of one identity): db/db-0"),
        "{text}"
    );
    assert!(!reasons(&power, "pve1").contains("identity"));
}

#[test]
fn longhorn_force_deleting_a_cut_off_statefulset_pod_makes_the_outcome_unknown_naming_the_pod() {
    let s = rwo_state(
        "StatefulSet",
        "rwo",
        Some("delete-both-statefulset-and-deployment-pod"),
    );
    let (power, partition) = both(&env(), &s);
    assert_eq!(power.host("pve1").unwrap().outcome, Outcome::Degraded);
    assert_eq!(
        partition.host("pve1").unwrap().outcome,
        Outcome::Unknown,
        "{}",
        reasons(&partition, "pve1")
    );
    assert_eq!(partition.exit_code(), ExitCode::CannotTell);
    let text = reasons(&partition, "pve1");
    assert!(
        text.starts_with("unknown: apps/db-0 (StatefulSet) uses ReadWriteOnce Longhorn volume pvc-db: Longhorn's node-down-pod-deletion-policy `delete-both-statefulset-and-deployment-pod` force-deletes the pod")
            && text.contains("whether two pods of one identity harm this application cannot be told")
            && text.contains("set node-down-pod-deletion-policy to delete-deployment-pod"),
        "{text}"
    );
    // The pod is said once, with its volume, not again among the waiting StatefulSet pods.
    assert_eq!(text.matches("db-0").count(), 1, "{text}");
}

#[test]
fn a_cut_off_deployment_pod_longhorn_releases_runs_twice_where_power_loss_just_releases_it() {
    let s = rwo_state("ReplicaSet", "rwo", Some("delete-deployment-pod"));
    let (power, partition) = both(&env(), &s);
    assert_eq!(power.host("pve1").unwrap().outcome, Outcome::Degraded);
    assert_eq!(partition.host("pve1").unwrap().outcome, Outcome::Degraded);
    assert!(!reasons(&power, "pve1").contains("cut-off"));
    let text = reasons(&partition, "pve1");
    assert!(
        text.contains("degraded: apps/db-0 (Deployment) uses ReadWriteOnce Longhorn volume pvc-db: Longhorn takes the cut-off node for down")
            && text.contains("while the old pod still runs on the cut-off node: two copies until the links come back"),
        "{text}"
    );
}

#[test]
fn under_longhorns_default_a_cut_off_pod_holds_its_volume_until_the_links_come_back() {
    let s = rwo_state("ReplicaSet", "rwo", None);
    let (power, partition) = both(&env(), &s);
    assert_eq!(power.host("pve1").unwrap().outcome, Outcome::Lost);
    assert_eq!(partition.host("pve1").unwrap().outcome, Outcome::Lost);
    assert!(reasons(&power, "pve1").contains("until someone force-deletes it"));
    let text = reasons(&partition, "pve1");
    assert!(
        text.starts_with("lost: apps/db-0 (Deployment) uses ReadWriteOnce Longhorn volume pvc-db: with Longhorn's node-down-pod-deletion-policy `do-nothing` the pod stays Terminating on the cut-off node")
            && text.contains("restore the network, or power the node off before force-deleting the pod"),
        "{text}"
    );
    // Its replacement waits for the volume: it is not said to run twice.
    assert!(!text.contains("two copies each"), "{text}");
}

#[test]
fn settings_that_cannot_be_read_leave_a_cut_off_pods_volume_unknown_as_for_power_loss() {
    let mut s = rwo_state("StatefulSet", "rwo", None);
    s.longhorn_settings = Collected::Absent("forbidden".into());
    let (power, partition) = both(&env(), &s);
    assert_eq!(partition.host("pve1").unwrap().outcome, Outcome::Unknown);
    assert_eq!(
        reasons(&power, "pve1")
            .lines()
            .filter(|l| l.starts_with("unknown"))
            .collect::<Vec<_>>(),
        reasons(&partition, "pve1")
            .lines()
            .filter(|l| l.starts_with("unknown"))
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_cut_off_etcd_member_is_a_minority_and_quorum_is_judged_as_after_power_loss() {
    // One member per host: the majority keeps quorum.
    let s = state().nodes(three()).build();
    let (power, partition) = both(&env(), &s);
    let etcd = |p: &super::Prediction, h: &str| {
        let e = p.host(h).unwrap().etcd.clone().unwrap();
        (e.members, e.left, e.quorum, e.kept, e.lost)
    };
    assert_eq!(etcd(&power, "pve1"), etcd(&partition, "pve1"));
    assert_eq!(
        etcd(&partition, "pve1"),
        (3, 2, 2, true, vec!["cp-1".to_string()])
    );
    assert!(
        reasons(&partition, "pve1").contains(
            "survives: etcd member cp-1 cut off: a minority, which can neither lead nor commit an entry; the 2 of 3 members left keep quorum"
        ),
        "{}",
        reasons(&partition, "pve1")
    );
    // Two members on one host: the majority is cut off, quorum is lost either way.
    let nodes = vec![
        node("cp-1").host("pve1").control_plane().ready().build(),
        node("cp-2").host("pve1").control_plane().ready().build(),
        node("cp-3").host("pve2").control_plane().ready().build(),
    ];
    let s = state().nodes(nodes).build();
    let (power, partition) = both(&env(), &s);
    assert_eq!(etcd(&power, "pve1"), etcd(&partition, "pve1"));
    assert_eq!(partition.host("pve1").unwrap().outcome, Outcome::Lost);
    assert_eq!(
        partition.host("pve1").unwrap().first_reason().unwrap(),
        "etcd loses quorum: 1 of 3 members left, 2 needed (lost: cp-1, cp-2)"
    );
}

#[test]
fn the_vip_moves_after_the_cut_off_holders_etcd_session_lapses_in_the_minute_of_a_power_loss() {
    let s = with_vip_on_cp1(state().nodes(three()).build());
    let (power, partition) = both(&env(), &s);
    let e = |p: &super::Prediction| {
        let e = p.host("pve1").unwrap().etcd.clone().unwrap();
        (e.vip_holder, e.vip_moves, e.vip_candidates)
    };
    assert_eq!(e(&power), e(&partition));
    assert_eq!(e(&partition).0.as_deref(), Some("cp-1"));
    let vip = |p: &super::Prediction| {
        reasons(p, "pve1")
            .lines()
            .find(|l| l.contains("the API VIP moves"))
            .map(str::to_string)
            .unwrap_or_default()
    };
    assert_eq!(
        vip(&power),
        "degraded: the API VIP moves from cp-1 to one of cp-2, cp-3: the API through the VIP is down until then (about a minute)"
    );
    assert!(
        vip(&partition).starts_with("degraded: the API VIP moves from cp-1 to one of cp-2, cp-3: the API through the VIP is down until then (about a minute, as after power loss:")
            && vip(&partition).contains("once the session's 60 s TTL ran out"),
        "{}",
        vip(&partition)
    );
    // Another host's partition leaves the VIP where it is.
    assert!(!vip(&partition).is_empty() && !reasons(&partition, "pve2").contains("API VIP"));
}

#[test]
fn a_cut_off_l2_lease_holder_stops_announcing_before_another_takes_the_lease() {
    let s = with_ingress(&[], "cp-2");
    let (power, partition) = both(&ingress_env(), &s);
    assert_eq!(power.host("pve2").unwrap().outcome, Outcome::Degraded);
    assert_eq!(partition.host("pve2").unwrap().outcome, Outcome::Degraded);
    assert!(reasons(&power, "pve2").contains(
        "lease holder cp-2 goes, cp-1, cp-3 can take the lease (10 to 20 s with default timings)"
    ));
    assert!(
        reasons(&partition, "pve2").contains("ingress to Service traefik/traefik blinks: lease holder cp-2 is cut off and stops announcing within the 5 s renew deadline, cp-1, cp-3 can take the lease once it went 15 s unrenewed (10 to 20 s with default timings, as after power loss)"),
        "{}",
        reasons(&partition, "pve2")
    );
}
