//! The trials on `fixtures/repo/talos-layouts`: nodes declared by the Talos configuration
//! alone, through talhelper's `talconfig.yaml` and through one file per node.

use std::collections::BTreeMap;

use super::tests::run_spec;
use crate::config::RepoSpec;
use crate::verdict::{Finding, Verdict};

/// The `repo` section for the layout of `talos/ENV`.
fn spec(env_name: &str) -> RepoSpec {
    RepoSpec {
        environment: Some(env_name.into()),
        talos: BTreeMap::from([(env_name.into(), format!("talos/{env_name}"))]),
        ..RepoSpec::default()
    }
}

fn trials(env_name: &str) -> BTreeMap<String, Finding> {
    run_spec("talos-layouts", spec(env_name))
}

#[test]
fn talhelper_nodes_are_the_declared_nodes_with_their_roles_labels_and_patches() {
    let t = trials("home");
    let cps = &t["gate1::home::repo::control-plane-nodes"];
    assert_eq!(cps.verdict, Verdict::Pass, "{cps:?}");
    assert!(
        cps.details()
            .contains("talos/home/talconfig.yaml:7: talhelper node[\"home-cp-1\"]"),
        "{cps:?}"
    );
    let hosts = &t["gate1::home::repo::distinct-hosts"];
    assert_eq!(hosts.verdict, Verdict::Fail, "{hosts:?}");
    assert!(
        hosts
            .details()
            .contains("control planes home-cp-2, home-cp-3 share host pve-b"),
        "{hosts:?}"
    );
    let schedulable = &t["gate1::home::repo::schedulable-control-plane"];
    assert_eq!(schedulable.verdict, Verdict::Pass, "{schedulable:?}");
    assert!(
        schedulable
            .details()
            .contains("talos/home/talconfig.yaml:5"),
        "{schedulable:?}"
    );
    let vip = &t["gate1::home::repo::vip"];
    assert_eq!(vip.verdict, Verdict::Pass, "{vip:?}");
}

#[test]
fn node_files_declare_their_nodes_by_hostname_and_their_role_by_directory() {
    let t = trials("lab");
    for trial in [
        "gate1::lab::repo::control-plane-nodes",
        "gate1::lab::repo::distinct-hosts",
        "gate1::lab::repo::schedulable-control-plane",
        "gate1::lab::repo::vip",
    ] {
        assert_eq!(t[trial].verdict, Verdict::Pass, "{trial}: {:?}", t[trial]);
    }
    let hosts = t["gate1::lab::repo::distinct-hosts"].details();
    assert!(
        hosts.contains("talos/lab/controlplane/lab-cp-1.yaml:7: Talos node file[\"lab-cp-1\"]"),
        "{hosts}"
    );
}

/// The `lab` layout with its control-plane role patch replaced by `patch`.
fn lab_with_role_patch(patch: &str) -> BTreeMap<String, Finding> {
    lab_with(&[("talos/lab/controlplane/controlplane.yaml", patch)])
}

/// The `lab` layout with `files` written over it.
fn lab_with(files: &[(&str, &str)]) -> BTreeMap<String, Finding> {
    let dir = super::tests::copy("talos-layouts");
    for (path, text) in files {
        std::fs::write(dir.path().join(path), text).unwrap();
    }
    super::tests::run_spec_at(dir.path(), spec("lab"))
}

#[test]
fn with_a_kube_node_config_the_generated_control_plane_taint_holds_unless_a_patch_deletes_it() {
    let t = lab_with_role_patch("machine:\n  install:\n    wipe: false\n");
    let s = &t["gate1::lab::repo::schedulable-control-plane"];
    assert_eq!(s.verdict, Verdict::Fail, "{s:?}");
    assert!(
        s.details().contains(
            "node-role.kubernetes.io/control-plane: NoSchedule, which `talosctl gen config` writes"
        ),
        "{}",
        s.details()
    );
}

#[test]
fn the_legacy_scheduling_switch_beside_a_kube_node_config_is_refused_by_talos_and_fails() {
    let t = lab_with_role_patch("cluster:\n  allowSchedulingOnControlPlanes: true\n");
    let s = &t["gate1::lab::repo::schedulable-control-plane"];
    assert_eq!(s.verdict, Verdict::Fail, "{s:?}");
    assert!(
        s.details().contains(
            "talos/lab/controlplane/controlplane.yaml:2: cluster.allowSchedulingOnControlPlanes: true: Talos refuses it beside a KubeNodeConfig document"
        ),
        "{}",
        s.details()
    );
}

#[test]
fn a_complete_machine_configuration_with_a_kube_node_config_has_no_generated_taint() {
    let t = lab_with_role_patch(
        "version: v1alpha1\nmachine:\n  type: controlplane\n  token: op://vault/talos/TOKEN\n---\napiVersion: v1alpha1\nkind: KubeNodeConfig\nlabels:\n  node-role.kubernetes.io/control-plane: \"\"\n",
    );
    let s = &t["gate1::lab::repo::schedulable-control-plane"];
    assert_eq!(s.verdict, Verdict::Pass, "{s:?}");
    assert!(
        s.details().contains("a complete machine configuration"),
        "{}",
        s.details()
    );
}

#[test]
fn a_jinja_interpolation_decides_only_the_trials_that_read_where_it_writes() {
    // The installer image a factory schematic names: no trial reads it.
    let t = lab_with(&[(
        "talos/lab/controlplane/controlplane-install.yaml.j2",
        "apiVersion: v1alpha1\nkind: UnattendedInstallConfig\ninstaller:\n  image: factory.talos.dev/installer/{{ schematic }}:v1.14.0\n",
    )]);
    let s = &t["gate1::lab::repo::schedulable-control-plane"];
    assert_eq!(s.verdict, Verdict::Pass, "{s:?}");
    assert!(
        s.details().contains("not read: talos/lab/controlplane/controlplane-install.yaml.j2:4: UnattendedInstallConfig installer.image is written by the Jinja interpolation `{{ schematic }}`"),
        "{}",
        s.details()
    );
    // A taint written by an interpolation may keep workloads off: no verdict.
    let t = lab_with(&[(
        "talos/lab/controlplane/controlplane-taints.yaml.j2",
        "apiVersion: v1alpha1\nkind: KubeNodeConfig\ntaints:\n  dedicated: \"{{ ENV.TAINT }}\"\n",
    )]);
    let s = &t["gate1::lab::repo::schedulable-control-plane"];
    assert_eq!(s.verdict, Verdict::Error, "{s:?}");
    assert!(
        s.summary.contains(
            "could not be read and may set what this trial reads; without them it would pass"
        ),
        "{s:?}"
    );
}
