//! One rollout gate of the ADR, read from `gates/<adr>/*.yaml`.

use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

use crate::checks::CheckSpec;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gate {
    #[serde(rename = "gate")]
    pub number: u32,
    /// The ADR's own words for the gate.
    pub title: String,
    pub environments: EnvironmentSet,
    pub checks: Vec<CheckSpec>,
    /// What other commands use this gate for (`roles: [chaos-preflight]`), so that no command
    /// has to know a gate by its number.
    #[serde(default)]
    pub roles: Vec<GateRole>,
    /// The file it came from; set by the loader.
    #[serde(skip)]
    pub file: PathBuf,
}

/// What a gate is used for beyond its own trials, declared in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GateRole {
    /// Must pass on the live state before `gates chaos` may power anything off.
    ChaosPreflight,
    /// Its `replicated-controller` checks name the controllers the chaos step probes during
    /// the outage and requires healthy again before it calls the cluster recovered.
    ChaosProtected,
    /// Proven by `gates chaos`: the chaos report's trials carry this gate's number and title.
    ChaosProof,
}

impl Gate {
    /// Whether the gate file declares this role.
    pub fn has(&self, role: GateRole) -> bool {
        self.roles.contains(&role)
    }

    pub fn applies_to(&self, gate_name: &str) -> bool {
        match &self.environments {
            EnvironmentSet::All => true,
            EnvironmentSet::Only(names) => names.iter().any(|n| n == gate_name),
        }
    }
}

/// `all`, or a list of environment names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvironmentSet {
    All,
    Only(Vec<String>),
}

impl<'de> Deserialize<'de> for EnvironmentSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SetVisitor;
        impl<'de> Visitor<'de> for SetVisitor {
            type Value = EnvironmentSet;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`all` or a list of environment names such as [staging]")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<EnvironmentSet, E> {
                if v == "all" {
                    Ok(EnvironmentSet::All)
                } else {
                    Err(E::custom(format!(
                        "environments must be `all` or a list such as [{v}], not the bare string {v:?}"
                    )))
                }
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<EnvironmentSet, A::Error> {
                let mut names = Vec::new();
                while let Some(name) = seq.next_element::<String>()? {
                    names.push(name);
                }
                Ok(EnvironmentSet::Only(names))
            }
        }
        deserializer.deserialize_any(SetVisitor)
    }
}
