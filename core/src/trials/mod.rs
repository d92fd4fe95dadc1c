//! Repository trials and drift trials. A repository trial is the gate's check evaluated on
//! what the repository declares for one of its environments, named
//! `gateN::ENV::repo::<check>`; a drift trial compares what the cluster runs with what the
//! repository declares for it, named `gateN::ENV::drift::<check>`. Both are pure functions
//! of the declared state (and, for drift, the collected [`State`]); evidence lines read
//! `file:line: key: value`.
//!
//! Which trials exist follows from the gate files: each live check kind that has a declared
//! counterpart gets one, for every environment of the repository the gate applies to, so a
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

/// What one repository or drift trial evaluates.
#[derive(Debug, Clone)]
pub enum RepoCheck {
    ControlPlaneNodes,
    DistinctHosts,
    SchedulableControlPlane,
    TalosEndpoints,
    ApiVip,
    ReplicatedController(crate::checks::replicated_controller::Params),
    /// A controller's PodDisruptionBudget, compared live and declared (drift only; the
    /// repository trial checks it as part of `ReplicatedController`).
    ControllerPdb(crate::checks::replicated_controller::Params),
    L2Announcement,
    ExternalTrafficPolicy,
    LonghornDisks,
    CapacityHeadroom,
}

impl RepoCheck {
    /// The declared counterpart of a live check, if it has one.
    fn of(check: &CheckSpec) -> Option<RepoCheck> {
        Some(match check {
            CheckSpec::ControlPlaneNodes(_) => RepoCheck::ControlPlaneNodes,
            CheckSpec::DistinctHosts(_) => RepoCheck::DistinctHosts,
            CheckSpec::SchedulableControlPlane(_) => RepoCheck::SchedulableControlPlane,
            CheckSpec::TalosEndpoints(_) => RepoCheck::TalosEndpoints,
            CheckSpec::ApiEndpoint(_) => RepoCheck::ApiVip,
            CheckSpec::ReplicatedController(p) => RepoCheck::ReplicatedController(p.clone()),
            CheckSpec::L2Announcement(_) => RepoCheck::L2Announcement,
            CheckSpec::ExternalTrafficPolicy(_) => RepoCheck::ExternalTrafficPolicy,
            CheckSpec::LonghornDisks(_) => RepoCheck::LonghornDisks,
            CheckSpec::CapacityHeadroom(_) => RepoCheck::CapacityHeadroom,
            // Membership, host sharing, chaos and the host-loss prediction are about what
            // runs, not what is declared; failure domains need Proxmox's storage list and the
            // environment's switches, which a repository does not hold.
            CheckSpec::EtcdMembers(_)
            | CheckSpec::HostSharing(_)
            | CheckSpec::FailureDomains(_)
            | CheckSpec::ChaosReport(_)
            | CheckSpec::HostLoss(_) => {
                return None;
            }
        })
    }

