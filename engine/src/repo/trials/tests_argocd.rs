//! The trials on `fixtures/repo/argocd-style`, a repository in the shape of the corpus's Argo
//! CD repositories: an app of apps, an ApplicationSet over directories, a chart inflated by
//! Kustomize `helmCharts`, and a chart installed by an Application from its chart repository.

use std::collections::BTreeMap;

use super::tests::run_spec;
use crate::config::RepoSpec;
use crate::verdict::{Finding, Verdict};

fn trials() -> BTreeMap<String, Finding> {
    run_spec(
        "argocd-style",
        RepoSpec {
            environment: Some("main".into()),
            kubernetes: BTreeMap::from([("main".into(), "argocd/apps".into())]),
            sources: vec!["https://git.example.org/ops/argocd-style.git".into()],
            ..RepoSpec::default()
        },
    )
}

#[test]
fn the_cilium_operator_inflated_by_kustomize_fails_on_the_charts_default_of_no_pdb() {
    let t = trials();
    let op = &t["gate2::main::repo::replicated-controller::cilium-operator"];
    assert_eq!(op.verdict, Verdict::Fail, "{op:?}");
    let details = op.details();
    assert!(
        details.contains(
            "infrastructure/network/cilium/values.yaml:2: cilium values operator.replicas: 2"
        ),
        "{details}"
    );
    assert!(
        details.contains("operator.podDisruptionBudget.enabled: false (the chart's default"),
        "{details}"
    );
}

#[test]
fn the_cert_manager_webhook_of_an_application_fails_on_its_value_object_line() {
    let t = trials();
    let webhook = &t["gate2::main::repo::replicated-controller::cert-manager-webhook"];
    assert_eq!(webhook.verdict, Verdict::Fail, "{webhook:?}");
    assert!(
        webhook
            .details()
            .contains("argocd/apps/cert-manager.yaml:16"),
        "{webhook:?}"
    );
}

#[test]
fn controllers_no_application_deploys_are_skipped_and_nothing_is_an_error() {
    let t = trials();
    let traefik = &t["gate2::main::repo::replicated-controller::traefik"];
    assert_eq!(traefik.verdict, Verdict::Skip, "{traefik:?}");
    assert!(
        t.iter()
            .filter(|(name, _)| name.contains("::repo::"))
            .all(|(_, f)| f.verdict != Verdict::Error),
        "{:#?}",
        t.iter()
            .filter(|(name, f)| name.contains("::repo::") && f.verdict == Verdict::Error)
            .collect::<Vec<_>>()
    );
}
