//! Whether snapshot files may stand for an environment: a file written by `gates snapshot`
//! says which environment and cluster it was taken from, and `check ENV --snapshot FILE`
//! refuses a file of another environment or another cluster (or files of two clusters at
//! once) instead of evaluating ENV's gates on someone else's evidence. kubectl output
//! records nothing, so it is accepted with a note that its origin cannot be proved.

use std::path::PathBuf;

use crate::state::provenance::{ClusterIdentity, Provenance, Sameness};

/// Why snapshot files may not stand for the environment being checked.
#[derive(Debug, thiserror::Error)]
pub enum ForeignSnapshot {
    #[error(
        "{} was written for environment {recorded} ({described}), not for {env}: take one with `gates snapshot {env} -o FILE`",
        file.display()
    )]
    OtherEnvironment {
        file: PathBuf,
        env: String,
        recorded: String,
        described: String,
    },
    #[error(
        "{} is of another cluster than the one {env}'s kubeconfig names: {}",
        file.display(),
        differences.join("; ")
    )]
    OtherCluster {
        file: PathBuf,
        env: String,
        differences: Vec<String>,
    },
    #[error(
        "{} and {} are of different clusters: {}",
        first.display(),
        second.display(),
        differences.join("; ")
    )]
    TwoClusters {
        first: PathBuf,
        second: PathBuf,
        differences: Vec<String>,
    },
}

/// The notes to print when the files are admitted, or why they are refused.
pub fn admit(
    env: &str,
    expected: &ClusterIdentity,
    files: &[PathBuf],
    recorded: &[(PathBuf, Provenance)],
) -> Result<Vec<String>, ForeignSnapshot> {
    let mut notes = Vec::new();
    for file in files {
        if !recorded.iter().any(|(f, _)| f == file) {
            notes.push(format!(
                "{} records no origin (kubectl output?): that it shows {env}'s cluster cannot be proved",
                file.display()
            ));
        }
    }
    for (file, provenance) in recorded {
        if provenance.environment != env {
            return Err(ForeignSnapshot::OtherEnvironment {
                file: file.clone(),
                env: env.to_string(),
                recorded: provenance.environment.clone(),
                described: provenance.describe(),
            });
        }
        match provenance.cluster.compare(expected) {
            Sameness::Different(parts) => {
                return Err(ForeignSnapshot::OtherCluster {
                    file: file.clone(),
                    env: env.to_string(),
                    differences: parts,
                });
            }
            Sameness::Unknown(_) => notes.push(format!(
                "{}: its cluster could not be verified against {env}'s kubeconfig (no CA readable here)",
                file.display()
            )),
            Sameness::Same => {}
        }
    }
    for pair in recorded.windows(2) {
        let ((a, pa), (b, pb)) = (&pair[0], &pair[1]);
        if let Sameness::Different(parts) = pa.cluster.compare(&pb.cluster) {
            return Err(ForeignSnapshot::TwoClusters {
                first: a.clone(),
                second: b.clone(),
                differences: parts,
            });
        }
    }
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::provenance::Topology;

    fn record(env: &str, uid: &str) -> Provenance {
        Provenance {
            environment: env.into(),
            collected_at: chrono::Utc::now(),
            cluster: ClusterIdentity {
                kube_system_uid: Some(uid.into()),
                api_ca_sha256: Some(format!("ca-of-{uid}")),
                etcd_members: None,
            },
            topology: Topology::default(),
        }
    }

    fn ca(of: &str) -> ClusterIdentity {
        ClusterIdentity {
            api_ca_sha256: Some(format!("ca-of-{of}")),
            ..Default::default()
        }
    }

    #[test]
    fn a_snapshot_of_another_environment_is_refused_naming_both() {
        let file = PathBuf::from("prod.json");
        let err = admit(
            "staging",
            &ca("uid-1"),
            std::slice::from_ref(&file),
            &[(file.clone(), record("production", "uid-1"))],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("prod.json was written for environment production")
                && err.contains("not for staging"),
            "{err}"
        );
    }

    #[test]
    fn a_snapshot_of_another_cluster_is_refused_naming_both_values() {
        let file = PathBuf::from("old.json");
        let err = admit(
            "staging",
            &ca("uid-2"),
            std::slice::from_ref(&file),
            &[(file.clone(), record("staging", "uid-1"))],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("ca-of-uid-1 vs ca-of-uid-2"), "{err}");
    }

    #[test]
    fn snapshots_of_two_clusters_are_refused_together() {
        let (a, b) = (PathBuf::from("a.json"), PathBuf::from("b.json"));
        let err = admit(
            "staging",
            &ClusterIdentity::default(),
            &[a.clone(), b.clone()],
            &[
                (a, record("staging", "uid-1")),
                (b, record("staging", "uid-2")),
            ],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("a.json and b.json are of different clusters"),
            "{err}"
        );
    }

    #[test]
    fn kubectl_output_is_accepted_with_a_note() {
        let notes = admit("staging", &ca("x"), &[PathBuf::from("core.json")], &[]).unwrap();
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("cannot be proved"), "{notes:?}");
    }
}
