//! Gate 1: the Kubernetes API is reached through the Talos Layer 2 VIP: the environment's
//! kubeconfig points at the VIP, and the VIP answers `/readyz`, verified with the cluster CA.
//! When the Talos API was read, the node holding the VIP is named, and a VIP assigned to two
//! nodes at once (split brain, siderolabs/talos#4604) fails.

use serde::Deserialize;

use super::Context;
use crate::verdict::Finding;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {}

impl super::Check for Params {
    fn inputs(&self) -> &'static [crate::state::Input] {
        use crate::state::Input;
        &[Input::Api, Input::Talos, Input::Nodes]
    }

    fn evaluate(&self, ctx: Context<'_>) -> Finding {
        evaluate(ctx, self)
    }
}

pub fn evaluate(ctx: Context<'_>, _params: &Params) -> Finding {
    let api = match ctx.state.api.get("the API endpoint") {
        Ok(api) => api,
        Err(finding) => return finding,
    };
    let vip = api.vip_endpoint.as_deref().unwrap_or("");
    let mut problems = Vec::new();
    let mut evidence = Vec::new();
    match &api.kubeconfig_server {
        Ok(server) if same_endpoint(server, vip) => evidence.push(format!("kubeconfig server {server} is the VIP")),
        Ok(server) => problems.push(format!(
            "the kubeconfig points at {server}, not at the API VIP {vip}: clients lose the API when that address fails"
        )),
        Err(reason) => return Finding::error(format!("cannot read the kubeconfig: {reason}")),
    }
    let mut unreached = None;
    match (&api.readyz, api.readyz_status) {
        (Ok(()), _) => evidence.push(format!(
            "{vip}/readyz answered 200 with a certificate from the cluster CA"
        )),
        (Err(reason), Some(_)) => problems.push(format!(
            "the API does not answer ready through the VIP: {reason}"
        )),
        // Nothing answered (unreachable, TLS, timeout): that says nothing about the rule.
        (Err(reason), None) => unreached = Some(reason.clone()),
    }
    if ctx.state.talos.present().is_some() && api.vip_addresses.is_empty() {
        evidence.push(format!(
            "the address of {vip} could not be resolved, so the node holding it is not named"
        ));
    }
    if let Some(talos) = ctx.state.talos.present()
        && !api.vip_addresses.is_empty()
    {
        let holders = talos.holders(&api.vip_addresses);
        let named: Vec<String> = holders
            .iter()
            .map(|e| match talos.node_of(e) {
                Some(node) => format!("{node} ({})", e.endpoint),
                None => e.endpoint.clone(),
            })
            .collect();
        let unread: Vec<String> = talos
            .endpoints
            .iter()
            .filter_map(|e| {
                e.addresses
                    .as_ref()
                    .err()
                    .map(|r| format!("{}: {r}", e.endpoint))
            })
            .collect();
        match named.as_slice() {
            [] if unread.len() == talos.endpoints.len() => evidence.push(format!(
                "the VIP holder is unknown: no endpoint's addresses could be read ({})",
                unread.join("; ")
            )),
            [] => evidence.push(
                "no control-plane node lists the VIP among its addresses (is it provided outside Talos?)"
                    .to_string(),
            ),
            [one] => evidence.push(format!("the VIP is held by {one}")),
            many => problems.push(format!(
                "the VIP is assigned to {} nodes at once: {}; clients reach whichever answers ARP",
                many.len(),
                many.join(", ")
            )),
        }
    }
    if let Some(reason) = &unreached {
        if problems.is_empty() {
            return Finding::error(format!(
                "could not reach the API through the VIP {vip}: {reason}"
            ))
            .with_evidence(
                std::iter::once(
                    "unreachable, TLS failure or timeout: check the VIP's address, the cluster CA in the kubeconfig and kube.timeout".to_string(),
                )
                .chain(evidence),
            );
        }
        evidence.push(format!("the VIP could not be reached: {reason}"));
    }
    if problems.is_empty() {
        Finding::pass(format!("the API answers through the VIP {vip}")).with_evidence(evidence)
    } else {
        Finding::fail(problems[0].clone())
            .with_evidence(problems.into_iter().skip(1).chain(evidence))
    }
}

