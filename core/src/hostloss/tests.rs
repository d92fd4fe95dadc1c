//! The model's behaviour per question it answers: one test per scheduler filter, etcd, the
//! VIP, L2, Longhorn, protected controllers, capacity, and what it does when it cannot tell.

use super::testing::*;
use super::{Outcome, ProtectedRef};
use crate::exit::ExitCode;
use crate::hostloss::schedule::MoveOutcome;
use crate::state::{Collected, State};

/// cp-1..3 on pve1..3, Ready control planes with 4 CPUs and 8Gi each.
pub(super) fn three() -> Vec<k8s_openapi::api::core::v1::Node> {
    crate::checks::testing::target_nodes()
}

pub(super) fn moves_of<'a>(p: &'a super::Prediction, host: &str) -> &'a [super::schedule::PodMove] {
    &p.host(host).expect("the host is predicted").pods
}

pub(super) fn reasons(p: &super::Prediction, host: &str) -> String {
    p.host(host)
        .expect("the host is predicted")
        .reasons
        .iter()
        .map(|r| format!("{}: {}", r.severity.as_str(), r.text))
        .collect::<Vec<_>>()
        .join("\n")
}

// ------------------------------------------------------------------ the ADR shape

#[test]
fn two_replicas_on_three_hosts_survive_every_host_and_exit_zero() {
    let s = state()
        .nodes(three())
        .pods([
            app_pod("web", 1, "cp-1", "500m", "1Gi"),
            app_pod("web", 2, "cp-2", "500m", "1Gi"),
        ])
        .build();
    let p = run(&s);
    assert_eq!(p.hosts.len(), 3);
    for h in &p.hosts {
        assert_eq!(h.outcome, Outcome::Survives, "{}: {:?}", h.host, h.reasons);
    }
    assert_eq!(p.exit_code(), ExitCode::Passed);
    let moves = moves_of(&p, "pve1");
    assert_eq!(moves.len(), 1);
    assert_eq!(
        moves[0].outcome,
        MoveOutcome::Placed {
            node: "cp-3".into(),
            host: "pve3".into(),
            after_seconds: 300,
            waits_for_deletion: false
        },
        "the replacement goes where no web pod runs and the most room is left"
    );
}

// ------------------------------------------------------------------ resources and pod count

#[test]
fn a_pod_that_fits_no_survivor_makes_the_loss_not_survivable_with_the_schedulers_words() {
    let s = state()
        .nodes(three())
        .pods([
            app_pod("big", 1, "cp-1", "3", "1Gi"),
            app_pod("fill", 2, "cp-2", "2", "1Gi"),
            app_pod("fill", 3, "cp-3", "2", "1Gi"),
        ])
        .build();
    let p = run(&s);
    let h = p.host("pve1").unwrap();
    assert_eq!(h.outcome, Outcome::Lost, "{}", reasons(&p, "pve1"));
    assert_eq!(
        h.first_reason().unwrap(),
        "ReplicaSet apps/big-rs: pod apps/big-1 cannot be rescheduled: 0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 2 Insufficient cpu"
    );
    assert_eq!(p.exit_code(), ExitCode::Failed);
    assert_eq!(p.worst.as_deref(), Some("pve1"));
    assert!(
        p.host("pve2").unwrap().survivable(),
        "the 2-CPU pod of cp-2 fits on cp-1 or cp-3"
    );
}

/// A pod of `app` binding `port` on its node, as an ingress controller on the host's
/// network does.
fn port_pod(app: &str, index: usize, node: &str, port: i32, ip: Option<&str>) -> crate::state::Pod {
    pod("apps", &format!("{app}-{index}"))
        .labels(&[("app", app)])
        .on(node)
        .requests("100m", "128Mi")
        .host_port(port, ip)
        .build()
        .owned("ReplicaSet", &format!("{app}-rs"))
        .evictable()
}

#[test]
fn a_replacement_needs_a_node_where_its_host_port_is_free() {
    // Every survivor binds 443 already: the lost host's copy fits nowhere, in the words of
    // the scheduler's NodePorts filter.
    let s = state()
        .nodes(three())
        .pods([
            port_pod("edge", 1, "cp-1", 443, None),
            port_pod("other", 2, "cp-2", 443, None),
            port_pod("other", 3, "cp-3", 443, Some("10.0.0.3")),
        ])
        .build();
    let p = run(&s);
    assert_eq!(
        p.host("pve1").unwrap().outcome,
        Outcome::Lost,
        "{}",
        reasons(&p, "pve1")
    );
    assert!(
        reasons(&p, "pve1")
            .contains("2 node(s) didn't have free ports for the requested pod ports"),
        "{}",
        reasons(&p, "pve1")
    );
    // Bound on another protocol or on one address each, 443 is free for a pod that binds a
    // different address.
    let mut udp = port_pod("other", 2, "cp-2", 443, None);
    udp.spec.as_mut().unwrap().containers[0].ports[0].protocol = Some("UDP".into());
    let s = state()
        .nodes(three())
        .pods([
            port_pod("edge", 1, "cp-1", 443, Some("10.0.0.1")),
            udp,
            port_pod("other", 3, "cp-3", 443, Some("10.0.0.3")),
        ])
        .build();
    let p = run(&s);
    assert!(
        moves_of(&p, "pve1")[0].placed_on().is_some(),
        "{:?}\n{}",
        moves_of(&p, "pve1"),
        reasons(&p, "pve1")
    );
}

#[test]
fn two_replacements_binding_one_host_port_do_not_share_a_node() {
    // Two copies on the lost node, one free survivor each: placed one per node, not both on
    // the emptier one.
    let s = state()
        .nodes(three())
        .pods([
            port_pod("edge", 1, "cp-1", 8443, None),
            port_pod("edge", 2, "cp-1", 8443, Some("10.0.0.1")),
            app_pod("fill", 3, "cp-2", "1", "1Gi"),
        ])
        .build();
    let p = run(&s);
    let nodes: std::collections::BTreeSet<&str> = moves_of(&p, "pve1")
        .iter()
        .filter_map(|m| m.placed_on())
        .collect();
    assert_eq!(nodes.len(), 2, "{:?}", moves_of(&p, "pve1"));
}

/// `app_pod` at `priority`.
fn prio_pod(app: &str, index: usize, node: &str, cpu: &str, priority: i32) -> crate::state::Pod {
    let mut p = app_pod(app, index, node, cpu, "256Mi");
    p.spec.as_mut().unwrap().priority = Some(priority);
    p
}

#[test]
fn a_replacement_of_higher_priority_preempts_the_fewest_lower_priority_pods_where_that_makes_room()
{
    // The lost host's critical pod fits no survivor as they stand. On cp-2 evicting one
    // priority-0 pod makes room; on cp-3 it would take a priority-100 one.
    let s = state()
        .nodes(three())
        .pods([
            prio_pod("critical", 1, "cp-1", "3", 1000),
            prio_pod("low", 2, "cp-2", "2", 0),
            prio_pod("low", 3, "cp-2", "1", 0),
            prio_pod("mid", 4, "cp-3", "3", 100),
        ])
        .build();
    let p = run(&s);
    let text = reasons(&p, "pve1");
    let critical = moves_of(&p, "pve1")
        .iter()
        .find(|m| m.pod == "apps/critical-1")
        .unwrap();
    assert_eq!(critical.placed_on(), Some("cp-2"), "{text}");
    assert!(
        text.contains(
            "pod apps/critical-1 (priority 1000) fits only by preempting lower-priority pods on cp-2: apps/low-2 (priority 0)"
        ),
        "{text}"
    );
    // The victim is made again by its ReplicaSet and placed where it fits, or named.
    let victim = moves_of(&p, "pve1")
        .iter()
        .find(|m| m.pod == "apps/low-2")
        .expect("the preempted pod is predicted too");
    assert_eq!(victim.from, "cp-2");
    assert!(
        !text.contains("apps/low-3"),
        "only as few as make room: {text}"
    );
    assert_ne!(p.host("pve1").unwrap().outcome, Outcome::Survives, "{text}");
}

