//! Talos patches applied by Terraform, read from small real-looking modules.

use crate::repo::talos::Applies;
use crate::repo::terraform::{Terraform, load};

use crate::repo::testing::repo;

const TFVARS: &str = r#"nodes = {
  cp-01 = { host = "pve1", role = "control-plane" }
  cp-02 = { host = "pve2", role = "control-plane" }
}
"#;

/// A root module whose only file is `main.tf` with the given talos blocks after the VMs.
fn with_main(talos: &str) -> String {
    format!(
        r#"variable "nodes" {{}}

resource "proxmox_virtual_environment_vm" "talos" {{
  for_each  = var.nodes
  name      = each.key
  node_name = each.value.host
  tags      = ["talos", each.value.role]
}}

{talos}"#
    )
}

fn read(files: &[(&str, &str)]) -> Terraform {
    let dir = repo(files);
    load(dir.path(), "tf", Some("tf/staging.tfvars")).unwrap()
}

#[test]
fn a_yamlencoded_patch_applies_to_each_node_with_the_hcl_line_and_the_tfvars_value() {
    let main = with_main(
        r#"data "talos_machine_configuration" "node" {
  for_each     = var.nodes
  machine_type = each.value.role == "control-plane" ? "controlplane" : "worker"
  config_patches = [
    yamlencode({
      cluster = {
        allowSchedulingOnControlPlanes = true
      }
      machine = {
        nodeLabels = {
          "topology.kubernetes.io/zone" = each.value.host
        }
      }
    }),
  ]
}
"#,
    );
    let tf = read(&[("tf/main.tf", &main), ("tf/staging.tfvars", TFVARS)]);
    assert_eq!(tf.talos_patches.len(), 2, "{:?}", tf.talos_skipped);
    let cp2 = &tf.talos_patches[1];
    assert_eq!(cp2.applies, Applies::Node("cp-02".to_string()));
    assert_eq!(cp2.file, "tf/main.tf");
    let allow = cp2
        .doc
        .get(&["cluster", "allowSchedulingOnControlPlanes"])
        .unwrap();
    assert_eq!(
        (allow.as_bool(), allow.site.to_string().as_str()),
        (Some(true), "tf/main.tf:16")
    );
    let zone = cp2
        .doc
        .get(&["machine", "nodeLabels", "topology.kubernetes.io/zone"])
        .unwrap();
    assert_eq!(
        (zone.as_str(), zone.site.to_string().as_str()),
        (Some("pve2"), "tf/staging.tfvars:3")
    );
    assert!(tf.talos_skipped.is_empty(), "{:?}", tf.talos_skipped);
}

#[test]
fn file_and_templatefile_patches_are_read_from_the_repository_files_they_name() {
    let main = with_main(
        r#"resource "talos_machine_configuration_apply" "cp" {
  machine_type = "controlplane"
  config_patches = [
    file("${path.module}/patches/controlplane.yaml"),
    templatefile("${path.module}/patches/vip.yaml.tftpl", { vip = "10.0.50.10" }),
  ]
}
"#,
    );
    let tf = read(&[
        ("tf/main.tf", &main),
        ("tf/staging.tfvars", TFVARS),
        (
            "tf/patches/controlplane.yaml",
            "# control planes run workloads\ncluster:\n  allowSchedulingOnControlPlanes: true\n",
        ),
        (
            "tf/patches/vip.yaml.tftpl",
            "machine:\n  network:\n    interfaces:\n      - interface: eth0\n        vip:\n          ip: ${vip}\n",
        ),
    ]);
    assert_eq!(tf.talos_patches.len(), 2, "{:?}", tf.talos_skipped);
    assert!(
        tf.talos_patches
            .iter()
            .all(|p| p.applies == Applies::ControlPlanes)
    );
    let allow = tf.talos_patches[0]
        .doc
        .get(&["cluster", "allowSchedulingOnControlPlanes"])
        .unwrap();
    assert_eq!(allow.site.to_string(), "tf/patches/controlplane.yaml:3");
    let vip = tf.talos_patches[1]
        .doc
        .get(&["machine", "network", "interfaces"])
        .and_then(|i| i.as_seq())
        .and_then(|i| i[0].get(&["vip", "ip"]))
        .unwrap();
    assert_eq!(
        (vip.as_str(), vip.site.to_string().as_str()),
        (Some("10.0.50.10"), "tf/patches/vip.yaml.tftpl:6")
    );
}

