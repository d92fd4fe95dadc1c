//! Repository trials and drift trials. A repository trial is the gate's check evaluated on
//! what the repository declares for one of its environments, named
//! `gateN::ENV::repo::<check>`; a drift trial compares what the cluster runs with what the
//! repository declares for it, named `gateN::ENV::drift::<check>`. Both are pure functions
//! of the declared state (and, for drift, the collected [`State`]); evidence lines read
//! `file:line: key: value`.
//!
//! Which trials exist follows from the gate files: each live check kind that has a declared
//! counterpart (its line in the check registry, `crate::checks`, names the trials, and its
//! parameters implement [`DeclaredCheck`] in `kinds`) gets one, for every environment of the repository the gate applies to, so a
//! staging run also shows what production would get from the same repository.

mod capacity;
// Public for the engine's tests, which run trials on throwaway checkouts and call these
// directly; not API.
#[doc(hidden)]
pub mod chart_requests;
mod controllers;
mod drift;
#[doc(hidden)]
pub mod drift_addresses;
mod drift_placement;
mod ingress;
mod kinds;
mod l2;
mod live_workloads;
mod nodes;
mod spread;
mod storage;
#[doc(hidden)]
pub mod workload_requests;

use crate::checks::CheckSpec;
use std::collections::BTreeMap;

use crate::config::{Environment, Gate};
use crate::state::State;
use crate::verdict::Finding;

use crate::declared::environments::{Declared, DeclaredEnv, DeclaredNode, NodesUnknown};

/// What a check kind's parameters implement, beside the live [`crate::checks::Check`], when
/// the kind has a declared part (its registry line names the trials, `kinds` implements
/// them): the check judged on what the repository declares, and the drift trials that
/// compare the cluster with it.
pub trait DeclaredCheck {
    /// The repository trial: the check, on what the repository declares.
    fn evaluate_declared(&self, ctx: &RepoContext<'_>) -> Finding;

    /// The drift trial of that kind (one of the registry line's, `drift::pdb`).
    fn evaluate_drift(&self, kind: &str, ctx: &RepoContext<'_>) -> Finding {
        let _ = (kind, ctx);
        Finding::skip("no drift trial for this check")
    }

    /// Where in the Talos configuration the repository trial reads (see [`TalosReads`]);
    /// `None` when no Talos patch can decide it.
    fn talos_reads(&self) -> Option<&'static [&'static str]> {
        None
    }

    /// Whether a fail stands although some Talos patches could not be read.
    fn settles_a_fail(&self, ctx: &RepoContext<'_>) -> bool {
        let _ = ctx;
        false
    }
}

/// The declared part of a registry line: `none`, or the kind's [`DeclaredCheck`].
macro_rules! declared_part {
    (none, $p:ident) => {{
        let _ = $p;
        None
    }};
    ($repo:literal, $p:ident) => {
        Some($p as &dyn DeclaredCheck)
    };
}

macro_rules! declared_parts {
    ($($variant:ident => $module:ident, $kind:literal, $about:literal,
        repo: $repo:tt, drift: [$($drift:literal),*];)*) => {
        /// The declared evaluation of a check, as its registry line says; `None` for a kind
        /// judged on the live state only.
        fn declared_part(check: &CheckSpec) -> Option<&dyn DeclaredCheck> {
            match check {
                $(CheckSpec::$variant(p) => declared_part!($repo, p),)*
            }
        }
    };
}

crate::checks::with_registry!(declared_parts);

/// What one repository or drift trial evaluates: a gate's check, on the declared side, and
/// the trial kind its registry line gives (`repo::vip`, `drift::pdb`).
#[derive(Debug, Clone)]
pub struct RepoCheck {
    pub check: CheckSpec,
    pub kind: &'static str,
}

impl RepoCheck {
    /// The repository trial of a live check, if its kind has a declared part.
    fn of(check: &CheckSpec) -> Option<RepoCheck> {
        check.declared().map(|d| RepoCheck {
            check: check.clone(),
            kind: d.repo,
        })
    }

