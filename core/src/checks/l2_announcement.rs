//! Gate 3: for each configured LoadBalancer Service, the CiliumL2AnnouncementPolicies that
//! select it and announce `loadBalancerIPs` together select every node, so the ingress address
//! can move to any surviving node when a host fails.
//!
//! Semantics follow Cilium's L2 announcer: a nil `serviceSelector` or `nodeSelector` selects
//! everything; the service selector also sees the pseudo-labels
//! `io.kubernetes.service.namespace` and `io.kubernetes.service.name`; a Service with a
//! `loadBalancerClass` other than `io.cilium/l2-announcer` is never announced. The current
//! announcer is the holder of Lease `cilium-l2announce-<namespace>-<name>` (normally in
//! kube-system); a holder that stopped renewing (older than the lease duration at collection
//! time, plus skew) is a warning. `node.kubernetes.io/exclude-from-external-load-balancers` on a
//! selected node is only a warning: Cilium's L2 announcer does not read that label
//! (`pkg/l2announcer`), so it changes nothing here, but the cloud service controller and other
//! load balancers do, and Talos puts it on every control plane since 1.8.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Service;
use serde::Deserialize;

use super::Context;
use super::support::{
    Hosts, describe_service_ref, find_services, labels, name, ns_name, service_type,
};
use crate::selector::{Selector, WhenNil};
use crate::state::L2AnnouncementPolicy;
use crate::verdict::Finding;

const L2_CLASS: &str = "io.cilium/l2-announcer";
const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
const LEASE_PREFIX: &str = "cilium-l2announce";
const CILIUM_NAMESPACE: &str = "kube-system";

/// No parameters: the Services come from the environment's `ingress.services`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {}

struct Policy<'a> {
    name: &'a str,
    policy: &'a L2AnnouncementPolicy,
    services: Selector,
    nodes: Selector,
}

impl super::Check for Params {
    fn inputs(&self) -> &'static [crate::state::Input] {
        use crate::state::Input;
        &[
            Input::Nodes,
            Input::Services,
            Input::Leases,
            Input::L2Policies,
            Input::Clock,
            Input::Proxmox,
        ]
    }

    fn evaluate(&self, ctx: Context<'_>) -> Finding {
        evaluate(ctx, self)
    }
}

pub fn evaluate(ctx: Context<'_>, _params: &Params) -> Finding {
    let (services, policies, nodes) = match (
        ctx.state.services.get("services"),
        ctx.state
            .l2_policies
            .get("CiliumL2AnnouncementPolicies (cilium.io/v2alpha1)"),
        ctx.state.nodes.get("nodes"),
    ) {
        (Ok(s), Ok(p), Ok(n)) => (s, p, n),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return e,
    };
    if ctx.env.ingress.services.is_empty() {
        return Finding::skip(
            "the environment names no ingress Services (ingress.services is empty)",
        );
    }
    if nodes.is_empty() {
        return Finding::error("the node list is empty, so there is nothing to announce from");
    }
    let hosts = Hosts::new(ctx, nodes);
    let mut compiled = Vec::new();
    for policy in policies {
        let policy_name = name(&policy.metadata);
        let svc = Selector::compile(policy.spec.service_selector.as_ref(), WhenNil::MatchesAll);
        let node = Selector::compile(policy.spec.node_selector.as_ref(), WhenNil::MatchesAll);
        match (svc, node) {
            (Ok(services), Ok(nodes)) => compiled.push(Policy {
                name: policy_name,
                policy,
                services,
                nodes,
            }),
            (Err(e), _) | (_, Err(e)) => {
                return Finding::error(format!(
                    "CiliumL2AnnouncementPolicy {policy_name} has an invalid selector: {e}"
                ));
            }
        }
    }
    if compiled.is_empty() {
        return Finding::fail(
            "no CiliumL2AnnouncementPolicy exists: no node announces the ingress address",
        );
    }

    let mut f = Found::default();
    for wanted in &ctx.env.ingress.services {
        let found = find_services(services, wanted);
        if found.load_balancers.is_empty() {
            let mut line = format!(
                "no LoadBalancer Service matches {}",
                describe_service_ref(wanted)
            );
            for s in &found.other_types {
                line.push_str(&format!(
                    " ({} is {})",
                    ns_name(&s.metadata),
                    service_type(s)
                ));
            }
            f.problems.push(line);
            continue;
        }
        for svc in found.load_balancers {
            let on = Announcing {
                ctx,
                policies: &compiled,
                nodes,
                hosts: &hosts,
            };
            on.check_service(svc, &mut f);
        }
    }
    let Found {
        problems,
        details,
        evidence,
        warnings,
    } = f;
    match problems.first() {
        Some(first) => Finding::fail(first.clone())
            .with_evidence(
                problems
                    .iter()
                    .skip(1)
                    .cloned()
                    .chain(details)
                    .chain(evidence),
            )
            .with_warnings(warnings),
        None => Finding::pass(format!(
            "every ingress Service is announced from all {} nodes",
            nodes.len()
        ))
        .with_evidence(evidence)
        .with_warnings(warnings),
    }
}

