//! Gates 1 and 5: etcd runs one member on each control-plane node, and every control-plane
//! endpoint, asked directly over the Talos API, sees the same healthy member set.
//!
//! An endpoint that does not answer (down, hanging past the timeout, another CA) is named
//! and makes the check an `error`: not being able to ask is not a broken rule. Only when the
//! endpoints that did answer already prove a violation (a wrong member count, a learner, an
//! alarm, disagreeing member sets) does the check fail, with the silent ones named too. It
//! never passes with a silent endpoint.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::Context;
use super::support::{is_control_plane, name};
use crate::state::{EtcdMemberView, TalosEndpoint};
use crate::verdict::Finding;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {}

impl super::Check for Params {
    fn inputs(&self) -> &'static [crate::state::Input] {
        use crate::state::Input;
        &[Input::Nodes, Input::Talos]
    }

    fn evaluate(&self, ctx: Context<'_>) -> Finding {
        evaluate(ctx, self)
    }
}

pub fn evaluate(ctx: Context<'_>, _params: &Params) -> Finding {
    let talos = match ctx.state.talos.get("the Talos API") {
        Ok(talos) => talos,
        Err(finding) => return finding,
    };
    let mut seen = Seen::default();
    for endpoint in &talos.endpoints {
        seen.read(endpoint);
    }
    if seen.answered.is_empty() {
        return Finding::error(format!("no Talos endpoint of {} answered", ctx.env.name))
            .with_evidence(seen.problems.into_iter().chain(seen.silent));
    }
    let members = seen.judge_membership(ctx);
    let voting = members.iter().filter(|m| !m.learner).count();
    let quorum = voting / 2 + 1;
    let member_count = members.len();
    let listed = members
        .iter()
        .map(|m| format!("{} ({})", m.hostname, m.id))
        .collect::<Vec<_>>()
        .join(", ");
    let Seen {
        mut problems,
        silent,
        mut evidence,
        ..
    } = seen;
    evidence.insert(
        0,
        format!(
            "members: {listed}; quorum {quorum} of {voting}, tolerates {} failure(s)",
            voting.saturating_sub(quorum)
        ),
    );
    if problems.is_empty() && !silent.is_empty() {
        return Finding::error(format!(
            "could not ask every control plane: {}",
            silent[0]
        ))
        .with_evidence(
            silent
                .into_iter()
                .skip(1)
                .chain(std::iter::once(
                    "the endpoints that answered agree; check that the silent node is up, reachable on port 50000 and trusted by the talosconfig's CA".to_string(),
                ))
                .chain(evidence),
        );
    }
    problems.extend(silent);
    if problems.is_empty() {
        Finding::pass(format!(
            "{member_count} etcd members agree on every endpoint; quorum {quorum}, tolerates {} failure(s)",
            voting.saturating_sub(quorum)
        ))
        .with_evidence(evidence)
    } else {
        Finding::fail(format!(
            "etcd membership does not meet the ADR: {}",
            problems[0]
        ))
        .with_evidence(problems.into_iter().skip(1).chain(evidence))
    }
}

/// What the control planes' Talos endpoints said about etcd, gathered one endpoint at a time.
#[derive(Default)]
struct Seen<'s> {
    problems: Vec<String>,
    silent: Vec<String>,
    evidence: Vec<String>,
    /// Each endpoint that answered, with the members (id, hostname) it sees.
    answered: Vec<(&'s str, BTreeSet<(String, String)>)>,
    learners: BTreeSet<String>,
    alarms: BTreeSet<String>,
    by_id: BTreeMap<String, &'s EtcdMemberView>,
}

