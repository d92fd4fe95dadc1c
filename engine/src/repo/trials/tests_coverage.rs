//! Repository and drift trials for what the first version left out: Talos patches Terraform
//! applies, every controller gate 2 protects, and drift of PDBs, scheduling, Longhorn's nodes
//! and host labels.

use std::path::Path;

use crate::checks::testing::{deployment, longhorn_node, node, pdb, state};
use crate::verdict::Verdict;

use super::tests::{copy, details, fixture, offline, run, run_env, verdict};

fn edit(dir: &Path, file: &str, from: &str, to: &str) {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{file} has no `{from}`");
    std::fs::write(&path, text.replace(from, to)).unwrap();
}

const MODULE: &str = "terraform/modules/talos_vms/main.tf";

#[test]
fn the_host_label_terraform_writes_into_the_machine_configuration_counts_for_gate_1() {
    let r = run(&fixture("adr-007"), &offline());
    assert_eq!(
        verdict(&r, "gate1::staging::repo::distinct-hosts"),
        Verdict::Pass,
        "{}",
        details(&r, "gate1::staging::repo::distinct-hosts")
    );
    let dir = copy("adr-007");
    edit(
        dir.path(),
        MODULE,
        "\"topology.kubernetes.io/zone\" = each.value.host",
        "\"topology.kubernetes.io/zone\" = \"pve1\"",
    );
    let r = run(dir.path(), &offline());
    let hosts = details(&r, "gate1::staging::repo::distinct-hosts");
    assert_eq!(
        verdict(&r, "gate1::staging::repo::distinct-hosts"),
        Verdict::Fail,
        "{hosts}"
    );
    assert!(
        hosts.contains(
            "terraform/modules/talos_vms/main.tf:88: talos-test-cp-02 nodeLabels.topology.kubernetes.io/zone: pve1, but the VM is on pve2"
        ),
        "{hosts}"
    );
}

#[test]
fn a_terraform_talos_patch_value_gates_cannot_evaluate_decides_only_the_trials_that_read_it() {
    let dir = copy("adr-007");
    edit(
        dir.path(),
        MODULE,
        "mount = var.longhorn_mount",
        "mount = data.disks.longhorn_mount",
    );
    let r = run(dir.path(), &offline());
    // The mount a data source gives writes only Longhorn's disk paths: the VIP is read.
    let vip = &r["gate1::staging::repo::vip"];
    assert_eq!(vip.verdict, Verdict::Pass, "{vip:?}");
    assert!(
        vip.warnings.iter().any(|w| w.contains(
            "machine.kubelet.extraMounts[0].source is written by the templatefile interpolation `${mount}`"
        )),
        "{vip:?}"
    );
    // Longhorn's disks are exactly what it writes: no verdict.
    let disks = r
        .iter()
        .find(|(name, _)| name.ends_with("::repo::longhorn-disks"))
        .map(|(_, f)| f)
        .expect("a longhorn-disks trial");
    assert_eq!(disks.verdict, Verdict::Error, "{disks:?}");
    assert!(
        disks.summary.contains("could not be read") && disks.details().contains("`${mount}`"),
        "{disks:?}"
    );
    // The VMs' own placement settles a fail no patch could undo: two control planes on one
    // host stay a fail, with the unread patch named.
    edit(
        dir.path(),
        "terraform/environments/staging.tfvars",
        "talos-test-cp-02 = { host = \"pve2\"",
        "talos-test-cp-02 = { host = \"pve1\"",
    );
    let r2 = run(dir.path(), &offline());
    let hosts = &r2["gate1::staging::repo::distinct-hosts"];
    assert_eq!(hosts.verdict, Verdict::Fail, "{hosts:?}");
    assert!(
        hosts.details().contains("share host pve1")
            && hosts.warnings.iter().any(|w| w.contains("not read:")),
        "{hosts:?}"
    );
    // Trials that read no Talos patch are not affected.
    let etp = &r["gate3::staging::repo::external-traffic-policy"];
    assert!(
        etp.warnings.is_empty() && etp.verdict != Verdict::Error,
        "{etp:?}"
    );
}

#[test]
fn a_malformed_terraform_talos_patch_file_makes_the_talos_trials_errors_naming_it() {
    let dir = copy("adr-007");
    std::fs::write(
        dir.path()
            .join("terraform/modules/talos_vms/patches/longhorn-disk.yaml.tftpl"),
        "machine:\n  disks: [\n",
    )
    .unwrap();
    let r = run(dir.path(), &offline());
    let sched = &r["gate1::staging::repo::schedulable-control-plane"];
    assert_eq!(sched.verdict, Verdict::Error, "{sched:?}");
    assert!(
        sched
            .summary
            .contains("terraform/modules/talos_vms/patches/longhorn-disk.yaml.tftpl:"),
        "{sched:?}"
    );
    // The VMs are still known.
    assert_eq!(
        verdict(&r, "gate1::staging::repo::control-plane-nodes"),
        Verdict::Pass
    );
}

