//! The trials on `fixtures/repo/home-ops-style`, a repository in the shape the public corpus
//! shows most (tools/corpus): its cluster is called `main`, its Flux source is not named
//! `flux-system`, every namespace includes a Kustomize component, the parent Kustomization
//! patches its children, variables come from `postBuild.substituteFrom`, charts come through
//! `chartRef`, and values through `configMapGenerator`.

use std::collections::BTreeMap;

use super::tests::run_spec;
use crate::config::RepoSpec;
use crate::verdict::{Finding, Verdict};

/// The `repo` section a user of this layout writes.
fn spec() -> RepoSpec {
    RepoSpec {
        environment: Some("main".into()),
        kubernetes: BTreeMap::from([("main".into(), "kubernetes/flux/cluster".into())]),
        sources: vec!["home".into()],
        ..RepoSpec::default()
    }
}

fn trials() -> BTreeMap<String, Finding> {
    run_spec("home-ops-style", spec())
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

/// The fixture with cert-manager's Flux Kustomization also substituting from a ConfigMap the
/// repository does not hold (one Terraform writes into the cluster, say) and rendering
/// `extra`.
fn with_unread_variables(extra: &str) -> BTreeMap<String, Finding> {
    let dir = super::tests::copy("home-ops-style");
    let app = dir.path().join("kubernetes/apps/cert-manager/cert-manager");
    let ks = std::fs::read_to_string(app.join("ks.yaml")).unwrap();
    std::fs::write(
        app.join("ks.yaml"),
        format!("{ks}  postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n        name: terraform-settings\n"),
    )
    .unwrap();
    std::fs::write(
        app.join("app/kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - helmrelease.yaml\n  - extra.yaml\n",
    )
    .unwrap();
    std::fs::write(app.join("app/extra.yaml"), extra).unwrap();
    super::tests::run_spec_at(dir.path(), spec())
}

#[test]
fn an_object_left_unread_by_substitution_blocks_only_the_controllers_it_may_be() {
    // Another application's Deployment: its labels are known, so it is not the webhook.
    let t = with_unread_variables(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: sidecar\nspec:\n  template:\n    metadata:\n      labels:\n        app: sidecar\n    spec:\n      containers:\n        - name: c\n          image: x\n          env:\n            - name: ENDPOINT\n              value: ${TF_ENDPOINT}\n",
    );
    let webhook = &t["gate2::main::repo::replicated-controller::cert-manager-webhook"];
    assert_eq!(webhook.verdict, Verdict::Fail, "{webhook:?}");
    // A Deployment whose pod labels are themselves unknown may be anything.
    let t = with_unread_variables(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: sidecar\nspec:\n  template:\n    metadata:\n      labels:\n        app.kubernetes.io/name: ${TF_APP}\n    spec:\n      containers:\n        - name: c\n          image: x\n",
    );
    let webhook = &t["gate2::main::repo::replicated-controller::cert-manager-webhook"];
    assert_eq!(webhook.verdict, Verdict::Error, "{webhook:?}");
    assert!(webhook.summary.contains("${TF_APP}"), "{webhook:?}");
}

#[test]
fn a_service_left_unread_by_substitution_that_is_no_ingress_service_leaves_gate_3_its_verdict() {
    let before = trials();
    let t = with_unread_variables(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: other\nspec:\n  type: LoadBalancer\n  loadBalancerIP: ${TF_IP}\n",
    );
    for trial in [
        "gate3::main::repo::l2-announcement",
        "gate3::main::repo::external-traffic-policy",
    ] {
        assert_ne!(t[trial].verdict, Verdict::Error, "{trial}: {:?}", t[trial]);
        assert_eq!(t[trial].verdict, before[trial].verdict, "{trial}");
    }
}
