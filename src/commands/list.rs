//! `gates list`: the gates, the environments and the check kinds, as the configuration has them.

use crate::config::{Config, EnvironmentSet};

/// The listing `gates list` prints.
pub fn list(config: &Config) -> String {
    let mut out = String::from("Gates:\n");
    for gate in &config.gates {
        let applies = match &gate.environments {
            EnvironmentSet::All => "every environment".to_string(),
            EnvironmentSet::Only(names) => names.join(", "),
        };
        out.push_str(&format!(
            "  gate {}: {}\n    applies to: {applies}\n",
            gate.number, gate.title
        ));
        for check in &gate.checks {
            match check.instance() {
                Some(instance) => out.push_str(&format!("    - {} ({instance})\n", check.kind())),
                None => out.push_str(&format!("    - {}\n", check.kind())),
            }
        }
    }
    out.push_str("Environments:\n");
    for env in config.environments.values() {
        let like = env
            .like
            .as_deref()
            .map(|l| format!(" (checked like {l})"))
            .unwrap_or_default();
        out.push_str(&format!("  {}{like}: {}\n", env.name, env.description));
    }
    out.push_str("Check kinds:\n");
    for (kind, about) in crate::checks::KINDS {
        out.push_str(&format!("  {kind}: {about}\n"));
    }
    out
}