#[test]
fn a_template_value_gates_cannot_resolve_is_set_aside_and_other_unreadable_patches_are_skipped() {
    let main = with_main(
        r#"locals {
  vip = "10.0.50.10"
}

resource "talos_machine_configuration_apply" "cp" {
  for_each = var.nodes
  config_patches = [
    templatefile("${path.module}/patches/vip.yaml.tftpl", { vip = data.net.vip }),
    templatefile("${path.module}/patches/vip.yaml.tftpl", { address = "10.0.50.10" }),
    templatefile("${path.module}/patches/when.yaml.tftpl", { on = data.net.on }),
    local.extra_patch,
  ]
}
"#,
    );
    let tf = read(&[
        ("tf/main.tf", &main),
        ("tf/staging.tfvars", TFVARS),
        (
            "tf/patches/vip.yaml.tftpl",
            "machine:\n  network:\n    interfaces:\n      - vip:\n          ip: ${vip}\n",
        ),
        (
            "tf/patches/when.yaml.tftpl",
            "%{ if on }\ncluster:\n  allowSchedulingOnControlPlanes: true\n%{ endif }\n",
        ),
    ]);
    // The VIP written from a data source is set aside; the rest of that patch is read.
    assert_eq!(tf.talos_patches.len(), 2, "{:?}", tf.talos_skipped);
    let unknown: Vec<String> = tf.talos_unknown.iter().map(ToString::to_string).collect();
    assert!(
        unknown.iter().all(|u| u.starts_with("tf/patches/vip.yaml.tftpl:5: v1alpha1 machine.network.interfaces[0].vip.ip is written by the templatefile interpolation `${vip}`")),
        "{unknown:?}"
    );
    let skipped = tf.talos_skipped.join("\n");
    assert_eq!(tf.talos_skipped.len(), 3, "{skipped}");
    assert!(
        skipped.contains(
            "tf/patches/vip.yaml.tftpl:5: `${vip}` has no value among the templatefile variables"
        ),
        "{skipped}"
    );
    assert!(
        skipped.contains("the directive `%{ if on }` reads `on`, which gates cannot evaluate"),
        "{skipped}"
    );
    assert!(
        skipped.contains("tf/main.tf:20: `local.extra_patch` is not evaluated"),
        "{skipped}"
    );
}

#[test]
fn a_patch_without_a_node_or_role_is_skipped_rather_than_applied_to_everyone() {
    let main = with_main(
        r#"resource "talos_machine_configuration_apply" "one" {
  node           = "10.0.50.11"
  config_patches = [yamlencode({ cluster = { allowSchedulingOnControlPlanes = true } })]
}
"#,
    );
    let tf = read(&[("tf/main.tf", &main), ("tf/staging.tfvars", TFVARS)]);
    assert!(tf.talos_patches.is_empty());
    assert!(
        tf.talos_skipped[0].starts_with("tf/main.tf:12: talos_machine_configuration_apply.one config_patches not read: which nodes they apply to is not declared"),
        "{:?}",
        tf.talos_skipped
    );
}

#[test]
fn a_missing_or_malformed_patch_file_is_an_error_naming_the_file_and_line() {
    let main = with_main(
        r#"resource "talos_machine_configuration_apply" "cp" {
  machine_type   = "controlplane"
  config_patches = [file("${path.module}/patches/cp.yaml")]
}
"#,
    );
    let tf = read(&[
        ("tf/main.tf", &main),
        ("tf/staging.tfvars", TFVARS),
        (
            "tf/patches/cp.yaml",
            "cluster:\n  allowSchedulingOnControlPlanes: [true\n",
        ),
    ]);
    let err = tf.talos_malformed.expect("an error");
    assert!(err.to_string().starts_with("tf/patches/cp.yaml:"), "{err}");
    assert!(err.message.contains("malformed YAML"), "{err}");
    let tf = read(&[("tf/main.tf", &main), ("tf/staging.tfvars", TFVARS)]);
    let err = tf.talos_malformed.expect("an error");
    assert!(
        err.to_string()
            .starts_with("tf/patches/cp.yaml: cannot read"),
        "{err}"
    );
    let tf = read(&[
        ("tf/main.tf", &main),
        ("tf/staging.tfvars", TFVARS),
        ("tf/patches/cp.yaml", "- not a mapping\n"),
    ]);
    assert!(
        tf.talos_malformed
            .unwrap()
            .message
            .contains("must be a YAML mapping")
    );
}

