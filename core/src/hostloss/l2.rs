//! Ingress after a host loss: each announced LoadBalancer Service needs a surviving Ready node
//! that its CiliumL2AnnouncementPolicies select, and when the lease holder goes the address is
//! unanswered until another node takes the lease (10 to 20 s with Cilium's default timings).
//!
//! Selection follows Cilium's L2 announcer as gate 3 does: nil selectors select everything,
//! the service selector also sees `io.kubernetes.service.namespace` and
//! `io.kubernetes.service.name`, only policies with `loadBalancerIPs: true` announce the
//! Service's load-balancer address, and a Service of another `loadBalancerClass` is never
//! announced.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::cluster::{Cluster, labels, name, ns_name};
pub use super::findings::L2Loss;
use super::outcome::{Fault, HostLoss, Outcome};
use crate::config::ServiceRef;
use crate::selector::{Selector, WhenNil};
use crate::state::L2AnnouncementPolicy;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Service;

const L2_CLASS: &str = "io.cilium/l2-announcer";
const LEASE_PREFIX: &str = "cilium-l2announce";

pub fn predict(cluster: &Cluster<'_>, lost: &[usize], fault: Fault, loss: &mut HostLoss) {
    if cluster.env.ingress.services.is_empty() {
        return;
    }
    let state = cluster.state;
    let (services, policies, leases) = match (
        state.services.get("services"),
        state
            .l2_policies
            .get("CiliumL2AnnouncementPolicies (cilium.io/v2alpha1)"),
        state.leases.get("leases"),
    ) {
        (Ok(s), Ok(p), Ok(l)) => (s, p, l),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            loss.reason(Outcome::Unknown, e.summary);
            return;
        }
    };
    let Some(announcers) = compile(policies, loss) else {
        return;
    };
    let announced = Announced {
        cluster,
        announcers,
        leases,
        lost,
        fault,
    };
    for wanted in &cluster.env.ingress.services {
        for svc in matching(wanted, services, loss) {
            announced.service(svc, loss);
        }
    }
}

/// A policy that announces load-balancer addresses: its name, service and node selectors.
type Announcer<'s> = (&'s str, Selector, Selector);

/// The policies that announce load-balancer addresses, compiled; `None` (the prediction
/// unknown) when one has a selector that does not compile.
fn compile<'s>(
    policies: &'s [Arc<L2AnnouncementPolicy>],
    loss: &mut HostLoss,
) -> Option<Vec<Announcer<'s>>> {
    let mut compiled = Vec::new();
    for policy in policies.iter().filter(|p| p.spec.load_balancer_ips) {
        let svc = Selector::compile(policy.spec.service_selector.as_ref(), WhenNil::MatchesAll);
        let node = Selector::compile(policy.spec.node_selector.as_ref(), WhenNil::MatchesAll);
        match (svc, node) {
            (Ok(s), Ok(n)) => compiled.push((name(&policy.metadata), s, n)),
            (Err(e), _) | (_, Err(e)) => {
                loss.reason(
                    Outcome::Unknown,
                    format!(
                        "CiliumL2AnnouncementPolicy {} has an invalid selector: {e}",
                        name(&policy.metadata)
                    ),
                );
                return None;
            }
        }
    }
    Some(compiled)
}

/// The LoadBalancer Services one `ingress.services` entry names; none is an unknown.
fn matching<'s>(
    wanted: &ServiceRef,
    services: &'s [Arc<Service>],
    loss: &mut HostLoss,
) -> Vec<&'s Service> {
    let selector = Selector::from_labels(&wanted.selector);
    let found: Vec<_> = services
        .iter()
        .map(|s| &**s)
        .filter(|s| {
            wanted
                .namespace
                .as_deref()
                .is_none_or(|ns| s.metadata.namespace.as_deref() == Some(ns))
                && selector.matches(labels(&s.metadata))
                && s.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
        })
        .collect();
    if found.is_empty() {
        loss.reason(
            Outcome::Unknown,
            format!("no LoadBalancer Service matches {selector}, so ingress cannot be predicted"),
        );
    }
    found
}

/// What announces the ingress Services, and the loss it is judged for.
struct Announced<'a, 'c> {
    cluster: &'a Cluster<'c>,
    announcers: Vec<Announcer<'a>>,
    leases: &'a [Arc<Lease>],
    lost: &'a [usize],
    fault: Fault,
}

