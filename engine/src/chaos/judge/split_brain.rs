//! Split-brain signals of a partition run, judged from what was sampled during it and right
//! after the links came back (docs/reality.md says why each is evidence):
//!
//! - `api-vip`: two control planes list the API VIP in their Talos addresses in one sample;
//! - `l2-announcement`: a `cilium-l2announce-*` Lease renewed by its holder after another node
//!   had acquired it, so both announced the address (a holder change after expiry is not it);
//! - `etcd-minority`: a cut-off etcd member, once read again, calls itself or another member
//!   leader while the majority follows a different one, or has applied raft entries the
//!   majority's leader, read after it, does not have (writes accepted on the minority).
//!
//! A signal seen fails the run with the times and nodes; a signal that could not be read is
//! an `error` naming what was missing. Pure over the samples.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::chaos::talos_pool::TalosAskError;
use crate::verdict::Finding;

/// Why the L2 announcement Leases could not be listed in one sample.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LeaseListError {
    #[error("listing Leases in kube-system took over {patience:?}")]
    TookOver { patience: Duration },
    #[error("listing Leases in kube-system: {0}")]
    Api(Arc<kube::Error>),
}

/// One sample of everything a split brain shows, at `at` on the run's timeline.
#[derive(Debug, Clone)]
pub struct BrainSample {
    pub at: Duration,
    /// Per control-plane node: whether its Talos addresses list the VIP, or why unread.
    pub vip: Vec<(String, Result<bool, TalosAskError>)>,
    /// Per control-plane node: its etcd status, or why unread.
    pub etcd: Vec<(String, Result<EtcdSeen, TalosAskError>)>,
    /// The leader's status read again after every other member's (for the index check).
    pub leader_after: Option<Result<EtcdSeen, TalosAskError>>,
    /// The `cilium-l2announce-*` Leases in kube-system, or why unread.
    pub leases: Result<Vec<LeaseSeen>, LeaseListError>,
}

/// One member's etcd status, as the Talos API reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EtcdSeen {
    pub member: u64,
    pub leader: u64,
    pub raft_index: u64,
    pub raft_applied_index: u64,
}

/// One L2 announcement Lease as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseSeen {
    pub name: String,
    pub holder: String,
    pub acquired: Option<DateTime<Utc>>,
    pub renewed: Option<DateTime<Utc>>,
}

/// What the judge needs besides the samples.
pub struct Partition<'a> {
    /// The nodes whose links were pulled.
    pub cut_off: &'a [String],
    /// When the links were pulled and when they were all back (timeline seconds).
    pub fault: Option<f64>,
    pub back: Option<f64>,
    /// Why the VIP could not be watched at all, when it could not.
    pub vip_unwatched: Option<String>,
    /// Why no Talos API (etcd status) could be watched at all, when none could.
    pub talos_unwatched: Option<String>,
}

pub use gates_core::record::split_brain::{Signal, SignalOutcome};

pub fn judge(samples: &[BrainSample], p: &Partition<'_>) -> Vec<SignalOutcome> {
    vec![vip(samples, p), l2(samples, p), etcd(samples, p)]
}

fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// The samples from when every link was back, or an error finding when they never were.
fn after_back<'s>(
    samples: &'s [BrainSample],
    p: &Partition<'_>,
) -> Result<&'s [BrainSample], Finding> {
    let Some(back) = p.back else {
        return Err(Finding::error(
            "the links were not all read back up, so nothing was read after the partition: run `gates recover ENV` and look at the cut-off nodes by hand",
        ));
    };
    let from = samples.partition_point(|s| s.at.as_secs_f64() < back);
    Ok(&samples[from..])
}

