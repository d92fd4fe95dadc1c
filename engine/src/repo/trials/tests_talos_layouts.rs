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

/// The `rendered` layout, its base template rendered with `MACHINE_TYPE` per role as the
/// repository's render step does.
fn rendered(template_env: Option<crate::config::TemplateEnv>) -> BTreeMap<String, Finding> {
    run_spec(
        "talos-layouts",
        RepoSpec {
            template_env,
            ..spec("rendered")
        },
    )
}

fn machine_type_per_role() -> crate::config::TemplateEnv {
    crate::config::TemplateEnv {
        control_plane: BTreeMap::from([("MACHINE_TYPE".into(), "controlplane".into())]),
        worker: BTreeMap::from([("MACHINE_TYPE".into(), "worker".into())]),
    }
}

#[test]
fn a_base_template_with_role_control_flow_is_rendered_per_role_with_the_template_env() {
    let t = rendered(Some(machine_type_per_role()));
    let vip = &t["gate1::rendered::repo::vip"];
    assert_eq!(vip.verdict, Verdict::Pass, "{vip:?}");
    // The evidence cites the template's own lines, not the rendered text's.
    assert!(
        vip.details()
            .contains("talos/rendered/machineconfig.yaml.j2:13"),
        "{}",
        vip.details()
    );
    let s = &t["gate1::rendered::repo::schedulable-control-plane"];
    assert_eq!(s.verdict, Verdict::Pass, "{s:?}");
    assert!(
        s.details()
            .contains("talos/rendered/machineconfig.yaml.j2:17"),
        "{}",
        s.details()
    );
    assert_eq!(
        s.details().matches("`{{ ENV.SCHEMATIC }}`").count(),
        1,
        "an unknown is named once, not once per rendering: {}",
        s.details()
    );
    let cps = &t["gate1::rendered::repo::control-plane-nodes"];
    assert_eq!(cps.verdict, Verdict::Pass, "{cps:?}");
}

#[test]
fn without_the_template_env_a_template_with_control_flow_is_unread_and_says_how_to_read_it() {
    let t = rendered(None);
    let vip = &t["gate1::rendered::repo::vip"];
    assert_eq!(vip.verdict, Verdict::Error, "{vip:?}");
    assert!(
        vip.details().contains(
            "talos/rendered/machineconfig.yaml.j2: a Jinja template with control flow ({% ... %}) gates renders only with repo.template_env"
        ),
        "{}",
        vip.details()
    );
}

#[test]
fn a_condition_over_a_variable_the_template_env_does_not_give_leaves_the_template_unread() {
    let mut env = machine_type_per_role();
    env.worker.clear();
    let t = rendered(Some(env));
    let s = &t["gate1::rendered::repo::schedulable-control-plane"];
    assert_eq!(s.verdict, Verdict::Error, "{s:?}");
    assert!(
        s.details().contains(
            "talos/rendered/machineconfig.yaml.j2: line 11: the condition `ENV.MACHINE_TYPE == 'controlplane'` cannot be evaluated with repo.template_env"
        ),
        "{}",
        s.details()
    );
}

#[test]
fn with_hosts_named_by_hostname_each_talos_declared_node_is_its_own_host() {
    // Bare metal: kubelet labels every node `kubernetes.io/hostname: NAME`, so the declared
    // control planes' hosts are their names even though no patch labels them.
    let t = super::tests::run_spec_with(
        &super::tests::fixture("talos-layouts"),
        RepoSpec {
            template_env: Some(machine_type_per_role()),
            ..spec("rendered")
        },
        |env| env.nodes.host_label = "kubernetes.io/hostname".into(),
    );
    let hosts = &t["gate1::rendered::repo::distinct-hosts"];
    assert_eq!(hosts.verdict, Verdict::Pass, "{hosts:?}");
    // With the shipped zone label they carry only their own zones (pve1..pve3): a pass too,
    // and the worker's missing zone is not a control plane's.
    let t = rendered(Some(machine_type_per_role()));
    assert_eq!(
        t["gate1::rendered::repo::distinct-hosts"].verdict,
        Verdict::Pass
    );
}