#[test]
fn staging_today_keeps_its_verdicts_with_the_labels_written_by_terraform() {
    let r = run(&fixture("staging-today"), &offline());
    let hosts = details(&r, "gate1::staging::repo::distinct-hosts");
    assert!(
        !hosts.contains("has no `topology.kubernetes.io/zone` label"),
        "{hosts}"
    );
    assert!(hosts.contains("1 distinct host(s)"), "{hosts}");
}

#[test]
fn every_controller_gate_2_protects_is_checked_or_skipped_with_the_reason() {
    let r = run(&fixture("adr-007"), &offline());
    for csi in ["resizer", "snapshotter"] {
        let name = format!("gate2::staging::repo::replicated-controller::longhorn-csi-{csi}");
        assert_eq!(verdict(&r, &name), Verdict::Pass, "{}", details(&r, &name));
        let text = details(&r, &name);
        assert!(
            text.contains(
                "kubernetes/infrastructure/controllers/longhorn/csi-disruption-budgets.yaml:"
            ) && text.contains(&format!("PodDisruptionBudget csi-{csi}: ")),
            "{text}"
        );
    }
    // Longhorn makes these two PDBs itself: the repository declares none.
    for csi in ["attacher", "provisioner"] {
        let name = format!("gate2::staging::repo::replicated-controller::longhorn-csi-{csi}");
        assert_eq!(verdict(&r, &name), Verdict::Pass, "{}", details(&r, &name));
        assert!(
            details(&r, &name).contains("made by Longhorn itself (minAvailable: 1)"),
            "{}",
            details(&r, &name)
        );
    }
    let coredns = &r["gate2::staging::repo::replicated-controller::coredns"];
    assert_eq!(coredns.verdict, Verdict::Skip);
    assert!(coredns.summary.contains("deployed by Talos"), "{coredns:?}");
    for absent in [
        "cilium-operator",
        "cert-manager-webhook",
        "external-secrets",
        "external-secrets-webhook",
    ] {
        let name = format!("gate2::staging::repo::replicated-controller::{absent}");
        let finding = &r[&name];
        assert_eq!(finding.verdict, Verdict::Skip, "{name}");
        assert!(
            finding.summary.contains("nothing in the repository"),
            "{finding:?}"
        );
    }
}

#[test]
fn a_csi_controller_with_one_replica_fails_and_one_no_pdb_selects_fails_too() {
    let dir = copy("adr-007");
    let release = "kubernetes/infrastructure/controllers/longhorn/release.yaml";
    edit(
        dir.path(),
        release,
        "attacherReplicaCount: 2",
        "attacherReplicaCount: 1",
    );
    edit(
        dir.path(),
        "kubernetes/infrastructure/controllers/longhorn/csi-disruption-budgets.yaml",
        "app: csi-resizer",
        "app: csi-resizer-old",
    );
    let r = run(dir.path(), &offline());
    let attacher = details(
        &r,
        "gate2::staging::repo::replicated-controller::longhorn-csi-attacher",
    );
    assert_eq!(
        verdict(
            &r,
            "gate2::staging::repo::replicated-controller::longhorn-csi-attacher"
        ),
        Verdict::Fail
    );
    assert!(
        attacher.contains(&format!(
            "{release}:25: longhorn values csi.attacherReplicaCount: 1"
        )),
        "{attacher}"
    );
    // Nothing makes a PDB for the resizer: without one in the repository it fails.
    let resizer = &r["gate2::staging::repo::replicated-controller::longhorn-csi-resizer"];
    assert_eq!(resizer.verdict, Verdict::Fail, "{resizer:?}");
    assert!(
        resizer.details().contains("the longhorn chart makes none"),
        "{resizer:?}"
    );
}

#[test]
fn a_second_pdb_over_a_longhorn_csi_attacher_fails_because_longhorn_makes_its_own() {
    let dir = copy("adr-007");
    let file = dir
        .path()
        .join("kubernetes/infrastructure/controllers/longhorn/csi-disruption-budgets.yaml");
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: attacher-extra\nspec:\n  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app: csi-attacher\n");
    std::fs::write(&file, text).unwrap();
    let r = run(dir.path(), &offline());
    let name = "gate2::staging::repo::replicated-controller::longhorn-csi-attacher";
    assert_eq!(verdict(&r, name), Verdict::Fail, "{}", details(&r, name));
    assert!(
        details(&r, name)
            .contains("a second one in the repository makes every eviction of its pods fail"),
        "{}",
        details(&r, name)
    );
}

