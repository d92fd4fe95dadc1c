//! Gates 1 and 5: talosctl is configured with every control-plane node as a direct endpoint,
//! and not with the API virtual IP: the VIP depends on etcd quorum, so a management path
//! through it is lost exactly when it is needed (ADR 007, "Control-plane access").

use std::collections::BTreeSet;

use serde::Deserialize;

use super::Context;
use super::support::{is_control_plane, name};
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
    let talos = match ctx.state.talos.get("the talosconfig") {
        Ok(talos) => talos,
        Err(finding) => return finding,
    };
    // A talosconfig that names the right addresses proves nothing when none of them answers:
    // the nodes may be down, or the client's CA may be another cluster's.
    let answered = |e: &&crate::state::TalosEndpoint| e.view.is_ok() || e.addresses.is_ok();
    if !talos.endpoints.is_empty() && !talos.endpoints.iter().any(|e| answered(&e)) {
        return Finding::error(format!(
            "no control-plane endpoint of {} answered over the Talos API",
            ctx.env.name
        ))
        .with_evidence(talos.endpoints.iter().map(|e| match &e.view {
            Err(reason) => format!("endpoint {}: {reason}", e.endpoint),
            Ok(_) => format!("endpoint {}: no answer", e.endpoint),
        }));
    }
    let listed: BTreeSet<&str> = talos.context_endpoints.iter().map(String::as_str).collect();
    // Control-plane addresses: the nodes' InternalIPs when the node list is there, else the
    // endpoints the environment names.
    let mut wanted: Vec<(String, String)> = Vec::new();
    if let Some(nodes) = ctx.state.nodes.present() {
        for node in nodes.iter().filter(|n| is_control_plane(n)) {
            let addresses = node.status.as_ref().and_then(|s| s.addresses.as_ref());
            if let Some(ip) = addresses.and_then(|a| a.iter().find(|a| a.type_ == "InternalIP")) {
                wanted.push((ip.address.clone(), format!("node {}", name(&node.metadata))));
            }
        }
    }
    if wanted.is_empty() {
        let access = ctx.env.talos.as_ref();
        wanted = access
            .map(|a| {
                a.endpoints
                    .iter()
                    .map(|e| (host_of(e), format!("endpoint {e} of {}", ctx.env.name)))
                    .collect()
            })
            .unwrap_or_default();
    }
    if wanted.is_empty() {
        return Finding::error(format!(
            "no control-plane address is known for {}: the node list has no control plane with an InternalIP and `talos.endpoints` is empty",
            ctx.env.name
        ));
    }
    let mut problems = Vec::new();
    for (address, what) in &wanted {
        if !listed.contains(address.as_str()) {
            problems.push(format!("{what} ({address}) is not a talosconfig endpoint"));
        }
    }
    if let Some(api) = &ctx.env.api {
        let vip = host_of(&api.endpoint);
        if listed.contains(vip.as_str()) {
            problems.push(format!(
                "the API VIP {vip} is a talosconfig endpoint: it depends on etcd quorum, list the control-plane nodes instead"
            ));
        }
    }
    let evidence = vec![format!(
        "talosconfig {} context {} lists: {}",
        talos.talosconfig,
        talos.context,
        if listed.is_empty() {
            "nothing".to_string()
        } else {
            listed.iter().copied().collect::<Vec<_>>().join(", ")
        }
    )];
    if problems.is_empty() {
        Finding::pass(format!(
            "talosctl reaches all {} control-plane nodes directly",
            wanted.len()
        ))
        .with_evidence(evidence)
    } else {
        Finding::fail(problems[0].clone())
            .with_evidence(problems.into_iter().skip(1).chain(evidence))
    }
}