#[test]
fn a_heredoc_patch_without_interpolation_is_read_at_its_lines() {
    let main = with_main(
        r#"resource "talos_machine_configuration_apply" "w" {
  machine_type = "worker"
  config_patches = [
    <<-EOT
    machine:
      nodeTaints:
        dedicated: storage:NoSchedule
    EOT
  ]
}
"#,
    );
    let tf = read(&[("tf/main.tf", &main), ("tf/staging.tfvars", TFVARS)]);
    assert_eq!(tf.talos_patches.len(), 1, "{:?}", tf.talos_skipped);
    let taint = tf.talos_patches[0]
        .doc
        .get(&["machine", "nodeTaints", "dedicated"])
        .unwrap();
    assert_eq!(taint.site.to_string(), "tf/main.tf:16");
    assert_eq!(tf.talos_patches[0].applies, Applies::Workers);
}

#[test]
fn a_conditional_list_of_patches_takes_the_branch_of_each_node_and_templates_render_as_terraform_does()
 {
    // The shape of a real module: per-role templates chosen by a conditional, an extra list
    // joined by `concat`, a template with `%{ if }` and `indent`, and a module input read by
    // `file()` relative to `path.module`.
    let main = with_main(
        r#"locals {
  extra = file("${path.module}/../common/extra.yaml")
}

data "talos_machine_configuration" "node" {
  for_each     = var.nodes
  machine_type = each.value.role == "control-plane" ? "controlplane" : "worker"
  config_patches = each.value.role == "control-plane" ? [
    templatefile("${path.module}/cp.yaml.tftpl", { zone = each.value.host, extra = local.extra, vip = "" }),
  ] : concat([templatefile("${path.module}/cp.yaml.tftpl", { zone = each.value.host, extra = "", vip = "" })], [])
}
"#,
    );
    let tfvars = r#"nodes = {
  cp-01 = { host = "pve1", role = "control-plane" }
  wk-01 = { host = "pve2", role = "worker" }
}
"#;
    let template = "machine:\n  nodeLabels:\n    topology.kubernetes.io/zone: ${zone}\n%{ if extra != \"\" ~}\n    extra: |\n      ${indent(6, extra)}\n%{ endif ~}\n";
    let tf = read(&[
        ("tf/main.tf", &main),
        ("tf/staging.tfvars", tfvars),
        ("tf/cp.yaml.tftpl", template),
        ("common/extra.yaml", "a: 1\nb: 2"),
    ]);
    assert!(tf.talos_skipped.is_empty(), "{:?}", tf.talos_skipped);
    assert_eq!(tf.talos_patches.len(), 2);
    let cp = &tf.talos_patches[0];
    assert_eq!(cp.applies, Applies::Node("cp-01".to_string()));
    let labels = cp.doc.get(&["machine", "nodeLabels"]).unwrap();
    assert_eq!(
        labels.get_str(&["topology.kubernetes.io/zone"]),
        Some("pve1")
    );
    assert_eq!(labels.get_str(&["extra"]), Some("a: 1\nb: 2\n"));
    let worker = tf.talos_patches[1]
        .doc
        .get(&["machine", "nodeLabels"])
        .unwrap();
    assert_eq!(worker.get_str(&["extra"]), None);
}

#[test]
fn a_file_outside_the_repository_is_refused_by_the_terraform_file_function() {
    let main = with_main(
        r#"data "talos_machine_configuration" "node" {
  for_each       = var.nodes
  machine_type   = "controlplane"
  config_patches = [yamlencode({ machine = { nodeLabels = { x = file("${path.module}/../../../etc/hostname") } } })]
}
"#,
    );
    let tf = read(&[("tf/main.tf", &main), ("tf/staging.tfvars", TFVARS)]);
    assert!(tf.talos_patches.is_empty());
    assert!(
        tf.talos_skipped
            .join("\n")
            .contains("leaves the repository"),
        "{:?}",
        tf.talos_skipped
    );
}