fn vip(samples: &[BrainSample], p: &Partition<'_>) -> SignalOutcome {
    let read = samples
        .iter()
        .filter(|s| s.vip.iter().any(|(_, r)| r.is_ok()))
        .count();
    let out = |finding| SignalOutcome {
        signal: Signal::ApiVip,
        samples: read,
        finding,
    };
    if let Some(why) = &p.vip_unwatched {
        return out(Finding::error(format!(
            "who holds the API VIP could not be watched: {why}"
        )));
    }
    let seen: Vec<String> = samples
        .iter()
        .filter_map(|s| {
            let holders: Vec<&str> = s
                .vip
                .iter()
                .filter(|(_, r)| matches!(r, Ok(true)))
                .map(|(n, _)| n.as_str())
                .collect();
            (holders.len() > 1).then(|| format!("at {}: {}", secs(s.at), holders.join(" and ")))
        })
        .collect();
    if !seen.is_empty() {
        return out(Finding::fail(format!(
            "two control planes held the API VIP at once in {} sample(s)",
            seen.len()
        ))
        .with_evidence(seen));
    }
    let after = match after_back(samples, p) {
        Ok(after) => after,
        Err(e) => return out(e),
    };
    let unread = unread_after(samples, after, p.cut_off, |s| &s.vip);
    if !unread.is_empty() {
        return out(Finding::error(format!(
            "the addresses of {} were never read after the links came back, so a VIP kept on the cut-off side cannot be ruled out: check that the Talos API answers there and raise chaos.recovery_timeout",
            unread.join(", ")
        )));
    }
    out(Finding::pass(format!(
        "no two control planes held the API VIP at once in {read} sample(s), the cut-off nodes read again after the links came back"
    )))
}

/// The cut-off nodes `per_node` asks about that no sample in `after` read.
fn unread_after<T>(
    samples: &[BrainSample],
    after: &[BrainSample],
    cut_off: &[String],
    per_node: impl Fn(&BrainSample) -> &Vec<(String, Result<T, TalosAskError>)>,
) -> Vec<String> {
    let asked = |n: &String| {
        samples
            .iter()
            .any(|s| per_node(s).iter().any(|(m, _)| m == n))
    };
    let read = |n: &String| {
        after
            .iter()
            .any(|s| per_node(s).iter().any(|(m, r)| m == n && r.is_ok()))
    };
    cut_off
        .iter()
        .filter(|n| asked(n) && !read(n))
        .cloned()
        .collect()
}

/// One term of a Lease: holder, when acquired, the latest renewal seen, and when it was seen.
type Term<'a> = (
    &'a str,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
    Duration,
);

fn l2(samples: &[BrainSample], p: &Partition<'_>) -> SignalOutcome {
    let read: Vec<&BrainSample> = samples.iter().filter(|s| s.leases.is_ok()).collect();
    let out = |finding| SignalOutcome {
        signal: Signal::L2Announcement,
        samples: read.len(),
        finding,
    };
    // Per Lease: each term (holder, acquired) with the latest renewal seen in it.
    let mut terms: BTreeMap<&str, Vec<Term<'_>>> = BTreeMap::new();
    for s in &read {
        for l in s.leases.as_ref().into_iter().flatten() {
            let list = terms.entry(l.name.as_str()).or_default();
            match list
                .iter_mut()
                .find(|(h, a, _, _)| *h == l.holder && *a == l.acquired)
            {
                Some(term) => {
                    if l.renewed > term.2 {
                        term.2 = l.renewed;
                        term.3 = s.at;
                    }
                }
                None => list.push((l.holder.as_str(), l.acquired, l.renewed, s.at)),
            }
        }
    }
    let mut seen = Vec::new();
    for (lease, list) in &terms {
        for (h1, a1, r1, at1) in list.iter().filter(|t| !t.0.is_empty()) {
            for (h2, a2, _, _) in list.iter().filter(|t| !t.0.is_empty() && t.0 != *h1) {
                if let (Some(a1), Some(r1), Some(a2)) = (a1, r1, a2)
                    && a1 < a2
                    && r1 > a2
                {
                    seen.push(format!(
                        "{lease}: {h2} acquired it at {} while {h1} (holding since {}) renewed it at {} (seen at {}): both announced the address in between",
                        a2.to_rfc3339(),
                        a1.to_rfc3339(),
                        r1.to_rfc3339(),
                        secs(*at1)
                    ));
                }
            }
        }
    }
    if !seen.is_empty() {
        return out(Finding::fail(format!(
            "two nodes announced one L2 address: {} overlapping term(s)",
            seen.len()
        ))
        .with_evidence(seen));
    }
    if terms.is_empty() {
        let why = samples
            .iter()
            .rev()
            .find_map(|s| s.leases.as_ref().err())
            .map_or(
                "no cilium-l2announce-* Lease in kube-system".to_string(),
                ToString::to_string,
            );
        return out(Finding::error(format!(
            "the L2 announcement Leases could not be read ({why}): check that Cilium's L2 announcements are on and the credentials may list Leases in kube-system"
        )));
    }
    match after_back(samples, p) {
        Err(e) => out(e),
        Ok(after) if !after.iter().any(|s| s.leases.is_ok()) => out(Finding::error(
            "the L2 announcement Leases were never read after the links came back, so a cut-off announcer renewing its old term cannot be ruled out: check that the API answers and raise chaos.recovery_timeout",
        )),
        Ok(_) => out(Finding::pass(format!(
            "no L2 announcement Lease was renewed by one node after another acquired it, in {} sample(s) of {} Lease(s)",
            read.len(),
            terms.len()
        ))),
    }
}

