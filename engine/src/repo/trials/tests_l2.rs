//! The repository's L2 announcement trial with Cilium's semantics: `loadBalancerIPs`, service
//! selectors, the labels kubelet and Talos put on every node, and labels nobody declares.

use super::tests::{copy, offline, run};
use crate::verdict::{Finding, Verdict};

const POLICY: &str = "kubernetes/infrastructure/staging/network/ingress-address.yaml";
const STAGING_POLICY_SPEC: &str = "spec:\n  serviceSelector:\n    matchLabels:\n      app.kubernetes.io/name: traefik\n  interfaces:\n    - ^eth[0-9]+\n  loadBalancerIPs: true\n";

/// Staging's L2 trial on adr-007 with its policy's spec replaced by `spec` (and `extra`
/// files written).
fn l2_with(spec: &str, extra: &[(&str, &str)]) -> Finding {
    let dir = copy("adr-007");
    let file = dir.path().join(POLICY);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(STAGING_POLICY_SPEC), "the fixture changed");
    std::fs::write(&file, text.replace(STAGING_POLICY_SPEC, spec)).unwrap();
    for (path, text) in extra {
        std::fs::write(dir.path().join(path), text).unwrap();
    }
    run(dir.path(), &offline())["gate3::staging::repo::l2-announcement"].clone()
}

#[test]
fn the_fixtures_policy_announces_traefik_from_every_declared_node() {
    let l2 = l2_with(STAGING_POLICY_SPEC, &[]);
    assert_eq!(l2.verdict, Verdict::Pass, "{l2:?}");
}

#[test]
fn a_policy_without_load_balancer_ips_announces_nothing_and_fails() {
    let l2 = l2_with(
        "spec:\n  serviceSelector:\n    matchLabels:\n      app.kubernetes.io/name: traefik\n",
        &[],
    );
    assert_eq!(l2.verdict, Verdict::Fail, "{l2:?}");
    assert!(
        l2.details()
            .contains("spec.loadBalancerIPs defaults to false"),
        "{l2:?}"
    );
}

#[test]
fn a_policy_for_another_service_neither_counts_nor_has_to_cover_every_node() {
    let other = "---\napiVersion: cilium.io/v2alpha1\nkind: CiliumL2AnnouncementPolicy\nmetadata:\n  name: dns-only\nspec:\n  serviceSelector:\n    matchLabels:\n      app.kubernetes.io/name: blocky\n  nodeSelector:\n    matchLabels:\n      kubernetes.io/hostname: talos-test-cp-01\n  loadBalancerIPs: true\n";
    let l2 = l2_with(&format!("{STAGING_POLICY_SPEC}{other}"), &[]);
    assert_eq!(l2.verdict, Verdict::Pass, "{l2:?}");

    // Alone, the other Service's policy does not announce Traefik.
    let only_other = other.trim_start_matches("---\napiVersion: cilium.io/v2alpha1\nkind: CiliumL2AnnouncementPolicy\nmetadata:\n  name: dns-only\n");
    let l2 = l2_with(only_other, &[]);
    assert_eq!(l2.verdict, Verdict::Fail, "{l2:?}");
    assert!(
        l2.details()
            .contains("no CiliumL2AnnouncementPolicy selects Service traefik/"),
        "{l2:?}"
    );
}

#[test]
fn a_node_selector_on_the_os_label_kubelet_sets_selects_every_node() {
    let l2 = l2_with(
        &format!(
            "{STAGING_POLICY_SPEC}  nodeSelector:\n    matchLabels:\n      kubernetes.io/os: linux\n"
        ),
        &[],
    );
    assert_eq!(l2.verdict, Verdict::Pass, "{l2:?}");
}

#[test]
fn a_node_selector_on_a_label_nobody_declares_is_unknown_not_a_fail() {
    let l2 = l2_with(
        &format!(
            "{STAGING_POLICY_SPEC}  nodeSelector:\n    matchLabels:\n      example.org/announcer: \"true\"\n"
        ),
        &[],
    );
    assert_eq!(l2.verdict, Verdict::Error, "{l2:?}");
    assert!(
        l2.details()
            .contains("example.org/announcer=true, which the repository does not say of the node"),
        "{l2:?}"
    );
}