    /// The drift trials of a live check: one per thing both a cluster and the repository say.
    fn drifts(check: &CheckSpec) -> Vec<RepoCheck> {
        let kinds = check.declared().map_or(&[][..], |d| d.drifts);
        kinds
            .iter()
            .map(|kind| RepoCheck {
                check: check.clone(),
                kind,
            })
            .collect()
    }

    fn instance(&self) -> Option<&str> {
        self.check.instance()
    }
}

/// One repository or drift trial before it runs.
#[derive(Debug, Clone)]
pub struct RepoTrial {
    pub name: String,
    pub gate: u32,
    /// The environment of the repository evaluated.
    pub repo_env: String,
    pub check: RepoCheck,
    /// Compares the live state with the declared one.
    pub drift: bool,
}

impl RepoTrial {
    pub fn kind(&self) -> &'static str {
        self.check.kind
    }

    pub fn instance(&self) -> Option<&str> {
        self.check.instance()
    }
}

/// The repository trials of every environment the repository declares, and the drift trials
/// of `env` against `repo_env`, its environment in the repository; `gates` and
/// `environments` are the configuration's.
pub fn trials(
    gates: &[Gate],
    environments: &BTreeMap<String, Environment>,
    env: &Environment,
    declared: &[String],
    repo_env: &str,
) -> Vec<RepoTrial> {
    let mut out = Vec::new();
    for gate in gates {
        let applies = |name: &str| {
            let gate_name = if name == repo_env {
                env.gate_name()
            } else {
                configured(environments, name).map_or(name, Environment::gate_name)
            };
            gate.applies_to(gate_name)
        };
        for name in declared.iter().filter(|n| applies(n)) {
            for check in gate.checks.iter().filter_map(RepoCheck::of) {
                out.push(trial(gate.number, name, name, check, false));
            }
        }
        if gate.applies_to(env.gate_name()) && declared.iter().any(|n| n == repo_env) {
            for check in gate.checks.iter().flat_map(RepoCheck::drifts) {
                out.push(trial(gate.number, &env.name, repo_env, check, true));
            }
        }
    }
    out
}

/// The configured environment a repository environment stands for: the one of that name,
/// else one whose `repo.environment` names it, else one checked `like:` it.
pub fn configured<'a>(
    environments: &'a BTreeMap<String, Environment>,
    repo_name: &str,
) -> Option<&'a Environment> {
    environments
        .get(repo_name)
        .or_else(|| {
            environments.values().find(|e| {
                e.repo
                    .as_ref()
                    .and_then(|r| r.environment.as_deref())
                    .is_some_and(|n| n == repo_name)
            })
        })
        .or_else(|| environments.values().find(|e| e.gate_name() == repo_name))
}

fn trial(gate: u32, shown: &str, repo_env: &str, check: RepoCheck, drift: bool) -> RepoTrial {
    let kind = check.kind;
    let name = match check.instance() {
        Some(instance) => format!("gate{gate}::{shown}::{kind}::{instance}"),
        None => format!("gate{gate}::{shown}::{kind}"),
    };
    RepoTrial {
        name,
        gate,
        repo_env: repo_env.to_string(),
        check,
        drift,
    }
}

/// What a repository trial sees.
pub struct RepoContext<'a> {
    pub declared: &'a Declared,
    pub env: &'a DeclaredEnv,
    /// The configuration of the environment evaluated (node count, host label, margin).
    pub settings: &'a Environment,
    /// The collected state, for drift trials.
    pub live: &'a State,
}

