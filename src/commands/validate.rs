//! `gates validate`: load the whole configuration (every environment and gate file, with the
//! loader's file:line:key errors) and check what can be checked without touching any system:
//! the files an environment names exist, the kubeconfig parses and has the named context, and
//! the repository its `repo` section names is there and its declared state loads.
//! Meant for a pre-commit hook or the first CI step, before credentials are even present.

use gates_core::exit::ExitCode;
use std::path::Path;

use crate::collect::kube::resolve;
use crate::config::{Config, Environment};

/// What validation found about one environment: problems make the exit code 2.
#[derive(Debug, Default)]
pub struct Findings {
    pub problems: Vec<String>,
    pub notes: Vec<String>,
}

/// Local checks of one environment's file references.
pub fn environment(env: &Environment) -> Findings {
    let mut found = Findings::default();
    let file = env.file.display().to_string();
    let must_exist = |problems: &mut Vec<String>, key: &str, path: &Path| {
        let full = resolve(&env.file, path);
        if full.is_file() {
            return Some(full);
        }
        problems.push(format!(
            "{file}: {key}: {} does not exist (paths are relative to the environment file)",
            full.display()
        ));
        None
    };
    if let Some(path) = &env.kube.kubeconfig
        && let Some(full) = must_exist(&mut found.problems, "kube.kubeconfig", path)
    {
        match kube::config::Kubeconfig::read_from(&full) {
            Err(err) => found.problems.push(format!(
                "{file}: kube.kubeconfig: {} is not a kubeconfig: {err}",
                full.display()
            )),
            Ok(kubeconfig) => {
                if let Some(context) = &env.kube.context
                    && !kubeconfig.contexts.iter().any(|c| &c.name == context)
                {
                    let known: Vec<&str> = kubeconfig
                        .contexts
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect();
                    found.problems.push(format!(
                        "{file}: kube.context: `{context}` is not a context of {} (it has: {})",
                        full.display(),
                        known.join(", ")
                    ));
                }
            }
        }
    }
    if let Some(talos) = &env.talos
        && let Some(path) = &talos.talosconfig
    {
        must_exist(&mut found.problems, "talos.talosconfig", path);
    }
    if let Some(proxmox) = &env.proxmox {
        if let Some(path) = &proxmox.token_secret_file {
            must_exist(&mut found.problems, "proxmox.token_secret_file", path);
        }
        if let Some(path) = &proxmox.ca_file {
            must_exist(&mut found.problems, "proxmox.ca_file", path);
        }
        if let Some(var) = &proxmox.token_secret_env
            && std::env::var_os(var).is_none()
        {
            found.notes.push(format!(
                "{file}: proxmox.token_secret_env: ${var} is not set here (needed where gates runs)"
            ));
        }
    }
    for url in &env.ingress.urls {
        if let Some(path) = &url.ca_file {
            must_exist(&mut found.problems, "ingress.urls[].ca_file", path);
        }
    }
    let repo = crate::repo::validate::check(env);
    found.problems.extend(repo.problems);
    found.notes.extend(repo.notes);
    found
}

/// The report of `gates validate` and whether anything is wrong.
pub fn run(config: &Config) -> (String, bool) {
    let mut out = format!(
        "{} gates, {} environments loaded\n",
        config.gates.len(),
        config.environments.len()
    );
    let mut ok = true;
    for env in config.environments.values() {
        let found = environment(env);
        let gates: Vec<String> = config
            .gates_for(env)
            .map(|g| g.number.to_string())
            .collect();
        let sections: Vec<&str> = [
            ("api", env.api.is_some()),
            ("talos", env.talos.is_some()),
            ("proxmox", env.proxmox.is_some()),
            ("chaos", env.chaos.is_some()),
            ("repo", env.repo.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, present)| present.then_some(name))
        .collect();
        out.push_str(&format!(
            "  {}: {} (gates {}; sections: kube{}{})\n",
            env.name,
            if found.problems.is_empty() {
                "ok"
            } else {
                "PROBLEMS"
            },
            if gates.is_empty() {
                "none".to_string()
            } else {
                gates.join(", ")
            },
            if sections.is_empty() { "" } else { ", " },
            sections.join(", ")
        ));
        // Every problem of the run, those of one file together under it.
        for (file, problems) in crate::repo::site::by_file(&found.problems) {
            let indent = match file {
                Some(file) => {
                    out.push_str(&format!("    {file}:\n"));
                    "      "
                }
                None => "    ",
            };
            for problem in problems {
                out.push_str(&format!("{indent}error: {problem}\n"));
            }
        }
        for note in &found.notes {
            out.push_str(&format!("    note: {note}\n"));
        }
        ok &= found.problems.is_empty();
    }
    (out, ok)
}

/// `gates validate`: the report on `out`; 0 when nothing is wrong, else 2.
pub fn command(config: &Config, streams: &mut crate::streams::Streams) -> ExitCode {
    let (text, ok) = run(config);
    streams.print(&text);
    if ok {
        ExitCode::Passed
    } else {
        ExitCode::CannotTell
    }
}