#[test]
fn a_pod_that_never_preempts_or_outranks_nobody_fits_nowhere() {
    let mut never = prio_pod("critical", 1, "cp-1", "3", 1000);
    never.spec.as_mut().unwrap().preemption_policy = Some("Never".into());
    for critical in [never, prio_pod("critical", 1, "cp-1", "3", 0)] {
        let s = state()
            .nodes(three())
            .pods([
                critical,
                prio_pod("low", 2, "cp-2", "3", 0),
                prio_pod("low", 3, "cp-3", "3", 0),
            ])
            .build();
        let p = run(&s);
        let text = reasons(&p, "pve1");
        assert!(!text.contains("preempting"), "{text}");
        assert_eq!(p.host("pve1").unwrap().outcome, Outcome::Lost, "{text}");
    }
}

#[test]
fn memory_is_judged_like_cpu() {
    let s = state()
        .nodes(three())
        .pods([
            app_pod("big", 1, "cp-1", "100m", "5Gi"),
            app_pod("fill", 2, "cp-2", "100m", "4Gi"),
            app_pod("fill", 3, "cp-3", "100m", "4Gi"),
        ])
        .build();
    let p = run(&s);
    assert!(
        reasons(&p, "pve1").contains("2 Insufficient memory"),
        "{}",
        reasons(&p, "pve1")
    );
}

