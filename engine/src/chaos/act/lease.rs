//! One chaos run per cluster, whatever the environment is called, across journal paths and
//! across machines. Locally an OS file lock per environment (its name and the cluster it
//! points at), whatever `--reports` or `--journal` say, and, once the cluster's identity is
//! read, one per cluster and endpoint whatever the environment is called; on the cluster one
//! `coordination.k8s.io` Lease named `gates-chaos` in `chaos.lease_namespace`, with the run's
//! id, host, environment and deadline, taken before the first power action and held past the
//! deadline. Two environment files for one cluster therefore share the Lease (give them the
//! same `lease_namespace`), and a second runner anywhere finds it and is refused. The Lease is
//! the only write outside the plan, and "no manual work" lists it.

use std::fs::{self, File, OpenOptions};
use std::io::Write as _;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, PostParams};

use crate::config::Environment;

/// Held by a run (and by `gates recover`) for its whole life; released by the OS even when
/// the process is killed.
pub struct EnvLock {
    _file: File,
    pub path: PathBuf,
}

/// Where the per-environment locks live: `GATES_LOCK_DIR`, else the system's temp dir.
pub fn lock_dir() -> PathBuf {
    std::env::var_os("GATES_LOCK_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("gates-chaos-locks"))
}

/// `chaos-lab-10.0.50.10_6443.lock`: the environment and the cluster it points at, so two
/// environments of the same name on different clusters do not block each other.
pub fn lock_name(env: &Environment) -> String {
    match endpoint(env) {
        None => format!("chaos-{}.lock", safe(&env.name)),
        Some(cluster) => format!("chaos-{}-{cluster}.lock", safe(&env.name)),
    }
}

/// The endpoint the environment reaches its cluster at (the API, else Proxmox), as a file
/// name part.
fn endpoint(env: &Environment) -> Option<String> {
    let cluster = env
        .api
        .as_ref()
        .map(|a| a.endpoint.as_str())
        .or(env.proxmox.as_ref().map(|p| p.url.as_str()))
        .unwrap_or("");
    let cluster = cluster
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    (!cluster.is_empty()).then(|| safe(cluster))
}

/// Why the environment's lock on this machine could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum EnvLockError {
    #[error(
        "a chaos run on {env} is in progress ({holder}) on this machine, whatever its --reports or --journal (lock {}); it restores on its own: interrupt it (Ctrl-C or SIGTERM) instead",
        lock.display()
    )]
    Busy {
        env: String,
        holder: String,
        lock: PathBuf,
    },
    #[error(
        "{}: {source}; the lock directory must be writable (set GATES_LOCK_DIR to move it)",
        path.display()
    )]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// `chaos-cluster-uid-UID-ENDPOINT.lock`: the cluster by its identity (its `kube-system` UID,
/// else its API CA digest) and the endpoint the environment reaches it at, whatever the
/// environment is called; `None` when no part of the identity was read. The endpoint keeps
/// two clusters built from one template (the lab's share namespace UIDs) apart; one cluster
/// reached at two endpoints is kept to one run by its Lease.
pub fn cluster_lock_name(
    env: &Environment,
    cluster: &crate::state::provenance::ClusterIdentity,
) -> Option<String> {
    let key = cluster
        .kube_system_uid
        .as_deref()
        .map(|uid| format!("uid-{uid}"))
        .or_else(|| {
            cluster
                .api_ca_sha256
                .as_deref()
                .map(|ca| format!("ca-{}", &ca[..ca.len().min(32)]))
        })?;
    let at = endpoint(env).map(|e| format!("-{e}")).unwrap_or_default();
    Some(format!("chaos-cluster-{}{at}.lock", safe(&key)))
}

