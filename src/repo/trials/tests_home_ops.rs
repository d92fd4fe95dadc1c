//! The trials on `fixtures/repo/home-ops-style`, a repository in the shape the public corpus
//! shows most (tools/corpus): its cluster is called `main`, its Flux source is not named
//! `flux-system`, every namespace includes a Kustomize component, the parent Kustomization
//! patches its children, variables come from `postBuild.substituteFrom`, charts come through
//! `chartRef`, and values through `configMapGenerator`.

use std::collections::BTreeMap;

use super::tests::run_spec;
use crate::config::RepoSpec;
use crate::verdict::{Finding, Verdict};

fn trials() -> BTreeMap<String, Finding> {
    run_spec(
        "home-ops-style",
        RepoSpec {
            environment: Some("main".into()),
            kubernetes: BTreeMap::from([("main".into(), "kubernetes/flux/cluster".into())]),
            sources: vec!["home".into()],
            ..RepoSpec::default()
        },
    )
}

#[test]
fn the_cilium_operator_fails_on_the_charts_default_of_no_pdb_with_its_substituted_replicas() {
    let t = trials();
    let op = &t["gate2::main::repo::replicated-controller::cilium-operator"];
    assert_eq!(op.verdict, Verdict::Fail, "{op:?}");
    let details = op.details();
    assert!(
        details.contains(
            "cilium values operator.podDisruptionBudget.enabled: false (the chart's default"
        ),
        "{details}"
    );
    assert!(
        details.contains(
            "kubernetes/apps/kube-system/cilium/app/helm-values.yaml:2: cilium values operator.replicas: 2"
        ),
        "the value generated from a file and substituted from cluster-settings, at its line: {details}"
    );
    assert!(
        details.contains("the chart's default requires one pod per node"),
        "{details}"
    );
}

#[test]
fn the_cert_manager_webhook_fails_on_the_charts_default_of_no_spread() {
    let t = trials();
    let webhook = &t["gate2::main::repo::replicated-controller::cert-manager-webhook"];
    assert_eq!(webhook.verdict, Verdict::Fail, "{webhook:?}");
    let details = webhook.details();
    assert!(
        details.contains("helmrelease.yaml:12: cert-manager values webhook.replicaCount: 2")
            && details.contains("the chart's default sets no required anti-affinity or spread"),
        "{details}"
    );
}

#[test]
fn a_repository_without_talos_or_terraform_skips_the_node_trials_and_reaches_the_rest() {
    let t = trials();
    assert_eq!(
        t["gate1::main::repo::control-plane-nodes"].verdict,
        Verdict::Skip
    );
    for (name, finding) in t.iter().filter(|(n, _)| n.contains("::repo::")) {
        assert_ne!(finding.verdict, Verdict::Error, "{name}: {finding:?}");
    }
}