#[test]
fn a_survivor_at_its_pod_limit_takes_no_more_pods() {
    let mut nodes = three();
    for n in &mut nodes {
        n.status
            .as_mut()
            .unwrap()
            .allocatable
            .as_mut()
            .unwrap()
            .insert(
                "pods".into(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity("1".into()),
            );
    }
    let s = state()
        .nodes(nodes)
        .pods([
            app_pod("a", 1, "cp-1", "10m", "10Mi"),
            app_pod("b", 2, "cp-2", "10m", "10Mi"),
            app_pod("c", 3, "cp-3", "10m", "10Mi"),
        ])
        .build();
    let p = run(&s);
    assert!(
        reasons(&p, "pve1").contains("2 Too many pods"),
        "{}",
        reasons(&p, "pve1")
    );
}

// ------------------------------------------------------------------ taints

#[test]
fn a_no_schedule_taint_keeps_replacements_off_a_survivor_unless_tolerated() {
    let mut nodes = three();
    nodes[1] = node("cp-2")
        .host("pve2")
        .control_plane()
        .ready()
        .taint("dedicated", "NoSchedule")
        .build();
    nodes[2] = node("cp-3")
        .host("pve3")
        .control_plane()
        .ready()
        .taint("node-role.kubernetes.io/control-plane", "NoSchedule")
        .build();
    let plain = app_pod("web", 1, "cp-1", "100m", "100Mi");
    let p = run(&state().nodes(nodes.clone()).pods([plain.clone()]).build());
    let text = reasons(&p, "pve1");
    assert!(
        text.contains("lost: ReplicaSet apps/web-rs: pod apps/web-1 cannot be rescheduled"),
        "{text}"
    );
    assert!(text.contains("{dedicated: }"), "{text}");
    assert!(
        text.contains("{node-role.kubernetes.io/control-plane: }"),
        "{text}"
    );

    let tolerant = plain.tolerating("dedicated", "NoSchedule", None);
    let p = run(&state().nodes(nodes).pods([tolerant]).build());
    assert_eq!(
        moves_of(&p, "pve1")[0].placed_on(),
        Some("cp-2"),
        "{}",
        reasons(&p, "pve1")
    );
}

#[test]
fn a_survivor_that_is_not_ready_carries_the_not_ready_taint_even_when_the_snapshot_lacks_it() {
    let mut nodes = three();
    nodes[1] = node("cp-2")
        .host("pve2")
        .control_plane()
        .not_ready()
        .build();
    let s = state()
        .nodes(nodes)
        .pods([
            app_pod("web", 1, "cp-1", "100m", "100Mi"),
            app_pod("fill", 2, "cp-3", "3950m", "100Mi"),
        ])
        .build();
    let p = run(&s);
    let text = reasons(&p, "pve1");
    assert!(text.contains("{node.kubernetes.io/not-ready: }"), "{text}");
    assert!(text.contains("1 Insufficient cpu"), "{text}");
}

#[test]
fn a_pod_that_tolerates_unreachable_forever_stays_bound_and_is_not_replaced() {
    let s = state()
        .nodes(three())
        .pods([pod("apps", "sticky")
            .labels(&[("app", "sticky")])
            .on("cp-1")
            .build()
            .owned("ReplicaSet", "sticky-rs")
            .tolerating("node.kubernetes.io/unreachable", "", None)])
        .build();
    let p = run(&s);
    assert!(matches!(
        moves_of(&p, "pve1")[0].outcome,
        MoveOutcome::Stays { .. }
    ));
    assert_eq!(p.host("pve1").unwrap().outcome, Outcome::Degraded);
}

#[test]
fn daemonset_and_static_pods_do_not_move_and_bare_pods_are_lost() {
    let s = state()
        .nodes(three())
        .pods([
            pod("kube-system", "cilium-x")
                .on("cp-1")
                .build()
                .owned("DaemonSet", "cilium"),
            pod("kube-system", "kube-apiserver-cp-1")
                .on("cp-1")
                .build()
                .owned("Node", "cp-1"),
            pod("apps", "debug").on("cp-1").build(),
        ])
        .build();
    let p = run(&s);
    let moves = moves_of(&p, "pve1");
    assert_eq!(moves.len(), 1, "{moves:?}");
    assert_eq!(moves[0].pod, "apps/debug");
    assert!(
        reasons(&p, "pve1")
            .contains("degraded: pod apps/debug on cp-1 is lost: no controller recreates it")
    );
}

// ------------------------------------------------------------------ node selector and affinity

#[test]
fn a_node_selector_only_lost_nodes_match_leaves_the_pod_nowhere() {
    let mut nodes = three();
    nodes[0] = node("cp-1")
        .host("pve1")
        .control_plane()
        .ready()
        .label("disk", "nvme")
        .build();
    let s = state()
        .nodes(nodes)
        .pods([app_pod("db", 1, "cp-1", "100m", "100Mi").node_selector(&[("disk", "nvme")])])
        .build();
    let text = reasons(&run(&s), "pve1");
    assert!(
        text.contains("2 node(s) didn't match Pod's node affinity/selector"),
        "{text}"
    );
}

#[test]
fn required_node_affinity_picks_among_the_survivors_it_allows() {
    let s = state()
        .nodes(three())
        .pods([app_pod("db", 1, "cp-1", "100m", "100Mi")
            .node_affinity_in("kubernetes.io/hostname", &["cp-1", "cp-3"])])
        .build();
    let p = run(&s);
    assert_eq!(moves_of(&p, "pve1")[0].placed_on(), Some("cp-3"));
}

// ------------------------------------------------------------------ pod anti-affinity

#[test]
fn required_anti_affinity_with_a_sibling_on_every_survivor_leaves_nowhere_to_go() {
    let pods = (1..=3).map(|i| {
        app_pod("op", i, &format!("cp-{i}"), "10m", "10Mi")
            .anti_affinity(&[("app", "op")], "kubernetes.io/hostname")
    });
    let p = run(&state().nodes(three()).pods(pods).build());
    for host in ["pve1", "pve2", "pve3"] {
        let text = reasons(&p, host);
        assert!(
            text.contains("2 node(s) didn't match pod anti-affinity rules"),
            "{host}: {text}"
        );
        assert_eq!(p.host(host).unwrap().outcome, Outcome::Lost);
    }

    let two = (1..=2).map(|i| {
        app_pod("op", i, &format!("cp-{i}"), "10m", "10Mi")
            .anti_affinity(&[("app", "op")], "kubernetes.io/hostname")
    });
    let p = run(&state().nodes(three()).pods(two).build());
    assert_eq!(moves_of(&p, "pve1")[0].placed_on(), Some("cp-3"));
}

#[test]
fn an_existing_pods_anti_affinity_repels_the_replacement() {
    let s = state()
        .nodes(three())
        .pods([
            app_pod("web", 1, "cp-1", "10m", "10Mi"),
            app_pod("loner", 2, "cp-2", "10m", "10Mi")
                .anti_affinity(&[("app", "web")], "kubernetes.io/hostname"),
            app_pod("fill", 3, "cp-3", "4", "10Mi"),
        ])
        .build();
    let text = reasons(&run(&s), "pve1");
    assert!(
        text.contains("1 node(s) didn't satisfy existing pods anti-affinity rules"),
        "{text}"
    );
}

// ------------------------------------------------------------------ topology spread

#[test]
fn a_hostname_spread_with_max_skew_one_is_pinned_by_the_lost_nodes_empty_domain() {
    let pods = (1..=3).map(|i| {
        app_pod("dns", i, &format!("cp-{i}"), "10m", "10Mi").spread(
            1,
            "kubernetes.io/hostname",
            &[("app", "dns")],
        )
    });
    let p = run(&state().nodes(three()).pods(pods).build());
    let text = reasons(&p, "pve1");
    assert!(
        text.contains("2 node(s) didn't match pod topology spread constraints"),
        "the lost node still counts as a domain with no pod, so any survivor would reach skew 2: {text}"
    );
}

#[test]
fn a_spread_that_honours_taints_ignores_the_lost_node_and_places_the_pod() {
    let pods: Vec<_> = (1..=3)
        .map(|i| {
            let mut p = app_pod("dns", i, &format!("cp-{i}"), "10m", "10Mi").spread(
                1,
                "kubernetes.io/hostname",
                &[("app", "dns")],
            );
            p.spec_mut().topology_spread_constraints.as_mut().unwrap()[0].node_taints_policy =
                Some("Honor".into());
            p
        })
        .collect();
    let p = run(&state().nodes(three()).pods(pods).build());
    assert!(
        moves_of(&p, "pve1")[0].placed_on().is_some(),
        "{}",
        reasons(&p, "pve1")
    );
}

#[test]
fn a_node_without_the_spread_key_is_rejected_for_a_missing_label() {
    let mut nodes = three();
    nodes[2] = node("cp-3").host("pve3").control_plane().ready().build();
    let pods = (1..=2).map(|i| {
        app_pod("dns", i, &format!("cp-{i}"), "10m", "10Mi").spread(1, "rack", &[("app", "dns")])
    });
    let mut nodes_with_rack = nodes.clone();
    for (i, n) in nodes_with_rack.iter_mut().enumerate().take(2) {
        n.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("rack".into(), format!("r{i}"));
    }
    let text = reasons(
        &run(&state().nodes(nodes_with_rack).pods(pods).build()),
        "pve1",
    );
    assert!(text.contains("(missing required label)"), "{text}");
}

// ------------------------------------------------------------------ etcd and the VIP

#[test]
fn two_control_planes_on_one_host_take_etcd_quorum_with_them() {
    let nodes = vec![
        node("cp-1").host("pve1").control_plane().ready().build(),
        node("cp-2").host("pve1").control_plane().ready().build(),
        node("cp-3").host("pve2").control_plane().ready().build(),
    ];
    let p = run(&state().nodes(nodes).build());
    let h = p.host("pve1").unwrap();
    assert_eq!(h.outcome, Outcome::Lost);
    assert_eq!(
        h.first_reason().unwrap(),
        "etcd loses quorum: 1 of 3 members left, 2 needed (lost: cp-1, cp-2)"
    );
    assert_eq!(p.host("pve2").unwrap().outcome, Outcome::Survives);
    let etcd = p.host("pve2").unwrap().etcd.as_ref().unwrap();
    assert_eq!((etcd.left, etcd.quorum, etcd.kept), (2, 2, true));
}

#[test]
fn a_member_already_down_counts_against_quorum() {
    let mut nodes = three();
    nodes[2] = node("cp-3")
        .host("pve3")
        .control_plane()
        .not_ready()
        .build();
    let p = run(&state().nodes(nodes).build());
    assert!(reasons(&p, "pve1").starts_with("lost: etcd loses quorum: 1 of 3"));
}

// ------------------------------------------------------------------ L2

pub(super) fn with_ingress(policy_nodes: &[(&str, &str)], holder: &str) -> State {
    state()
        .nodes(three())
        .services([traefik_service().build()])
        .l2_policies([l2_policy("ingress")
            .service_labels(&[("app.kubernetes.io/name", "traefik")])
            .node_labels(policy_nodes)
            .build()])
        .leases([lease(
            "kube-system",
            "cilium-l2announce-traefik-traefik",
            holder,
        )])
        .build()
}

#[test]
fn a_missing_ingress_service_means_ingress_cannot_be_predicted() {
    let p = run_with(&ingress_env(), &state().nodes(three()).build(), &[]);
    assert_eq!(
        reasons(&p, "pve1"),
        "unknown: no LoadBalancer Service matches app.kubernetes.io/name=traefik, so ingress cannot be predicted"
    );
}

#[test]
fn an_l2_policy_selecting_only_the_lost_node_loses_the_ingress_address() {
    let p = run_with(
        &ingress_env(),
        &with_ingress(&[("kubernetes.io/hostname", "cp-1")], "cp-1"),
        &[],
    );
    let h = p.host("pve1").unwrap();
    assert_eq!(h.outcome, Outcome::Lost);
    assert_eq!(
        h.first_reason().unwrap(),
        "Service traefik/traefik loses its ingress address: the L2 policies announcing it (ingress) select no surviving Ready node (they select cp-1 (pve1))"
    );
    assert_eq!(p.host("pve2").unwrap().outcome, Outcome::Survives);
}

#[test]
fn the_lease_holders_host_blinks_ingress_and_the_others_do_not() {
    let p = run_with(&ingress_env(), &with_ingress(&[], "cp-2"), &[]);
    assert_eq!(p.host("pve2").unwrap().outcome, Outcome::Degraded);
    assert!(reasons(&p, "pve2").contains("ingress to Service traefik/traefik blinks: lease holder cp-2 goes, cp-1, cp-3 can take the lease"));
    assert_eq!(p.host("pve1").unwrap().outcome, Outcome::Survives);
    assert_eq!(p.worst.as_deref(), Some("pve2"));
}

#[test]
fn unreadable_l2_policies_make_the_outcome_unknown_and_exit_two() {
    let s = State {
        l2_policies: Collected::Absent("the CRD is not served".into()),
        ..with_ingress(&[], "cp-2")
    };
    let p = run_with(&ingress_env(), &s, &[]);
    assert_eq!(p.host("pve1").unwrap().outcome, Outcome::Unknown);
    assert_eq!(p.exit_code(), ExitCode::CannotTell);
}

// ------------------------------------------------------------------ Longhorn

#[test]
fn a_volume_whose_last_replica_is_on_the_host_loses_it_and_others_run_degraded() {
    let s = state()
        .nodes(three())
        .longhorn_volumes([
            longhorn_volume("pvc-single", "attached", "healthy", "cp-2"),
            longhorn_volume("pvc-triple", "attached", "healthy", "cp-2"),
        ])
        .longhorn_replicas([
            longhorn_replica("pvc-single-r1", "pvc-single", "cp-1"),
            longhorn_replica("pvc-triple-r1", "pvc-triple", "cp-1"),
            longhorn_replica("pvc-triple-r2", "pvc-triple", "cp-2"),
            longhorn_replica("pvc-triple-r3", "pvc-triple", "cp-3"),
        ])
        .build();
    let p = run(&s);
    // Three replicas on three nodes under hard anti-affinity: the two survivors already hold
    // one each, so the lost one cannot be rebuilt anywhere until its host returns.
    assert_eq!(
        reasons(&p, "pve1"),
        "lost: Longhorn volume pvc-single loses its last replica (on cp-1)\ndegraded: 1 Longhorn volume run degraded until the host returns: every surviving node Longhorn may schedule on already holds a replica, and replica anti-affinity is hard (replica-soft-anti-affinity false), so the lost replicas cannot be rebuilt: pvc-triple (2 of 3 left)"
    );
    assert_eq!(p.host("pve2").unwrap().outcome, Outcome::Degraded);
}

#[test]
fn a_lost_replica_is_rebuilt_where_a_survivor_holds_none_or_anti_affinity_is_soft() {
    let lh = |n: &str| {
        crate::checks::testing::longhorn_node(n)
            .disk("d", true)
            .build()
    };
    let fourth = crate::checks::testing::node("w-4")
        .host("pve4")
        .ready()
        .build();
    let triple = [
        longhorn_replica("pvc-triple-r1", "pvc-triple", "cp-1"),
        longhorn_replica("pvc-triple-r2", "pvc-triple", "cp-2"),
        longhorn_replica("pvc-triple-r3", "pvc-triple", "cp-3"),
    ];
    let s = state()
        .nodes(three().into_iter().chain([fourth]))
        .longhorn_nodes([lh("cp-1"), lh("cp-2"), lh("cp-3"), lh("w-4")])
        .longhorn_volumes([longhorn_volume("pvc-triple", "attached", "healthy", "cp-2")])
        .longhorn_replicas(triple.clone())
        .build();
    let p = run(&s);
    let text = reasons(&p, "pve1");
    assert!(
        text.contains("until Longhorn rebuilds the lost replicas: pvc-triple"),
        "{text}"
    );
    // The rebuild copies the 2 GiB volume once, onto the fourth node, and nothing keeps
    // room for that traffic.
    assert!(
        text.contains("about 2.0 GiB to copy (each volume's size once per lost replica), with no capacity.rebuild_margin kept for the traffic"),
        "{text}"
    );
    let volume = &p.host("pve1").unwrap().volumes[0];
    assert_eq!(volume.rebuild_bytes, Some(2 << 30));
    let mut env = crate::checks::testing::env();
    env.capacity.rebuild_margin = 0.2;
    let with_margin = super::predict(
        super::Input {
            env: &env,
            state: &s,
            protected: &[],
            pause: &crate::pause::NEVER,
        },
        Some("pve1"),
    );
    assert!(
        reasons(&with_margin, "pve1")
            .contains("carried by the 20 % of each receiving node capacity.rebuild_margin keeps"),
        "{}",
        reasons(&with_margin, "pve1")
    );

    // Three nodes, but two replicas of a volume may share a node.
    let s = state()
        .nodes(three())
        .longhorn_nodes([lh("cp-1"), lh("cp-2"), lh("cp-3")])
        .longhorn_volumes([longhorn_volume("pvc-triple", "attached", "healthy", "cp-2")])
        .longhorn_replicas(triple)
        .longhorn_settings([crate::checks::testing::longhorn_setting(
            "replica-soft-anti-affinity",
            "true",
        )])
        .build();
    let text = reasons(&run(&s), "pve1");
    assert!(
        text.contains("until Longhorn rebuilds the lost replicas: pvc-triple"),
        "{text}"
    );
}

#[test]
fn failed_replicas_are_no_copies_so_a_volume_whose_only_healthy_replica_goes_is_lost() {
    let failed = |name: &str, node: &str| {
        let mut r = longhorn_replica(name, "pvc-data", node);
        r.spec.failed_at = "2026-12-01T10:00:00Z".into();
        r
    };
    let s = state()
        .nodes(three())
        .longhorn_volumes([longhorn_volume("pvc-data", "attached", "degraded", "cp-1")])
        .longhorn_replicas([
            longhorn_replica("pvc-data-r1", "pvc-data", "cp-1"),
            failed("pvc-data-r2", "cp-2"),
            failed("pvc-data-r3", "cp-3"),
        ])
        .build();
    let p = run(&s);
    assert_eq!(
        reasons(&p, "pve1"),
        "lost: Longhorn volume pvc-data loses its last replica (on cp-1)"
    );
    // Losing a host that holds only a failed replica costs the volume nothing.
    assert!(!reasons(&p, "pve2").contains("pvc-data"));
}

#[test]
fn a_replica_still_being_rebuilt_is_no_copy_but_one_without_the_field_counts() {
    // healthyAt is cleared before a rebuild and set when the replica turns read/write.
    let rebuilding = |name: &str, node: &str| {
        let mut r = longhorn_replica(name, "pvc-data", node);
        r.spec.healthy_at = Some(String::new());
        r
    };
    let s = state()
        .nodes(three())
        .longhorn_volumes([longhorn_volume("pvc-data", "attached", "degraded", "cp-1")])
        .longhorn_replicas([
            longhorn_replica("pvc-data-r1", "pvc-data", "cp-1"),
            rebuilding("pvc-data-r2", "cp-2"),
            rebuilding("pvc-data-r3", "cp-3"),
        ])
        .build();
    assert_eq!(
        reasons(&run(&s), "pve1"),
        "lost: Longhorn volume pvc-data loses its last replica (on cp-1)"
    );
    // A hand-written replica that carries no healthyAt at all is read as healthy.
    let unmarked = |name: &str, node: &str| {
        let mut r = longhorn_replica(name, "pvc-data", node);
        r.spec.healthy_at = None;
        r
    };
    let s = state()
        .nodes(three())
        .longhorn_volumes([longhorn_volume("pvc-data", "attached", "healthy", "cp-1")])
        .longhorn_replicas([
            unmarked("pvc-data-r1", "cp-1"),
            unmarked("pvc-data-r2", "cp-2"),
            unmarked("pvc-data-r3", "cp-3"),
        ])
        .build();
    assert!(reasons(&run(&s), "pve1").contains("pvc-data (2 of 3 left)"));
}

// ------------------------------------------------------------------ protected controllers, PDBs

#[test]
fn a_protected_controller_with_every_replica_on_the_host_is_not_survivable() {
    let s = state()
        .nodes(three())
        .pods([
            app_pod("web", 1, "cp-1", "10m", "10Mi"),
            app_pod("web", 2, "cp-1", "10m", "10Mi"),
        ])
        .build();
    let named = [ProtectedRef {
        name: "web".into(),
        namespace: Some("apps".into()),
        selector: [("app".to_string(), "web".to_string())].into(),
    }];
    let p = run_with(&env(), &s, &named);
    let h = p.host("pve1").unwrap();
    assert_eq!(
        h.first_reason().unwrap(),
        "protected controller web keeps no ready replica: web-1, web-2 go with the host"
    );
    assert_eq!(h.controllers[0].after_rescheduling, 2);
    // Unprotected, the same loss is an outage until the pods are recreated, not a loss.
    let p = run(&s);
    assert_eq!(p.host("pve1").unwrap().outcome, Outcome::Degraded);
    assert!(reasons(&p, "pve1").contains("ReplicaSet apps/web-rs has no ready replica until its pods are recreated elsewhere (evicted after 300s)"));
}

#[test]
fn a_pdb_with_neither_field_requires_every_pod_it_selects() {
    // policy/v1 defaults neither minAvailable nor maxUnavailable; the disruption controller
    // then allows no disruption, so three healthy of three is already the floor.
    let mut neither = pdb("apps", "web", &[("app", "web")]).build();
    let spec = neither.spec.as_mut().unwrap();
    spec.min_available = None;
    spec.max_unavailable = None;
    let s = state()
        .nodes(three())
        .pods((1..=3).map(|i| app_pod("web", i, &format!("cp-{i}"), "10m", "10Mi")))
        .pdbs([neither])
        .build();
    let p = run(&s);
    assert!(
        reasons(&p, "pve1").contains(
            "PDB apps/web allows no eviction while the host is down (2 healthy, 3 required)"
        ),
        "{}",
        reasons(&p, "pve1")
    );
}

#[test]
fn a_pdb_protects_its_controller_and_names_the_evictions_it_would_block() {
    let s = state()
        .nodes(three())
        .pods((1..=3).map(|i| app_pod("web", i, &format!("cp-{i}"), "10m", "10Mi")))
        .pdbs([pdb("apps", "web", &[("app", "web")])
            .min_available(2)
            .build()])
        .build();
    let p = run(&s);
    let h = p.host("pve1").unwrap();
    assert_eq!(h.controllers[0].name, "PDB apps/web");
    assert_eq!(
        (
            h.controllers[0].ready_left,
            h.controllers[0].after_rescheduling
        ),
        (2, 3)
    );
    assert_eq!(
        reasons(&p, "pve1"),
        "degraded: PDB apps/web allows no eviction while the host is down (2 healthy, 2 required): draining another node blocks until the pods are rescheduled"
    );
}

#[test]
fn statefulset_pods_are_placed_but_wait_for_the_old_pod_to_be_deleted() {
    let s = state()
        .nodes(three())
        .pods([pod("db", "db-0")
            .on("cp-1")
            .build()
            .owned("StatefulSet", "db")
            .evictable()])
        .build();
    let p = run(&s);
    let m = &moves_of(&p, "pve1")[0];
    assert!(matches!(
        m.outcome,
        MoveOutcome::Placed {
            waits_for_deletion: true,
            ..
        }
    ));
    assert_eq!(m.controller, "StatefulSet db/db");
    assert!(
        m.describe()
            .ends_with("once the old pod is deleted (StatefulSet)"),
        "{}",
        m.describe()
    );
}

// ------------------------------------------------------------------ capacity

#[test]
fn moved_memory_usage_beyond_allocatable_is_not_survivable_and_the_rebuild_margin_degrades() {
    let mut env = env();
    env.capacity.basis = crate::config::CapacityBasis::Usage;
    env.capacity.rebuild_margin = 0.25;
    let s = state()
        .nodes(three())
        .pods([
            app_pod("web", 1, "cp-1", "100m", "1Gi"),
            app_pod("web", 2, "cp-2", "100m", "1Gi"),
        ])
        .node_metrics([
            node_metrics("cp-1", "1", "2Gi"),
            node_metrics("cp-2", "1", "2Gi"),
            node_metrics("cp-3", "1", "7680Mi"),
        ])
        .build();
    let p = run_with(&env, &s, &[]);
    let text = reasons(&p, "pve1");
    assert!(
        text.contains("lost: cp-3 (pve3) would use 106% of its memory (8.5Gi of 8Gi): pods are evicted or OOM-killed"),
        "{text}"
    );
    let s2 = state()
        .nodes(three())
        .pods([app_pod("web", 1, "cp-1", "100m", "1Gi")])
        .node_metrics([
            node_metrics("cp-1", "1", "2Gi"),
            node_metrics("cp-2", "1", "6Gi"),
            node_metrics("cp-3", "1", "6Gi"),
        ])
        .build();
    let p = run_with(&env, &s2, &[]);
    let text = reasons(&p, "pve1");
    assert!(
        text.contains("keeps less than the 25% rebuild margin free"),
        "{text}"
    );
    assert_eq!(p.host("pve1").unwrap().outcome, Outcome::Degraded);
}

// ------------------------------------------------------------------ cannot tell

#[test]
fn a_node_without_a_host_makes_every_host_loss_fatal() {
    let mut nodes = three();
    nodes.push(node("w-1").ready().build());
    let p = run(&state().nodes(nodes.clone()).build());
    for h in &p.hosts {
        assert_eq!(h.outcome, Outcome::Lost);
        assert_eq!(
            h.first_reason().unwrap(),
            "node w-1 has no host label topology.kubernetes.io/zone: no host's loss can be shown survivable while a node's host is unknown"
        );
    }
    assert_eq!(p.exit_code(), ExitCode::Failed);
    // With no node on a known host there is no host to list, and the reason stays.
    let p = run(&state().nodes([node("w-1").ready().build()]).build());
    assert!(p.hosts.is_empty());
    assert_eq!(p.not_survivable.len(), 1);
    assert_eq!(p.exit_code(), ExitCode::Failed);
}

#[test]
fn a_node_whose_vm_config_could_not_be_read_makes_every_outcome_unknown_not_lost() {
    let s = state()
        .nodes(three())
        .with(|s| {
            s.proxmox = crate::checks::testing::proxmox(
                &[("cp-1", "pve1"), ("cp-2", "pve2")],
                &["VM 103 cp-3 on pve3: timed out"],
            )
        })
        .build();
    let p = run(&s);
    assert!(!p.hosts.is_empty());
    for h in &p.hosts {
        assert_eq!(h.outcome, Outcome::Unknown, "{}", reasons(&p, &h.host));
        assert!(
            reasons(&p, &h.host).contains("VM 103 cp-3 on pve3: timed out"),
            "{}",
            reasons(&p, &h.host)
        );
    }
    assert_eq!(p.exit_code(), ExitCode::CannotTell);
    // With no node on a known host, nothing can be predicted, and the prediction says why.
    let s = state()
        .nodes(three())
        .with(|s| {
            s.proxmox = crate::checks::testing::proxmox(&[], &["VM 101 cp-1 on pve1: timed out"])
        })
        .build();
    let p = run(&s);
    assert!(p.hosts.is_empty());
    assert!(p.not_survivable.is_empty(), "{:?}", p.not_survivable);
    assert!(
        p.cannot_tell.join("\n").contains("VM 101 cp-1 on pve1"),
        "{:?}",
        p.cannot_tell
    );
    assert_eq!(p.exit_code(), ExitCode::CannotTell);
}

fn usage_env() -> crate::config::Environment {
    let mut env = env();
    env.capacity.basis = crate::config::CapacityBasis::Usage;
    env
}

fn two_web_pods() -> Vec<crate::state::Pod> {
    vec![
        app_pod("web", 1, "cp-1", "500m", "1Gi"),
        app_pod("web", 2, "cp-2", "500m", "1Gi"),
    ]
}

#[test]
fn unreadable_metrics_make_the_measured_capacity_unknown_and_exit_two() {
    let s = state()
        .nodes(three())
        .pods(two_web_pods())
        .with(|s| s.node_metrics = Collected::Absent("metrics-server is not installed".into()))
        .build();
    let p = run_with(&usage_env(), &s, &[]);
    assert_eq!(p.host("pve1").unwrap().outcome, Outcome::Unknown);
    assert_eq!(
        reasons(&p, "pve1"),
        "unknown: the measured load of the 1 node(s) that take the moved pods is unknown: node metrics (metrics.k8s.io) could not be read (metrics-server is not installed). Install metrics-server, or set `capacity: {basis: requests}` in environment staging to judge by requests alone"
    );
    // A host whose loss moves nothing leaves the survivors' load as it is.
    assert_eq!(p.host("pve3").unwrap().outcome, Outcome::Survives);
    assert_eq!(p.exit_code(), ExitCode::CannotTell);
}

#[test]
fn unreadable_metrics_still_let_requests_prove_a_loss_fatal() {
    let s = state()
        .nodes(three())
        .pods([
            app_pod("big", 1, "cp-1", "3500m", "1Gi"),
            app_pod("big", 2, "cp-2", "3500m", "1Gi"),
            app_pod("big", 3, "cp-3", "3500m", "1Gi"),
            app_pod("web", 1, "cp-1", "100m", "256Mi"),
        ])
        .with(|s| s.node_metrics = Collected::Absent("metrics-server is not installed".into()))
        .build();
    let p = run_with(&usage_env(), &s, &[]);
    assert_eq!(p.host("pve1").unwrap().outcome, Outcome::Lost);
    let text = reasons(&p, "pve1");
    assert!(
        text.contains("unknown: the measured load of the 1 node(s)"),
        "{text}"
    );
    assert_eq!(
        p.exit_code(),
        ExitCode::Failed,
        "not survivable is known whatever else is not"
    );
}

#[test]
fn a_receiving_node_that_metrics_server_has_not_reported_is_unknown_by_name() {
    let s = state()
        .nodes(three())
        .pods(two_web_pods())
        .node_metrics([
            node_metrics("cp-1", "1", "2Gi"),
            node_metrics("cp-2", "1", "2Gi"),
        ])
        .build();
    let p = run_with(&usage_env(), &s, &[]);
    assert_eq!(
        reasons(&p, "pve1"),
        "unknown: the measured load of cp-3 (taking moved pods) is unknown: metrics-server has not reported it"
    );
    assert_eq!(p.exit_code(), ExitCode::CannotTell);
}

#[test]
fn judged_by_requests_unreadable_metrics_do_not_matter() {
    let s = state()
        .nodes(three())
        .pods(two_web_pods())
        .with(|s| s.node_metrics = Collected::Absent("metrics-server is not installed".into()))
        .build();
    let p = run(&s);
    assert_eq!(p.exit_code(), ExitCode::Passed);
}

#[test]
fn unreadable_pods_mean_nothing_can_be_predicted() {
    let s = state()
        .nodes(three())
        .with(|s| s.pods = Collected::Absent("forbidden".into()))
        .build();
    let p = run(&s);
    assert_eq!(p.cannot_tell, ["pods could not be read: forbidden"]);
    assert_eq!(p.exit_code(), ExitCode::CannotTell);
}

#[test]
fn hosts_predicted_side_by_side_come_back_in_the_order_asked() {
    let hosts: Vec<String> = (0..64).map(|i| format!("pve{i}")).collect();
    let asked: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let answered = super::each_host(&asked, |host| {
        // Uneven work, so the workers finish out of order.
        let spin = host.len() * 1000 + (host.as_bytes()[host.len() - 1] as usize % 7) * 20_000;
        (0..spin).fold(0u64, |a, b| a.wrapping_add(b as u64));
        host.to_string()
    });
    assert_eq!(answered, hosts);
}

// ------------------------------------------------------------------ ReadWriteOnce volumes

/// cp-1's database pod (owned by `owner`) uses ReadWriteOnce volume pvc-db, whose replicas
/// are on every node, under Longhorn's node-down-pod-deletion-policy `policy` (`None`: not
/// set, Longhorn's default).
pub(super) fn rwo_state(owner: &str, access: &str, policy: Option<&str>) -> State {
    let mut volume = crate::checks::testing::used_by(
        crate::checks::testing::longhorn_volume("pvc-db", "attached", "healthy", "cp-1"),
        "apps",
        "db-0",
    );
    volume.spec.access_mode = access.into();
    let db = pod("apps", "db-0")
        .labels(&[("app", "db")])
        .on("cp-1")
        .requests("100m", "128Mi")
        .build()
        .owned(owner, "db")
        .evictable();
    state()
        .nodes(three())
        .pods([db])
        .longhorn_volumes([volume])
        .longhorn_replicas([
            crate::checks::testing::longhorn_replica("pvc-db-r1", "pvc-db", "cp-1"),
            crate::checks::testing::longhorn_replica("pvc-db-r2", "pvc-db", "cp-2"),
            crate::checks::testing::longhorn_replica("pvc-db-r3", "pvc-db", "cp-3"),
        ])
        .longhorn_settings(
            policy.map(|p| {
                crate::checks::testing::longhorn_setting("node-down-pod-deletion-policy", p)
            }),
        )
        .build()
}

#[test]
fn a_pod_with_a_read_write_once_volume_on_a_lost_host_needs_manual_work_under_longhorns_default() {
    let p = run(&rwo_state("ReplicaSet", "rwo", None));
    let host = p.host("pve1").unwrap();
    assert_eq!(host.outcome, Outcome::Lost, "{}", reasons(&p, "pve1"));
    let text = reasons(&p, "pve1");
    assert!(
        text.contains("apps/db-0 (Deployment) uses ReadWriteOnce Longhorn volume pvc-db")
            && text.contains("node-down-pod-deletion-policy `do-nothing`")
            && text.contains(
                "set node-down-pod-deletion-policy to delete-both-statefulset-and-deployment-pod"
            ),
        "{text}"
    );
    // The other hosts hold only replicas of it.
    assert!(!reasons(&p, "pve2").contains("ReadWriteOnce"));
}

#[test]
fn longhorn_releases_the_volume_only_for_the_owners_its_policy_names() {
    let p = run(&rwo_state(
        "ReplicaSet",
        "rwo",
        Some("delete-both-statefulset-and-deployment-pod"),
    ));
    assert_ne!(
        p.host("pve1").unwrap().outcome,
        Outcome::Lost,
        "{}",
        reasons(&p, "pve1")
    );
    assert!(
        reasons(&p, "pve1").contains("degraded: apps/db-0 (Deployment) uses ReadWriteOnce Longhorn volume pvc-db: Longhorn force-deletes the pod"),
        "{}",
        reasons(&p, "pve1")
    );
    // A StatefulSet's pod under a policy for Deployments only stays.
    let p = run(&rwo_state(
        "StatefulSet",
        "rwop",
        Some("delete-deployment-pod"),
    ));
    assert_eq!(p.host("pve1").unwrap().outcome, Outcome::Lost);
    assert!(reasons(&p, "pve1").contains("(StatefulSet)"));
}

#[test]
fn a_read_write_many_volume_is_served_by_a_share_manager_and_holds_no_pod_back() {
    let p = run(&rwo_state("ReplicaSet", "rwx", None));
    assert!(
        !reasons(&p, "pve1").contains("ReadWriteOnce"),
        "{}",
        reasons(&p, "pve1")
    );
}

#[test]
fn settings_that_cannot_be_read_leave_the_release_unknown_not_guessed() {
    let mut s = rwo_state("ReplicaSet", "rwo", None);
    s.longhorn_settings = crate::checks::testing::absent("settings.longhorn.io: forbidden");
    let p = run(&s);
    assert!(
        reasons(&p, "pve1").contains(
            "unknown: whether Longhorn releases the volumes of pods on a lost node is not known"
        ),
        "{}",
        reasons(&p, "pve1")
    );
}

#[test]
fn a_policy_value_longhorn_does_not_define_is_unknown_not_taken_for_do_nothing() {
    let p = run(&rwo_state("ReplicaSet", "rwo", Some("delete-all-pods")));
    let host = p.host("pve1").unwrap();
    assert_eq!(host.outcome, Outcome::Unknown, "{}", reasons(&p, "pve1"));
    let text = reasons(&p, "pve1");
    assert!(
        text.contains(
            "node-down-pod-deletion-policy is `delete-all-pods`, which gates does not know"
        ),
        "{text}"
    );
    // The same value when a chaos run reads its lost nodes: the fix says it was not known.
    let mut s = rwo_state("ReplicaSet", "rwo", Some("delete-all-pods"));
    if let crate::state::Collected::Present(pods) = &mut s.pods {
        std::sync::Arc::make_mut(&mut pods[0])
            .metadata
            .deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
    }
    let held = super::attach::held_on(&s, &["cp-1".to_string()]).unwrap();
    assert_eq!(held.pods.len(), 1, "{held:?}");
    assert!(
        held.fix.contains("which gates does not know"),
        "{}",
        held.fix
    );
}

#[test]
fn an_access_mode_longhorn_does_not_define_is_unknown_not_skipped() {
    let p = run(&rwo_state("ReplicaSet", "rwm", None));
    assert_eq!(
        p.host("pve1").unwrap().outcome,
        Outcome::Unknown,
        "{}",
        reasons(&p, "pve1")
    );
    assert!(
        reasons(&p, "pve1").contains("accessMode `rwm`, which gates does not know"),
        "{}",
        reasons(&p, "pve1")
    );
    let err = super::attach::held_on(&rwo_state("ReplicaSet", "rwm", None), &["cp-1".to_string()])
        .unwrap_err();
    assert!(err.to_string().contains("accessMode `rwm`"), "{err}");
}

#[test]
fn a_longhorn_instance_manager_goes_with_its_node_and_is_no_reason() {
    let mut im = pod("longhorn-system", "instance-manager-0c1d")
        .labels(&[
            ("longhorn.io/component", "instance-manager"),
            ("longhorn.io/node", "cp-1"),
        ])
        .on("cp-1")
        .requests("100m", "128Mi")
        .build()
        .owned("InstanceManager", "instance-manager-0c1d");
    im.metadata.owner_references.as_mut().unwrap()[0].api_version = "longhorn.io/v1beta2".into();
    let im_pdb = crate::checks::testing::pdb(
        "longhorn-system",
        "instance-manager-0c1d",
        &[
            ("longhorn.io/component", "instance-manager"),
            ("longhorn.io/node", "cp-1"),
        ],
    )
    .min_available(1)
    .build();
    let s = state().nodes(three()).pods([im]).pdbs([im_pdb]).build();
    let p = run(&s);
    let text = reasons(&p, "pve1");
    assert!(!text.contains("instance-manager"), "{text}");
    assert_eq!(p.host("pve1").unwrap().outcome, Outcome::Survives, "{text}");

    // The same pod owned by anything else is still lost with its node.
    let other = pod("longhorn-system", "instance-manager-0c1d")
        .on("cp-1")
        .build()
        .owned("Job", "x");
    let text = reasons(&run(&state().nodes(three()).pods([other]).build()), "pve1");
    assert!(
        text.contains("pod longhorn-system/instance-manager-0c1d on cp-1 is lost"),
        "{text}"
    );
}

// ------------------------------------------------------------------ the node-lifecycle zones

/// `n` Ready workers `w-1`.. in one zone `dc1`, placed on hosts by Proxmox as `hosts` says.
fn one_zone(hosts: &[&str]) -> (Vec<k8s_openapi::api::core::v1::Node>, Vec<(String, String)>) {
    let nodes = hosts
        .iter()
        .enumerate()
        .map(|(i, _)| {
            node(&format!("w-{}", i + 1))
                .label("topology.kubernetes.io/zone", "dc1")
                .ready()
                .build()
        })
        .collect();
    let placed = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| (format!("w-{}", i + 1), h.to_string()))
        .collect();
    (nodes, placed)
}