fn same_endpoint(a: &str, b: &str) -> bool {
    a.trim_end_matches('/')
        .eq_ignore_ascii_case(b.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::{env, run, state, text};
    use crate::state::{
        ApiState, Collected, EtcdMemberView, EtcdView, State, TalosEndpoint, TalosState,
    };
    use crate::verdict::Verdict;
    use std::net::{IpAddr, Ipv4Addr};

    const VIP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 10));

    /// Three control planes; each entry is the extra addresses of cp-N (or why none were read).
    fn with_talos(state: State, extra: [Result<Vec<IpAddr>, &str>; 3]) -> State {
        let members: Vec<EtcdMemberView> = (1..=3)
            .map(|i| EtcdMemberView {
                id: format!("{i:016x}"),
                hostname: format!("cp-{i}"),
                ..Default::default()
            })
            .collect();
        let mut state = state;
        state.talos = Collected::Present(TalosState {
            endpoints: extra
                .into_iter()
                .enumerate()
                .map(|(i, extra)| {
                    let own = IpAddr::V4(Ipv4Addr::new(10, 0, 0, i as u8 + 1));
                    TalosEndpoint {
                        endpoint: own.to_string(),
                        view: Ok(EtcdView {
                            members: members.clone(),
                            member_id: format!("{:016x}", i + 1),
                            ..Default::default()
                        }),
                        addresses: extra
                            .map(|mut a| {
                                a.push(own);
                                a
                            })
                            .map_err(crate::state::Unanswered::from),
                    }
                })
                .collect(),
            ..Default::default()
        });
        state
    }

    #[test]
    fn the_node_holding_the_vip_is_named() {
        let state = with_talos(
            with_api(Ok("https://10.0.0.10:6443"), Ok(())),
            [Ok(vec![]), Ok(vec![VIP]), Err("refused")],
        );
        let f = run(&env(), &state, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert!(
            text(&f).contains("the VIP is held by cp-2 (10.0.0.2)"),
            "{}",
            text(&f)
        );
    }

    #[test]
    fn a_vip_on_two_nodes_at_once_fails_naming_both() {
        let state = with_talos(
            with_api(Ok("https://10.0.0.10:6443"), Ok(())),
            [Ok(vec![VIP]), Ok(vec![]), Ok(vec![VIP])],
        );
        let f = run(&env(), &state, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Fail, "{}", text(&f));
        assert!(
            text(&f).contains("assigned to 2 nodes at once: cp-1 (10.0.0.1), cp-3 (10.0.0.3)"),
            "{}",
            text(&f)
        );
    }

    #[test]
    fn an_unknown_holder_is_said_not_guessed() {
        let state = with_talos(
            with_api(Ok("https://10.0.0.10:6443"), Ok(())),
            [Err("denied"), Err("denied"), Err("denied")],
        );
        let f = run(&env(), &state, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert!(
            text(&f).contains("the VIP holder is unknown"),
            "{}",
            text(&f)
        );
        let state = with_talos(
            with_api(Ok("https://10.0.0.10:6443"), Ok(())),
            [Ok(vec![]), Ok(vec![]), Ok(vec![])],
        );
        let f = run(&env(), &state, &Params {}, evaluate);
        assert!(
            text(&f).contains("no control-plane node lists the VIP"),
            "{}",
            text(&f)
        );
    }

    fn with_api(server: Result<&str, &str>, readyz: Result<(), &str>) -> State {
        state()
            .with(|s| {
                s.api = Collected::Present(ApiState {
                    vip_endpoint: Some("https://10.0.0.10:6443".into()),
                    vip_addresses: vec![VIP],
                    kubeconfig_server: server
                        .map(str::to_string)
                        .map_err(crate::state::Unanswered::from),
                    readyz_status: Some(if readyz.is_ok() { 200 } else { 503 }),
                    readyz: readyz.map_err(crate::state::Unanswered::from),
                })
            })
            .build()
    }

    #[test]
    fn vip_in_kubeconfig_and_answering_passes() {
        let f = run(
            &env(),
            &with_api(Ok("https://10.0.0.10:6443/"), Ok(())),
            &Params {},
            evaluate,
        );
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
    }

    #[test]
    fn kubeconfig_pointing_at_one_node_fails_naming_both() {
        let f = run(
            &env(),
            &with_api(Ok("https://10.0.0.11:6443"), Ok(())),
            &Params {},
            evaluate,
        );
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(text(&f).contains(
            "points at https://10.0.0.11:6443, not at the API VIP https://10.0.0.10:6443"
        ));
    }

    #[test]
    fn a_vip_that_answers_not_ready_fails_with_the_reason() {
        let f = run(
            &env(),
            &with_api(
                Ok("https://10.0.0.10:6443"),
                Err("answered 503: etcd failed"),
            ),
            &Params {},
            evaluate,
        );
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(text(&f).contains("etcd failed"));
    }

    /// Nothing answered: no HTTP status.
    fn unreached(reason: &str) -> State {
        let mut state = with_api(Ok("https://10.0.0.10:6443"), Err(reason));
        if let Collected::Present(api) = &mut state.api {
            api.readyz_status = None;
        }
        state
    }

    #[test]
    fn a_vip_that_cannot_be_reached_is_an_error_never_a_failure() {
        for reason in [
            "connection refused",
            "invalid peer certificate: UnknownIssuer",
            "operation timed out",
        ] {
            let f = run(&env(), &unreached(reason), &Params {}, evaluate);
            assert_eq!(f.verdict, Verdict::Error, "{reason}: {}", text(&f));
            assert!(text(&f).contains(reason), "{}", text(&f));
        }
    }

    #[test]
    fn an_unreachable_vip_still_fails_when_the_kubeconfig_proves_a_violation() {
        let mut state = unreached("connection refused");
        if let Collected::Present(api) = &mut state.api {
            api.kubeconfig_server = Ok("https://10.0.0.11:6443".into());
        }
        let f = run(&env(), &state, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Fail, "{}", text(&f));
    }

    #[test]
    fn an_unreadable_kubeconfig_is_an_error() {
        let f = run(
            &env(),
            &with_api(Err("no context"), Ok(())),
            &Params {},
            evaluate,
        );
        assert_eq!(f.verdict, Verdict::Error);
    }

    #[test]
    fn an_unresolvable_vip_name_is_said() {
        let mut state = with_talos(
            with_api(Ok("https://10.0.0.10:6443"), Ok(())),
            [Ok(vec![VIP]), Ok(vec![]), Ok(vec![])],
        );
        if let Collected::Present(api) = &mut state.api {
            api.vip_addresses.clear();
        }
        let f = run(&env(), &state, &Params {}, evaluate);
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert!(text(&f).contains("could not be resolved"), "{}", text(&f));
        assert!(!text(&f).contains("held by"), "{}", text(&f));
    }
}