fn safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl EnvLock {
    pub fn acquire(env: &Environment) -> Result<EnvLock, EnvLockError> {
        Self::acquire_at(env, &lock_name(env))
    }

    /// The lock of the cluster `env` points at, once its identity is read: a run on the same
    /// cluster under another environment name on this machine holds it. `Ok(None)` when the
    /// identity is not known (the environment's lock and the Lease still hold).
    pub fn acquire_cluster(
        env: &Environment,
        cluster: &crate::state::provenance::ClusterIdentity,
    ) -> Result<Option<EnvLock>, EnvLockError> {
        match cluster_lock_name(env, cluster) {
            Some(name) => Self::acquire_at(env, &name).map(Some),
            None => Ok(None),
        }
    }

    fn acquire_at(env: &Environment, name: &str) -> Result<EnvLock, EnvLockError> {
        let dir = lock_dir();
        let path = dir.join(name);
        let io = |source: std::io::Error| EnvLockError::Io {
            path: path.clone(),
            source,
        };
        fs::create_dir_all(&dir).map_err(|source| EnvLockError::Io {
            path: dir.clone(),
            source,
        })?;
        #[cfg(unix)]
        {
            // Shared by every user of the machine, like /tmp itself.
            use std::os::unix::fs::PermissionsExt;
            let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(0o1777));
        }
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                let holder = fs::read_to_string(&path).unwrap_or_default();
                let mut words = holder.split_whitespace();
                let holder = match (words.next(), words.next()) {
                    (None, _) => "another process".to_string(),
                    (Some(pid), Some(other)) if other != env.name => {
                        format!("pid {pid}, environment {other}, the same cluster")
                    }
                    (Some(pid), _) => format!("pid {pid}"),
                };
                return Err(EnvLockError::Busy {
                    env: env.name.clone(),
                    holder,
                    lock: path.clone(),
                });
            }
            Err(fs::TryLockError::Error(err)) => return Err(io(err)),
        }
        file.set_len(0).map_err(io)?;
        writeln!(file, "{} {}", std::process::id(), env.name).map_err(io)?;
        Ok(EnvLock { _file: file, path })
    }
}

/// Who is running: the run's id, the machine, and when the run's deadline passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub run_id: String,
    pub host: String,
    pub deadline: DateTime<Utc>,
}

impl Claim {
    pub fn new(deadline: DateTime<Utc>, now: DateTime<Utc>) -> Claim {
        Claim {
            run_id: format!(
                "{}-{}",
                now.format("%Y%m%dT%H%M%S%.3fZ"),
                std::process::id()
            ),
            host: machine_name(),
            deadline,
        }
    }

    fn holder(&self) -> String {
        format!("gates-chaos {} on {}", self.run_id, self.host)
    }
}

/// This machine's name, for the Lease (never a secret).
pub fn machine_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_string())
}

/// The one Lease a cluster's chaos runs share, whatever their environment is called.
pub const LEASE_NAME: &str = "gates-chaos";

pub fn lease_name(_env: &str) -> String {
    LEASE_NAME.to_string()
}

/// Why `existing` keeps this run out, if it does: someone holds it and it has not expired.
pub fn blocker(existing: &Lease, now: DateTime<Utc>) -> Option<String> {
    let spec = existing.spec.as_ref()?;
    let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty())?;
    let renewed = spec
        .renew_time
        .as_ref()
        .or(spec.acquire_time.as_ref())
        .map(|t| t.0.as_second())?;
    let expires = renewed + i64::from(spec.lease_duration_seconds.unwrap_or(0));
    (now.timestamp() < expires).then(|| {
        let deadline = existing
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("gates.dev/deadline"))
            .cloned()
            .unwrap_or_default();
        let at = |t: i64| {
            DateTime::<Utc>::from_timestamp(t, 0)
                .map(|t| t.to_rfc3339())
                .unwrap_or_default()
        };
        let environment = existing
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("gates.dev/environment"))
            .map(|e| format!(" (environment {e})"))
            .unwrap_or_default();
        format!(
            "held by {holder}{environment} until {} (renewed {} for {}s; the run's restore deadline {deadline})",
            at(expires),
            at(renewed),
            spec.lease_duration_seconds.unwrap_or(0)
        )
    })
}

fn micro(t: DateTime<Utc>) -> Option<MicroTime> {
    k8s_openapi::jiff::Timestamp::from_second(t.timestamp())
        .ok()
        .map(MicroTime)
}