fn placed_state(hosts: &[&str], pods: Vec<crate::state::Pod>) -> State {
    let (nodes, placed) = one_zone(hosts);
    let placed: Vec<(&str, &str)> = placed
        .iter()
        .map(|(n, h)| (n.as_str(), h.as_str()))
        .collect();
    let proxmox = crate::checks::testing::proxmox(&placed, &[]);
    state()
        .nodes(nodes)
        .pods(pods)
        .with(|s| s.proxmox = proxmox)
        .build()
}

#[test]
fn a_host_with_most_of_a_small_zone_keeps_its_pods_because_the_controller_stops_evicting() {
    // Three of five nodes of zone dc1 on pve1: a partial disruption (more than 2 NotReady, at
    // least 55 %) in a zone of at most 50 nodes, so kube-controller-manager evicts nothing.
    let s = placed_state(
        &["pve1", "pve1", "pve1", "pve2", "pve3"],
        vec![
            app_pod("web", 1, "w-1", "100m", "128Mi"),
            app_pod("web", 2, "w-4", "100m", "128Mi"),
        ],
    );
    let p = run(&s);
    let moves = moves_of(&p, "pve1");
    assert_eq!(moves.len(), 1, "{moves:?}");
    match &moves[0].outcome {
        MoveOutcome::Stays { why } => assert!(
            why.contains("zone dc1 has 3 of 5 nodes NotReady") && why.contains("stops evicting"),
            "{why}"
        ),
        other => panic!("web-1 must stay on the lost node: {other:?}"),
    }
    let text = reasons(&p, "pve1");
    assert!(
        text.contains("pod apps/web-1 of the lost nodes stay bound to them and are not replaced until the host returns"),
        "{text}"
    );
    // One node of five: the zone stays healthy and the pod is evicted and placed.
    assert!(matches!(
        moves_of(&p, "pve2")[0].outcome,
        MoveOutcome::Placed { .. }
    ));
}

