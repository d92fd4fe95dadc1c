//! The declared state: what one repository says about each of its environments, each part
//! read independently by the engine (`repo::declared::load`), so a malformed Terraform file
//! makes the trials that need Terraform give `error` naming that file while the Kubernetes
//! trials still run. Which nodes an environment declares, and their roles, is read here.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::manifests::Manifests;
use super::site::RepoError;
use super::talos::{self, Patches};
use super::terraform::{self, Terraform, Vm};
use crate::config::RoleTags;

/// Everything one repository declares.
#[derive(Debug, Clone)]
pub struct Declared {
    pub root: PathBuf,
    pub environments: BTreeMap<String, DeclaredEnv>,
}

/// One environment of the repository. `None`: the repository has no such part.
#[derive(Debug, Clone)]
pub struct DeclaredEnv {
    pub name: String,
    /// `None`: the repository has no Flux entry directory for this environment.
    pub manifests: Option<Result<Manifests, RepoError>>,
    pub terraform: Option<Result<Terraform, RepoError>>,
    pub talos: Option<Result<Patches, RepoError>>,
    pub roles: RoleTags,
    /// The nodes the Talos configuration declares (talhelper nodes, node files), as VMs
    /// without a host or size, with their roles: used when the repository declares no VMs.
    pub talos_nodes: Vec<(Vm, Option<bool>)>,
}

/// A node the repository declares: a VM and its role.
#[derive(Debug, Clone)]
pub struct DeclaredNode<'a> {
    pub vm: &'a Vm,
    /// `None` when the VM's tags say neither `control-plane` (`controlplane`) nor `worker`.
    pub control_plane: Option<bool>,
}

impl DeclaredNode<'_> {
    pub fn name(&self) -> &str {
        self.vm.name()
    }

    /// Why the node's name is not known, where it is not.
    pub fn name_unknown(&self) -> Option<&RepoError> {
        self.vm.name_unknown.as_ref()
    }

    pub fn host(&self) -> Option<&str> {
        self.vm.host.as_ref().and_then(|h| h.as_str())
    }

    /// Whether a VM resource declares it (not only the Talos configuration).
    pub fn is_vm(&self) -> bool {
        self.vm.resource != talos::NODE_FILE && self.vm.resource != talos::TALHELPER_NODE
    }

    pub fn role(&self) -> &'static str {
        match self.control_plane {
            Some(true) => "control-plane",
            Some(false) => "worker",
            None => "unknown role",
        }
    }
}

impl DeclaredEnv {
    /// The declared nodes, or why they cannot be known.
    pub fn nodes(&self) -> Result<Vec<DeclaredNode<'_>>, NodesUnknown> {
        let from_talos = || {
            (!self.talos_nodes.is_empty()).then(|| {
                self.talos_nodes
                    .iter()
                    .map(|(vm, control_plane)| DeclaredNode {
                        vm,
                        control_plane: *control_plane,
                    })
                    .collect::<Vec<_>>()
            })
        };
        let tf = match &self.terraform {
            None => {
                return from_talos().ok_or_else(|| {
                    NodesUnknown::NotDeclared(
                        "the repository has no Terraform directory and its Talos configuration names no node, so no nodes are declared".to_string(),
                    )
                });
            }
            Some(Err(err)) if err.undeclared => {
                return Err(NodesUnknown::NotDeclared(format!(
                    "the repository does not declare the VMs' inputs: {err} (name the tfvars file in repo.tfvars)"
                )));
            }
            Some(Err(err)) => {
                return Err(NodesUnknown::Unreadable(format!(
                    "the Terraform cannot be read: {err}"
                )));
            }
            Some(Ok(tf)) => tf,
        };
        if !tf.unread_modules.is_empty() {
            return Err(NodesUnknown::Unreadable(format!(
                "the VMs are not all in the repository: {}",
                tf.unread_modules.join("; ")
            )));
        }
        if tf.vms.is_empty() {
            if let Some(nodes) = from_talos() {
                return Ok(nodes);
            }
            return Err(NodesUnknown::NotDeclared(format!(
                "the Terraform declares no {} or {} VM",
                terraform::BPG_VM,
                terraform::TELMATE_VM
            )));
        }
        Ok(tf
            .vms
            .iter()
            .map(|vm| DeclaredNode {
                vm,
                control_plane: role(vm, &self.roles),
            })
            .collect())
    }
}

/// A VM's role from its tags, else from the Talos configuration Terraform applies to it;
/// `None` when the tags name neither role or both, or disagree with that configuration.
fn role(vm: &Vm, roles: &RoleTags) -> Option<bool> {
    let any = |words: &[String]| words.iter().any(|w| vm.has_tag(w));
    let tagged = match (any(&roles.control_plane), any(&roles.worker)) {
        (true, false) => Some(true),
        (false, true) => Some(false),
        (true, true) | (false, false) => None,
    };
    match (tagged, vm.machine_type.as_ref().map(|(role, _)| *role)) {
        (Some(a), Some(b)) if a != b => None,
        (Some(role), _) | (None, Some(role)) => Some(role),
        (None, None) => None,
    }
}

/// Why the declared nodes are not known: not declared at all (skip) or not readable (error).
#[derive(Debug, Clone)]
pub enum NodesUnknown {
    NotDeclared(String),
    Unreadable(String),
}
