//! Gate 5: Longhorn can store data on every node (so it is not restricted to workers, as the
//! ADR's implementation status reports), attached volumes are healthy, and no two replicas of a
//! volume share a physical host, so one host failure leaves every volume a live replica.
//!
//! A node counts when its `nodes.longhorn.io` object allows scheduling and at least one of its
//! disks does. Robustness is judged only for attached volumes: Longhorn reports `unknown` for
//! detached ones. A replica belongs to the volume named by its `longhornvolume` label, else by
//! `spec.volumeName`; replicas not yet placed on a node are ignored.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::Context;
use super::support::{Hosts, labels, name, ns_name};
use crate::state::{LonghornSetting, longhorn_condition_false};
use crate::verdict::Finding;

/// No parameters.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {}

impl super::Check for Params {
    fn evaluate(&self, ctx: Context<'_>) -> Finding {
        evaluate(ctx, self)
    }
}

/// Why Longhorn's replica scheduler skips this node, from its own conditions: it places
/// replicas only where `Ready` and `Schedulable` are true (longhorn-manager
/// `scheduler/replica_scheduler.go`). A condition not reported is not judged.
fn node_condition_false(node: &crate::state::LonghornNode) -> Option<String> {
    let conditions = node
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or(&[]);
    ["Ready", "Schedulable"].iter().find_map(|kind| {
        longhorn_condition_false(conditions, kind).map(|c| {
            format!(
                "is not {kind} for Longhorn (condition {kind} False{})",
                reason(c)
            )
        })
    })
}

/// Why Longhorn will not place a replica on this disk: scheduling off, eviction requested, or
/// its own `Schedulable` condition false (a full disk reports `DiskPressure`).
fn disk_refusal(
    node: &crate::state::LonghornNode,
    disk: &str,
    spec: &crate::state::LonghornDisk,
) -> Option<String> {
    if !spec.allow_scheduling {
        return Some("allowScheduling false".to_string());
    }
    if spec.eviction_requested {
        return Some("eviction requested".to_string());
    }
    let status = node.status.as_ref()?.disk_status.get(disk)?;
    longhorn_condition_false(&status.conditions, "Schedulable")
        .map(|c| format!("condition Schedulable False{}", reason(c)))
}

fn reason(c: &crate::state::LonghornCondition) -> String {
    if c.reason.is_empty() {
        String::new()
    } else {
        format!(", {}", c.reason)
    }
}

