//! Gate 5: Longhorn can store data on every node (so it is not restricted to workers, as the
//! ADR's implementation status reports), attached volumes are healthy, and no two replicas of a
//! volume share a physical host, so one host failure leaves every volume a live replica.
//!
//! A node counts by the rule of Longhorn's replica scheduler (longhorn-manager
//! `scheduler/replica_scheduler.go`, fields of `k8s/pkg/apis/longhorn/v1beta2/node.go`): its
//! `nodes.longhorn.io` object allows scheduling, has no eviction requested, reports its `Ready`
//! and `Schedulable` conditions `True`, and has a disk that allows scheduling, has no eviction
//! requested and whose own `Schedulable` condition (`status.diskStatus.<disk>.conditions`) is
//! `True`. A condition not reported, or reported `Unknown`, makes the node unknown: the verdict
//! is `error` naming it, never a pass. Robustness is judged only for attached volumes: Longhorn reports `unknown` for
//! detached ones. A replica belongs to the volume named by its `longhornvolume` label, else by
//! `spec.volumeName`; replicas not yet placed on a node are ignored.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

use super::Context;
use super::support::{Hosts, labels, name, ns_name};
use crate::state::{
    LonghornCondition, LonghornConditionState, LonghornDisk, LonghornNode, LonghornReplica,
    LonghornSetting, LonghornVolume, longhorn_condition,
};
use crate::verdict::Finding;
use k8s_openapi::api::core::v1::Node;

/// No parameters.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {}

impl super::Check for Params {
    fn inputs(&self) -> &'static [crate::state::Input] {
        use crate::state::Input;
        &[
            Input::Nodes,
            Input::Pods,
            Input::LonghornNodes,
            Input::LonghornVolumes,
            Input::LonghornReplicas,
            Input::LonghornSettings,
            Input::Proxmox,
        ]
    }

    fn evaluate(&self, ctx: Context<'_>) -> Finding {
        evaluate(ctx, self)
    }
}

/// What Longhorn's replica scheduler makes of a node or a disk.
enum Judged {
    Usable,
    /// It will place no replica there, and why.
    Refused(String),
    /// A fact the scheduler needs is missing or unknown, so whether it would is unknown.
    Unknown(String),
}

/// The condition `kind` as the scheduler reads it: only `True` admits (longhorn-manager's
/// `types.GetCondition` fills an absent condition as `Unknown`, and `ListSchedulableNodes` and
/// `FindDiskCandidates` in `scheduler/replica_scheduler.go` skip anything not `True`).
/// `whose` says where the list sits (`status.conditions`, ...), for a condition not reported.
fn condition(conditions: &[LonghornCondition], kind: &str, whose: &str) -> Judged {
    match longhorn_condition(conditions, kind) {
        LonghornConditionState::True => Judged::Usable,
        LonghornConditionState::False(c) => {
            Judged::Refused(format!("condition {kind} is False{}", why(c)))
        }
        LonghornConditionState::Unknown(None) => {
            Judged::Unknown(format!("condition {kind} is not reported in {whose}"))
        }
        LonghornConditionState::Unknown(Some(c)) => Judged::Unknown(format!(
            "condition {kind} is {}{}",
            if c.status.is_empty() {
                "without a status"
            } else {
                &c.status
            },
            why(c)
        )),
    }
}

/// ` (reason: message)`, or whichever of the two is set.
fn why(c: &LonghornCondition) -> String {
    match (c.reason.is_empty(), c.message.is_empty()) {
        (true, true) => String::new(),
        (false, true) => format!(" ({})", c.reason),
        (true, false) => format!(" ({})", c.message),
        (false, false) => format!(" ({}: {})", c.reason, c.message),
    }
}

