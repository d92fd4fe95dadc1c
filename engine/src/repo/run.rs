//! Joining the repository trials to a `gates check` run: find the repository (the
//! environment's `repo` section or `--repo`), read its declared state once, name its trials
//! and evaluate the selected ones beside the live trials.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::declared::{self, Declared, Layout};
use super::trials::{self, RepoContext, RepoTrial};
use crate::config::{Config, Environment, RepoSpec};
use crate::runner::TrialResult;
use crate::selection::Asked;
use crate::state::State;

/// A repository read for one run.
pub struct RepoRun {
    pub root: PathBuf,
    pub declared: Declared,
    pub trials: Vec<RepoTrial>,
    /// The environment's own name in the repository.
    pub repo_env: String,
    /// The name of the environment checked, when no `repo.environment` names its
    /// counterpart (otherwise `repo_env`).
    checked: String,
}

/// Why the repository named for a run cannot be read as evidence.
#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    /// `from` says who named it: `--repo`, or `repo.path in FILE`.
    #[error(
        "repository {} not found (from {from}); check the path, or remove it to check without the repository",
        root.display()
    )]
    NotFound { root: PathBuf, from: String },
    #[error(
        "repository {}: no environments found: it has no clusters/ENV directories and {} names no repo.kubernetes entries",
        root.display(),
        env_file.display()
    )]
    NoEnvironments { root: PathBuf, env_file: PathBuf },
    /// The environment checked has no counterpart in the repository: evaluating another in
    /// its place would be a verdict about the wrong cluster.
    #[error(
        "repository {}: it declares the environments {}, and `{wanted}` is not one of them; set repo.environment in {} to the repository's name for this cluster (gates evaluates no other in its place)",
        root.display(),
        found.join(", "),
        env_file.display()
    )]
    EnvironmentNotDeclared {
        root: PathBuf,
        wanted: String,
        found: Vec<String>,
        env_file: PathBuf,
    },
}

/// The repository of `env`, read; `None` when neither the environment nor `--repo` names one.
pub fn prepare(
    config: &Config,
    env: &Environment,
    given: Option<&Path>,
) -> Result<Option<RepoRun>, RepoError> {
    let spec = env.repo.clone().unwrap_or_default();
    let root = match (given, &spec.path) {
        (Some(path), _) => path.to_path_buf(),
        (None, Some(path)) => env
            .file
            .parent()
            .map(|dir| dir.join(path))
            .unwrap_or_else(|| path.clone()),
        (None, None) => return Ok(None),
    };
    if !root.is_dir() {
        let from = if given.is_some() {
            "--repo".to_string()
        } else {
            format!("repo.path in {}", env.file.display())
        };
        return Err(RepoError::NotFound { root, from });
    }
    let layout = Layout::resolve(&root, &spec);
    if layout.names.is_empty() {
        return Err(RepoError::NoEnvironments {
            root,
            env_file: env.file.clone(),
        });
    }
    let repo_env = repo_env_name(env, &spec, &layout.names);
    if !layout.names.contains(&repo_env) {
        return Err(RepoError::EnvironmentNotDeclared {
            root,
            wanted: repo_env,
            found: layout.names.clone(),
            env_file: env.file.clone(),
        });
    }
    let declared = declared::load(&root, &layout);
    let names: Vec<String> = declared.environments.keys().cloned().collect();
    let trials = trials::trials(&config.gates, &config.environments, env, &names, &repo_env);
    let checked = match &spec.environment {
        Some(_) => repo_env.clone(),
        None => env.name.clone(),
    };
    Ok(Some(RepoRun {
        root,
        declared,
        trials,
        repo_env,
        checked,
    }))
}

/// The environment's name in the repository: `repo.environment`; else its own name when the
/// repository declares it; else, for an environment checked `like:` another, that one's when
/// the repository declares it (a lab or a copy of staging, evaluated against staging's
/// directory; the run says so on stderr). Otherwise its own name, which `prepare` refuses.
pub(super) fn repo_env_name(env: &Environment, spec: &RepoSpec, declared: &[String]) -> String {
    if let Some(name) = &spec.environment {
        return name.clone();
    }
    let own = env.name.clone();
    match &env.like {
        Some(like) if !declared.contains(&own) && declared.contains(like) => like.clone(),
        _ => own,
    }
}

impl RepoRun {
    /// Things read and deliberately left out, for stderr.
    pub fn notes(&self) -> Vec<String> {
        let chosen = (self.repo_env != self.checked).then(|| {
            format!(
                "the repository has no environment `{}`; evaluating its `{}` for it (set repo.environment to choose another)",
                self.checked, self.repo_env
            )
        });
        chosen.into_iter().chain(self.declared_notes()).collect()
    }