pub fn evaluate(ctx: Context<'_>, _params: &Params) -> Finding {
    let (nodes, lh_nodes, volumes, replicas) = match (
        ctx.state.nodes.get("nodes"),
        ctx.state
            .longhorn_nodes
            .get("Longhorn nodes (nodes.longhorn.io)"),
        ctx.state
            .longhorn_volumes
            .get("Longhorn volumes (volumes.longhorn.io)"),
        ctx.state
            .longhorn_replicas
            .get("Longhorn replicas (replicas.longhorn.io)"),
    ) {
        (Ok(n), Ok(l), Ok(v), Ok(r)) => (n, l, v, r),
        (Err(e), ..) | (_, Err(e), ..) | (_, _, Err(e), _) | (.., Err(e)) => return e,
    };
    if nodes.is_empty() {
        return Finding::error("the node list is empty, so there is nothing to store data on");
    }
    let hosts = Hosts::new(ctx, nodes);
    let mut problems = Vec::new();
    // Replicas whose host a failed read hides: unknown, not misplaced.
    let mut unread = Vec::new();
    let mut details = Vec::new();
    let mut evidence = Vec::new();

    // Every node can hold replicas.
    let mut unusable = Vec::new();
    for node in nodes {
        let node_name = name(&node.metadata);
        let who = hosts.describe(node_name);
        let reason = match lh_nodes.iter().find(|l| name(&l.metadata) == node_name) {
            None => Some("has no Longhorn node object (longhorn-manager does not run there)".to_string()),
            Some(l) if !l.spec.allow_scheduling => Some("has Longhorn scheduling disabled (spec.allowScheduling false)".to_string()),
            Some(l) if l.spec.eviction_requested => {
                Some("has a Longhorn eviction requested (spec.evictionRequested), so no replica is placed there".to_string())
            }
            Some(l) if node_condition_false(l).is_some() => node_condition_false(l),
            Some(l) if l.spec.disks.is_empty() => Some(
                "has no Longhorn disk (with create-default-disk-labeled-nodes, only labelled nodes get one)".to_string(),
            ),
            Some(l) => {
                let usable: Vec<&str> =
                    l.spec.disks.iter().filter(|(n, d)| disk_refusal(l, n, d).is_none()).map(|(n, _)| n.as_str()).collect();
                if usable.is_empty() {
                    let why: Vec<String> = l
                        .spec
                        .disks
                        .iter()
                        .filter_map(|(n, d)| disk_refusal(l, n, d).map(|r| format!("{n}: {r}")))
                        .collect();
                    Some(format!(
                        "has {} Longhorn disk(s), none of which Longhorn's replica scheduler may use ({})",
                        l.spec.disks.len(),
                        why.join("; ")
                    ))
                } else {
                    evidence.push(format!("{who}: {} schedulable Longhorn disk(s) ({})", usable.len(), usable.join(", ")));
                    None
                }
            }
        };
        if let Some(reason) = reason {
            unusable.push(node_name);
            details.push(format!("{who} {reason}"));
        }
    }
    if !unusable.is_empty() {
        problems.push(format!(
            "Longhorn cannot store data on {} of {} nodes: {}",
            unusable.len(),
            nodes.len(),
            unusable.join(", ")
        ));
    }

    // Attached volumes are healthy.
    let mut attached = 0;
    for volume in volumes.iter().filter(|v| v.status.state == "attached") {
        attached += 1;
        if volume.status.robustness != "healthy" {
            let node = &volume.status.current_node_id;
            let place = if node.is_empty() {
                "a node".to_string()
            } else {
                hosts.describe(node)
            };
            problems.push(format!(
                "volume {} attached to {place} is {} (wants {} healthy replicas)",
                ns_name(&volume.metadata),
                if volume.status.robustness.is_empty() {
                    "of unknown robustness"
                } else {
                    &volume.status.robustness
                },
                volume.spec.number_of_replicas
            ));
        }
    }

    // Replicas of one volume sit on distinct hosts.
    let mut by_volume: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for replica in replicas {
        let volume = labels(&replica.metadata)
            .get("longhornvolume")
            .map(String::as_str)
            .filter(|v| !v.is_empty())
            .unwrap_or(replica.spec.volume_name.as_str());
        if volume.is_empty() || replica.spec.node_id.is_empty() {
            continue;
        }
        by_volume
            .entry(volume)
            .or_default()
            .push((name(&replica.metadata), replica.spec.node_id.as_str()));
    }
    for (volume, placed) in &by_volume {
        let mut by_host: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (replica, node) in placed {
            match hosts.of(node) {
                Some(host) => by_host
                    .entry(host)
                    .or_default()
                    .push(format!("replica {replica} on node {node}")),
                None => match hosts.unread([*node]) {
                    Some(why) => {
                        unread.push(format!("replica {replica} of volume {volume}: {why}"))
                    }
                    None => problems.push(format!(
                        "replica {replica} of volume {volume} sits on {}, so its host is unknown",
                        hosts.describe(node)
                    )),
                },
            }
        }
        for (host, members) in by_host.iter().filter(|(_, m)| m.len() > 1) {
            problems.push(format!(
                "volume {volume} has {} on host {host} ({}): losing the host loses them all",
                crate::words::count(members.len() as i128, "replica"),
                members.join(", ")
            ));
        }
    }
    evidence.push(format!(
        "{} volume(s), {attached} attached; replicas of {} volume(s) placed",
        volumes.len(),
        by_volume.len()
    ));

    let warnings = setting_warnings(
        ctx.state
            .longhorn_settings
            .present()
            .map(Vec::as_slice)
            .unwrap_or(&[]),
    );
    match (problems.first(), unread.first()) {
        (Some(first), _) => Finding::fail(first.clone())
            .with_evidence(
                problems
                    .iter()
                    .skip(1)
                    .chain(&unread)
                    .cloned()
                    .chain(details)
                    .chain(evidence),
            )
            .with_warnings(warnings),
        (None, Some(first)) => Finding::error(first.clone())
            .with_evidence(unread.iter().skip(1).cloned().chain(details).chain(evidence))
            .with_warnings(warnings),
        (None, None) => Finding::pass(format!(
            "Longhorn can store data on all {} nodes; {attached} attached volume(s) healthy; replicas on distinct hosts",
            nodes.len()
        ))
        .with_evidence(evidence)
        .with_warnings(warnings),
    }
}

