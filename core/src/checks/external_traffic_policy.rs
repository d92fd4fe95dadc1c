//! Gate 3: each configured LoadBalancer Service (Traefik by default) uses
//! `externalTrafficPolicy: Cluster`. Cilium documents `Local` as incompatible with L2
//! announcements: the address is announced on nodes without a ready backend, and traffic that
//! lands there is dropped. An unset policy is `Cluster`, the Kubernetes default.

use serde::Deserialize;

use super::Context;
use super::support::{describe_service_ref, find_services, ns_name, service_type};
use crate::verdict::Finding;

/// No parameters: the Services come from the environment's `ingress.services`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {}

impl super::Check for Params {
    fn inputs(&self) -> &'static [crate::state::Input] {
        use crate::state::Input;
        &[Input::Services]
    }

    fn evaluate(&self, ctx: Context<'_>) -> Finding {
        evaluate(ctx, self)
    }
}

pub fn evaluate(ctx: Context<'_>, _params: &Params) -> Finding {
    let services = match ctx.state.services.get("services") {
        Ok(services) => services,
        Err(finding) => return finding,
    };
    if ctx.env.ingress.services.is_empty() {
        return Finding::skip(
            "the environment names no ingress Services (ingress.services is empty)",
        );
    }
    let mut problems = Vec::new();
    let mut evidence = Vec::new();
    for wanted in &ctx.env.ingress.services {
        let found = find_services(services, wanted);
        if found.load_balancers.is_empty() {
            let mut line = format!(
                "no LoadBalancer Service matches {}",
                describe_service_ref(wanted)
            );
            if !found.other_types.is_empty() {
                let others: Vec<String> = found
                    .other_types
                    .iter()
                    .map(|s| format!("{} is {}", ns_name(&s.metadata), service_type(s)))
                    .collect();
                line.push_str(&format!(" ({})", others.join(", ")));
            }
            problems.push(line);
            continue;
        }
        for svc in found.load_balancers {
            let policy = svc
                .spec
                .as_ref()
                .and_then(|s| s.external_traffic_policy.as_deref())
                .unwrap_or("Cluster");
            let id = ns_name(&svc.metadata);
            if policy == "Cluster" {
                evidence.push(format!("Service {id}: externalTrafficPolicy Cluster"));
            } else {
                problems.push(format!(
                    "Service {id} has externalTrafficPolicy {policy}: Cilium documents Local as incompatible with L2 announcements (the address is announced on nodes without a ready pod, which drop the traffic); set it to Cluster"
                ));
            }
        }
    }
    match problems.first() {
        Some(first) => Finding::fail(first.clone())
            .with_evidence(problems.iter().skip(1).cloned().chain(evidence)),
        None => Finding::pass("every ingress Service uses externalTrafficPolicy Cluster")
            .with_evidence(evidence),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::config::ServiceRef;
    use crate::verdict::Verdict;
    use std::collections::BTreeMap;

    fn check(state: &crate::state::State) -> Finding {
        run(&env(), state, &Params {}, evaluate)
    }

    #[test]
    fn cluster_or_unset_passes() {
        let f = check(&state().services([traefik_service().build()]).build());
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert_eq!(
            f.evidence,
            vec!["Service traefik/traefik: externalTrafficPolicy Cluster"]
        );
        let f = check(
            &state()
                .services([traefik_service().etp("Cluster").build()])
                .build(),
        );
        assert_eq!(f.verdict, Verdict::Pass);
    }

    #[test]
    fn local_fails_and_says_why() {
        let f = check(
            &state()
                .services([traefik_service().etp("Local").build()])
                .build(),
        );
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(f.summary.starts_with("Service traefik/traefik has externalTrafficPolicy Local: Cilium documents Local as incompatible with L2 announcements"));
        assert!(f.summary.ends_with("set it to Cluster"));
    }

    #[test]
    fn no_load_balancer_service_fails_naming_the_selector() {
        let f = check(&state().build());
        assert_eq!(f.verdict, Verdict::Fail);
        assert_eq!(
            f.summary,
            "no LoadBalancer Service matches app.kubernetes.io/name=traefik in any namespace"
        );
        let f = check(
            &state()
                .services([traefik_service().type_("ClusterIP").build()])
                .build(),
        );
        assert!(
            f.summary.ends_with("(traefik/traefik is ClusterIP)"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn every_configured_service_is_checked_within_its_namespace() {
        let mut env = env();
        env.ingress.services.push(ServiceRef {
            namespace: Some("internal".into()),
            selector: BTreeMap::from([("app".to_string(), "gw".to_string())]),
        });
        let s = state()
            .services([
                traefik_service().build(),
                service("other", "gw", &[("app", "gw")])
                    .etp("Local")
                    .build(),
                service("internal", "gw", &[("app", "gw")])
                    .etp("Local")
                    .build(),
            ])
            .build();
        let f = run(&env, &s, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(
            f.summary
                .starts_with("Service internal/gw has externalTrafficPolicy Local")
        );
        assert!(!text(&f).contains("other/gw"));
    }

    #[test]
    fn no_configured_service_is_a_skip() {
        let mut env = env();
        env.ingress.services.clear();
        let f = run(&env, &state().build(), &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Skip);
    }

    #[test]
    fn services_absent_is_an_error() {
        let f = check(&state().with(|s| s.services = absent("forbidden")).build());
        assert_eq!(f.verdict, Verdict::Error);
    }
}
