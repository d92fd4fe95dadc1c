//! A VM's role from the siderolabs/talos provider: a `talos_machine_configuration_apply`
//! applies `data.talos_machine_configuration.NAME.machine_configuration` to `node`, an
//! address; the VM whose static address that is runs with that configuration's
//! `machine_type` (`controlplane` or `worker`). The provider's documentation names these
//! arguments (`machine_type`, `machine_configuration_input`, `node`).

use std::collections::BTreeMap;

use hcl_edit::structure::Block;

use super::{File, Scope, Terraform, eval, instances, label, source};
use crate::repo::site::Site;

/// The `machine_type` of each `data "talos_machine_configuration"` without `for_each` or
/// `count`, by name: `Some(true)` for a control plane.
pub(super) fn machine_types(files: &[File], scope: &Scope) -> BTreeMap<String, bool> {
    let mut out = BTreeMap::new();
    for file in files {
        for block in
            super::blocks(&file.body, "data").filter(|b| label(b, 0) == super::talos_patches::DATA)
        {
            if block.body.get_attribute("for_each").is_some()
                || block.body.get_attribute("count").is_some()
            {
                continue;
            }
            let role = block
                .body
                .get_attribute("machine_type")
                .and_then(|a| eval(&a.value, file, scope).ok())
                .and_then(|n| match n.as_str() {
                    Some("controlplane") => Some(true),
                    Some("worker") => Some(false),
                    _ => None,
                });
            if let Some(role) = role {
                out.insert(label(block, 1), role);
            }
        }
    }
    out
}

/// The addresses one apply resource configures, with the role of the configuration it
/// applies and the line of its `node`.
pub(super) fn applied(
    block: &Block,
    file: &File,
    scope: &Scope,
    types: &BTreeMap<String, bool>,
    out: &mut Vec<(String, bool, Site)>,
) {
    let Some(input) = block.body.get_attribute("machine_configuration_input") else {
        return;
    };
    let text = source(&input.value, file);
    let parts: Vec<&str> = text.trim().split('.').collect();
    let role = match parts.as_slice() {
        [
            "data",
            super::talos_patches::DATA,
            name,
            "machine_configuration",
        ] => types.get(*name),
        _ => None,
    };
    let (Some(&role), Some(node)) = (role, block.body.get_attribute("node")) else {
        return;
    };
    let Ok(instances) = instances(block, file, scope, "talos_machine_configuration_apply") else {
        return;
    };
    for (_, instance) in instances {
        if let Ok(address) = eval(&node.value, file, &instance)
            && let Some(text) = address.as_str()
        {
            out.push((text.to_string(), role, address.site.clone()));
        }
    }
}

/// Give each VM the role of the configuration applied to one of its addresses; a VM two
/// configurations of different roles reach gets none.
pub(super) fn assign(tf: &mut Terraform, applied: &[(String, bool, Site)]) {
    for vm in &mut tf.vms {
        let found: Vec<&(String, bool, Site)> = applied
            .iter()
            .filter(|(address, _, _)| vm.addresses.iter().any(|a| a == address))
            .collect();
        let roles: std::collections::BTreeSet<bool> = found.iter().map(|(_, r, _)| *r).collect();
        if roles.len() == 1 {
            vm.machine_type = found.first().map(|(_, role, site)| (*role, site.clone()));
        }
    }
}
