//! Gate 3 on the repository, Traefik's half (the L2 announcements are in [`super::l2`]):
//! every Traefik HelmRelease's effective values give `externalTrafficPolicy: Cluster`. A `Local` names the file and line that set it and the environments that
//! inherit it from there.

use crate::verdict::Finding;

use super::{RepoContext, at, manifests_except, reads, traefik};
use crate::declared::manifests::HelmRelease;

/// Where Traefik's chart takes the Service's traffic policy.
pub const TRAEFIK_ETP: [&str; 3] = ["service", "spec", "externalTrafficPolicy"];

pub fn external_traffic_policy(ctx: &RepoContext<'_>) -> Finding {
    let wanted = &ctx.settings.ingress.services;
    let m = match manifests_except(ctx.env, reads::TRAFFIC_POLICY, &|o| {
        super::l2::not_an_ingress_service(o, wanted)
    }) {
        Ok(m) => m,
        Err(finding) => return finding,
    };
    let releases: Vec<&HelmRelease> = traefik(&m.helm_releases).collect();
    if releases.is_empty() {
        return Finding::skip(format!(
            "no Traefik HelmRelease is declared for {}",
            ctx.env.name
        ));
    }
    let mut problems = Vec::new();
    let mut evidence = Vec::new();
    let mut warnings = Vec::new();
    let mut unset = Vec::new();
    for hr in releases {
        let values = match &hr.values {
            Ok(values) => values,
            Err(err) => {
                return Finding::error(format!(
                    "the values of HelmRelease {}/{} cannot be known: {err}",
                    hr.namespace, hr.name
                ));
            }
        };
        let key = format!(
            "{}/{} spec.values.{}",
            hr.namespace,
            hr.name,
            TRAEFIK_ETP.join(".")
        );
        match values.get(&TRAEFIK_ETP) {
            Some(v) if v.as_str() == Some("Cluster") => {
                evidence.push(at(&v.site, &key, "Cluster"));
                for other in shared_local(ctx, hr) {
                    warnings.push(format!("{other}; {} overrides it", ctx.env.name));
                }
            }
            Some(v) => {
                let inherit = inheritors(ctx, &v.site);
                problems.push(format!(
                    "{} (set here; in effect for {})",
                    at(&v.site, &key, v.show()),
                    inherit.join(", ")
                ));
            }
            None => unset.push(format!("{key} is not set in the repository (the chart's default decides, and the repository does not hold it)")),
        }
    }
    if !problems.is_empty() {
        Finding::fail("Traefik's declared externalTrafficPolicy is not Cluster; Cilium's L2 announcements need Cluster")
            .with_evidence(problems.into_iter().chain(evidence))
            .with_warnings(warnings)
    } else if !unset.is_empty() {
        Finding::skip(unset.join("; "))
    } else {
        Finding::pass("every Traefik HelmRelease declares externalTrafficPolicy: Cluster")
            .with_evidence(evidence)
            .with_warnings(warnings)
    }
}

/// The environments of the repository whose effective value comes from `site`.
fn inheritors(ctx: &RepoContext<'_>, site: &crate::declared::site::Site) -> Vec<String> {
    ctx.declared
        .environments
        .values()
        .filter(|env| {
            env.manifests
                .as_ref()
                .and_then(|m| m.as_ref().ok())
                .is_some_and(|m| {
                    traefik(&m.helm_releases).any(|hr| {
                        hr.values
                            .as_ref()
                            .ok()
                            .and_then(|v| v.get(&TRAEFIK_ETP))
                            .is_some_and(|v| v.site == *site)
                    })
                })
        })
        .map(|env| env.name.clone())
        .collect()
}

/// `Local` values in other environments' Traefik releases that share this release's files,
/// to warn that an environment passes only by overriding shared values.
fn shared_local(ctx: &RepoContext<'_>, hr: &HelmRelease) -> Vec<String> {
    let mut out = Vec::new();
    for env in ctx
        .declared
        .environments
        .values()
        .filter(|e| e.name != ctx.env.name)
    {
        let Some(Ok(m)) = &env.manifests else {
            continue;
        };
        for other in traefik(&m.helm_releases).filter(|o| o.site == hr.site) {
            if let Some(v) = other.values.as_ref().ok().and_then(|v| v.get(&TRAEFIK_ETP))
                && v.as_str() != Some("Cluster")
            {
                out.push(format!(
                    "the shared values say {} at {} (in effect for {})",
                    v.show(),
                    v.site,
                    env.name
                ));
            }
        }
    }
    out
}