/// The Lease for `claim`, held until `until` (past the deadline).
pub fn lease_for(env: &str, claim: &Claim, now: DateTime<Utc>, until: DateTime<Utc>) -> Lease {
    let mut lease = Lease::default();
    lease.metadata.name = Some(lease_name(env));
    lease.metadata.annotations = Some(
        [
            ("gates.dev/run-id", claim.run_id.clone()),
            ("gates.dev/environment", env.to_string()),
            ("gates.dev/host", claim.host.clone()),
            ("gates.dev/deadline", claim.deadline.to_rfc3339()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
    );
    lease.spec = Some(LeaseSpec {
        holder_identity: Some(claim.holder()),
        lease_duration_seconds: Some(
            i32::try_from((until - now).num_seconds().max(1)).unwrap_or(i32::MAX),
        ),
        acquire_time: micro(now),
        renew_time: micro(now),
        ..LeaseSpec::default()
    });
    lease
}

/// The run's Lease, taken.
pub struct RunLease {
    api: Api<Lease>,
    pub namespace: String,
    pub name: String,
    /// The holder identity this run wrote.
    pub holder: String,
    held: Lease,
}

/// The Lease call that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseStep {
    Read,
    Create,
    Take,
    Release,
}

/// Why the environment's Lease on the cluster stops a run, or could not be given up.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// A live run elsewhere holds it (`why` says by whom and until when).
    #[error(
        "a chaos run on {env} is in progress elsewhere: the Lease {namespace}/{name} is {why}; wait for it, or if that run died, `gates recover {env}` frees it (run it where that run ran, with its journal), or let the lease expire"
    )]
    Held {
        env: String,
        namespace: String,
        name: String,
        why: String,
    },
    #[error("another chaos run on {env} took the Lease {namespace}/{name} at the same moment")]
    Raced {
        env: String,
        namespace: String,
        name: String,
    },
    #[error("cannot {} the Lease {namespace}/{name}: {source}; {}", step.doing(), step.fix(namespace))]
    Api {
        step: LeaseStep,
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
}

impl LeaseStep {
    fn doing(self) -> &'static str {
        match self {
            LeaseStep::Read => "read",
            LeaseStep::Create => "create",
            LeaseStep::Take => "take",
            LeaseStep::Release => "release",
        }
    }

    fn fix(self, namespace: &str) -> String {
        match self {
            LeaseStep::Read | LeaseStep::Create | LeaseStep::Take => format!(
                "the run needs create and update on leases.coordination.k8s.io in {namespace} (chaos.lease_namespace)"
            ),
            LeaseStep::Release => "it expires on its own".to_string(),
        }
    }
}

fn api_error(
    step: LeaseStep,
    namespace: &str,
    name: &str,
) -> impl FnOnce(kube::Error) -> LeaseError {
    let (namespace, name) = (namespace.to_string(), name.to_string());
    move |source| LeaseError::Api {
        step,
        namespace,
        name,
        source: Box::new(source),
    }
}

/// Refused when a live run elsewhere holds the environment's Lease. Only reads; a Lease
/// that cannot be read is left to [`RunLease::acquire`] to report.
pub async fn check(
    client: kube::Client,
    env: &str,
    namespace: &str,
    now: DateTime<Utc>,
) -> Result<(), LeaseError> {
    let api: Api<Lease> = Api::namespaced(client, namespace);
    let name = lease_name(env);
    match api.get_opt(&name).await {
        Ok(Some(existing)) => match blocker(&existing, now) {
            Some(why) => Err(busy(env, namespace, &name, &why)),
            None => Ok(()),
        },
        Ok(None) | Err(_) => Ok(()),
    }
}

fn busy(env: &str, namespace: &str, name: &str, why: &str) -> LeaseError {
    LeaseError::Held {
        env: env.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
        why: why.to_string(),
    }
}

