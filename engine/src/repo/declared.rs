//! The declared state's reading: where each part of each environment lives ([`Layout`]) and
//! the reading of every part, once, with positions ([`load`]) into core's [`Declared`]. Each
//! part is read independently, so a malformed Terraform file makes the trials that need
//! Terraform give `error` naming that file while the Kubernetes trials still run.

use std::collections::BTreeMap;
use std::path::Path;

use super::flux;
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

// What a repository declares, once read, is pure: it lives in core.
pub use gates_core::declared::environments::{Declared, DeclaredEnv, DeclaredNode, NodesUnknown};

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