#[test]
fn two_nodes_of_a_zone_lost_or_a_zone_of_its_own_fully_down_are_still_evicted() {
    // Two of three NotReady is not "more than 2"; a host that is its zone is a full
    // disruption of that zone only, which the controller evicts at its normal rate.
    let s = placed_state(
        &["pve1", "pve1", "pve2"],
        vec![app_pod("web", 1, "w-1", "100m", "128Mi")],
    );
    let p = run(&s);
    assert!(
        matches!(moves_of(&p, "pve1")[0].outcome, MoveOutcome::Placed { .. }),
        "{:?}",
        moves_of(&p, "pve1")
    );
    let s = state()
        .nodes(three())
        .pods([app_pod("web", 1, "cp-1", "100m", "128Mi")])
        .build();
    assert!(matches!(
        moves_of(&run(&s), "pve1")[0].outcome,
        MoveOutcome::Placed { .. }
    ));
}

#[test]
fn a_large_zone_in_partial_disruption_still_evicts_slowly() {
    // 51 nodes: above --large-cluster-size-threshold the secondary rate (0.01/s) applies.
    let mut hosts = vec!["pve1"; 30];
    hosts.extend(vec!["pve2"; 21]);
    let s = placed_state(&hosts, vec![app_pod("web", 1, "w-1", "100m", "128Mi")]);
    assert!(matches!(
        moves_of(&run(&s), "pve1")[0].outcome,
        MoveOutcome::Placed { .. }
    ));
}