    fn declared_notes(&self) -> Vec<String> {
        self.declared
            .environments
            .values()
            .flat_map(|env| {
                let manifests = env.manifests.iter().flatten().flat_map(|m| {
                    let unread = m.unread.iter().map(|u| format!("not read: {}", u.error));
                    m.notes.iter().cloned().chain(unread).collect::<Vec<_>>()
                });
                let talos = env
                    .talos
                    .iter()
                    .flatten()
                    .flat_map(|t| t.notes.iter().chain(&t.skipped).cloned());
                manifests.chain(talos).collect::<Vec<_>>()
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    /// The trials the command line selects.
    pub fn selected(&self, asked: &Asked<'_>) -> Vec<&RepoTrial> {
        self.trials
            .iter()
            .filter(|t| asked.selects(&t.name))
            .collect()
    }

    /// Evaluate the selected trials; drift trials compare with `live`.
    pub fn evaluate(
        &self,
        selected: &[&RepoTrial],
        config: &Config,
        env: &Environment,
        live: &State,
    ) -> Vec<TrialResult> {
        selected
            .iter()
            .filter_map(|trial| {
                let declared_env = self.declared.environments.get(&trial.repo_env)?;
                let settings = if trial.drift {
                    env
                } else {
                    settings_for(config, env, &self.repo_env, &trial.repo_env)
                };
                let started = Instant::now();
                let ctx = RepoContext {
                    declared: &self.declared,
                    env: declared_env,
                    settings,
                    live,
                };
                let finding = trials::evaluate(trial, &ctx);
                Some(TrialResult {
                    name: trial.name.clone(),
                    gate: trial.gate,
                    kind: trial.kind().into(),
                    instance: trial.instance().map(str::to_string),
                    finding,
                    duration: started.elapsed(),
                })
            })
            .collect()
    }
}

/// The configuration of a repository environment: the environment being checked when it is
/// that environment's counterpart (`repo.environment`), else the environment file of that
/// name, else one whose `repo.environment` or `like:` names it, else the one being checked.
fn settings_for<'a>(
    config: &'a Config,
    env: &'a Environment,
    repo_env: &str,
    name: &str,
) -> &'a Environment {
    if repo_env == name {
        return env;
    }
    trials::configured(&config.environments, name).unwrap_or(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        Config::load(
            &Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("gates"),
            &[],
        )
        .expect("the shipped configuration loads")
    }

    #[test]
    fn a_repository_that_is_not_there_names_the_path_and_who_named_it() {
        let config = config();
        let env = config.environment("staging").unwrap();
        let err = prepare(&config, env, Some(Path::new("no-such-repo")))
            .err()
            .expect("refused");
        assert!(matches!(err, RepoError::NotFound { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("repository no-such-repo not found (from --repo)")
                && text.contains("check the path"),
            "{text}"
        );
    }

    /// A repository whose environments have other names than the configuration's, with one
    /// per directory under `clusters/`.
    fn repo_with(names: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for name in names {
            let entry = dir.path().join("clusters").join(name);
            std::fs::create_dir_all(&entry).unwrap();
            std::fs::write(entry.join("kustomization.yaml"), "resources: []\n").unwrap();
        }
        dir
    }

    fn trial_names(run: &RepoRun) -> Vec<&str> {
        run.trials.iter().map(|t| t.name.as_str()).collect()
    }

    #[test]
    fn an_environment_named_by_repo_environment_takes_every_gate_of_the_environment_checked() {
        let config = config();
        let mut env = config.environment("staging").unwrap().clone();
        env.repo = Some(RepoSpec {
            environment: Some("main".into()),
            ..RepoSpec::default()
        });
        let repo = repo_with(&["main"]);
        let run = prepare(&config, &env, Some(repo.path())).unwrap().unwrap();
        let names = trial_names(&run);
        for expected in [
            "gate1::main::repo::control-plane-nodes",
            "gate2::main::repo::replicated-controller::traefik",
            "gate3::main::repo::l2-announcement",
            "gate1::staging::drift::control-plane-nodes",
        ] {
            assert!(names.contains(&expected), "{expected} missing: {names:?}");
        }
        assert_eq!(run.repo_env, "main");
    }

    #[test]
    fn an_environment_checked_like_another_gets_the_repository_trials_of_the_gates_it_takes() {
        let config = config();
        let mut env = config.environment("staging").unwrap().clone();
        env.name = "canary".into();
        env.like = Some("staging".into());
        let repo = repo_with(&["canary", "staging"]);
        let run = prepare(&config, &env, Some(repo.path())).unwrap().unwrap();
        let names = trial_names(&run);
        assert_eq!(run.repo_env, "canary", "its own directory, not staging's");
        assert!(
            names.contains(&"gate1::canary::repo::control-plane-nodes")
                && names.contains(&"gate2::canary::repo::replicated-controller::traefik"),
            "{names:?}"
        );
        // Without a directory of its own, the one it is checked like, said on stderr.
        let repo = repo_with(&["staging"]);
        let run = prepare(&config, &env, Some(repo.path())).unwrap().unwrap();
        assert_eq!(run.repo_env, "staging");
        assert!(
            run.notes()
                .iter()
                .any(|n| n.contains("no environment `canary`; evaluating its `staging`")),
            "{:?}",
            run.notes()
        );
    }

    #[test]
    fn a_repository_without_the_environment_checked_is_refused_naming_what_it_declares() {
        let config = config();
        let env = config.environment("staging").unwrap();
        let repo = repo_with(&["main", "test"]);
        let err = prepare(&config, env, Some(repo.path()))
            .err()
            .expect("refused, not another environment evaluated in its place");
        let text = err.to_string();
        assert!(
            text.contains("declares the environments main, test")
                && text.contains("`staging` is not one of them")
                && text.contains("set repo.environment"),
            "{text}"
        );
    }

    /// A Terraform-only repository with `main_tf` as its root module, mapped to `main`: the
    /// finding of its trial `name`, evaluated offline.
    fn terraform_only(main_tf: &str, name: &str) -> (RepoRun, crate::verdict::Finding) {
        let config = config();
        let mut env = config.environment("staging").unwrap().clone();
        env.repo = Some(RepoSpec {
            environment: Some("main".into()),
            terraform: Some(".".into()),
            ..RepoSpec::default()
        });
        let repo = tempfile::tempdir().unwrap();
        std::fs::write(repo.path().join("main.tf"), main_tf).unwrap();
        let run = prepare(&config, &env, Some(repo.path())).unwrap().unwrap();
        let trial = run
            .trials
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no trial {name}"));
        let live = State::empty(
            crate::state::Source::Snapshot { files: vec![] },
            chrono::Utc::now(),
        );
        let mut results = run.evaluate(&[trial], &config, &env, &live);
        let finding = results.remove(0).finding;
        (run, finding)
    }

    #[test]
    fn a_terraform_only_repository_is_an_environment_whose_manifest_trials_skip() {
        let (run, finding) = terraform_only("locals {}\n", "gate3::main::repo::l2-announcement");
        assert!(run.declared.environments["main"].manifests.is_none());
        assert!(
            finding.verdict == crate::verdict::Verdict::Skip
                && finding
                    .summary
                    .contains("declares no Kubernetes manifests for main"),
            "{finding:?}"
        );
    }

    #[test]
    fn vms_tagged_ctrl_are_control_planes_and_a_vm_with_both_roles_has_none() {
        let vm = |name: &str, host: &str, tags: &str| {
            format!(
                "resource \"proxmox_virtual_environment_vm\" \"{name}\" {{\n  name = \"{name}\"\n  node_name = \"{host}\"\n  tags = [{tags}]\n}}\n"
            )
        };
        let three = [
            vm("c1", "pve1", "\"ctrl\""),
            vm("c2", "pve2", "\"talos\", \"ctrl\""),
            vm("c3", "pve3", "\"controller\""),
        ]
        .concat();
        let (_, finding) = terraform_only(&three, "gate1::main::repo::control-plane-nodes");
        assert_eq!(
            finding.verdict,
            crate::verdict::Verdict::Pass,
            "{finding:?}"
        );
        let both = three + &vm("w1", "pve1", "\"worker\", \"master\"");
        let (_, finding) = terraform_only(&both, "gate1::main::repo::control-plane-nodes");
        assert!(
            finding.verdict == crate::verdict::Verdict::Error
                && finding.summary.contains("repo.roles"),
            "{finding:?}"
        );
    }

    #[test]
    fn a_module_whose_inputs_the_repository_does_not_set_skips_its_vm_trials_saying_so() {
        let (_, finding) = terraform_only(
            "variable \"cluster\" {}\nresource \"proxmox_virtual_environment_vm\" \"cp\" {\n  for_each = var.cluster\n  name = each.key\n}\n",
            "gate1::main::repo::control-plane-nodes",
        );
        assert!(
            finding.verdict == crate::verdict::Verdict::Skip
                && finding.summary.contains("does not declare")
                && finding.summary.contains("var.cluster has no value"),
            "{finding:?}"
        );
    }

    #[test]
    fn a_repository_without_environments_names_it_and_the_environment_file() {
        let config = config();
        let env = config.environment("staging").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let err = prepare(&config, env, Some(dir.path()))
            .err()
            .expect("refused");
        assert!(matches!(err, RepoError::NoEnvironments { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains(&dir.path().display().to_string())
                && text.contains("environments/staging.yaml")
                && text.contains("repo.kubernetes"),
            "{text}"
        );
    }
}
