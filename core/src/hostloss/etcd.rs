//! etcd and the API VIP after a host loss or partition: the voting members left against the
//! quorum, and a surviving Ready control plane to take the VIP (which Talos moves within about
//! a minute when its holder goes or is cut off).
//!
//! Members come from the Talos API (each endpoint's member list; the member name is the node's
//! hostname) when the environment has a `talos` section, else every control-plane node is taken
//! as a member, as Talos runs etcd on each. A member whose node is not Ready counts as down
//! already.

use super::cluster::Cluster;
pub use super::findings::EtcdLoss;
use super::outcome::{Fault, HostLoss, Outcome};
use crate::state::Collected;

/// etcd's quorum is the same question for either fault: a cut-off member is a minority of
/// one, out of the quorum as a member without power is (etcd's `failures.md`: "there is no
/// split-brain in etcd"). Only the words for the VIP's move differ ([`vip`]).
pub fn predict(cluster: &Cluster<'_>, lost: &[usize], fault: Fault, loss: &mut HostLoss) {
    let (members, source): (Vec<String>, &str) = match &cluster.state.talos {
        Collected::Present(talos) => {
            let Some(view) = talos.endpoints.iter().find_map(|e| e.view.as_ref().ok()) else {
                loss.reason(
                    Outcome::Unknown,
                    "no Talos endpoint answered with the etcd member list",
                );
                return;
            };
            (
                view.members
                    .iter()
                    .filter(|m| !m.learner)
                    .map(|m| m.hostname.clone())
                    .collect(),
                "the Talos API",
            )
        }
        Collected::Absent(why) => {
            loss.reason(
                Outcome::Unknown,
                format!("the etcd member list could not be read: {why}"),
            );
            return;
        }
        Collected::NotApplicable(_) => (
            cluster
                .nodes
                .iter()
                .filter(|n| n.control_plane)
                .map(|n| n.name.to_string())
                .collect(),
            "the control-plane nodes (no talos section)",
        ),
    };
    let mut left = 0;
    let mut gone = Vec::new();
    for member in &members {
        match cluster.node_index.get(member.as_str()) {
            None => loss.reason(
                Outcome::Unknown,
                format!(
                    "etcd member {member} is not a node of the cluster, so its host is unknown"
                ),
            ),
            Some(&n) if lost.contains(&n) => gone.push(member.clone()),
            Some(&n) if cluster.nodes[n].ready => left += 1,
            Some(_) => {}
        }
    }
    let quorum = members.len() / 2 + 1;
    let kept = left >= quorum;
    if members.is_empty() {
        loss.reason(Outcome::Unknown, format!("{source} name no etcd member"));
    } else if !kept {
        loss.reason(
            Outcome::Lost,
            format!(
                "etcd loses quorum: {left} of {} members left, {quorum} needed (lost: {})",
                members.len(),
                gone.join(", ")
            ),
        );
    }

    let (candidates, holder, holder_lost) = vip(cluster, lost, fault, loss);
    if fault == Fault::Partition && kept && !gone.is_empty() {
        loss.reason(
            Outcome::Survives,
            format!(
                "etcd member{} {} cut off: a minority, which can neither lead nor commit an entry; the {left} of {} members left keep quorum",
                if gone.len() == 1 { "" } else { "s" },
                gone.join(", "),
                members.len()
            ),
        );
    }
    loss.etcd = Some(EtcdLoss {
        members: members.len(),
        left,
        quorum,
        kept,
        source: source.to_string(),
        lost: gone,
        vip_candidates: candidates,
        vip_moves: holder_lost,
        vip_holder: holder,
    });
}

/// The Ready control planes left to take the API VIP, its holder now, and whether the holder
/// goes; says how long the API through the VIP is down when it does. Talos's holder keeps
/// the VIP while its etcd session lives (etcd's default session TTL, 60 s): a cut-off holder
/// cannot keep the session alive, and the majority elects a new holder only once it expired,
/// so a partition moves the VIP in about the minute a power loss does.
fn vip(
    cluster: &Cluster<'_>,
    lost: &[usize],
    fault: Fault,
    loss: &mut HostLoss,
) -> (Vec<String>, Option<String>, bool) {
    let candidates: Vec<String> = cluster
        .nodes
        .iter()
        .enumerate()
        .filter(|(n, node)| node.control_plane && node.ready && !lost.contains(n))
        .map(|(_, node)| node.name.to_string())
        .collect();
    let holder = vip_holder(cluster);
    let holder_lost = holder
        .as_deref()
        .and_then(|h| cluster.node_index.get(h))
        .is_some_and(|n| lost.contains(n));
    if candidates.is_empty() {
        loss.reason(
            Outcome::Lost,
            "no Ready control plane survives to take the API VIP",
        );
    } else if holder_lost {
        let old = holder.as_deref().unwrap_or_default();
        let when = match fault {
            Fault::Power => "(about a minute)".to_string(),
            Fault::Partition => format!(
                "(about a minute, as after power loss: cut off, {old} cannot keep its etcd session alive and answers no one, and a new holder is elected once the session's 60 s TTL ran out)"
            ),
        };
        loss.reason(
            Outcome::Degraded,
            format!(
                "the API VIP moves from {old} to one of {}: the API through the VIP is down until then {when}",
                candidates.join(", ")
            ),
        );
    }
    (candidates, holder, holder_lost)
}

/// The node whose Talos addresses carry the API VIP, when both were read.
fn vip_holder(cluster: &Cluster<'_>) -> Option<String> {
    let talos = cluster.state.talos.present()?;
    let api = cluster.state.api.present()?;
    let holders = talos.holders(&api.vip_addresses);
    match holders.as_slice() {
        [one] => talos.node_of(one),
        _ => None,
    }
}