    /// The kind as it appears in trial names (`repo::vip`).
    pub fn kind(&self, drift: bool) -> &'static str {
        match (self, drift) {
            (RepoCheck::ControlPlaneNodes, false) => "repo::control-plane-nodes",
            (RepoCheck::ControlPlaneNodes, true) => "drift::control-plane-nodes",
            (RepoCheck::DistinctHosts, false) => "repo::distinct-hosts",
            (RepoCheck::DistinctHosts, true) => "drift::host-labels",
            (RepoCheck::SchedulableControlPlane, false) => "repo::schedulable-control-plane",
            (RepoCheck::SchedulableControlPlane, true) => "drift::schedulable-control-plane",
            (RepoCheck::TalosEndpoints, false) => "repo::talos-endpoints",
            (RepoCheck::TalosEndpoints, true) => "drift::talos-endpoints",
            (RepoCheck::ApiVip, false) => "repo::vip",
            (RepoCheck::ApiVip, true) => "drift::vip",
            (RepoCheck::ReplicatedController(_), false) => "repo::replicated-controller",
            (RepoCheck::ReplicatedController(_), true) => "drift::replicated-controller",
            (RepoCheck::ControllerPdb(_), _) => "drift::pdb",
            (RepoCheck::L2Announcement, false) => "repo::l2-announcement",
            (RepoCheck::L2Announcement, true) => "drift::l2-announcement",
            (RepoCheck::ExternalTrafficPolicy, false) => "repo::external-traffic-policy",
            (RepoCheck::ExternalTrafficPolicy, true) => "drift::external-traffic-policy",
            (RepoCheck::LonghornDisks, false) => "repo::longhorn-disks",
            (RepoCheck::LonghornDisks, true) => "drift::longhorn-nodes",
            (RepoCheck::CapacityHeadroom, _) => "repo::capacity-headroom",
        }
    }

    /// The drift trials of a check: one per thing both a cluster and the repository say.
    fn drifts(&self) -> Vec<RepoCheck> {
        match self {
            RepoCheck::ControlPlaneNodes
            | RepoCheck::DistinctHosts
            | RepoCheck::SchedulableControlPlane
            | RepoCheck::L2Announcement
            | RepoCheck::ExternalTrafficPolicy
            | RepoCheck::LonghornDisks
            | RepoCheck::TalosEndpoints
            | RepoCheck::ApiVip => vec![self.clone()],
            RepoCheck::ReplicatedController(p) => vec![
                RepoCheck::ReplicatedController(p.clone()),
                RepoCheck::ControllerPdb(p.clone()),
            ],
            // Declared and live capacity are different quantities (VM size against
            // allocatable).
            RepoCheck::CapacityHeadroom | RepoCheck::ControllerPdb(_) => Vec::new(),
        }
    }

    fn instance(&self) -> Option<&str> {
        match self {
            RepoCheck::ReplicatedController(p) | RepoCheck::ControllerPdb(p) => Some(&p.name),
            _ => None,
        }
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
        self.check.kind(self.drift)
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
            for check in gate
                .checks
                .iter()
                .filter_map(RepoCheck::of)
                .flat_map(|c| c.drifts())
            {
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
    let kind = check.kind(drift);
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
    if trial.drift {
        return drift::evaluate(&trial.check, ctx);
    }
    let finding = declared(trial, ctx);
    // A Talos patch that was not read could decide what these trials read: say so on each.
    let reads_talos = matches!(
        trial.check,
        RepoCheck::DistinctHosts
            | RepoCheck::SchedulableControlPlane
            | RepoCheck::TalosEndpoints
            | RepoCheck::ApiVip
            | RepoCheck::L2Announcement
            | RepoCheck::LonghornDisks
    );
    let Some(Ok(patches)) = &ctx.env.talos else {
        return finding;
    };
    if !reads_talos {
        return finding;
    }
    // Values a template writes decide the trial only where it reads them.
    let (deciding, aside): (Vec<_>, Vec<_>) = patches
        .unknown
        .iter()
        .partition(|u| talos_reads(&trial.check).may_read(u));
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
    let settled = finding.verdict == crate::verdict::Verdict::Fail
        && match trial.check {
            RepoCheck::DistinctHosts => nodes::hosts_settle_a_fail(ctx),
            RepoCheck::L2Announcement => l2::fails_without_nodes(ctx),
            _ => false,
        };
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

fn talos_reads(check: &RepoCheck) -> TalosReads {
    let paths: &'static [&'static str] = match check {
        RepoCheck::DistinctHosts => &["machine.nodeLabels"],
        RepoCheck::SchedulableControlPlane => &[
            "cluster.allowSchedulingOnControlPlanes",
            "machine.nodeTaints",
        ],
        RepoCheck::TalosEndpoints | RepoCheck::ApiVip => {
            &["machine.network", "cluster.controlPlane"]
        }
        // Cilium's L2 announcer reads node labels only.
        RepoCheck::L2Announcement => &["machine.nodeLabels"],
        RepoCheck::LonghornDisks => &[
            "machine.kubelet",
            "machine.disks",
            "machine.nodeLabels",
            "machine.nodeTaints",
            "cluster.allowSchedulingOnControlPlanes",
        ],
        _ => &[],
    };
    TalosReads {
        paths,
        unrelated_kinds: NOT_NODE_PLACEMENT,
    }
}

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

fn declared(trial: &RepoTrial, ctx: &RepoContext<'_>) -> Finding {
    match &trial.check {
        RepoCheck::ControlPlaneNodes => nodes::control_plane_nodes(ctx),
        RepoCheck::DistinctHosts => nodes::distinct_hosts(ctx),
        RepoCheck::SchedulableControlPlane => nodes::schedulable_control_plane(ctx),
        RepoCheck::TalosEndpoints => nodes::talos_endpoints(ctx),
        RepoCheck::ApiVip => nodes::vip(ctx),
        RepoCheck::ReplicatedController(p) => controllers::evaluate(ctx, p),
        RepoCheck::ControllerPdb(p) => controllers::evaluate(ctx, p),
        RepoCheck::L2Announcement => l2::l2_announcement(ctx),
        RepoCheck::ExternalTrafficPolicy => ingress::external_traffic_policy(ctx),
        RepoCheck::LonghornDisks => storage::longhorn_disks(ctx),
        RepoCheck::CapacityHeadroom => capacity::capacity_headroom(ctx),
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
        "control-plane-nodes"
        | "distinct-hosts"
        | "schedulable-control-plane"
        | "talos-endpoints"
        | "replicated-controller"
        | "l2-announcement"
        | "external-traffic-policy"
        | "longhorn-disks"
        | "capacity-headroom" => crate::checks::KINDS
            .iter()
            .find(|(kind, _)| *kind == name)
            .map(|(_, about)| *about)?,
        _ => return None,
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