/// Settings that let Longhorn put two replicas of a volume on one node.
fn setting_warnings(settings: &[LonghornSetting]) -> Vec<String> {
    settings
        .iter()
        .filter(|s| name(&s.metadata) == "replica-soft-anti-affinity" && setting_is_true(&s.value))
        .map(|_| {
            "Longhorn setting replica-soft-anti-affinity is true: Longhorn may place two replicas of a volume on one node".to_string()
        })
        .collect()
}

/// A setting value is either a plain string or, since Longhorn 1.10, JSON per data engine
/// (`{"v1":"true","v2":"false"}`); true when any engine says `true`.
fn setting_is_true(value: &str) -> bool {
    let value = value.trim();
    if value.starts_with('{') {
        serde_json::from_str::<BTreeMap<String, String>>(value)
            .is_ok_and(|m| m.values().any(|v| v.eq_ignore_ascii_case("true")))
    } else {
        value.eq_ignore_ascii_case("true")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::state::{Collected, State};
    use crate::verdict::Verdict;

    fn good() -> StateBuilder {
        state()
            .nodes(target_nodes())
            .longhorn_nodes((1..=3).map(|i| {
                longhorn_node(&format!("cp-{i}"))
                    .disk("default-disk-1", true)
                    .build()
            }))
            .longhorn_volumes([
                longhorn_volume("pvc-a", "attached", "healthy", "cp-1"),
                longhorn_volume("pvc-b", "detached", "unknown", ""),
            ])
            .longhorn_replicas([
                longhorn_replica("pvc-a-r-1", "pvc-a", "cp-1"),
                longhorn_replica("pvc-a-r-2", "pvc-a", "cp-2"),
                longhorn_replica("pvc-a-r-3", "pvc-a", "cp-3"),
                longhorn_replica("pvc-b-r-1", "pvc-b", "cp-1"),
                longhorn_replica("pvc-b-r-2", "pvc-b", "cp-2"),
            ])
    }

    fn check(state: &State) -> Finding {
        run(&env(), state, &Params {}, evaluate)
    }

    fn fails_with(state: &State, needle: &str) -> Finding {
        let f = check(state);
        assert_eq!(f.verdict, Verdict::Fail, "{}", text(&f));
        assert!(
            f.summary.contains(needle),
            "summary {:?} lacks {needle:?}",
            f.summary
        );
        f
    }

    fn lh_nodes(list: Vec<crate::state::LonghornNode>) -> impl FnOnce(&mut State) {
        move |s| s.longhorn_nodes = Collected::Present(list)
    }

    #[test]
    fn disks_everywhere_healthy_volumes_spread_replicas_pass() {
        let f = check(&good().build());
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert!(f.evidence.contains(
            &"node cp-1 (host pve1): 1 schedulable Longhorn disk(s) (default-disk-1)".to_string()
        ));
        assert!(f.warnings.is_empty());
    }

    #[test]
    fn longhorn_only_on_workers_fails_naming_the_control_plane() {
        let s = good()
            .with(lh_nodes(vec![
                longhorn_node("cp-1").build(),
                longhorn_node("cp-2").disk("d", true).build(),
                longhorn_node("cp-3").disk("d", true).build(),
            ]))
            .build();
        let f = fails_with(&s, "Longhorn cannot store data on 1 of 3 nodes: cp-1");
        assert!(text(&f).contains("node cp-1 (host pve1) has no Longhorn disk"));
    }

    #[test]
    fn each_way_a_node_cannot_hold_data_is_named() {
        let s = good()
            .with(lh_nodes(vec![
                longhorn_node("cp-2")
                    .disk("d", true)
                    .allow_scheduling(false)
                    .build(),
                longhorn_node("cp-3").disk("d", false).build(),
            ]))
            .build();
        let f = fails_with(
            &s,
            "Longhorn cannot store data on 3 of 3 nodes: cp-1, cp-2, cp-3",
        );
        let t = text(&f);
        assert!(t.contains("node cp-1 (host pve1) has no Longhorn node object"));
        assert!(t.contains("node cp-2 (host pve2) has Longhorn scheduling disabled"));
        assert!(t.contains(
            "node cp-3 (host pve3) has 1 Longhorn disk(s), none of which Longhorn's replica scheduler may use (d: allowScheduling false)"
        ));
    }

    #[test]
    fn a_full_disk_that_still_allows_scheduling_cannot_hold_data() {
        // longhorn-manager sets the disk's Schedulable condition False under DiskPressure;
        // allowScheduling stays true, which passed before.
        let s = good()
            .with(lh_nodes(vec![
                longhorn_node("cp-1").disk("d", true).build(),
                longhorn_node("cp-2").disk("d", true).build(),
                longhorn_node("cp-3")
                    .disk("d", true)
                    .disk_condition("d", "Schedulable", "False", "DiskPressure")
                    .build(),
            ]))
            .build();
        let f = fails_with(&s, "Longhorn cannot store data on 1 of 3 nodes: cp-3");
        assert!(text(&f).contains("d: condition Schedulable False, DiskPressure"));
    }

    #[test]
    fn a_node_longhorn_reports_unschedulable_or_evicting_cannot_hold_data() {
        let s = good()
            .with(lh_nodes(vec![
                longhorn_node("cp-1").disk("d", true).build(),
                longhorn_node("cp-2")
                    .disk("d", true)
                    .node_condition("Ready", "True", "")
                    .node_condition("Schedulable", "False", "KubernetesNodeCordoned")
                    .build(),
                longhorn_node("cp-3")
                    .disk("d", true)
                    .eviction_requested()
                    .build(),
            ]))
            .build();
        let f = fails_with(&s, "Longhorn cannot store data on 2 of 3 nodes: cp-2, cp-3");
        let t = text(&f);
        assert!(t.contains("node cp-2 (host pve2) is not Schedulable for Longhorn (condition Schedulable False, KubernetesNodeCordoned)"));
        assert!(t.contains("node cp-3 (host pve3) has a Longhorn eviction requested"));
    }

    #[test]
    fn conditions_read_from_a_v1beta2_node_object() {
        let node: crate::state::LonghornNode = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "cp-1"},
            "spec": {"allowScheduling": true, "disks": {"d": {"path": "/var/lib/longhorn", "allowScheduling": true}}},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "diskStatus": {"d": {"conditions": [{"type": "Schedulable", "status": "False", "reason": "DiskPressure"}]}}
            }
        }))
        .unwrap();
        let status = node.status.as_ref().unwrap();
        assert!(longhorn_condition_false(&status.conditions, "Ready").is_none());
        assert!(
            longhorn_condition_false(&status.disk_status["d"].conditions, "Schedulable").is_some()
        );
    }

    #[test]
    fn an_attached_degraded_volume_fails_but_a_detached_unknown_one_does_not() {
        let s = good()
            .with(|s| {
                s.longhorn_volumes = Collected::Present(vec![
                    longhorn_volume("pvc-a", "attached", "degraded", "cp-2"),
                    longhorn_volume("pvc-b", "detached", "unknown", ""),
                ])
            })
            .build();
        let f = fails_with(
            &s,
            "volume longhorn-system/pvc-a attached to node cp-2 (host pve2) is degraded (wants 3 healthy replicas)",
        );
        assert!(!text(&f).contains("pvc-b attached"));
    }

    #[test]
    fn two_replicas_on_one_host_fail_naming_both() {
        let s = good()
            .with(|s| s.nodes = Collected::Present(vec![]))
            .nodes([
                node("cp-1").host("pve1").build(),
                node("cp-2").host("pve1").build(),
                node("cp-3").host("pve3").build(),
            ])
            .build();
        fails_with(
            &s,
            "volume pvc-a has 2 replicas on host pve1 (replica pvc-a-r-1 on node cp-1, replica pvc-a-r-2 on node cp-2)",
        );
    }

    #[test]
    fn replicas_found_by_volume_name_without_label_and_unknown_hosts_fail() {
        let mut unlabelled = longhorn_replica("pvc-c-r-1", "pvc-c", "cp-1");
        unlabelled.metadata.labels = None;
        let s = good()
            .longhorn_replicas([unlabelled, longhorn_replica("pvc-c-r-2", "pvc-c", "cp-1")])
            .build();
        fails_with(&s, "volume pvc-c has 2 replicas on host pve1");
        let s = good()
            .longhorn_replicas([longhorn_replica("pvc-d-r-1", "pvc-d", "ghost")])
            .build();
        fails_with(
            &s,
            "replica pvc-d-r-1 of volume pvc-d sits on node ghost (not in the node list)",
        );
        // Not yet placed: ignored.
        let s = good()
            .longhorn_replicas([longhorn_replica("pvc-e-r-1", "pvc-e", "")])
            .build();
        assert_eq!(check(&s).verdict, Verdict::Pass);
    }

    #[test]
    fn a_replica_on_a_node_whose_vm_config_could_not_be_read_is_an_error_naming_the_vm() {
        let s = good()
            .with(|s| {
                s.proxmox = proxmox(
                    &[("cp-1", "pve1"), ("cp-2", "pve2")],
                    &["VM 103 cp-3 on pve3: 500 Internal Server Error"],
                )
            })
            .build();
        let f = check(&s);
        assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
        assert!(
            f.summary.contains("the host of node cp-3 is unknown"),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("VM 103 cp-3 on pve3"), "{}", f.summary);
    }

    #[test]
    fn an_unreadable_proxmox_makes_the_replica_spread_an_error_not_a_pass_on_labels() {
        let f = check(
            &good()
                .with(|s| s.proxmox = absent("401 Unauthorized"))
                .build(),
        );
        assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
        assert!(
            f.summary
                .contains("Proxmox could not be read (401 Unauthorized)"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn two_replicas_proven_on_one_host_fail_though_a_vm_config_could_not_be_read() {
        let s = good()
            .with(|s| {
                s.proxmox = proxmox(
                    &[("cp-1", "pve1"), ("cp-2", "pve1")],
                    &["VM 103 cp-3 on pve3: timed out"],
                )
            })
            .build();
        fails_with(&s, "volume pvc-a has 2 replicas on host pve1");
    }

    #[test]
    fn soft_anti_affinity_warns_in_both_setting_forms() {
        for value in ["true", r#"{"v1":"true","v2":"false"}"#] {
            let s = good()
                .longhorn_settings([longhorn_setting("replica-soft-anti-affinity", value)])
                .build();
            let f = check(&s);
            assert_eq!(f.verdict, Verdict::Pass);
            assert_eq!(f.warnings.len(), 1, "{value}");
        }
        let s = good()
            .longhorn_settings([longhorn_setting(
                "replica-soft-anti-affinity",
                r#"{"v1":"false"}"#,
            )])
            .build();
        assert!(check(&s).warnings.is_empty());
    }

    #[test]
    fn an_empty_node_list_is_an_error() {
        let f = check(
            &good()
                .with(|s| s.nodes = Collected::Present(vec![]))
                .build(),
        );
        assert_eq!(f.verdict, Verdict::Error);
    }

    #[test]
    fn absent_longhorn_resources_are_errors() {
        let f = check(
            &good()
                .with(|s| s.longhorn_nodes = absent("CRD nodes.longhorn.io not served"))
                .build(),
        );
        assert_eq!(f.verdict, Verdict::Error);
        assert_eq!(
            f.summary,
            "Longhorn nodes (nodes.longhorn.io) unavailable: CRD nodes.longhorn.io not served"
        );
        for absent_one in [
            (|s: &mut State| s.longhorn_volumes = absent("x")) as fn(&mut State),
            |s: &mut State| s.longhorn_replicas = absent("x"),
            |s: &mut State| s.nodes = absent("x"),
        ] {
            assert_eq!(
                check(&good().with(absent_one).build()).verdict,
                Verdict::Error
            );
        }
    }
}
