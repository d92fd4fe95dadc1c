//! Whether a run may even be planned: chaos allowed by the environment file, `--yes` on
//! production, a Proxmox section to power VMs through, and no earlier run that still owes a
//! restore. Nothing is read from the cluster yet.

use std::path::Path;

use crate::chaos::ChaosOptions;
use crate::chaos::journal;
use crate::chaos::{ChaosError, JournalStep};
use crate::config::{ChaosSpec, Environment, ProxmoxAccess};

/// The environment's chaos settings and Proxmox access, or why a run is refused.
pub fn admit<'e>(
    env: &'e Environment,
    args: &ChaosOptions,
) -> Result<(ChaosSpec, &'e ProxmoxAccess), ChaosError> {
    let spec = match &env.chaos {
        Some(spec) if spec.allowed => spec.clone(),
        _ => {
            return Err(ChaosError::NotAllowed {
                env: env.name.clone(),
                env_file: env.file.clone(),
            });
        }
    };
    if env.gate_name() == "production" && !args.yes {
        return Err(ChaosError::ProductionNeedsYes {
            env: env.name.clone(),
        });
    }
    let access = env.proxmox.as_ref().ok_or_else(|| ChaosError::NoProxmox {
        env: env.name.clone(),
        env_file: env.file.clone(),
    })?;
    Ok((spec, access))
}

/// An earlier run that died owes a restore: that comes before anything else.
pub fn nothing_owed(path: &Path, env: &Environment) -> Result<(), ChaosError> {
    if !path.exists() {
        return Ok(());
    }
    let records = journal::read(path).map_err(ChaosError::journal(&env.name, JournalStep::Read))?;
    match journal::owed_text(&records) {
        Some(owed) => Err(ChaosError::RestoreOwed {
            env: env.name.clone(),
            journal: path.to_path_buf(),
            owed,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::test_support::{args, environment, journal_owing_a_start};

    #[test]
    fn chaos_is_refused_unless_the_environment_file_allows_it() {
        let env = environment("lab", "allowed: false");
        let err = admit(&env, &args()).expect_err("refused");
        let text = err.to_string();
        assert!(
            text.contains("chaos is not allowed on lab")
                && text.contains("environments/lab.yaml")
                && text.contains("chaos: {allowed: true}"),
            "{text}"
        );
        assert_eq!(err.kind(), crate::chaos::ChaosErrorKind::Refused);
    }

    #[test]
    fn production_needs_yes() {
        let env = environment("production", "allowed: true");
        let err = admit(&env, &args()).expect_err("refused");
        assert!(err.to_string().contains("--yes"), "{err}");
        let mut yes = args();
        yes.yes = true;
        assert!(admit(&env, &yes).is_ok());
    }

    #[test]
    fn a_journal_that_owes_a_restore_refuses_the_next_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chaos-lab.journal");
        let env = environment("lab", "allowed: true");
        assert!(
            nothing_owed(&path, &env).is_ok(),
            "no journal, nothing owed"
        );
        journal_owing_a_start(&path);
        let err = nothing_owed(&path, &env).expect_err("refused");
        assert!(err.to_string().contains("gates recover lab"), "{err}");
    }
}