#[test]
fn a_traefik_pdb_enabled_with_neither_field_blocks_every_drain_and_fails() {
    let dir = copy("adr-007");
    let file = dir
        .path()
        .join("kubernetes/infrastructure/controllers/traefik/release.yaml");
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "      enabled: true\n      maxUnavailable: 1\n",
        "      enabled: true\n",
    );
    std::fs::write(&file, text).unwrap();
    let r = run(dir.path(), &offline());
    let name = "gate2::staging::repo::replicated-controller::traefik";
    assert_eq!(verdict(&r, name), Verdict::Fail, "{}", details(&r, name));
    assert!(
        details(&r, name).contains("allows no disruption, so every drain blocks"),
        "{}",
        details(&r, name)
    );
}

#[test]
fn a_preferred_anti_affinity_in_chart_values_is_not_a_spread() {
    let dir = copy("adr-007");
    let file = dir
        .path()
        .join("kubernetes/infrastructure/controllers/longhorn/release.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("podAntiAffinityPreset: hard"),
        "the fixture changed"
    );
    std::fs::write(
        &file,
        text.replace("podAntiAffinityPreset: hard", "podAntiAffinityPreset: soft"),
    )
    .unwrap();
    let r = run(dir.path(), &offline());
    let name = "gate2::staging::repo::replicated-controller::longhorn-csi-resizer";
    assert_eq!(verdict(&r, name), Verdict::Fail, "{}", details(&r, name));
    assert!(
        details(&r, name).contains("may share a host"),
        "{}",
        details(&r, name)
    );
}

#[test]
fn coredns_disabled_in_talos_is_skipped_naming_the_patch_line() {
    let dir = copy("adr-007");
    edit(
        dir.path(),
        "talos/staging/common.yaml",
        "  proxy:\n    disabled: true\n",
        "  proxy:\n    disabled: true\n  coreDNS:\n    disabled: true\n",
    );
    let r = run(dir.path(), &offline());
    let coredns = &r["gate2::staging::repo::replicated-controller::coredns"];
    assert_eq!(coredns.verdict, Verdict::Skip);
    assert!(
        coredns
            .summary
            .starts_with("talos/staging/common.yaml:18: cluster.coreDNS.disabled: true"),
        "{coredns:?}"
    );
}

#[test]
fn drift_of_pdbs_scheduling_longhorn_and_host_labels_names_both_sides() {
    let live = state()
        .nodes([
            node("talos-test-cp-01")
                .control_plane()
                .host("pve1")
                .taint("node-role.kubernetes.io/control-plane", "NoSchedule")
                .build(),
            node("talos-test-cp-02")
                .control_plane()
                .host("pve9")
                .build(),
            node("talos-test-cp-03")
                .control_plane()
                .host("pve3")
                .build(),
        ])
        .deployments([deployment(
            "traefik",
            "traefik",
            &[("app.kubernetes.io/name", "traefik")],
        )
        .replicas(2)
        .build()])
        .statefulsets([])
        .pdbs([])
        .build();
    let r = run(&fixture("adr-007"), &live);
    let pdb_drift = &r["gate2::staging::drift::pdb::traefik"];
    assert_eq!(pdb_drift.verdict, Verdict::Fail, "{pdb_drift:?}");
    let text = pdb_drift.details();
    assert!(
        text.contains("live: no PodDisruptionBudget selects the pods of traefik"),
        "{text}"
    );
    assert!(
        text.contains("declared: kubernetes/infrastructure/controllers/traefik/release.yaml:30: traefik values podDisruptionBudget.enabled: true"),
        "{text}"
    );
    let sched = &r["gate1::staging::drift::schedulable-control-plane"];
    assert_eq!(sched.verdict, Verdict::Fail, "{sched:?}");
    assert!(
        sched.details().contains(
            "live: kept off by talos-test-cp-01 node-role.kubernetes.io/control-plane:NoSchedule"
        ),
        "{}",
        sched.details()
    );
    assert!(
        sched.details().contains(
            "declared: workloads allowed on talos-test-cp-01 (talos/staging/controlplane.yaml:3"
        ),
        "{}",
        sched.details()
    );
    let hosts = &r["gate1::staging::drift::host-labels"];
    let text = hosts.details();
    assert_eq!(hosts.verdict, Verdict::Fail, "{text}");
    assert!(
        text.contains("talos-test-cp-02: live topology.kubernetes.io/zone=pve9, declared on pve2 (terraform/environments/staging.tfvars:7)"),
        "{text}"
    );
    // The same cluster with the declared PDB and no taint agrees.
    let live = state()
        .nodes([node("talos-test-cp-01")
            .control_plane()
            .host("pve1")
            .build()])
        .deployments([deployment(
            "traefik",
            "traefik",
            &[("app.kubernetes.io/name", "traefik")],
        )
        .replicas(2)
        .build()])
        .statefulsets([])
        .pdbs([pdb(
            "traefik",
            "traefik",
            &[("app.kubernetes.io/name", "traefik")],
        )
        .build()])
        .build();
    let r = run(&fixture("adr-007"), &live);
    assert_eq!(
        verdict(&r, "gate2::staging::drift::pdb::traefik"),
        Verdict::Pass
    );
    assert_eq!(
        verdict(&r, "gate1::staging::drift::schedulable-control-plane"),
        Verdict::Pass
    );
    assert_eq!(
        verdict(&r, "gate1::staging::drift::host-labels"),
        Verdict::Pass
    );
}