fn etcd(samples: &[BrainSample], p: &Partition<'_>) -> SignalOutcome {
    let read = samples
        .iter()
        .filter(|s| s.etcd.iter().any(|(_, r)| r.is_ok()))
        .count();
    let out = |finding| SignalOutcome {
        signal: Signal::EtcdMinority,
        samples: read,
        finding,
    };
    if let Some(why) = &p.talos_unwatched {
        return out(Finding::error(format!(
            "the etcd status of the cut-off members could not be watched: {why}"
        )));
    }
    let fault = p.fault.unwrap_or(f64::INFINITY);
    let mut seen = Vec::new();
    let mut judged: Vec<&String> = Vec::new();
    for s in samples.iter().filter(|s| s.at.as_secs_f64() >= fault) {
        let majority = majority_leader(s, p.cut_off);
        for (node, r) in s.etcd.iter().filter(|(n, _)| p.cut_off.contains(n)) {
            let (Ok(status), Some(leader)) = (r, majority) else {
                continue;
            };
            judged.push(node);
            if status.leader != 0 && status.leader != leader {
                let whom = if status.leader == status.member {
                    "itself".to_string()
                } else {
                    format!("{:016x}", status.leader)
                };
                seen.push(format!(
                    "at {}: {node} follows {whom} as leader while the majority follows {leader:016x}",
                    secs(s.at)
                ));
            }
            if let Some(Ok(after)) = &s.leader_after
                && status.raft_applied_index > after.raft_index
            {
                seen.push(format!(
                    "at {}: {node} applied raft index {} while the majority's leader, read after it, was at {}: entries the quorum never had",
                    secs(s.at),
                    status.raft_applied_index,
                    after.raft_index
                ));
            }
        }
    }
    if !seen.is_empty() {
        return out(
            Finding::fail(format!(
                "the cut-off etcd member acted on its own: {} reading(s) show writes or a leader of the minority",
                seen.len()
            ))
            .with_evidence(seen),
        );
    }
    let after = match after_back(samples, p) {
        Ok(after) => after,
        Err(e) => return out(e),
    };
    let cut_members: Vec<&String> = p
        .cut_off
        .iter()
        .filter(|n| samples.iter().any(|s| s.etcd.iter().any(|(m, _)| m == *n)))
        .collect();
    let missing: Vec<String> = cut_members
        .iter()
        .filter(|n| {
            !after.iter().any(|s| {
                majority_leader(s, p.cut_off).is_some()
                    && s.etcd.iter().any(|(m, r)| m == **n && r.is_ok())
            })
        })
        .map(|n| n.to_string())
        .collect();
    if !missing.is_empty() {
        return out(Finding::error(format!(
            "the etcd status of {} was never read beside the majority's after the links came back, so writes on the minority cannot be ruled out: check that the Talos API answers there and raise chaos.recovery_timeout",
            missing.join(", ")
        )));
    }
    out(Finding::pass(if cut_members.is_empty() {
        format!("no etcd member was cut off; {read} sample(s) read")
    } else {
        format!(
            "{} followed the majority's leader with no entries of its own in {} reading(s) after the links came back",
            cut_members
                .iter()
                .map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            judged.len()
        )
    }))
}