/// Evaluate one trial. Pure.
pub fn evaluate(trial: &RepoTrial, ctx: &RepoContext<'_>) -> Finding {
    let Some(part) = declared_part(&trial.check.check) else {
        return Finding::error(format!(
            "{} has no declared part to judge",
            trial.check.check.kind()
        ));
    };
    if trial.drift {
        return part.evaluate_drift(trial.check.kind, ctx);
    }
    let finding = part.evaluate_declared(ctx);
    // A Talos patch that was not read could decide what these trials read: say so on each.
    let Some(Ok(patches)) = &ctx.env.talos else {
        return finding;
    };
    let Some(paths) = part.talos_reads() else {
        return finding;
    };
    let reads = TalosReads {
        paths,
        unrelated_kinds: NOT_NODE_PLACEMENT,
    };
    // Values a template writes decide the trial only where it reads them.
    let (deciding, aside): (Vec<_>, Vec<_>) =
        patches.unknown.iter().partition(|u| reads.may_read(u));
    let unread: Vec<String> = patches
        .skipped
        .iter()
        .cloned()
        .chain(deciding.iter().map(ToString::to_string))
        .collect();
    let finding = finding.with_warnings(aside.iter().map(|u| format!("not read: {u}")));
    if unread.is_empty() {
        return finding;
    }
    let settled = finding.verdict == crate::verdict::Verdict::Fail && part.settles_a_fail(ctx);
    if settled {
        finding.with_warnings(unread.iter().map(|s| format!("not read: {s}")))
    } else {
        unread_patches(finding, &unread)
    }
}

/// Where in the Talos configuration a trial reads: the machine-config paths (a value at, above
/// or below one of them counts) and whether a document of another kind may decide it. Every
/// trial reads the node's role, hostname, labels and taints.
struct TalosReads {
    paths: &'static [&'static str],
    /// Documents other than the machine config that cannot decide it.
    unrelated_kinds: &'static [&'static str],
}

/// Documents whose fields set neither labels, taints, scheduling, addresses nor volumes
/// (Talos `pkg/machinery/config/types`: installer, time, logs, events, resolvers, kernel).
const NOT_NODE_PLACEMENT: &[&str] = &[
    "UnattendedInstallConfig",
    "TimeSyncConfig",
    "KmsgLogConfig",
    "EventSinkConfig",
    "ResolverConfig",
    "KernelModuleConfig",
    "SysctlConfig",
    "WatchdogTimerConfig",
];

/// What every trial reads: which nodes there are and their roles.
const EVERY_TRIAL: &[&str] = &["machine.type", "machine.network.hostname"];

impl TalosReads {
    fn may_read(&self, unknown: &crate::declared::talos::Unknown) -> bool {
        if unknown.kind != "v1alpha1" {
            return !self.unrelated_kinds.contains(&unknown.kind.as_str());
        }
        let overlaps = |read: &str| {
            let (a, b) = (unknown.path.as_str(), read);
            a == b
                || a.strip_prefix(b).is_some_and(|r| r.starts_with(['.', '[']))
                || b.strip_prefix(a).is_some_and(|r| r.starts_with(['.', '[']))
        };
        EVERY_TRIAL.iter().chain(self.paths).any(|p| overlaps(p))
    }
}

/// A pass or fail reached without some of the Talos patches is no verdict: a patch that was
/// not read may set exactly what the trial judged (a template setting
/// `allowSchedulingOnControlPlanes`, say). It becomes an error naming the patches, with the
/// verdict it would have been; an error or skip keeps its own reason, with the patches noted.
fn unread_patches(finding: Finding, skipped: &[String]) -> Finding {
    let lines = skipped.iter().map(|s| format!("not read: {s}"));
    match finding.verdict {
        crate::verdict::Verdict::Pass | crate::verdict::Verdict::Fail => {
            let would = format!(
                "without them it would {}: {}",
                if finding.verdict == crate::verdict::Verdict::Pass {
                    "pass"
                } else {
                    "fail"
                },
                finding.summary
            );
            Finding::error(format!(
                "{} Talos patch(es) of the repository could not be read and may set what this trial reads; {would}",
                skipped.len()
            ))
            .with_evidence(lines.chain(finding.evidence))
        }
        crate::verdict::Verdict::Error | crate::verdict::Verdict::Skip => {
            finding.with_warnings(lines)
        }
    }
}