#[test]
fn a_label_the_talos_patches_set_on_some_nodes_is_known_absent_on_the_others() {
    let l2 = l2_with(
        &format!(
            "{STAGING_POLICY_SPEC}  nodeSelector:\n    matchLabels:\n      example.org/announcer: \"true\"\n"
        ),
        &[(
            "talos/staging/talos-test-cp-01.yaml",
            "machine:\n  network:\n    hostname: talos-test-cp-01\n  nodeLabels:\n    example.org/announcer: \"true\"\n",
        )],
    );
    assert_eq!(l2.verdict, Verdict::Fail, "{l2:?}");
    let details = l2.details();
    assert!(
        details.contains("leave out talos-test-cp-02")
            && !details.contains("leave out talos-test-cp-01"),
        "{details}"
    );
}

#[test]
fn the_talos_exclusion_label_is_unknown_on_control_planes_until_a_patch_deletes_it() {
    let spec = format!(
        "{STAGING_POLICY_SPEC}  nodeSelector:\n    matchExpressions:\n      - key: node.kubernetes.io/exclude-from-external-load-balancers\n        operator: DoesNotExist\n"
    );
    let l2 = l2_with(&spec, &[]);
    assert_eq!(
        l2.verdict,
        Verdict::Error,
        "the label depends on the Talos version that generated the config: {l2:?}"
    );

    let l2 = l2_with(
        &spec,
        &[(
            "talos/staging/controlplane.yaml",
            "cluster:\n  allowSchedulingOnControlPlanes: true\nmachine:\n  nodeLabels:\n    node.kubernetes.io/exclude-from-external-load-balancers:\n      $patch: delete\n  network:\n    interfaces:\n      - interface: eth0\n        dhcp: false\n        vip:\n          ip: 10.0.50.10\n",
        )],
    );
    assert_eq!(l2.verdict, Verdict::Pass, "deleted by the patch: {l2:?}");
}

#[test]
fn a_service_selector_on_a_label_traefiks_chart_does_not_set_excludes_it() {
    let l2 = l2_with(
        "spec:\n  serviceSelector:\n    matchLabels:\n      example.org/announce: \"yes\"\n  loadBalancerIPs: true\n",
        &[],
    );
    assert_eq!(l2.verdict, Verdict::Fail, "{l2:?}");
}

#[test]
fn with_a_kube_node_config_the_exclusion_label_is_what_gen_config_or_the_complete_config_writes() {
    let spec = format!(
        "{STAGING_POLICY_SPEC}  nodeSelector:\n    matchExpressions:\n      - key: node.kubernetes.io/exclude-from-external-load-balancers\n        operator: DoesNotExist\n"
    );
    // Patches over `gen config` (Talos 1.14): its KubeNodeConfig labels control planes.
    let l2 = l2_with(
        &spec,
        &[(
            "talos/staging/controlplane.yaml",
            "apiVersion: v1alpha1\nkind: KubeNodeConfig\nlabels:\n  example.org/rack: a\n",
        )],
    );
    assert_eq!(l2.verdict, Verdict::Fail, "{l2:?}");
    assert!(
        l2.details().contains("leave out talos-test-cp-01"),
        "{}",
        l2.details()
    );
    // A complete configuration writes only its own labels.
    let l2 = l2_with(
        &spec,
        &[(
            "talos/staging/controlplane.yaml",
            "version: v1alpha1\nmachine:\n  type: controlplane\n  token: op://vault/talos/TOKEN\n---\napiVersion: v1alpha1\nkind: KubeNodeConfig\nlabels:\n  example.org/rack: a\n",
        )],
    );
    assert_eq!(l2.verdict, Verdict::Pass, "{l2:?}");
}

#[test]
fn without_any_policy_the_trial_fails_whatever_a_talos_patch_not_read_would_label() {
    let dir = copy("adr-007");
    std::fs::write(
        dir.path().join(POLICY),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: no-policy-here\n  namespace: kube-system\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("talos/staging/common-labels.yaml.j2"),
        "{% if rack %}\nmachine:\n  nodeLabels:\n    rack: a\n{% endif %}\n",
    )
    .unwrap();
    let l2 = run(dir.path(), &offline())["gate3::staging::repo::l2-announcement"].clone();
    assert_eq!(l2.verdict, Verdict::Fail, "{l2:?}");
    assert!(
        l2.warnings
            .iter()
            .any(|w| w.contains("common-labels.yaml.j2: a Jinja template with control flow")),
        "{l2:?}"
    );
}