/// Whether the scheduler may put a replica on disk `disk` of `node`: scheduling allowed, no
/// eviction requested (`DiskSpec`), and the disk's own `Schedulable` condition in
/// `status.diskStatus.<disk>.conditions` true (false under DiskPressure, on a full disk,
/// whatever `allowScheduling` says). The scheduler considers only disks that have a status
/// entry. Each reason names the node and the disk.
fn disk_judged(node: &LonghornNode, disk: &str, spec: &LonghornDisk) -> Judged {
    let whom = format!("{} disk {disk}", name(&node.metadata));
    if !spec.allow_scheduling {
        return Judged::Refused(format!("{whom}: allowScheduling false"));
    }
    if spec.eviction_requested {
        return Judged::Refused(format!(
            "{whom}: eviction requested (evictionRequested true)"
        ));
    }
    match node
        .status
        .as_ref()
        .and_then(|s| s.disk_status.get(disk))
        .and_then(Option::as_ref)
    {
        None => Judged::Unknown(format!(
            "{whom}: no status.diskStatus.{disk} (longhorn-manager has not reported the disk, so its Schedulable condition is unknown)"
        )),
        Some(status) => match condition(
            &status.conditions,
            "Schedulable",
            &format!("status.diskStatus.{disk}.conditions"),
        ) {
            Judged::Usable => Judged::Usable,
            Judged::Refused(r) => Judged::Refused(format!("{whom}: {r}")),
            Judged::Unknown(r) => Judged::Unknown(format!("{whom}: {r}")),
        },
    }
}