/// What the check found: what breaks the gate, why (each node or policy left out), what
/// holds, and what is worth knowing.
#[derive(Default)]
struct Found {
    problems: Vec<String>,
    details: Vec<String>,
    evidence: Vec<String>,
    warnings: Vec<String>,
}

/// The cluster one ingress Service is judged in: its L2 policies, nodes and hosts.
struct Announcing<'a> {
    ctx: Context<'a>,
    policies: &'a [Policy<'a>],
    nodes: &'a [Arc<k8s_openapi::api::core::v1::Node>],
    hosts: &'a Hosts,
}

impl Announcing<'_> {
    fn check_service(&self, svc: &Service, f: &mut Found) {
        let id = ns_name(&svc.metadata);
        if let Some(class) = svc
            .spec
            .as_ref()
            .and_then(|s| s.load_balancer_class.as_deref())
            && class != L2_CLASS
        {
            f.problems.push(format!(
                "Service {id} has loadBalancerClass {class}: Cilium's L2 announcer only announces Services without a class or with {L2_CLASS}"
            ));
            return;
        }
        let Some(announcing) = self.announcing(svc, &id, f) else {
            return;
        };
        let selected = self.selected_nodes(&announcing, &id, f);
        self.current_announcer(svc, &id, &selected, f);
    }

    /// The policies that select the Service and announce its load-balancer address; `None`
    /// (with the problem said) when none does.
    fn announcing(&self, svc: &Service, id: &str, f: &mut Found) -> Option<Vec<&Policy<'_>>> {
        let namespace = svc.metadata.namespace.as_deref().unwrap_or("");
        let svc_name = name(&svc.metadata);
        let mut svc_labels: BTreeMap<String, String> = labels(&svc.metadata).clone();
        svc_labels.insert("io.kubernetes.service.namespace".into(), namespace.into());
        svc_labels.insert("io.kubernetes.service.name".into(), svc_name.into());
        let selecting: Vec<&Policy<'_>> = self
            .policies
            .iter()
            .filter(|p| p.services.matches(&svc_labels))
            .collect();
        if selecting.is_empty() {
            f.problems.push(format!(
                "no CiliumL2AnnouncementPolicy selects Service {id}"
            ));
            for p in self.policies {
                f.details.push(format!(
                    "policy {}: serviceSelector excludes Service {id} ({} not met)",
                    p.name,
                    p.services.excluded_by(&svc_labels).join("; ")
                ));
            }
            return None;
        }
        let announcing: Vec<&Policy<'_>> = selecting
            .iter()
            .copied()
            .filter(|p| p.policy.spec.load_balancer_ips)
            .collect();
        if announcing.is_empty() {
            let names: Vec<&str> = selecting.iter().map(|p| p.name).collect();
            f.problems.push(format!(
                "the policies that select Service {id} ({}) do not announce loadBalancerIPs (spec.loadBalancerIPs is false)",
                names.join(", ")
            ));
            return None;
        }
        Some(announcing)
    }

    /// The nodes the announcing policies select, each left out said with why.
    fn selected_nodes<'n>(
        &'n self,
        announcing: &[&Policy<'_>],
        id: &str,
        f: &mut Found,
    ) -> Vec<&'n str> {
        let (nodes, hosts) = (self.nodes, self.hosts);
        let mut left_out = Vec::new();
        let mut selected = Vec::new();
        for node in nodes {
            let node_name = name(&node.metadata);
            let node_labels = labels(&node.metadata);
            if announcing.iter().any(|p| p.nodes.matches(node_labels)) {
                selected.push(node_name);
                if node_labels.contains_key(EXCLUDE_LABEL) {
                    f.warnings.push(format!(
                        "{} carries {EXCLUDE_LABEL}; Cilium's L2 announcer does not read it, so the node still announces, but other load balancers honour it (Talos sets it on control planes since 1.8; remove it with a machine-config patch `$patch: delete` on machine.nodeLabels)",
                        hosts.describe(node_name)
                    ));
                }
            } else {
                left_out.push(node_name);
                let reasons: Vec<String> = announcing
                    .iter()
                    .map(|p| {
                        format!(
                            "policy {} requires {}",
                            p.name,
                            p.nodes.excluded_by(node_labels).join("; ")
                        )
                    })
                    .collect();
                f.details.push(format!(
                    "{} is not selected: {}",
                    hosts.describe(node_name),
                    reasons.join(", ")
                ));
            }
        }
        let names: Vec<&str> = announcing.iter().map(|p| p.name).collect();
        if !left_out.is_empty() {
            f.problems.push(format!(
                "the L2 policies announcing Service {id} ({}) leave out {} of {} nodes: {}",
                names.join(", "),
                left_out.len(),
                nodes.len(),
                left_out.join(", ")
            ));
        }
        f.evidence.push(format!(
            "Service {id} is announced by {} on {}",
            names
                .iter()
                .map(|n| format!("policy {n}"))
                .collect::<Vec<_>>()
                .join(", "),
            if selected.is_empty() {
                "no node".to_string()
            } else {
                selected.join(", ")
            }
        ));
        selected
    }

    /// The current announcer, from the election lease.
    fn current_announcer(&self, svc: &Service, id: &str, selected: &[&str], f: &mut Found) {
        let (ctx, hosts) = (self.ctx, self.hosts);
        let namespace = svc.metadata.namespace.as_deref().unwrap_or("");
        let lease_name = format!("{LEASE_PREFIX}-{namespace}-{}", name(&svc.metadata));
        let Some(leases) = ctx.state.leases.present() else {
            f.warnings.push(format!(
                "leases were not collected, so the current announcer of Service {id} is unknown"
            ));
            return;
        };
        let lease: Option<&Lease> = leases
            .iter()
            .map(|l| &**l)
            .filter(|l| l.metadata.name.as_deref() == Some(lease_name.as_str()))
            .min_by_key(|l| l.metadata.namespace.as_deref() != Some(CILIUM_NAMESPACE));
        match lease {
            None => f.warnings.push(format!(
                "no Lease {lease_name}: no node announces Service {id} right now (is l2announcements.enabled set in Cilium?)"
            )),
            Some(l) => match l.spec.as_ref().and_then(|s| s.holder_identity.as_deref()).filter(|h| !h.is_empty()) {
                None => f.warnings.push(format!(
                    "Lease {} has no holder: the announcer released it and no node has taken over yet",
                    ns_name(&l.metadata)
                )),
                Some(holder) => {
                    f.evidence.push(format!("Lease {} is held by {}", ns_name(&l.metadata), hosts.describe(holder)));
                    if let Some(warning) = stale_lease(ctx, l) {
                        f.warnings.push(warning);
                    }
                    if !selected.contains(&holder) {
                        f.warnings.push(format!("the holder of Lease {}, node {holder}, is not selected by the policies", ns_name(&l.metadata)));
                    }
                }
            },
        }
    }
}