#[test]
fn the_controllers_zone_key_reads_the_beta_labels_first_and_is_empty_without_any() {
    use super::zones::zone_key;
    let labels = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    assert_eq!(zone_key(&labels(&[])), "");
    assert_eq!(
        zone_key(&labels(&[("topology.kubernetes.io/zone", "a")])),
        ":\0:a"
    );
    assert_eq!(
        zone_key(&labels(&[
            ("topology.kubernetes.io/zone", "a"),
            ("failure-domain.beta.kubernetes.io/zone", "b"),
            ("topology.kubernetes.io/region", "r"),
        ])),
        "r:\0:b"
    );
}

/// `rwo_state`'s pod as a chaos run finds it after its host's loss: evicted, Terminating.
fn evicted(mut s: State) -> State {
    if let Collected::Present(pods) = &mut s.pods {
        for p in pods.iter_mut() {
            std::sync::Arc::make_mut(p).metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    "2026-12-05T10:00:00Z".parse().unwrap(),
                ));
        }
    }
    s
}

#[test]
fn a_terminating_pod_holding_its_read_write_once_volume_on_a_lost_node_is_held_with_the_fix() {
    let s = evicted(rwo_state("ReplicaSet", "rwo", None));
    let held = super::attach::held_on(&s, &["cp-1".to_string()]).unwrap();
    assert_eq!(
        held.pods,
        [
            "apps/db-0 stayed Terminating on cp-1 holding ReadWriteOnce Longhorn volume pvc-db, attached there"
        ]
    );
    assert!(
        held.fix
            .contains("node-down-pod-deletion-policy is `do-nothing`")
            && held
                .fix
                .contains("delete-both-statefulset-and-deployment-pod"),
        "{}",
        held.fix
    );
    // Another host's loss holds nothing; neither does a pod not yet evicted, nor a shared
    // (ReadWriteMany) volume.
    assert!(
        super::attach::held_on(&s, &["cp-2".to_string()])
            .unwrap()
            .pods
            .is_empty()
    );
    let running = rwo_state("ReplicaSet", "rwo", None);
    assert!(
        super::attach::held_on(&running, &["cp-1".to_string()])
            .unwrap()
            .pods
            .is_empty()
    );
    let shared = evicted(rwo_state("ReplicaSet", "rwx", None));
    assert!(
        super::attach::held_on(&shared, &["cp-1".to_string()])
            .unwrap()
            .pods
            .is_empty()
    );
}