/// What the repository and drift trials of one kind ask, by the kind's name after `repo::`
/// or `drift::` in trial names (`vip`, `pdb`), for reports that describe each kind once
/// (the rules of the SARIF log). A kind named after a live check asks what that check asks,
/// in its own words (the check registry's); the drift-only kinds and the VIP, whose live
/// check reads the kubeconfig instead, are described here. `None` for a name no repository
/// or drift trial has.
pub fn about(name: &str) -> Option<&'static str> {
    Some(match name {
        "vip" => {
            "the API VIP is declared on every control plane and nowhere else, and is the one the cluster uses"
        }
        "host-labels" => "each node's live host label names the Proxmox host its VM is declared on",
        "pdb" => {
            "a controller has a PodDisruptionBudget live exactly when the repository declares one"
        }
        "longhorn-nodes" => {
            "Longhorn runs on the nodes the Terraform role lists admit, and on no others"
        }
        // A kind named after its live check: the check's own words.
        _ => {
            let named = |kind: &str| kind.split_once("::").is_some_and(|(_, n)| n == name);
            let declares = |part: &Option<crate::checks::DeclaredKinds>| {
                part.is_some_and(|p| named(p.repo) || p.drifts.iter().any(|d| named(d)))
            };
            crate::checks::DECLARED
                .iter()
                .find(|(kind, part)| *kind == name && declares(part))?;
            crate::checks::KINDS
                .iter()
                .find(|(kind, _)| *kind == name)
                .map(|(_, about)| *about)?
        }
    })
}

/// The Traefik HelmReleases of an environment's manifests.
pub fn traefik(
    releases: &[crate::declared::manifests::HelmRelease],
) -> impl Iterator<Item = &crate::declared::manifests::HelmRelease> {
    releases
        .iter()
        .filter(|hr| hr.chart.as_deref() == Some("traefik"))
}

// `file:line: key: value`, the shape of every evidence line, is written with the sites.
pub use crate::declared::site::at;

/// The finding for a part that could not be read: a skip when the repository simply does
/// not declare the value (see [`crate::declared::site::RepoError::undeclared`]), else an error.
pub fn unreadable(what: &str, err: &crate::declared::site::RepoError) -> Finding {
    if err.undeclared {
        Finding::skip(format!(
            "{what}: the repository does not declare it: {err} (name the tfvars file in repo.tfvars)"
        ))
    } else {
        Finding::error(format!("{what}: {err}"))
    }
}

/// The declared nodes, or the finding that says why they are unknown.
pub fn declared_nodes<'a>(env: &'a DeclaredEnv) -> Result<Vec<DeclaredNode<'a>>, Finding> {
    env.nodes().map_err(|why| match why {
        NodesUnknown::NotDeclared(reason) => Finding::skip(reason),
        NodesUnknown::Unreadable(reason) => Finding::error(reason),
    })
}

/// The manifests, or an error finding naming the file that could not be read, or a skip when
/// the repository has no Kubernetes manifests for the environment. `reads`: the kinds the
/// trial reads; a part of the manifests that could not be read and may hold one of them makes
/// the trial an error naming every such part, and parts that cannot hold them do not count.
pub fn manifests<'a>(
    env: &'a DeclaredEnv,
    reads: &[&str],
) -> Result<&'a crate::declared::manifests::Manifests, Finding> {
    manifests_except(env, reads, &|_| false)
}

/// [`manifests`], where an unread part that is one object the trial can tell is not its
/// target (`not_mine`, over the object with its unknown variables still written `${...}`)
/// does not count either.
pub fn manifests_except<'a>(
    env: &'a DeclaredEnv,
    reads: &[&str],
    not_mine: &dyn Fn(&crate::declared::yaml::Node) -> bool,
) -> Result<&'a crate::declared::manifests::Manifests, Finding> {
    let m = match &env.manifests {
        None => {
            return Err(Finding::skip(format!(
                "the repository declares no Kubernetes manifests for {} (no clusters/{} directory or repo.kubernetes entry)",
                env.name, env.name
            )));
        }
        Some(Err(err)) => {
            return Err(Finding::error(format!(
                "the manifests of {} cannot be read: {err}",
                env.name
            )));
        }
        Some(Ok(m)) => m,
    };
    let blocking: Vec<String> = m
        .unread
        .iter()
        .filter(|u| u.kinds.may_hold(reads))
        .filter(|u| !u.object.as_ref().is_some_and(not_mine))
        .map(|u| u.error.to_string())
        .collect();
    match blocking.as_slice() {
        [] => Ok(m),
        [one] => Err(Finding::error(format!(
            "part of the manifests of {} cannot be read and may hold a {}: {one}",
            env.name,
            reads.join(" or ")
        ))),
        [first, ..] => Err(Finding::error(format!(
            "{} parts of the manifests of {} cannot be read and may hold a {}; the first: {first}",
            blocking.len(),
            env.name,
            reads.join(" or ")
        ))
        .with_evidence(blocking.clone())),
    }
}

