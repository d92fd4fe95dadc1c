//! Reading and validating the whole configuration directory.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::spans::Node;
use super::yaml;
use gates_core::config::Environment;
use gates_core::config::{ConfigError, ConfigErrors, nearest};
use gates_core::config::{EnvironmentSet, Gate};

/// The validated configuration: every environment and every gate.
#[derive(Debug, Clone)]
pub struct Config {
    pub environments: BTreeMap<String, Environment>,
    /// Sorted by gate number.
    pub gates: Vec<Gate>,
}

impl Config {
    /// Load `<root>/environments/*.yaml`, the extra environment directories, and the gate
    /// files in every other subdirectory of `root` (one per decision, e.g. `adr-007`).
    pub fn load(root: &Path, extra_env_dirs: &[PathBuf]) -> Result<Config, ConfigErrors> {
        let mut errors = Vec::new();
        if !root.is_dir() {
            return Err(ConfigErrors(vec![
                ConfigError::new(root, "configuration directory not found")
                    .hint("run gates from the repository root, or pass --config DIR"),
            ]));
        }
        let mut environments = BTreeMap::new();
        // Environments whose files failed to load still count as known, so one typo is
        // reported once and not again by every gate that names the environment.
        let mut broken = Vec::new();
        let mut env_dirs = vec![root.join("environments")];
        env_dirs.extend(extra_env_dirs.iter().cloned());
        for dir in &env_dirs {
            for file in yaml_files(dir, &mut errors) {
                let Some(env) = load_environment(&file, &mut errors) else {
                    broken.extend(file.file_stem().map(|s| s.to_string_lossy().into_owned()));
                    continue;
                };
                {
                    // A later directory (an --env-dir, such as the one the lab writes)
                    // overrides an environment of the same name from an earlier one.
                    environments.insert(env.name.clone(), env);
                }
            }
        }

        let mut gates = Vec::new();
        for dir in subdirectories(root, &mut errors) {
            if dir.file_name().is_some_and(|n| n == "environments") {
                continue;
            }
            for file in yaml_files(&dir, &mut errors) {
                gates.extend(load_gate(&file, &environments, &broken, &mut errors));
            }
        }
        gates.sort_by_key(|g| g.number);
        for pair in gates.windows(2) {
            if pair[0].number == pair[1].number {
                errors.push(ConfigError::new(
                    &pair[1].file,
                    format!(
                        "gate {} is also defined in {}",
                        pair[1].number,
                        pair[0].file.display()
                    ),
                ));
            }
        }
        check_likes(&environments, &gates, &mut errors);

        if errors.is_empty() {
            Ok(Config {
                environments,
                gates,
            })
        } else {
            Err(ConfigErrors(errors))
        }
    }

    /// The environment by name, or an error that suggests the nearest one.
    pub fn environment(&self, name: &str) -> Result<&Environment, UnknownEnvironment> {
        self.environments.get(name).ok_or_else(|| {
            let known: Vec<&str> = self.environments.keys().map(String::as_str).collect();
            UnknownEnvironment {
                name: name.to_string(),
                nearest: nearest(name, known.iter().copied()).map(str::to_string),
                known: known.iter().map(|k| k.to_string()).collect(),
            }
        })
    }

    /// The gates that apply to an environment, in gate order.
    pub fn gates_for<'a>(&'a self, env: &'a Environment) -> impl Iterator<Item = &'a Gate> + 'a {
        self.gates
            .iter()
            .filter(move |g| g.applies_to(env.gate_name()))
    }
}