impl<'s> Seen<'s> {
    fn read(&mut self, endpoint: &'s TalosEndpoint) {
        let view = match &endpoint.view {
            Ok(view) => view,
            Err(reason) => {
                self.silent.push(format!(
                    "endpoint {} did not answer: {reason}",
                    endpoint.endpoint
                ));
                return;
            }
        };
        let set: BTreeSet<(String, String)> = view
            .members
            .iter()
            .map(|m| (m.id.clone(), m.hostname.clone()))
            .collect();
        for member in &view.members {
            self.by_id.entry(member.id.clone()).or_insert(member);
            if member.learner {
                self.learners
                    .insert(format!("{} ({})", member.hostname, member.id));
            }
        }
        self.alarms.extend(view.alarms.iter().cloned());
        for error in &view.errors {
            self.problems.push(format!(
                "endpoint {} reports an etcd error: {error}",
                endpoint.endpoint
            ));
        }
        self.evidence.push(format!(
            "endpoint {}: Talos {}, member {}, leader {}, sees {} members",
            endpoint.endpoint,
            view.talos_version,
            view.member_id,
            if view.leader.is_empty() {
                "none"
            } else {
                &view.leader
            },
            view.members.len()
        ));
        self.answered.push((&endpoint.endpoint, set));
    }