/// What each kind of trial reads of the manifests.
pub mod reads {
    /// The objects that make pods, and what sizes them.
    pub const WORKLOADS: &[&str] = &[
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "ReplicaSet",
        "Pod",
        "Job",
        "CronJob",
        "HelmRelease",
        "LimitRange",
    ];
    /// A controller, its copies, its PodDisruptionBudget and the release that makes it.
    pub const CONTROLLERS: &[&str] = &[
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "HelmRelease",
        "PodDisruptionBudget",
    ];
    /// L2 announcements and the Services they announce.
    pub const L2: &[&str] = &["CiliumL2AnnouncementPolicy", "Service", "HelmRelease"];
    /// Traefik's Service, as a manifest or from its release.
    pub const TRAFFIC_POLICY: &[&str] = &["Service", "HelmRelease"];
    /// Longhorn's placement: its release and its node settings.
    pub const LONGHORN: &[&str] = &["HelmRelease", "ConfigMap", "DaemonSet"];
}

/// The Talos patches; `None` when the repository has none for the environment.
pub fn talos_patches(
    env: &DeclaredEnv,
) -> Result<Option<&crate::declared::talos::Patches>, Finding> {
    match &env.talos {
        None => Ok(None),
        Some(Ok(p)) => Ok(Some(p)),
        Some(Err(err)) => Err(Finding::error(format!(
            "the Talos patches cannot be read: {err}"
        ))),
    }
}

/// The declared nodes and the Talos patches that configure them, for a trial that needs
/// both; when the repository has no Talos patches for the environment, a skip whose reason
/// is `unpatched` (the sentence that says what stays unknown without them).
pub fn nodes_and_patches<'a>(
    env: &'a DeclaredEnv,
    unpatched: impl FnOnce() -> String,
) -> Result<(Vec<DeclaredNode<'a>>, &'a crate::declared::talos::Patches), Finding> {
    let nodes = declared_nodes(env)?;
    match talos_patches(env)? {
        Some(patches) => {
            // A patch for one node by its name cannot be placed while a name is unknown.
            let by_name = patches
                .patches
                .iter()
                .any(|p| matches!(p.applies, crate::declared::talos::Applies::Node(_)))
                || !patches.unmatched.is_empty();
            if by_name && let Some(err) = nodes.iter().find_map(|n| n.name_unknown()) {
                return Err(unnamed(err));
            }
            Ok((nodes, patches))
        }
        None => Err(Finding::skip(unpatched())),
    }
}

/// The declared nodes, for a trial that matches them by name (with the live nodes, or with
/// patches for one node): an error while any VM's name is unknown.
pub fn named_nodes(env: &DeclaredEnv) -> Result<Vec<DeclaredNode<'_>>, Finding> {
    let nodes = declared_nodes(env)?;
    match nodes.iter().find_map(|n| n.name_unknown()) {
        Some(err) => Err(unnamed(err)),
        None => Ok(nodes),
    }
}

fn unnamed(err: &crate::declared::site::RepoError) -> Finding {
    Finding::error(format!(
        "this trial matches nodes by name, and a VM's name is not known: {err}"
    ))
}