#[test]
fn held_pods_are_unknown_when_the_volumes_could_not_be_read_and_none_without_longhorn() {
    let mut s = evicted(rwo_state(
        "StatefulSet",
        "rwo",
        Some("delete-deployment-pod"),
    ));
    s.longhorn_volumes = Collected::Absent("the list timed out".into());
    let err = super::attach::held_on(&s, &["cp-1".to_string()]).unwrap_err();
    assert!(err.to_string().contains("the list timed out"), "{err}");
    s.longhorn_volumes = Collected::NotApplicable("Longhorn is not installed".into());
    assert_eq!(
        super::attach::held_on(&s, &["cp-1".to_string()]).unwrap(),
        super::attach::Held::default()
    );
}

/// The load over a day at five minutes: `memory` bytes all the time, `peak` bytes for the two
/// hours after 01:00 (`None`: the node's memory query gave no series).
fn prometheus_load(memory: &[(&str, f64, Option<f64>)]) -> crate::load::NodeLoad {
    use crate::load::{NodeLoad, NodeMeasure, Window, measure};
    let window = Window {
        start_ms: 0,
        end_ms: 287 * 300_000,
        step_ms: 300_000,
    };
    let stat = crate::config::LoadStatistic::Quantile(0.95);
    let at = |k: i64| k * 300_000;
    NodeLoad {
        url: "http://127.0.0.1:9090".into(),
        window,
        statistic: stat,
        max_gap_share: 0.05,
        node_label: "node".into(),
        nodes: memory
            .iter()
            .map(|&(node, quiet, peak)| {
                let cpu: Vec<(i64, f64)> = (0..288).map(|k| (at(k), 1.0)).collect();
                let mem: Vec<(i64, f64)> = match peak {
                    Some(peak) => (0..288)
                        .map(|k| (at(k), if (12..36).contains(&k) { peak } else { quiet }))
                        .collect(),
                    None => Vec::new(),
                };
                (
                    node.to_string(),
                    NodeMeasure {
                        cpu: measure(&window, &cpu, stat),
                        memory: measure(&window, &mem, stat),
                    },
                )
            })
            .collect(),
    }
}