/// Whether the scheduler may put a replica on this node, by its rule: `spec.allowScheduling`,
/// no `spec.evictionRequested`, the node's `Ready` and `Schedulable` conditions true, and at
/// least one disk it may use. A refusal anywhere outweighs an unknown elsewhere; a usable
/// disk counts only when the node's own conditions are known true. `evidence` gets the usable
/// disks.
fn node_judged(l: &LonghornNode, who: &str, evidence: &mut Vec<String>) -> Judged {
    if !l.spec.allow_scheduling {
        return Judged::Refused(
            "has Longhorn scheduling disabled (spec.allowScheduling false)".to_string(),
        );
    }
    if l.spec.eviction_requested {
        return Judged::Refused(
            "has a Longhorn eviction requested (spec.evictionRequested), so no replica is placed there"
                .to_string(),
        );
    }
    let conditions = l
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or(&[]);
    let mut unknown = Vec::new();
    for kind in ["Ready", "Schedulable"] {
        match condition(conditions, kind, "status.conditions") {
            Judged::Usable => {}
            Judged::Refused(r) => {
                return Judged::Refused(format!("is skipped by Longhorn's replica scheduler: {r}"));
            }
            Judged::Unknown(r) => unknown.push(r),
        }
    }
    if l.spec.disks.is_empty() {
        return Judged::Refused(
            "has no Longhorn disk (with create-default-disk-labeled-nodes, only labelled nodes get one)"
                .to_string(),
        );
    }
    let mut usable = Vec::new();
    let mut refused = Vec::new();
    let mut disk_unknown = Vec::new();
    for (disk, spec) in &l.spec.disks {
        match disk_judged(l, disk, spec) {
            Judged::Usable => usable.push(disk.as_str()),
            Judged::Refused(r) => refused.push(r),
            Judged::Unknown(r) => disk_unknown.push(r),
        }
    }
    if usable.is_empty() && disk_unknown.is_empty() {
        return Judged::Refused(format!(
            "has {} Longhorn disk(s), none of which Longhorn's replica scheduler may use: {}",
            l.spec.disks.len(),
            refused.join("; ")
        ));
    }
    if unknown.is_empty() && !usable.is_empty() {
        evidence.push(format!(
            "{who}: {} schedulable Longhorn disk(s) ({})",
            usable.len(),
            usable.join(", ")
        ));
        return Judged::Usable;
    }
    if usable.is_empty() {
        unknown.extend(disk_unknown);
        unknown.extend(refused);
    }
    Judged::Unknown(unknown.join("; "))
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
    let mut found = Found::default();
    usable_nodes(nodes, lh_nodes, &hosts, &mut found);
    let attached = attached_health(volumes, &hosts, &mut found);
    let placed = replica_hosts(replicas, &hosts, &mut found);
    found.evidence.push(format!(
        "{} volume(s), {attached} attached; replicas of {placed} volume(s) placed",
        volumes.len(),
    ));
    let warnings = setting_warnings(
        ctx.state
            .longhorn_settings
            .present()
            .map(Vec::as_slice)
            .unwrap_or(&[]),
    );
    let Found {
        problems,
        unread,
        details,
        evidence,
    } = found;
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

/// What the check found: what breaks the gate, what could not be read (replicas whose host
/// a failed read hides are unknown, not misplaced), each unusable node's reason, and what holds.
#[derive(Default)]
struct Found {
    problems: Vec<String>,
    unread: Vec<String>,
    details: Vec<String>,
    evidence: Vec<String>,
}

/// Every node can hold replicas.
fn usable_nodes(
    nodes: &[Arc<Node>],
    lh_nodes: &[Arc<LonghornNode>],
    hosts: &Hosts,
    found: &mut Found,
) {
    let mut unusable = Vec::new();
    for node in nodes {
        let node_name = name(&node.metadata);
        let who = hosts.describe(node_name);
        let judged = match lh_nodes.iter().find(|l| name(&l.metadata) == node_name) {
            None => Judged::Refused(
                "has no Longhorn node object (longhorn-manager does not run there)".to_string(),
            ),
            Some(l) => node_judged(l, &who, &mut found.evidence),
        };
        match judged {
            Judged::Usable => {}
            Judged::Refused(reason) => {
                unusable.push(node_name);
                found.details.push(format!("{who} {reason}"));
            }
            Judged::Unknown(what) => found.unread.push(format!(
                "whether Longhorn's replica scheduler may place replicas on {who} is unknown: {what}"
            )),
        }
    }
    if !unusable.is_empty() {
        found.problems.push(format!(
            "Longhorn cannot store data on {} of {} nodes: {}",
            unusable.len(),
            nodes.len(),
            unusable.join(", ")
        ));
    }
}

/// Attached volumes are healthy; how many are attached.
fn attached_health(volumes: &[Arc<LonghornVolume>], hosts: &Hosts, found: &mut Found) -> usize {
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
            found.problems.push(format!(
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
    attached
}

/// Replicas of one volume sit on distinct hosts; how many volumes have replicas placed.
fn replica_hosts(replicas: &[Arc<LonghornReplica>], hosts: &Hosts, found: &mut Found) -> usize {
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
                    Some(why) => found
                        .unread
                        .push(format!("replica {replica} of volume {volume}: {why}")),
                    None => found.problems.push(format!(
                        "replica {replica} of volume {volume} sits on {}, so its host is unknown",
                        hosts.describe(node)
                    )),
                },
            }
        }
        for (host, members) in by_host.iter().filter(|(_, m)| m.len() > 1) {
            found.problems.push(format!(
                "volume {volume} has {} on host {host} ({}): losing the host loses them all",
                crate::words::count(members.len() as i128, "replica"),
                members.join(", ")
            ));
        }
    }
    by_volume.len()
}

