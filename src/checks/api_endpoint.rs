//! Gate 1: the Kubernetes API is reached through the Talos Layer 2 VIP: the environment's
//! kubeconfig points at the VIP, and the VIP answers `/readyz`, verified with the cluster CA.

use serde::Deserialize;

use super::Context;
use crate::verdict::Finding;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {}

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
    match &api.readyz {
        Ok(()) => evidence.push(format!(
            "{vip}/readyz answered 200 with a certificate from the cluster CA"
        )),
        Err(reason) => problems.push(format!("the API does not answer through the VIP: {reason}")),
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
    use crate::state::{ApiState, Collected, State};
    use crate::verdict::Verdict;

    fn with_api(server: Result<&str, &str>, readyz: Result<(), &str>) -> State {
        state()
            .with(|s| {
                s.api = Collected::Present(ApiState {
                    vip_endpoint: Some("https://10.0.0.10:6443".into()),
                    kubeconfig_server: server.map(str::to_string).map_err(str::to_string),
                    readyz: readyz.map_err(str::to_string),
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
    fn a_vip_that_does_not_answer_fails_with_the_reason() {
        let f = run(
            &env(),
            &with_api(Ok("https://10.0.0.10:6443"), Err("connection refused")),
            &Params {},
            evaluate,
        );
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(text(&f).contains("connection refused"));
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
}