#[test]
fn drift_of_longhorn_nodes_names_the_node_the_repository_allows_and_the_cluster_lacks() {
    let live = state()
        .longhorn_nodes([
            longhorn_node("talos-prod-cp-01").build(),
            longhorn_node("talos-prod-cp-02").build(),
        ])
        .build();
    let r = run_env(&fixture("adr-007"), &live, "production");
    let longhorn = &r["gate5::production::drift::longhorn-nodes"];
    let text = longhorn.details();
    assert_eq!(longhorn.verdict, Verdict::Fail, "{text}");
    assert!(
        text.contains("talos-prod-cp-03: allowed by the repository, not live"),
        "{text}"
    );
    assert!(
        text.contains(
            "terraform/variables_talos.tf:56: var.longhorn_node_roles: [control-plane, worker]"
        ),
        "{text}"
    );
    // Longhorn's nodes not collected: an error, not a pass.
    let r = run_env(&fixture("adr-007"), &offline(), "production");
    assert_eq!(
        verdict(&r, "gate5::production::drift::longhorn-nodes"),
        Verdict::Error
    );
}

/// A live Deployment whose pod template carries the labels its selector selects, as the
/// API server requires.
fn labelled(
    namespace: &str,
    name: &str,
    labels: &[(&str, &str)],
    replicas: i32,
) -> k8s_openapi::api::apps::v1::Deployment {
    let mut d = deployment(namespace, name, labels)
        .replicas(replicas)
        .build();
    if let Some(spec) = d.spec.as_mut() {
        spec.template.metadata = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            labels: spec.selector.match_labels.clone(),
            ..Default::default()
        });
    }
    d
}

#[test]
fn replica_drift_sums_the_live_workloads_the_selector_matches_and_errors_when_unread() {
    let traefik = |replicas| {
        labelled(
            "traefik",
            "traefik",
            &[("app.kubernetes.io/name", "traefik")],
            replicas,
        )
    };
    let other = labelled("apps", "whoami", &[("app.kubernetes.io/name", "whoami")], 5);
    let live = state()
        .deployments([traefik(3), other.clone()])
        .statefulsets([])
        .pdbs([])
        .build();
    let r = run(&fixture("adr-007"), &live);
    let drift = &r["gate2::staging::drift::replicated-controller::traefik"];
    assert_eq!(drift.verdict, Verdict::Fail, "{drift:?}");
    assert_eq!(drift.summary, "live 3 replicas, declared 2");
    assert!(
        drift.details().contains("live: traefik/traefik 3 replicas"),
        "{drift:?}"
    );
    let live = state()
        .deployments([traefik(2), other])
        .statefulsets([])
        .pdbs([])
        .build();
    let r = run(&fixture("adr-007"), &live);
    assert_eq!(
        verdict(&r, "gate2::staging::drift::replicated-controller::traefik"),
        Verdict::Pass
    );
    // Deployments read, StatefulSets not: the controller's replicas are not known.
    let live = state()
        .deployments([traefik(2)])
        .with(|s| s.statefulsets = crate::state::Collected::Absent("forbidden".into()))
        .pdbs([])
        .build();
    let r = run(&fixture("adr-007"), &live);
    for name in [
        "gate2::staging::drift::replicated-controller::traefik",
        "gate2::staging::drift::pdb::traefik",
    ] {
        assert_eq!(r[name].verdict, Verdict::Error, "{:?}", r[name]);
        assert!(
            r[name]
                .summary
                .contains("statefulsets unavailable: forbidden"),
            "{:?}",
            r[name]
        );
    }
}