impl Announced<'_, '_> {
    /// One Service: lost when no surviving Ready node announces it, a blink when its lease
    /// holder goes.
    fn service(&self, svc: &Service, loss: &mut HostLoss) {
        let (cluster, lost) = (self.cluster, self.lost);
        let id = ns_name(&svc.metadata);
        if let Some(class) = svc
            .spec
            .as_ref()
            .and_then(|s| s.load_balancer_class.as_deref())
            && class != L2_CLASS
        {
            loss.reason(
                Outcome::Unknown,
                format!("Service {id} has loadBalancerClass {class}, which Cilium's L2 announcer does not serve"),
            );
            return;
        }
        let namespace = svc.metadata.namespace.as_deref().unwrap_or("");
        let mut svc_labels: BTreeMap<String, String> = labels(&svc.metadata).clone();
        svc_labels.insert("io.kubernetes.service.namespace".into(), namespace.into());
        svc_labels.insert(
            "io.kubernetes.service.name".into(),
            name(&svc.metadata).into(),
        );
        let announcing: Vec<_> = self
            .announcers
            .iter()
            .filter(|(_, s, _)| s.matches(&svc_labels))
            .collect();
        let selected: Vec<usize> = (0..cluster.nodes.len())
            .filter(|&n| {
                announcing
                    .iter()
                    .any(|(_, _, sel)| sel.matches(cluster.nodes[n].labels))
            })
            .collect();
        let left: Vec<String> = selected
            .iter()
            .filter(|n| !lost.contains(n) && cluster.nodes[**n].ready)
            .map(|&n| cluster.nodes[n].name.to_string())
            .collect();
        let lease_name = format!("{LEASE_PREFIX}-{namespace}-{}", name(&svc.metadata));
        let holder = self
            .leases
            .iter()
            .find(|l| name(&l.metadata) == lease_name)
            .and_then(|l| l.spec.as_ref()?.holder_identity.clone())
            .filter(|h| !h.is_empty());
        let holder_lost = holder
            .as_deref()
            .and_then(|h| cluster.node_index.get(h))
            .is_some_and(|n| lost.contains(n));
        if left.is_empty() {
            let selected_names: Vec<String> =
                selected.iter().map(|&n| cluster.describe(n)).collect();
            loss.reason(
                Outcome::Lost,
                format!(
                    "Service {id} loses its ingress address: the L2 policies announcing it ({}) select no surviving Ready node (they select {})",
                    if announcing.is_empty() {
                        "none".to_string()
                    } else {
                        announcing.iter().map(|(n, _, _)| *n).collect::<Vec<_>>().join(", ")
                    },
                    if selected_names.is_empty() {
                        "no node".to_string()
                    } else {
                        selected_names.join(", ")
                    }
                ),
            );
        } else if holder_lost {
            let holder = holder.as_deref().unwrap_or_default();
            loss.reason(Outcome::Degraded, blink(self.fault, &id, holder, &left));
        }
        loss.l2.push(L2Loss {
            service: id,
            announcers_left: left,
            holder,
            holder_lost,
        });
    }
}

/// How long ingress to a Service blinks when its lease holder goes or is cut off. Cilium's
/// agent announces only while it holds the Service's Lease: after power loss nobody renews
/// it; a cut-off agent stops announcing once it could not renew within the renew deadline
/// (5 s) and its datapath stops answering ARP, and another agent takes the Lease only after
/// it went unrenewed for the lease duration (15 s). Either way the address is unanswered
/// for the same 10 to 20 s, and never answered twice.
fn blink(fault: Fault, id: &str, holder: &str, left: &[String]) -> String {
    let left = left.join(", ");
    match fault {
        Fault::Power => format!(
            "ingress to Service {id} blinks: lease holder {holder} goes, {left} can take the lease (10 to 20 s with default timings)"
        ),
        Fault::Partition => format!(
            "ingress to Service {id} blinks: lease holder {holder} is cut off and stops announcing within the 5 s renew deadline, {left} can take the lease once it went 15 s unrenewed (10 to 20 s with default timings, as after power loss)"
        ),
    }
}