fn raced(env: &str, namespace: &str, name: &str) -> LeaseError {
    LeaseError::Raced {
        env: env.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
}

/// Give up the Lease `namespace/name` if `holder` still holds it (for `gates recover`).
pub async fn release_if_held(
    client: kube::Client,
    namespace: &str,
    name: &str,
    holder: &str,
    now: DateTime<Utc>,
) -> Result<bool, LeaseError> {
    let api: Api<Lease> = Api::namespaced(client, namespace);
    let Some(mut lease) =
        api.get_opt(name)
            .await
            .map_err(api_error(LeaseStep::Read, namespace, name))?
    else {
        return Ok(false);
    };
    let Some(spec) = lease.spec.as_mut() else {
        return Ok(false);
    };
    if spec.holder_identity.as_deref() != Some(holder) {
        return Ok(false);
    }
    spec.holder_identity = None;
    spec.renew_time = micro(now);
    spec.lease_duration_seconds = Some(1);
    api.replace(name, &PostParams::default(), &lease)
        .await
        .map(|_| true)
        .map_err(api_error(LeaseStep::Release, namespace, name))
}

impl RunLease {
    /// Take the environment's Lease, or say who holds it. `until` is past the deadline.
    pub async fn acquire(
        client: kube::Client,
        env: &str,
        namespace: &str,
        claim: &Claim,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<RunLease, LeaseError> {
        let api: Api<Lease> = Api::namespaced(client, namespace);
        let name = lease_name(env);
        let mut wanted = lease_for(env, claim, now, until);
        let failed = |step: LeaseStep| {
            let name = name.clone();
            move |err: kube::Error| match &err {
                kube::Error::Api(e) if e.code == 409 => raced(env, namespace, &name),
                _ => api_error(step, namespace, &name)(err),
            }
        };
        let held = match api.get_opt(&name).await {
            Err(err) => return Err(api_error(LeaseStep::Read, namespace, &name)(err)),
            Ok(None) => api
                .create(&PostParams::default(), &wanted)
                .await
                .map_err(failed(LeaseStep::Create))?,
            Ok(Some(existing)) => {
                if let Some(why) = blocker(&existing, now) {
                    return Err(busy(env, namespace, &name, &why));
                }
                wanted.metadata.resource_version = existing.metadata.resource_version.clone();
                api.replace(&name, &PostParams::default(), &wanted)
                    .await
                    .map_err(failed(LeaseStep::Take))?
            }
        };
        Ok(RunLease {
            api,
            namespace: namespace.to_string(),
            name,
            holder: claim.holder(),
            held,
        })
    }

    /// Give the Lease up at the end of the run (holder cleared, the run's annotations kept).
    pub async fn release(self, now: DateTime<Utc>) -> Result<(), LeaseError> {
        let mut lease = self.held;
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
            spec.renew_time = micro(now);
            spec.lease_duration_seconds = Some(1);
        }
        self.api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
            .map_err(api_error(LeaseStep::Release, &self.namespace, &self.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::test_support::environment;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn a_second_environment_name_for_one_cluster_is_refused_by_the_cluster_lock() {
        use crate::state::provenance::ClusterIdentity;
        let uid = format!("test-{}-{}", std::process::id(), line!());
        let cluster = ClusterIdentity {
            kube_system_uid: Some(uid.clone()),
            ..ClusterIdentity::default()
        };
        let lab = environment("lab", "");
        let twin = environment("labtwin", "");
        let held = EnvLock::acquire_cluster(&lab, &cluster)
            .unwrap()
            .expect("a lock");
        assert!(
            held.path
                .ends_with(format!("chaos-cluster-uid-{uid}-127.0.0.1_1.lock")),
            "{}",
            held.path.display()
        );
        let err = EnvLock::acquire_cluster(&twin, &cluster)
            .err()
            .expect("refused");
        assert!(
            err.to_string().contains(&format!(
                "pid {}, environment lab, the same cluster",
                std::process::id()
            )),
            "{err}"
        );
        let held_path = held.path.clone();
        drop(held);
        assert!(EnvLock::acquire_cluster(&twin, &cluster).unwrap().is_some());
        // No identity read: nothing to key on, the environment's lock and the Lease hold.
        assert!(
            EnvLock::acquire_cluster(&twin, &ClusterIdentity::default())
                .unwrap()
                .is_none()
        );
        let _ = std::fs::remove_file(&held_path);
    }

    fn claim() -> Claim {
        Claim {
            run_id: "20261129T201500.000Z-42".into(),
            host: "runner-1".into(),
            deadline: at("2026-11-29T20:30:00Z"),
        }
    }

    #[test]
    fn a_live_lease_of_another_run_blocks_until_it_expires() {
        let now = at("2026-11-29T20:15:00Z");
        let lease = lease_for("lab", &claim(), now, at("2026-11-29T20:40:00Z"));
        let why = blocker(&lease, at("2026-11-29T20:20:00Z")).expect("blocked");
        assert!(
            why.contains("gates-chaos 20261129T201500.000Z-42 on runner-1")
                && why.contains("deadline 2026-11-29T20:30:00+00:00"),
            "{why}"
        );
        assert_eq!(blocker(&lease, at("2026-11-29T20:40:01Z")), None, "expired");
    }

    #[test]
    fn a_released_lease_blocks_nobody() {
        let now = at("2026-11-29T20:15:00Z");
        let mut lease = lease_for("lab", &claim(), now, at("2026-11-29T20:40:00Z"));
        lease.spec.as_mut().unwrap().holder_identity = None;
        assert_eq!(blocker(&lease, now), None);
    }

    #[test]
    fn the_local_lock_is_per_environment_and_cluster_not_per_journal() {
        let mut lab = environment("lab", "allowed: true");
        assert_eq!(lock_name(&lab), "chaos-lab-127.0.0.1_1.lock");
        lab.api = gates_core::yaml::from_str("{endpoint: 'https://10.0.50.10:6443'}").unwrap();
        assert_eq!(lock_name(&lab), "chaos-lab-10.0.50.10_6443.lock");
    }
}