fn known_gate_environments(gates: &[Gate]) -> Vec<&str> {
    let mut names: Vec<&str> = gates
        .iter()
        .flat_map(|g| match &g.environments {
            EnvironmentSet::All => Vec::new(),
            EnvironmentSet::Only(names) => names.iter().map(String::as_str).collect(),
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// The longest instance name (`name:` of a check) a trial name may carry: names are shown
/// in terminals, JUnit and file listings, and libtest-mimic cannot print arbitrary lengths.
pub const MAX_INSTANCE_NAME: usize = 100;
/// The longest environment name (the file name without `.yaml`).
pub const MAX_ENVIRONMENT_NAME: usize = 63;

fn validate_gate(
    gate: &Gate,
    tree: &Node,
    environments: &BTreeMap<String, Environment>,
    broken: &[String],
) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    if let Err(error) = validate_gate_environments(gate, tree, environments, broken) {
        errors.push(error);
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (index, check) in gate.checks.iter().enumerate() {
        let trial = match check.instance() {
            Some(instance) => format!("{}::{instance}", check.kind()),
            None => check.kind().to_string(),
        };
        if let Some(instance) = check.instance() {
            if instance.chars().count() > MAX_INSTANCE_NAME {
                errors.push(
                    ConfigError::new(
                        &gate.file,
                        format!(
                            "the name of check {} is {} characters long; at most {MAX_INSTANCE_NAME} are allowed",
                            index + 1,
                            instance.chars().count()
                        ),
                    )
                    .at(tree
                        .at(&["checks", &index.to_string(), "name"])
                        .map(Node::position))
                    .key("name")
                    .hint("a short name such as `coredns` becomes the trial gateN::ENV::KIND::NAME"),
                );
            } else if instance.is_empty()
                || instance
                    .chars()
                    .any(|c| c.is_control() || c.is_whitespace() || c == ':')
            {
                errors.push(
                    ConfigError::new(
                        &gate.file,
                        format!(
                            "the name {instance:?} of check {} cannot be part of a trial name",
                            index + 1
                        ),
                    )
                    .at(tree
                        .at(&["checks", &index.to_string(), "name"])
                        .map(Node::position))
                    .key("name")
                    .hint("use letters, digits, `-`, `_` and `.`, without spaces or `:`"),
                );
            }
        }
        if let Some(first) = seen.insert(trial.clone(), index) {
            errors.push(
                ConfigError::new(
                    &gate.file,
                    format!(
                        "checks {} and {} of gate {} are both `{trial}`: trial names must be unique",
                        first + 1,
                        index + 1,
                        gate.number
                    ),
                )
                .at(tree.at(&["checks", &index.to_string()]).map(Node::position))
                .key("checks")
                .hint("give one of them another `name`"),
            );
        }
    }
    errors
}

fn validate_gate_environments(
    gate: &Gate,
    tree: &Node,
    environments: &BTreeMap<String, Environment>,
    broken: &[String],
) -> Result<(), ConfigError> {
    if let EnvironmentSet::Only(names) = &gate.environments {
        for (index, name) in names.iter().enumerate() {
            let known_as_gate_target =
                environments.values().any(|e| e.gate_name() == name) || broken.contains(name);
            if !known_as_gate_target {
                let known: Vec<&str> = environments.keys().map(String::as_str).collect();
                let mut error = ConfigError::new(
                    &gate.file,
                    format!("unknown environment `{name}` in `environments`"),
                )
                .at(tree
                    .at(&["environments", &index.to_string()])
                    .map(Node::position))
                .key("environments");
                error = match nearest(name, known.iter().copied()) {
                    Some(best) => error.hint(format!(
                        "did you mean `{best}`? (known: {})",
                        known.join(", ")
                    )),
                    None => error.hint(format!(
                        "known: {}; add gates/environments/{name}.yaml to define it",
                        known.join(", ")
                    )),
                };
                return Err(error);
            }
        }
    }
    if gate.checks.is_empty() {
        return Err(
            ConfigError::new(&gate.file, format!("gate {} has no checks", gate.number))
                .at(tree.at(&["checks"]).map(Node::position))
                .key("checks"),
        );
    }
    Ok(())
}

/// One gate file: parsed, checked for what YAML hides and for empty label keys, typed and
/// validated against the environments; `None` with its errors said.
fn load_gate(
    file: &Path,
    environments: &BTreeMap<String, Environment>,
    broken: &[String],
    errors: &mut Vec<ConfigError>,
) -> Option<Gate> {
    let tree = match read(file)
        .map_err(|e| vec![e])
        .and_then(|text| yaml::parse(file, &text))
    {
        Ok(tree) => tree,
        Err(found) => {
            errors.extend(found);
            return None;
        }
    };
    let mut from_tree = super::invisible::check(file, &tree);
    from_tree.extend(super::selectors::empty_label_keys(file, &tree));
    if !from_tree.is_empty() {
        errors.extend(from_tree);
        return None;
    }
    match yaml::typed::<Gate>(file, &tree).map(|mut gate| {
        gate.file = file.to_path_buf();
        gate
    }) {
        Ok(gate) => {
            let found = validate_gate(&gate, &tree, environments, broken);
            if found.is_empty() {
                return Some(gate);
            }
            errors.extend(found);
        }
        Err(error) => errors.push(error),
    }
    None
}

/// Each `like:` must name an environment a gate applies to.
fn check_likes(
    environments: &BTreeMap<String, Environment>,
    gates: &[Gate],
    errors: &mut Vec<ConfigError>,
) {
    for env in environments.values() {
        if let Some(like) = &env.like {
            let known: Vec<&str> = known_gate_environments(gates);
            if !known.contains(&like.as_str()) {
                let text = fs::read_to_string(&env.file).unwrap_or_default();
                let at = super::spans::parse(&text)
                    .ok()
                    .and_then(|tree| tree.at(&["like"]).map(|n| n.position()));
                let mut error = ConfigError::new(
                    &env.file,
                    format!("`like: {like}` names an environment no gate applies to"),
                )
                .at(at)
                .key("like");
                if let Some(best) = nearest(like, known.iter().copied()) {
                    error = error.hint(format!("did you mean `{best}`?"));
                }
                errors.push(error);
            }
        }
    }
}

fn load_environment(file: &Path, errors: &mut Vec<ConfigError>) -> Option<Environment> {
    let name = file.file_stem()?.to_string_lossy().into_owned();
    if name.chars().count() > MAX_ENVIRONMENT_NAME
        || name.is_empty()
        || name
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || c == ':')
    {
        errors.push(
            ConfigError::new(
                file,
                format!(
                    "the environment name (the file name) must be 1 to {MAX_ENVIRONMENT_NAME} characters without spaces or `:`"
                ),
            )
            .hint("rename the file, e.g. staging.yaml"),
        );
        return None;
    }
    let text = match read(file) {
        Ok(text) => text,
        Err(error) => {
            errors.push(error);
            return None;
        }
    };
    let tree = match yaml::parse(file, &text) {
        Ok(tree) => tree,
        Err(found) => {
            errors.extend(found);
            return None;
        }
    };
    // What the tree alone shows is reported with whatever typing finds, all at once.
    let mut from_tree = super::invisible::check(file, &tree);
    from_tree.extend(super::selectors::empty_label_keys(file, &tree));
    let mut env: Environment = match yaml::typed(file, &tree) {
        Ok(env) => env,
        Err(error) => {
            errors.extend(from_tree);
            errors.push(error);
            return None;
        }
    };
    env.name = name;
    env.file = file.to_path_buf();
    let mut found = from_tree;
    found.extend(super::validate::environment(&env, &tree));
    if found.is_empty() {
        Some(env)
    } else {
        errors.extend(found);
        None
    }
}

fn read(file: &Path) -> Result<String, ConfigError> {
    fs::read_to_string(file).map_err(|err| ConfigError::new(file, format!("cannot read: {err}")))
}

fn yaml_files(dir: &Path, errors: &mut Vec<ConfigError>) -> Vec<PathBuf> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) => {
            errors.push(ConfigError::new(
                dir,
                format!("cannot read directory: {err}"),
            ));
            return Vec::new();
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    files
}

fn subdirectories(root: &Path, errors: &mut Vec<ConfigError>) -> Vec<PathBuf> {
    match fs::read_dir(root) {
        Ok(entries) => {
            let mut dirs: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            dirs.sort();
            dirs
        }
        Err(err) => {
            errors.push(ConfigError::new(
                root,
                format!("cannot read directory: {err}"),
            ));
            Vec::new()
        }
    }
}

/// A command named an environment no environment file defines.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown environment `{name}`{hint} (known: {known})",
    hint = nearest.as_ref().map(|n| format!(": did you mean `{n}`?")).unwrap_or_default(),
    known = known.join(", ")
)]
pub struct UnknownEnvironment {
    pub name: String,
    /// The known name closest to the one given, when one is close.
    pub nearest: Option<String>,
    pub known: Vec<String>,
}