/// The leader the members that were not cut off agree on, when they answered and agree.
fn majority_leader(s: &BrainSample, cut_off: &[String]) -> Option<u64> {
    let leaders: Vec<u64> = s
        .etcd
        .iter()
        .filter(|(n, _)| !cut_off.contains(n))
        .filter_map(|(_, r)| r.as_ref().ok().map(|e| e.leader))
        .collect();
    let first = *leaders.first()?;
    (first != 0 && leaders.iter().all(|l| *l == first)).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::Verdict;

    const CUT: &str = "cp-1";

    fn at(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn partition(cut_off: &[String]) -> Partition<'_> {
        Partition {
            cut_off,
            fault: Some(10.0),
            back: Some(100.0),
            vip_unwatched: None,
            talos_unwatched: None,
        }
    }

    fn status(member: u64, leader: u64, index: u64) -> Result<EtcdSeen, TalosAskError> {
        Ok(EtcdSeen {
            member,
            leader,
            raft_index: index,
            raft_applied_index: index,
        })
    }

    /// A node that did not answer.
    fn unreachable() -> TalosAskError {
        TalosAskError::NoAnswer {
            endpoint: "unreachable".into(),
            patience: Duration::from_secs(1),
        }
    }

    fn lease(holder: &str, acquired: i64, renewed: i64) -> LeaseSeen {
        let t = |s: i64| DateTime::<Utc>::from_timestamp(1_800_000_000 + s, 0);
        LeaseSeen {
            name: "cilium-l2announce-kube-system-traefik".into(),
            holder: holder.into(),
            acquired: t(acquired),
            renewed: t(renewed),
        }
    }

    /// A sample where `vip_holders` list the VIP, cp-1 (the cut-off node) answers when
    /// `cut_answers`, the etcd leader is member 2 and the L2 Lease is `leases`.
    fn sample(
        s: u64,
        vip_holders: &[&str],
        cut_answers: bool,
        cut_etcd: Result<EtcdSeen, TalosAskError>,
        leases: Vec<LeaseSeen>,
    ) -> BrainSample {
        let vip = ["cp-1", "cp-2", "cp-3"]
            .iter()
            .map(|n| {
                let r = if *n == CUT && !cut_answers {
                    Err(unreachable())
                } else {
                    Ok(vip_holders.contains(n))
                };
                (n.to_string(), r)
            })
            .collect();
        let etcd = vec![
            (
                "cp-1".to_string(),
                if cut_answers {
                    cut_etcd
                } else {
                    Err(unreachable())
                },
            ),
            ("cp-2".to_string(), status(2, 2, 500)),
            ("cp-3".to_string(), status(3, 2, 499)),
        ];
        BrainSample {
            at: at(s),
            vip,
            etcd,
            leader_after: Some(status(2, 2, 501)),
            leases: Ok(leases),
        }
    }

    /// A clean partition of cp-1, which held the VIP and the Lease: both move on their
    /// timings, cp-1 comes back a follower.
    fn clean() -> Vec<BrainSample> {
        vec![
            sample(
                0,
                &["cp-1"],
                true,
                status(1, 2, 400),
                vec![lease("cp-1", 0, 0)],
            ),
            sample(20, &[], false, status(1, 2, 400), vec![lease("cp-1", 0, 5)]),
            sample(
                80,
                &["cp-2"],
                false,
                status(1, 2, 400),
                vec![lease("cp-2", 30, 75)],
            ),
            sample(
                110,
                &["cp-2"],
                true,
                status(1, 2, 480),
                vec![lease("cp-2", 30, 105)],
            ),
        ]
    }

    fn verdicts(outcomes: &[SignalOutcome]) -> Vec<(Signal, Verdict)> {
        outcomes
            .iter()
            .map(|o| (o.signal, o.finding.verdict))
            .collect()
    }

    #[test]
    fn a_clean_partition_passes_every_signal_from_what_was_read_after_the_links_came_back() {
        let cut = vec![CUT.to_string()];
        let judged = judge(&clean(), &partition(&cut));
        assert_eq!(
            verdicts(&judged),
            vec![
                (Signal::ApiVip, Verdict::Pass),
                (Signal::L2Announcement, Verdict::Pass),
                (Signal::EtcdMinority, Verdict::Pass)
            ],
            "{judged:#?}"
        );
        assert!(judged.iter().all(|o| o.samples == 4), "{judged:#?}");
    }

    #[test]
    fn two_vip_holders_in_one_sample_fail_naming_the_time_and_both_nodes() {
        let cut = vec![CUT.to_string()];
        let mut samples = clean();
        samples[3] = sample(
            110,
            &["cp-1", "cp-2"],
            true,
            status(1, 2, 480),
            vec![lease("cp-2", 30, 105)],
        );
        let judged = judge(&samples, &partition(&cut));
        let vip = &judged[0];
        assert_eq!(vip.finding.verdict, Verdict::Fail, "{vip:#?}");
        assert_eq!(vip.finding.evidence, vec!["at 110.0s: cp-1 and cp-2"]);
    }

    #[test]
    fn a_cut_off_announcer_renewing_its_old_term_after_another_acquired_it_fails() {
        let cut = vec![CUT.to_string()];
        let mut samples = clean();
        // Back on the network, cp-1 renews the term it acquired at 0: it never stopped.
        samples[3].leases = Ok(vec![lease("cp-1", 0, 105)]);
        let judged = judge(&samples, &partition(&cut));
        let l2 = &judged[1];
        assert_eq!(l2.finding.verdict, Verdict::Fail, "{l2:#?}");
        let evidence = l2.finding.evidence.join("\n");
        assert!(
            evidence.contains("cp-2 acquired it at") && evidence.contains("while cp-1"),
            "{evidence}"
        );
    }

    #[test]
    fn a_holder_change_after_the_lease_expired_is_no_split_brain() {
        let cut = vec![CUT.to_string()];
        // cp-2 acquired 25 s after cp-1's last renewal: cp-1 had stopped 5 s after it.
        let samples = clean();
        assert_eq!(
            judge(&samples, &partition(&cut))[1].finding.verdict,
            Verdict::Pass
        );
    }

    #[test]
    fn a_cut_off_member_that_leads_itself_or_applied_entries_the_leader_lacks_fails() {
        let cut = vec![CUT.to_string()];
        let mut leads = clean();
        leads[3].etcd[0].1 = status(1, 1, 480);
        let judged = judge(&leads, &partition(&cut));
        assert_eq!(judged[2].finding.verdict, Verdict::Fail);
        assert!(
            judged[2].finding.evidence[0].contains("cp-1 follows itself as leader"),
            "{:?}",
            judged[2].finding.evidence
        );
        let mut wrote = clean();
        wrote[3].etcd[0].1 = status(1, 2, 900);
        let judged = judge(&wrote, &partition(&cut));
        assert_eq!(judged[2].finding.verdict, Verdict::Fail);
        assert!(
            judged[2].finding.evidence[0].contains("applied raft index 900")
                && judged[2].finding.evidence[0].contains("was at 501"),
            "{:?}",
            judged[2].finding.evidence
        );
    }

    #[test]
    fn a_cut_off_node_never_read_after_the_links_came_back_is_an_error_never_a_pass() {
        let cut = vec![CUT.to_string()];
        let mut samples = clean();
        samples[3] = sample(
            110,
            &["cp-2"],
            false,
            status(1, 2, 480),
            vec![lease("cp-2", 30, 105)],
        );
        samples[3].leases = Err(LeaseListError::TookOver {
            patience: Duration::from_secs(1),
        });
        let judged = judge(&samples, &partition(&cut));
        assert_eq!(
            verdicts(&judged),
            vec![
                (Signal::ApiVip, Verdict::Error),
                (Signal::L2Announcement, Verdict::Error),
                (Signal::EtcdMinority, Verdict::Error)
            ],
            "{judged:#?}"
        );
        assert!(judged[0].finding.summary.contains("cp-1"), "{judged:#?}");
        assert!(judged[2].finding.summary.contains("cp-1"), "{judged:#?}");
    }

    #[test]
    fn signals_that_cannot_be_read_at_all_are_errors_saying_what_to_fix() {
        let cut = vec![CUT.to_string()];
        let p = Partition {
            vip_unwatched: Some("the API VIP is not known".into()),
            back: None,
            ..partition(&cut)
        };
        let mut samples = clean();
        for s in &mut samples {
            s.leases = Ok(Vec::new());
        }
        let judged = judge(&samples, &p);
        assert_eq!(judged[0].finding.verdict, Verdict::Error);
        assert!(judged[0].finding.summary.contains("not known"));
        assert_eq!(judged[1].finding.verdict, Verdict::Error);
        assert!(
            judged[1]
                .finding
                .summary
                .contains("no cilium-l2announce-* Lease"),
            "{}",
            judged[1].finding.summary
        );
        assert_eq!(judged[2].finding.verdict, Verdict::Error);
        assert!(judged[2].finding.summary.contains("gates recover"));
    }
}