/// The two sides of a drift, as evidence lines.
fn both(live: String, declared: String) -> Vec<String> {
    vec![format!("live: {live}"), format!("declared: {declared}")]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EnvironmentSet;

    const GATE_FILES: [&str; 5] = [
        include_str!("../../../gates/adr-007/1-control-plane.yaml"),
        include_str!("../../../gates/adr-007/2-controllers.yaml"),
        include_str!("../../../gates/adr-007/3-ingress-address.yaml"),
        include_str!("../../../gates/adr-007/4-host-failure.yaml"),
        include_str!("../../../gates/adr-007/5-production-capacity.yaml"),
    ];

    /// The trial kinds each registry kind gives, in registry order: a check with a declared
    /// part is its registry line and its `DeclaredCheck`, and nothing else names its trials.
    const TRIAL_KINDS: &[(&str, &[&str])] = &[
        (
            "control-plane-nodes",
            &["repo::control-plane-nodes", "drift::control-plane-nodes"],
        ),
        (
            "distinct-hosts",
            &["repo::distinct-hosts", "drift::host-labels"],
        ),
        (
            "schedulable-control-plane",
            &[
                "repo::schedulable-control-plane",
                "drift::schedulable-control-plane",
            ],
        ),
        (
            "replicated-controller",
            &[
                "repo::replicated-controller",
                "drift::replicated-controller",
                "drift::pdb",
            ],
        ),
        (
            "l2-announcement",
            &["repo::l2-announcement", "drift::l2-announcement"],
        ),
        (
            "external-traffic-policy",
            &[
                "repo::external-traffic-policy",
                "drift::external-traffic-policy",
            ],
        ),
        (
            "longhorn-disks",
            &["repo::longhorn-disks", "drift::longhorn-nodes"],
        ),
        ("capacity-headroom", &["repo::capacity-headroom"]),
        ("chaos-report", &[]),
        ("etcd-members", &[]),
        (
            "talos-endpoints",
            &["repo::talos-endpoints", "drift::talos-endpoints"],
        ),
        ("api-endpoint", &["repo::vip", "drift::vip"]),
        ("host-sharing", &[]),
        ("failure-domains", &[]),
        ("host-loss", &[]),
    ];

    #[test]
    fn every_kind_of_the_registry_gives_the_trials_its_declared_part_names() {
        let mut gates: Vec<Gate> = GATE_FILES
            .iter()
            .map(|text| crate::yaml::from_str(text).expect("a shipped gate file"))
            .collect();
        for gate in &mut gates {
            gate.environments = EnvironmentSet::All;
        }
        let env = crate::checks::testing::env();
        let made = trials(
            &gates,
            &BTreeMap::new(),
            &env,
            &["staging".to_string()],
            "staging",
        );
        // What each kind's trials are called, as the trials made them.
        let mut by_kind: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        let mut expected = Vec::new();
        for gate in &gates {
            let (mut repo, mut drift) = (Vec::new(), Vec::new());
            for check in &gate.checks {
                let named = |kind: &str| match check.instance() {
                    Some(i) => format!("gate{}::staging::{kind}::{i}", gate.number),
                    None => format!("gate{}::staging::{kind}", gate.number),
                };
                let kinds = by_kind.entry(check.kind()).or_default();
                let Some(part) = check.declared() else {
                    assert!(declared_part(check).is_none(), "{}", check.kind());
                    continue;
                };
                assert!(declared_part(check).is_some(), "{}", check.kind());
                kinds.clear();
                kinds.push(part.repo);
                kinds.extend(part.drifts);
                repo.push(named(part.repo));
                drift.extend(part.drifts.iter().map(|d| named(d)));
            }
            expected.extend(repo);
            expected.extend(drift);
        }
        let names: Vec<&str> = made.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, expected);
        // Every kind of the registry is walked, and gives the trials it always gave.
        let walked: Vec<(&str, &[&str])> = crate::checks::KINDS
            .iter()
            .map(|(kind, _)| (*kind, by_kind.get(kind).map_or(&[][..], Vec::as_slice)))
            .collect();
        assert_eq!(walked, TRIAL_KINDS);
        for trial in &made {
            let (_, name) = trial.kind().split_once("::").unwrap();
            assert!(about(name).is_some(), "{}", trial.kind());
            assert!(trial.name.contains(trial.kind()), "{}", trial.name);
        }
        assert_eq!(about("api-endpoint"), None);
        assert_eq!(about("etcd-members"), None);
    }
}
