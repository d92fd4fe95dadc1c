//! The declared state: what one repository says about each of its environments, read once
//! with positions. Each part is read independently, so a malformed Terraform file makes the
//! trials that need Terraform give `error` naming that file while the Kubernetes trials still
//! run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::flux::{self, Manifests};
use super::site::RepoError;
use super::talos::{self, Patches};
use super::terraform::{self, Terraform, Vm};
use crate::config::RepoSpec;

/// Where each part of each environment lives in the repository.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    /// The repository's environments: those with a Flux entry directory, and the one a
    /// `repo` section names with Terraform or Talos but no manifests (a Terraform-only
    /// repository).
    pub names: Vec<String>,
    /// Environment name → Flux entry directory.
    pub kubernetes: BTreeMap<String, String>,
    pub terraform: Option<String>,
    pub tfvars: BTreeMap<String, String>,
    pub talos: BTreeMap<String, String>,
    /// The Flux GitRepository names that are this repository.
    pub sources: Vec<String>,
    /// The VM tags that name each role.
    pub roles: crate::config::RoleTags,
    /// The variables Jinja Talos templates are rendered with, per role.
    pub template_env: Option<crate::config::TemplateEnv>,
}

impl Layout {
    /// The spec's choices, with the usual Flux layout filling what it leaves out.
    pub fn resolve(root: &Path, spec: &RepoSpec) -> Layout {
        let mut kubernetes = spec.kubernetes.clone();
        if kubernetes.is_empty() {
            kubernetes = subdirectories(&root.join("clusters"))
                .into_iter()
                .map(|name| (name.clone(), format!("clusters/{name}")))
                .collect();
        }
        let terraform = spec.terraform.clone().or_else(|| {
            root.join("terraform")
                .is_dir()
                .then(|| "terraform".to_string())
        });
        let mut names: Vec<String> = kubernetes.keys().cloned().collect();
        let declared_elsewhere = spec.tfvars.keys().chain(spec.talos.keys()).cloned();
        let own = spec
            .environment
            .clone()
            .filter(|_| terraform.is_some() || !spec.talos.is_empty());
        for name in declared_elsewhere.chain(own) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names.sort();
        let mut tfvars = BTreeMap::new();
        let mut talos = BTreeMap::new();
        for env in &names {
            let given = spec.tfvars.get(env).cloned().or_else(|| {
                let tf = terraform.as_deref()?;
                [
                    format!("{tf}/environments/{env}.tfvars"),
                    format!("{tf}/{env}.tfvars"),
                ]
                .into_iter()
                .find(|f| root.join(f).is_file())
            });
            tfvars.extend(given.map(|f| (env.clone(), f)));
            let patches = spec.talos.get(env).cloned().or_else(|| {
                root.join(format!("talos/{env}"))
                    .is_dir()
                    .then(|| format!("talos/{env}"))
            });
            talos.extend(patches.map(|d| (env.clone(), d)));
        }
        let mut sources = vec!["flux-system".to_string()];
        sources.extend(spec.sources.iter().cloned());
        Layout {
            roles: spec.roles.clone().unwrap_or_default(),
            template_env: spec.template_env.clone(),
            sources,
            names,
            kubernetes,
            terraform,
            tfvars,
            talos,
        }
    }
}

fn subdirectories(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

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
    pub roles: crate::config::RoleTags,
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
fn role(vm: &Vm, roles: &crate::config::RoleTags) -> Option<bool> {
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

/// The patches Terraform applies join those of the patch directory, after them: Talos applies
/// a node's patches in order, and the provider's come with the configuration it applies.
fn with_terraform_patches(
    talos: Option<Result<Patches, RepoError>>,
    terraform: Option<&Result<Terraform, RepoError>>,
    nodes: &[String],
) -> Option<Result<Patches, RepoError>> {
    let Some(Ok(tf)) = terraform else {
        return talos;
    };
    if let Some(err) = &tf.talos_malformed {
        return Some(Err(err.clone()));
    }
    if tf.talos_patches.is_empty() && tf.talos_skipped.is_empty() && tf.talos_unknown.is_empty() {
        return talos;
    }
    let mut patches = match talos {
        Some(Err(err)) => return Some(Err(err)),
        Some(Ok(p)) => p,
        None => Patches::default(),
    };
    for patch in &tf.talos_patches {
        if let talos::Applies::Node(node) = &patch.applies
            && !nodes.contains(node)
        {
            patches.skipped.push(format!(
                "{}: a Terraform Talos patch for `{node}`, which is not a declared VM name, is not applied to any node",
                patch.doc.site
            ));
            continue;
        }
        patches.patches.push(talos::Patch {
            file: patch.file.clone(),
            applies: patch.applies.clone(),
            doc: patch.doc.clone(),
        });
    }
    patches.skipped.extend(tf.talos_skipped.iter().cloned());
    patches.unknown.extend(tf.talos_unknown.iter().cloned());
    Some(Ok(patches))
}

/// Read every environment of the repository at `root`.
pub fn load(root: &Path, layout: &Layout) -> Declared {
    let environments = layout
        .names
        .iter()
        .map(|name| {
            let terraform = layout
                .terraform
                .as_deref()
                .map(|dir| terraform::load(root, dir, layout.tfvars.get(name).map(String::as_str)));
            let nodes: Vec<String> = match &terraform {
                Some(Ok(tf)) => tf.vms.iter().map(|vm| vm.name().to_string()).collect(),
                _ => Vec::new(),
            };
            let talos = layout
                .talos
                .get(name)
                .map(|dir| talos::load(root, dir, &nodes, layout.template_env.as_ref()));
            let talos = with_terraform_patches(talos, terraform.as_ref(), &nodes);
            let talos_nodes = match &talos {
                Some(Ok(patches)) => patches
                    .nodes
                    .iter()
                    .map(|n| {
                        (
                            Vm {
                                resource: n.declared_by.to_string(),
                                name: n.name.clone(),
                                name_unknown: None,
                                host: None,
                                host_unknown: None,
                                addresses: Vec::new(),
                                machine_type: None,
                                cores: None,
                                memory_mib: None,
                                tags: Vec::new(),
                            },
                            n.control_plane,
                        )
                    })
                    .collect(),
                _ => Vec::new(),
            };
            let env = DeclaredEnv {
                name: name.clone(),
                manifests: layout
                    .kubernetes
                    .get(name)
                    .map(|entry| flux::render_from(root, entry, &layout.sources)),
                terraform,
                talos,
                roles: layout.roles.clone(),
                talos_nodes,
            };
            (name.clone(), env)
        })
        .collect();
    Declared {
        root: root.to_path_buf(),
        environments,
    }
}