    /// The members, once every endpoint's view is in: the views agree, the count is the
    /// ADR's, every member votes and is a control plane, no alarm is raised.
    fn judge_membership(&mut self, ctx: Context<'_>) -> Vec<&'s EtcdMemberView> {
        let expected = ctx.env.nodes.control_planes;
        let reference = &self.answered[0];
        for (endpoint, set) in &self.answered[1..] {
            if set != &reference.1 {
                self.problems.push(format!(
                    "endpoint {endpoint} sees members {} but endpoint {} sees {}",
                    describe(set),
                    reference.0,
                    describe(&reference.1)
                ));
            }
        }
        let members: Vec<&EtcdMemberView> = self.by_id.values().copied().collect();
        if members.len() != expected {
            self.problems.push(format!(
                "etcd has {} members, the ADR expects {expected}",
                members.len()
            ));
        }
        if !self.learners.is_empty() {
            self.problems.push(format!(
                "learner members (not voting yet): {}",
                join(&self.learners)
            ));
        }
        if !self.alarms.is_empty() {
            self.problems
                .push(format!("etcd alarms raised: {}", join(&self.alarms)));
        }
        if let Some(nodes) = ctx.state.nodes.present() {
            let control_planes: BTreeSet<&str> = nodes
                .iter()
                .filter(|n| is_control_plane(n))
                .map(|n| name(&n.metadata))
                .collect();
            for member in &members {
                if !control_planes.contains(member.hostname.as_str()) {
                    self.problems.push(format!(
                        "member {} ({}) is not a control-plane node of {}",
                        member.hostname, member.id, ctx.env.name
                    ));
                }
            }
        }
        members
    }
}

fn describe(set: &BTreeSet<(String, String)>) -> String {
    set.iter()
        .map(|(id, host)| format!("{host} ({id})"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn join(items: &BTreeSet<String>) -> String {
    items.iter().cloned().collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::{env, node, run, state, text};
    use crate::state::{Collected, EtcdView, State, TalosEndpoint, TalosState};
    use crate::verdict::Verdict;

    fn member(i: u8) -> EtcdMemberView {
        EtcdMemberView {
            id: format!("{:016x}", 0xa0 + i as u64),
            hostname: format!("cp-{i}"),
            peer_urls: vec![format!("https://10.0.0.{i}:2380")],
            learner: false,
        }
    }

    fn view(members: Vec<EtcdMemberView>) -> Result<EtcdView, crate::state::Unanswered> {
        Ok(EtcdView {
            talos_version: "v1.11.5".into(),
            member_id: members.first().map(|m| m.id.clone()).unwrap_or_default(),
            leader: members.first().map(|m| m.id.clone()).unwrap_or_default(),
            members,
            alarms: vec![],
            errors: vec![],
        })
    }

    fn with_endpoints(views: Vec<Result<EtcdView, crate::state::Unanswered>>) -> State {
        state()
            .nodes((1..=3).map(|i| node(&format!("cp-{i}")).control_plane().ready().build()))
            .with(|s| {
                s.talos = Collected::Present(TalosState {
                    endpoints: views
                        .into_iter()
                        .enumerate()
                        .map(|(i, view)| TalosEndpoint {
                            endpoint: format!("10.0.0.{}", i + 1),
                            view,
                            addresses: Ok(Vec::new()),
                        })
                        .collect(),
                    ..TalosState::default()
                })
            })
            .build()
    }

    fn three() -> Vec<EtcdMemberView> {
        vec![member(1), member(2), member(3)]
    }

    #[test]
    fn three_agreeing_members_pass_with_quorum_stated() {
        let s = with_endpoints(vec![view(three()), view(three()), view(three())]);
        let f = run(&env(), &s, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert!(
            text(&f).contains("quorum 2 of 3, tolerates 1 failure(s)"),
            "{}",
            text(&f)
        );
    }

    #[test]
    fn a_silent_endpoint_is_an_error_and_is_named() {
        for reason in ["deadline exceeded", "certificate signed by another CA"] {
            let s = with_endpoints(vec![view(three()), Err(reason.into()), view(three())]);
            let f = run(&env(), &s, &Params {}, evaluate);
            assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
            assert!(
                text(&f).contains(&format!("endpoint 10.0.0.2 did not answer: {reason}")),
                "{}",
                text(&f)
            );
        }
    }

    #[test]
    fn a_silent_endpoint_beside_a_proven_violation_fails_naming_both() {
        let two = vec![member(1), member(2)];
        let s = with_endpoints(vec![view(two.clone()), Err("timeout".into()), view(two)]);
        let f = run(&env(), &s, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Fail, "{}", text(&f));
        let t = text(&f);
        assert!(
            t.contains("etcd has 2 members") && t.contains("10.0.0.2 did not answer"),
            "{t}"
        );
    }

    #[test]
    fn no_endpoint_answering_is_an_error() {
        let s = with_endpoints(vec![Err("refused".into()), Err("refused".into())]);
        assert_eq!(
            run(&env(), &s, &Params {}, evaluate).verdict,
            Verdict::Error
        );
    }

    #[test]
    fn endpoints_that_disagree_fail_naming_both_sets() {
        let s = with_endpoints(vec![
            view(three()),
            view(vec![member(1), member(2)]),
            view(three()),
        ]);
        let f = run(&env(), &s, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(
            text(&f).contains("endpoint 10.0.0.2 sees members cp-1"),
            "{}",
            text(&f)
        );
    }

    #[test]
    fn two_members_fail_the_count() {
        let two = vec![member(1), member(2)];
        let s = with_endpoints(vec![view(two.clone()), view(two)]);
        let f = run(&env(), &s, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(
            text(&f).contains("etcd has 2 members, the ADR expects 3"),
            "{}",
            text(&f)
        );
    }

    #[test]
    fn learners_and_alarms_fail() {
        let mut members = three();
        members[2].learner = true;
        let mut alarmed = view(members).unwrap();
        alarmed.alarms = vec!["NoSpace on member 00000000000000a1".into()];
        let s = with_endpoints(vec![Ok(alarmed)]);
        let f = run(&env(), &s, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Fail);
        let t = text(&f);
        assert!(
            t.contains("learner members") && t.contains("NoSpace"),
            "{t}"
        );
    }

    #[test]
    fn a_member_that_is_no_control_plane_node_fails() {
        let mut members = three();
        members[2].hostname = "worker-9".into();
        let s = with_endpoints(vec![view(members)]);
        let f = run(&env(), &s, &Params {}, evaluate);
        assert!(
            text(&f).contains("member worker-9 (00000000000000a3) is not a control-plane node"),
            "{}",
            text(&f)
        );
    }

    #[test]
    fn without_a_talos_section_the_check_is_skipped() {
        let s = state()
            .with(|s| s.talos = Collected::NotApplicable("no `talos` section".into()))
            .build();
        assert_eq!(run(&env(), &s, &Params {}, evaluate).verdict, Verdict::Skip);
    }
}