/// A lease whose last renewal is older than its duration at collection time: its holder
/// may be gone. `renewTime` is written with the holder's clock, so a few seconds of skew
/// are allowed before saying so.
fn stale_lease(ctx: Context<'_>, lease: &Lease) -> Option<String> {
    const SKEW_SECONDS: i64 = 5;
    let spec = lease.spec.as_ref()?;
    let renewed = spec.renew_time.as_ref()?.0.as_second();
    let duration = i64::from(spec.lease_duration_seconds?);
    let age = ctx.state.collected_at.timestamp() - renewed;
    (age > duration + SKEW_SECONDS).then(|| {
        let words = |secs: i64| crate::words::duration(std::time::Duration::from_secs(secs.max(0) as u64));
        format!(
            "Lease {} was last renewed {} before collection, longer than its {} duration: its holder may be gone",
            ns_name(&lease.metadata),
            words(age),
            words(duration)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::state::{Collected, State};
    use crate::verdict::Verdict;

    const CP: &str = "node-role.kubernetes.io/control-plane";

    fn good() -> StateBuilder {
        state()
            .nodes(target_nodes())
            .services([traefik_service().build()])
            .l2_policies([l2_policy("ingress")
                .service_labels(&[("app.kubernetes.io/name", "traefik")])
                .build()])
            .leases([lease(
                "kube-system",
                "cilium-l2announce-traefik-traefik",
                "cp-2",
            )])
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

    fn policies(list: Vec<L2AnnouncementPolicy>) -> impl FnOnce(&mut State) {
        move |s| s.l2_policies = listed(list)
    }

    #[test]
    fn a_policy_over_all_nodes_passes_and_reports_the_lease_holder() {
        let f = check(&good().build());
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert!(
            f.evidence.contains(
                &"Service traefik/traefik is announced by policy ingress on cp-1, cp-2, cp-3"
                    .to_string()
            )
        );
        assert!(f.evidence.contains(&"Lease kube-system/cilium-l2announce-traefik-traefik is held by node cp-2 (host pve2)".to_string()));
        assert!(f.warnings.is_empty(), "{:?}", f.warnings);
    }

    #[test]
    fn nil_selectors_select_everything_and_pseudo_labels_work() {
        let s = good()
            .with(policies(vec![l2_policy("all").build()]))
            .build();
        assert_eq!(check(&s).verdict, Verdict::Pass);
        let s = good()
            .with(policies(vec![
                l2_policy("by-name")
                    .service_labels(&[
                        ("io.kubernetes.service.namespace", "traefik"),
                        ("io.kubernetes.service.name", "traefik"),
                    ])
                    .build(),
            ]))
            .build();
        assert_eq!(check(&s).verdict, Verdict::Pass);
    }

    #[test]
    fn several_policies_together_may_cover_the_nodes() {
        let s = good()
            .with(policies(vec![
                l2_policy("a")
                    .node_expression("topology.kubernetes.io/zone", "In", &["pve1", "pve2"])
                    .build(),
                l2_policy("b")
                    .node_labels(&[("topology.kubernetes.io/zone", "pve3")])
                    .build(),
            ]))
            .build();
        let f = check(&s);
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
    }

    #[test]
    fn staging_today_policy_on_one_worker_names_each_left_out_node_with_the_expression() {
        let s = good()
            .with(|s| s.nodes = Collected::Present(vec![]))
            .nodes([
                node("talos-test-cp-01")
                    .host("pve1")
                    .control_plane()
                    .ready()
                    .build(),
                node("talos-test-worker-01").host("pve2").ready().build(),
            ])
            .with(policies(vec![
                l2_policy("ingress-address")
                    .node_labels(&[("kubernetes.io/hostname", "talos-test-worker-01")])
                    .node_expression(CP, "DoesNotExist", &[])
                    .build(),
            ]))
            .build();
        let f = fails_with(
            &s,
            "the L2 policies announcing Service traefik/traefik (ingress-address) leave out 1 of 2 nodes: talos-test-cp-01",
        );
        assert!(
            f.evidence.contains(&"node talos-test-cp-01 (host pve1) is not selected: policy ingress-address requires kubernetes.io/hostname=talos-test-worker-01; node-role.kubernetes.io/control-plane DoesNotExist".to_string()),
            "{}",
            text(&f)
        );
    }

    #[test]
    fn no_policy_at_all_fails() {
        let f = check(&good().with(policies(vec![])).build());
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(
            f.summary
                .starts_with("no CiliumL2AnnouncementPolicy exists")
        );
    }

    #[test]
    fn no_policy_selects_the_service() {
        let s = good()
            .with(policies(vec![
                l2_policy("other")
                    .service_labels(&[("app", "other")])
                    .build(),
            ]))
            .build();
        let f = fails_with(
            &s,
            "no CiliumL2AnnouncementPolicy selects Service traefik/traefik",
        );
        assert!(text(&f).contains(
            "policy other: serviceSelector excludes Service traefik/traefik (app=other not met)"
        ));
    }

    #[test]
    fn a_policy_that_announces_only_external_ips_does_not_count() {
        let s = good()
            .with(policies(vec![
                l2_policy("ext")
                    .load_balancer_ips(false)
                    .external_ips(true)
                    .build(),
            ]))
            .build();
        fails_with(&s, "(ext) do not announce loadBalancerIPs");
    }

    #[test]
    fn no_load_balancer_service_fails_naming_the_selector() {
        let s = good()
            .with(|s| s.services = listed(vec![traefik_service().type_("NodePort").build()]))
            .build();
        fails_with(
            &s,
            "no LoadBalancer Service matches app.kubernetes.io/name=traefik in any namespace (traefik/traefik is NodePort)",
        );
    }

    #[test]
    fn a_foreign_load_balancer_class_fails() {
        let s = good()
            .with(|s| {
                s.services = listed(vec![
                    traefik_service()
                        .lb_class("io.cilium/bgp-control-plane")
                        .build(),
                ])
            })
            .build();
        fails_with(&s, "has loadBalancerClass io.cilium/bgp-control-plane");
        let s = good()
            .with(|s| s.services = listed(vec![traefik_service().lb_class(L2_CLASS).build()]))
            .build();
        assert_eq!(check(&s).verdict, Verdict::Pass);
    }

    #[test]
    fn exclude_from_load_balancers_label_warns_but_passes() {
        let mut nodes = target_nodes();
        nodes[0] = node("cp-1")
            .host("pve1")
            .control_plane()
            .label(EXCLUDE_LABEL, "")
            .build();
        let s = good().with(|s| s.nodes = listed(nodes)).build();
        let f = check(&s);
        assert_eq!(f.verdict, Verdict::Pass);
        assert_eq!(f.warnings.len(), 1);
        assert!(f.warnings[0].starts_with(
            "node cp-1 (host pve1) carries node.kubernetes.io/exclude-from-external-load-balancers"
        ));
        assert!(
            f.warnings[0].contains("Cilium's L2 announcer does not read it"),
            "{}",
            f.warnings[0]
        );
    }

    #[test]
    fn lease_problems_are_warnings() {
        let f = check(&good().with(|s| s.leases = listed(vec![])).build());
        assert_eq!(f.verdict, Verdict::Pass);
        assert!(f.warnings[0].starts_with("no Lease cilium-l2announce-traefik-traefik"));
        let released = lease("kube-system", "cilium-l2announce-traefik-traefik", "");
        let f = check(&good().with(|s| s.leases = listed(vec![released])).build());
        assert!(f.warnings[0].contains("has no holder"));
        let elsewhere = lease("cilium", "cilium-l2announce-traefik-traefik", "outsider");
        let f = check(&good().with(|s| s.leases = listed(vec![elsewhere])).build());
        assert!(text(&f).contains("Lease cilium/cilium-l2announce-traefik-traefik is held by node outsider (not in the node list)"));
        assert!(f.warnings[0].contains("node outsider, is not selected"));
        // Renewed 60s before collection with a 15s duration: stale; 10s before: fine.
        let collected = state().build().collected_at.timestamp();
        for (age, said, stale) in [
            (60, "1m", true),
            (10, "10s", false),
            (171_876, "1d 23h", true),
        ] {
            let mut l = lease("kube-system", "cilium-l2announce-traefik-traefik", "cp-1");
            if let Some(spec) = l.spec.as_mut() {
                spec.renew_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
                    k8s_openapi::jiff::Timestamp::from_second(collected - age).unwrap(),
                ));
            }
            let f = check(&good().with(|s| s.leases = listed(vec![l])).build());
            assert_eq!(f.verdict, Verdict::Pass);
            assert_eq!(
                f.warnings.iter().any(|w| w.contains(&format!(
                    "last renewed {said} before collection, longer than its 15s duration"
                ))),
                stale,
                "{:?}",
                f.warnings
            );
        }
        let f = check(&good().with(|s| s.leases = absent("forbidden")).build());
        assert_eq!(f.verdict, Verdict::Pass);
        assert!(f.warnings[0].contains("leases were not collected"));
    }

    #[test]
    fn an_empty_node_list_is_an_error() {
        let f = check(
            &good()
                .with(|s| s.nodes = Collected::Present(vec![]))
                .build(),
        );
        assert_eq!(f.verdict, Verdict::Error);
        assert!(f.summary.starts_with("the node list is empty"));
    }

    #[test]
    fn absent_policies_or_invalid_selectors_are_errors() {
        let f = check(
            &good()
                .with(|s| {
                    s.l2_policies = absent("the server could not find the requested resource")
                })
                .build(),
        );
        assert_eq!(f.verdict, Verdict::Error);
        assert!(
            f.summary
                .starts_with("CiliumL2AnnouncementPolicies (cilium.io/v2alpha1) unavailable")
        );
        let s = good()
            .with(policies(vec![
                l2_policy("bad").node_expression("x", "Maybe", &[]).build(),
            ]))
            .build();
        let f = check(&s);
        assert_eq!(f.verdict, Verdict::Error);
        assert!(
            f.summary
                .contains("CiliumL2AnnouncementPolicy bad has an invalid selector")
        );
        assert_eq!(
            check(&good().with(|s| s.services = absent("x")).build()).verdict,
            Verdict::Error
        );
        assert_eq!(
            check(&good().with(|s| s.nodes = absent("x")).build()).verdict,
            Verdict::Error
        );
    }
}