/// The host of `https://10.0.0.1:6443`, `10.0.0.1:50000` or `10.0.0.1`.
fn host_of(endpoint: &str) -> String {
    let rest = endpoint.split_once("://").map_or(endpoint, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    if let Some(stripped) = authority.strip_prefix('[') {
        return stripped.split(']').next().unwrap_or(stripped).to_string();
    }
    authority
        .rsplit_once(':')
        .map_or(authority, |(h, _)| h)
        .to_string()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::NodeAddress;

    use super::*;
    use crate::checks::testing::{env, node, run, state, text};
    use crate::config::ApiSpec;
    use crate::state::{Collected, State, TalosState};
    use crate::verdict::Verdict;

    fn cp(i: u8) -> k8s_openapi::api::core::v1::Node {
        let mut n = node(&format!("cp-{i}")).control_plane().ready().build();
        n.status.get_or_insert_with(Default::default).addresses = Some(vec![NodeAddress {
            type_: "InternalIP".into(),
            address: format!("10.0.0.{i}"),
        }]);
        n
    }

    fn with_listed(listed: &[&str]) -> State {
        let listed: Vec<String> = listed.iter().map(|s| s.to_string()).collect();
        state()
            .nodes([cp(1), cp(2), cp(3)])
            .with(|s| {
                s.talos = Collected::Present(TalosState {
                    talosconfig: "/home/op/.talos/config".into(),
                    context: "staging".into(),
                    context_endpoints: listed,
                    endpoints: vec![],
                })
            })
            .build()
    }

    fn env_with_vip() -> crate::config::Environment {
        let mut e = env();
        e.api = Some(ApiSpec {
            endpoint: "https://10.0.0.10:6443".into(),
        });
        e
    }

    #[test]
    fn every_control_plane_listed_and_no_vip_passes() {
        let f = run(
            &env_with_vip(),
            &with_listed(&["10.0.0.1", "10.0.0.2", "10.0.0.3"]),
            &Params {},
            evaluate,
        );
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
    }

    #[test]
    fn a_missing_control_plane_is_named() {
        let f = run(
            &env_with_vip(),
            &with_listed(&["10.0.0.1", "10.0.0.3"]),
            &Params {},
            evaluate,
        );
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(
            text(&f).contains("node cp-2 (10.0.0.2) is not a talosconfig endpoint"),
            "{}",
            text(&f)
        );
    }

    #[test]
    fn the_vip_as_an_endpoint_fails_with_the_reason() {
        let f = run(
            &env_with_vip(),
            &with_listed(&["10.0.0.10", "10.0.0.1", "10.0.0.2", "10.0.0.3"]),
            &Params {},
            evaluate,
        );
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(
            text(&f).contains("the API VIP 10.0.0.10 is a talosconfig endpoint"),
            "{}",
            text(&f)
        );
    }

    #[test]
    fn hosts_are_taken_from_urls_and_ports() {
        assert_eq!(host_of("https://10.0.0.10:6443"), "10.0.0.10");
        assert_eq!(host_of("10.0.0.1:50000"), "10.0.0.1");
        assert_eq!(host_of("cp-1.example"), "cp-1.example");
        assert_eq!(host_of("[fd00::1]:50000"), "fd00::1");
    }

    #[test]
    fn a_right_talosconfig_with_no_endpoint_answering_is_an_error_never_a_pass() {
        use crate::state::TalosEndpoint;
        let mut s = with_listed(&["10.0.0.1", "10.0.0.2", "10.0.0.3"]);
        if let Collected::Present(talos) = &mut s.talos {
            talos.endpoints = (1..=3)
                .map(|i| TalosEndpoint {
                    endpoint: format!("10.0.0.{i}"),
                    view: Err("tls: unknown certificate authority".into()),
                    addresses: Err("tls: unknown certificate authority".into()),
                })
                .collect();
        }
        let f = run(&env_with_vip(), &s, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
        assert!(
            text(&f).contains("unknown certificate authority"),
            "{}",
            text(&f)
        );
    }

    #[test]
    fn no_known_control_plane_address_is_an_error_not_a_pass_of_zero() {
        let s = state()
            .with(|s| s.talos = Collected::Present(TalosState::default()))
            .build();
        assert_eq!(
            run(&env(), &s, &Params {}, evaluate).verdict,
            Verdict::Error
        );
    }

    #[test]
    fn absent_talosconfig_is_an_error() {
        let s = state()
            .with(|s| s.talos = Collected::Absent("talosconfig not found".into()))
            .build();
        assert_eq!(
            run(&env(), &s, &Params {}, evaluate).verdict,
            Verdict::Error
        );
    }
}