#[test]
fn on_prometheus_a_receiving_node_is_judged_on_its_nightly_peak_and_an_unmeasured_one_is_unknown_naming_why()
 {
    let mut env = env();
    env.capacity.basis = crate::config::CapacityBasis::Prometheus;
    let gib = 1024.0 * 1024.0 * 1024.0;
    // cp-3 is quiet at 2 GiB but holds 7.5 GiB two hours a night: the moved 1 GiB pod does
    // not fit at its p95, though it would at a quiet moment.
    let load = prometheus_load(&[
        ("cp-1", 2.0 * gib, Some(2.0 * gib)),
        ("cp-2", 2.0 * gib, Some(2.0 * gib)),
        ("cp-3", 2.0 * gib, Some(7.5 * gib)),
    ]);
    let built = |load: crate::load::NodeLoad| {
        let metrics = crate::state::NodeMetrics::of_load(&load);
        state()
            .nodes(three())
            .pods([
                app_pod("web", 1, "cp-1", "100m", "1Gi"),
                app_pod("web", 2, "cp-2", "100m", "1Gi"),
            ])
            .with(|s| {
                s.node_metrics = crate::checks::testing::listed(metrics);
                s.node_load = Collected::Present(load);
            })
            .build()
    };
    let p = run_with(&env, &built(load), &[]);
    let text = reasons(&p, "pve1");
    assert!(
        text.contains("lost: cp-3 (pve3) would use 106% of its memory"),
        "{text}"
    );
    // The same node with no memory series: unknown, naming the query and the node.
    let load = prometheus_load(&[
        ("cp-1", 2.0 * gib, Some(2.0 * gib)),
        ("cp-2", 2.0 * gib, Some(2.0 * gib)),
        ("cp-3", 2.0 * gib, None),
    ]);
    let p = run_with(&env, &built(load), &[]);
    let text = reasons(&p, "pve1");
    assert_eq!(p.host("pve1").unwrap().outcome, Outcome::Unknown, "{text}");
    assert!(
        text.contains("the load of cp-3 (taking moved pods) over the window is unknown: capacity.prometheus.queries.memory gave no series with node=\"cp-3\""),
        "{text}"
    );
    // Prometheus unread: every loss that moves pods is unknown with the collector's reason.
    let s = state()
        .nodes(three())
        .pods([app_pod("web", 1, "cp-1", "100m", "1Gi")])
        .with(|s| {
            s.node_metrics = Collected::Absent("capacity.prometheus.url did not answer".into());
            s.node_load = Collected::Absent("capacity.prometheus.url did not answer".into());
        })
        .build();
    let p = run_with(&env, &s, &[]);
    let text = reasons(&p, "pve1");
    assert_eq!(p.host("pve1").unwrap().outcome, Outcome::Unknown, "{text}");
    assert!(
        text.contains("capacity.prometheus.url did not answer"),
        "{text}"
    );
}
