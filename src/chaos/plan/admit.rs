//! Whether a run may even be planned: chaos allowed by the environment file, `--yes` on
//! production, a Proxmox section to power VMs through, and no earlier run that still owes a
//! restore. Nothing is read from the cluster yet.

use std::path::Path;

use crate::chaos::ChaosError;
use crate::chaos::journal;
use crate::cli::ChaosArgs;
use crate::config::{ChaosSpec, Environment, ProxmoxAccess};

/// The environment's chaos settings and Proxmox access, or why a run is refused.
pub fn admit<'e>(
    env: &'e Environment,
    args: &ChaosArgs,
) -> Result<(ChaosSpec, &'e ProxmoxAccess), ChaosError> {
    let spec = match &env.chaos {
        Some(spec) if spec.allowed => spec.clone(),
        _ => {
            return Err(ChaosError::Refused(format!(
                "chaos is not allowed on {}: its file {} must say `chaos: {{allowed: true}}`",
                env.name,
                env.file.display()
            )));
        }
    };
    if env.gate_name() == "production" && !args.yes {
        return Err(ChaosError::Refused(format!(
            "{} is a production environment: the chaos step needs --yes",
            env.name
        )));
    }
    let access = env.proxmox.as_ref().ok_or_else(|| {
        ChaosError::Refused(format!(
            "{} has no proxmox section: the chaos step powers VMs off through Proxmox",
            env.file.display()
        ))
    })?;
    Ok((spec, access))
}

/// An earlier run that died owes a restore: that comes before anything else.
pub fn nothing_owed(path: &Path, env: &Environment) -> Result<(), ChaosError> {
    if !path.exists() {
        return Ok(());
    }
    let records = journal::read(path).map_err(|e| ChaosError::Failed(e.to_string()))?;
    match journal::owed_text(&records) {
        Some(owed) => Err(ChaosError::Refused(format!(
            "{}: an earlier chaos run has not restored what it stopped ({owed}); run `gates recover {}` first",
            path.display(),
            env.name
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::journal::{Entry, Journal};
    use crate::chaos::test_support::{args, environment, planned_fault};

    #[test]
    fn chaos_is_refused_unless_the_environment_file_allows_it() {
        let env = environment("lab", "allowed: false");
        let err = admit(&env, &args()).expect_err("refused");
        assert!(err.to_string().contains("chaos: {allowed: true}"), "{err}");
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
        let mut journal = Journal::create(&path, &planned_fault("lab")).unwrap();
        journal
            .append(Entry::StopRequested {
                vmid: 201,
                host: "pve2".into(),
            })
            .unwrap();
        let err = nothing_owed(&path, &env).expect_err("refused");
        assert!(err.to_string().contains("gates recover lab"), "{err}");
    }
}