/// Settings that let Longhorn put two replicas of a volume on one node.
fn setting_warnings(settings: &[Arc<LonghornSetting>]) -> Vec<String> {
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
        move |s| s.longhorn_nodes = listed(list)
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
            "node cp-3 (host pve3) has 1 Longhorn disk(s), none of which Longhorn's replica scheduler may use: cp-3 disk d: allowScheduling false"
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
                    .disk("default", true)
                    .disk_condition(
                        "default",
                        "Schedulable",
                        "False",
                        "DiskPressure",
                        "Disk default (/var/lib/longhorn/) on the node cp-3 is not schedulable for more replica",
                    )
                    .build(),
            ]))
            .build();
        let f = fails_with(&s, "Longhorn cannot store data on 1 of 3 nodes: cp-3");
        assert!(text(&f).contains(
            "node cp-3 (host pve3) has 1 Longhorn disk(s), none of which Longhorn's replica scheduler may use: cp-3 disk default: condition Schedulable is False (DiskPressure: Disk default (/var/lib/longhorn/) on the node cp-3 is not schedulable for more replica)"
        ), "{}", text(&f));
    }

    #[test]
    fn one_full_disk_beside_a_schedulable_one_leaves_the_node_usable() {
        let s = good()
            .with(lh_nodes(vec![
                longhorn_node("cp-1").disk("d", true).build(),
                longhorn_node("cp-2").disk("d", true).build(),
                longhorn_node("cp-3")
                    .disk("full", true)
                    .disk_condition("full", "Schedulable", "False", "DiskPressure", "")
                    .disk("spare", true)
                    .build(),
            ]))
            .build();
        let f = check(&s);
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert!(text(&f).contains("node cp-3 (host pve3): 1 schedulable Longhorn disk(s) (spare)"));
    }

    #[test]
    fn a_node_longhorn_reports_not_ready_unschedulable_or_evicting_cannot_hold_data() {
        let s = good()
            .with(lh_nodes(vec![
                longhorn_node("cp-1")
                    .disk("d", true)
                    .node_condition(
                        "Ready",
                        "False",
                        "KubernetesNodeNotReady",
                        "Kubernetes node cp-1 not ready: KubeletNotReady",
                    )
                    .build(),
                longhorn_node("cp-2")
                    .disk("d", true)
                    .node_condition(
                        "Schedulable",
                        "False",
                        "KubernetesNodeCordoned",
                        "Node cp-2 is cordoned",
                    )
                    .build(),
                longhorn_node("cp-3")
                    .disk("d", true)
                    .eviction_requested()
                    .build(),
            ]))
            .build();
        let f = fails_with(
            &s,
            "Longhorn cannot store data on 3 of 3 nodes: cp-1, cp-2, cp-3",
        );
        let t = text(&f);
        assert!(t.contains("node cp-1 (host pve1) is skipped by Longhorn's replica scheduler: condition Ready is False (KubernetesNodeNotReady: Kubernetes node cp-1 not ready: KubeletNotReady)"), "{t}");
        assert!(t.contains("node cp-2 (host pve2) is skipped by Longhorn's replica scheduler: condition Schedulable is False (KubernetesNodeCordoned: Node cp-2 is cordoned)"), "{t}");
        assert!(
            t.contains("node cp-3 (host pve3) has a Longhorn eviction requested"),
            "{t}"
        );
    }

    #[test]
    fn a_disk_with_eviction_requested_cannot_hold_data() {
        let mut evicting = longhorn_node("cp-3").disk("d", true).build();
        evicting.spec.disks.get_mut("d").unwrap().eviction_requested = true;
        let s = good()
            .with(lh_nodes(vec![
                longhorn_node("cp-1").disk("d", true).build(),
                longhorn_node("cp-2").disk("d", true).build(),
                evicting,
            ]))
            .build();
        let f = fails_with(&s, "Longhorn cannot store data on 1 of 3 nodes: cp-3");
        assert!(text(&f).contains("cp-3 disk d: eviction requested"));
    }

    #[test]
    fn missing_or_unknown_conditions_are_an_error_naming_what_is_missing_never_a_pass() {
        let cases: [(LonghornNode, &str); 5] = [
            (
                longhorn_node("cp-3")
                    .disk("d", true)
                    .without_status()
                    .build(),
                "whether Longhorn's replica scheduler may place replicas on node cp-3 (host pve3) is unknown: condition Ready is not reported in status.conditions; condition Schedulable is not reported in status.conditions",
            ),
            (
                longhorn_node("cp-3")
                    .disk("d", true)
                    .without_node_condition("Schedulable")
                    .build(),
                "node cp-3 (host pve3) is unknown: condition Schedulable is not reported in status.conditions",
            ),
            (
                longhorn_node("cp-3")
                    .disk("d", true)
                    .node_condition("Ready", "Unknown", "", "")
                    .build(),
                "node cp-3 (host pve3) is unknown: condition Ready is Unknown",
            ),
            (
                longhorn_node("cp-3")
                    .disk("d", true)
                    .without_disk_status("d")
                    .build(),
                "node cp-3 (host pve3) is unknown: cp-3 disk d: no status.diskStatus.d",
            ),
            (
                longhorn_node("cp-3")
                    .disk("d", true)
                    .disk_condition("d", "Schedulable", "Unknown", "NoDiskInfo", "")
                    .build(),
                "node cp-3 (host pve3) is unknown: cp-3 disk d: condition Schedulable is Unknown (NoDiskInfo)",
            ),
        ];
        for (node, needle) in cases {
            let s = good()
                .with(lh_nodes(vec![
                    longhorn_node("cp-1").disk("d", true).build(),
                    longhorn_node("cp-2").disk("d", true).build(),
                    node,
                ]))
                .build();
            let f = check(&s);
            assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
            assert!(
                f.summary.contains(needle),
                "{:?} lacks {needle:?}",
                f.summary
            );
        }
        // A disk whose Schedulable condition is missing is unknown even when the node's are
        // true.
        let mut bare = longhorn_node("cp-3").disk("d", true).build();
        bare.status.as_mut().unwrap().disk_status.insert(
            "d".into(),
            Some(crate::state::LonghornDiskStatus::default()),
        );
        let s = good()
            .with(lh_nodes(vec![
                longhorn_node("cp-1").disk("d", true).build(),
                longhorn_node("cp-2").disk("d", true).build(),
                bare,
            ]))
            .build();
        let f = check(&s);
        assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
        assert!(f.summary.contains(
            "cp-3 disk d: condition Schedulable is not reported in status.diskStatus.d.conditions"
        ), "{}", f.summary);
    }

    #[test]
    fn a_refusal_outweighs_an_unknown_condition() {
        // Schedulable unknown, but the only disk is full: Longhorn places nothing there.
        let s = good()
            .with(lh_nodes(vec![
                longhorn_node("cp-1").disk("d", true).build(),
                longhorn_node("cp-2").disk("d", true).build(),
                longhorn_node("cp-3")
                    .disk("d", true)
                    .without_node_condition("Schedulable")
                    .disk_condition("d", "Schedulable", "False", "DiskPressure", "")
                    .build(),
            ]))
            .build();
        fails_with(&s, "Longhorn cannot store data on 1 of 3 nodes: cp-3");
    }

    #[test]
    fn conditions_read_from_a_v1beta2_node_object() {
        let node: LonghornNode = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "cp-1"},
            "spec": {"allowScheduling": true, "disks": {
                "d": {"path": "/var/lib/longhorn", "allowScheduling": true},
                "e": {"path": "/mnt/e", "allowScheduling": true}
            }},
            "status": {
                "conditions": [{"type": "Ready", "status": "True", "reason": "", "message": ""}],
                "diskStatus": {
                    "d": {"conditions": [{"type": "Schedulable", "status": "False", "reason": "DiskPressure", "message": "full"}]},
                    "e": null
                }
            }
        }))
        .unwrap();
        let status = node.status.as_ref().unwrap();
        assert!(matches!(
            longhorn_condition(&status.conditions, "Ready"),
            LonghornConditionState::True
        ));
        assert!(matches!(
            longhorn_condition(&status.conditions, "Schedulable"),
            LonghornConditionState::Unknown(None)
        ));
        let d = status.disk_status["d"].as_ref().unwrap();
        assert!(matches!(
            longhorn_condition(&d.conditions, "Schedulable"),
            LonghornConditionState::False(c) if c.reason == "DiskPressure" && c.message == "full"
        ));
        assert!(status.disk_status["e"].is_none());
    }

    #[test]
    fn an_attached_degraded_volume_fails_but_a_detached_unknown_one_does_not() {
        let s = good()
            .with(|s| {
                s.longhorn_volumes = listed(vec![
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
