//! The `repo` section of an environment: where its GitOps repository is and how it is laid
//! out. Every key may be left out; the defaults are the usual Flux layout (see
//! `crate::repo::layout`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoSpec {
    /// The repository checkout, relative to the environment file; `--repo PATH` overrides.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// This environment's name in the repository (default: the name its gates use).
    #[serde(default)]
    pub environment: Option<String>,
    /// Per environment of the repository, the directory Flux starts from
    /// (default: each directory under `clusters/`).
    #[serde(default)]
    pub kubernetes: BTreeMap<String, String>,
    /// The Terraform root module (default: `terraform`, when it exists).
    #[serde(default)]
    pub terraform: Option<String>,
    /// Per environment, its tfvars file (default: `terraform/environments/ENV.tfvars`).
    #[serde(default)]
    pub tfvars: BTreeMap<String, String>,
    /// Per environment, its directory of Talos machine-config patches (default: `talos/ENV`).
    #[serde(default)]
    pub talos: BTreeMap<String, String>,
    /// The Flux GitRepository names that are this repository, beside `flux-system` (and any
    /// GitRepository whose URL is the checkout's own `origin`).
    #[serde(default)]
    pub sources: Vec<String>,
    /// The VM tags that name a role, replacing the defaults (control planes: `control-plane`,
    /// `controlplane`, `ctrl`, `controller`, `master`; workers: `worker`).
    #[serde(default)]
    pub roles: Option<RoleTags>,
    /// The variables the repository's render step gives its Jinja Talos templates for each
    /// role, as minijinja-cli's `ENV` (`{control_plane: {MACHINE_TYPE: controlplane}, worker:
    /// {MACHINE_TYPE: worker}}`): with them a template's `if`/`elif`/`else` is rendered per
    /// role; without them a template with control flow is not read.
    #[serde(default)]
    pub template_env: Option<TemplateEnv>,
}

/// Per role, the `ENV` variables a Jinja template is rendered with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplateEnv {
    #[serde(default)]
    pub control_plane: BTreeMap<String, String>,
    #[serde(default)]
    pub worker: BTreeMap<String, String>,
}

impl TemplateEnv {
    /// The variables of one role.
    pub fn of(&self, control_plane: bool) -> &BTreeMap<String, String> {
        match control_plane {
            true => &self.control_plane,
            false => &self.worker,
        }
    }
}

/// The tag words of each role.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleTags {
    pub control_plane: Vec<String>,
    pub worker: Vec<String>,
}

impl Default for RoleTags {
    fn default() -> Self {
        RoleTags {
            control_plane: [
                "control-plane",
                "controlplane",
                "ctrl",
                "controller",
                "master",
            ]
            .map(String::from)
            .to_vec(),
            worker: vec!["worker".to_string()],
        }
    }
}
