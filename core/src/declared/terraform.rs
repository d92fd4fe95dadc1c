//! Terraform as the engine reads it (`repo::terraform`, hcl-edit and hcl-rs): an
//! environment's Proxmox VMs with their host, cores, memory and tags, its variables and their
//! defaults, and the Talos patches the siderolabs/talos provider applies. Every value keeps
//! the file and line it was written at.

use std::collections::BTreeMap;

use super::site::{RepoError, Site};
use super::talos::{Applies, Unknown};
use super::yaml::Node;

/// The VM resource types read, and their provider.
pub const BPG_VM: &str = "proxmox_virtual_environment_vm";
pub const TELMATE_VM: &str = "proxmox_vm_qemu";

/// What Terraform declares for one environment.
#[derive(Debug, Clone, Default)]
pub struct Terraform {
    pub vms: Vec<Vm>,
    /// Every variable of the root and of each local module, with its default.
    pub variables: Vec<Variable>,
    /// Values given to variables: by tfvars (`var.x`) or by a module call (`module.m.var.x`).
    pub module_inputs: BTreeMap<String, Node>,
    /// `talos_client_configuration` endpoints, where declared (an error when they are
    /// written in a way gates does not evaluate).
    pub talos_endpoints: Option<Result<Node, RepoError>>,
    /// Modules whose source is not in the repository: their VMs are not known.
    pub unread_modules: Vec<String>,
    /// VM templates (`template = true`), which are no nodes, each with its file and line.
    pub templates: Vec<String>,
    /// The addresses `talos_machine_configuration_apply` resources configure, with the role
    /// of the configuration and the line of `node`.
    pub applied: Vec<(String, bool, Site)>,
    /// Talos machine-config patches applied by the siderolabs/talos provider.
    pub talos_patches: Vec<TfPatch>,
    /// `config_patches` not read, each with the file, line and reason.
    pub talos_skipped: Vec<String>,
    /// Values of the patches read that a template writes from a variable gates cannot
    /// evaluate.
    pub talos_unknown: Vec<Unknown>,
    /// The first `config_patches` file that is missing or malformed: the Talos patches of
    /// the environment are then unreadable, not partly read.
    pub talos_malformed: Option<RepoError>,
    /// The root module's directory, repository-relative.
    pub dir: String,
}

/// One declared VM (one instance of a `for_each` or `count`).
#[derive(Debug, Clone)]
pub struct Vm {
    pub resource: String,
    /// The VM's name; where it cannot be evaluated (a name known only after apply), the
    /// resource address stands in and [`Vm::name_unknown`] says why.
    pub name: Node,
    pub name_unknown: Option<RepoError>,
    /// The Proxmox node (host) it is placed on.
    pub host: Option<Node>,
    /// Why the host is not known, where its expression cannot be evaluated.
    pub host_unknown: Option<HostUnknown>,
    /// The static addresses its cloud-init configuration gives it (Telmate `ipconfigN`
    /// `ip=`, bpg `initialization.ip_config.ipv4.address`), without the prefix length.
    pub addresses: Vec<String>,
    /// The role the siderolabs/talos provider configures it with: the `machine_type` of the
    /// configuration a `talos_machine_configuration_apply` applies to one of its addresses,
    /// with the line of that apply's `node`.
    pub machine_type: Option<(bool, Site)>,
    pub cores: Option<Node>,
    /// MiB, as both providers take it.
    pub memory_mib: Option<Node>,
    pub tags: Vec<Node>,
}

impl Vm {
    pub fn name(&self) -> &str {
        self.name.as_str().unwrap_or("?")
    }

    pub fn has_tag(&self, tag: &str) -> bool {
        self.tags.iter().any(|t| t.as_str() == Some(tag))
    }
}

/// A host gates cannot evaluate. `same_as`: the expression, qualified by its module, when
/// it reads the same value for every instance (it refers to neither `count`, `each` nor
/// `self`): VMs with the same `same_as` share one host, whatever it is.
#[derive(Debug, Clone)]
pub struct HostUnknown {
    pub error: RepoError,
    pub same_as: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Variable {
    /// `""` for the root module, else the module call's name.
    pub module: String,
    pub name: String,
    pub site: Site,
    pub default: Option<Node>,
}

impl Variable {
    pub fn qualified(&self) -> String {
        if self.module.is_empty() {
            format!("var.{}", self.name)
        } else {
            format!("module.{}.var.{}", self.module, self.name)
        }
    }
}

/// One patch Terraform applies, with the nodes it applies to.
#[derive(Debug, Clone)]
pub struct TfPatch {
    /// Where the patch is written: the HCL file for `yamlencode`, the YAML file for `file()`.
    pub file: String,
    pub applies: Applies,
    pub doc: Node,
}
