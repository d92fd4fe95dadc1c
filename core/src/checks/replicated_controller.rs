//! Gate 2: a controller the ADR names runs enough ready replicas, spread over distinct nodes
//! on distinct physical hosts, with exactly one PodDisruptionBudget that lets one pod go.
//!
//! Pods are found by labels, never by names (Flux `targetNamespace` changes names).
//!
//! PDB rules, in the order they are reported:
//! - A pod selected by two or more PDBs fails, naming them: the eviction API answers 500 for
//!   such a pod, so every drain of its node stalls.
//! - No PDB selecting the pods fails. Before saying "no PDB", the check looks for a PDB that
//!   was *meant* for the workload but selects nothing: a PDB in the pods' namespace that
//!   matches no running pod there (the controller reports `expectedPods: 0`) and whose
//!   selector uses one of the label keys of this check's selector, or whose name is the
//!   check's name or the name of a Deployment/StatefulSet that owns the pods. That case gets
//!   its own message with the requirement that excludes the pods (usually a label typo).
//! - Pods split over different PDBs, or some pods without one, fail: one PDB per controller.
//! - The one PDB blocks every drain when `maxUnavailable` is 0 (or 0%), or `minAvailable`
//!   (a number, or a percentage of the replicas rounded up) reaches the replica count. The
//!   replica count is the `spec.replicas` sum of the Deployments and StatefulSets whose
//!   selectors match the pods, else the number of matching pods.
//! - Otherwise the live status must allow a disruption (`disruptionsAllowed` >= 1). When
//!   `status.observedGeneration` is older than `metadata.generation` the status is stale and
//!   the verdict is `error` (unless something else already failed).
//!
//! Longhorn's own PDBs are recognised, not flagged: in `longhorn-system`, with
//! `minAvailable: 1` and no `maxUnavailable`, a PDB named `instance-manager*` (one per
//! instance-manager pod, `disruptionsAllowed` 0 by design) is ignored entirely, and one named
//! `csi-attacher` or `csi-provisioner` counts as that controller's PDB (with three replicas
//! it allows two disruptions) but is never reported as selecting nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::state::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;

use super::Context;
use super::support::{Hosts, labels, name, ns_name, pod_is_ready, pod_is_terminated, pod_node};
use crate::selector::{Selector, WhenNil};
use crate::verdict::Finding;

const LONGHORN_NAMESPACE: &str = "longhorn-system";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Names the trial (`coredns`); workloads are found by `selector`, never by name.
    pub name: String,
    /// Look only in this namespace; every namespace when left out.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Pod labels that identify the controller's pods (all must match).
    pub selector: BTreeMap<String, String>,
    /// Ready replicas required (default 2).
    #[serde(default = "default_min_replicas")]
    pub min_replicas: usize,
}

fn default_min_replicas() -> usize {
    2
}

/// How a Longhorn-managed PDB is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LonghornPdb {
    InstanceManager,
    Csi,
}

fn longhorn_pdb(pdb: &PodDisruptionBudget) -> Option<LonghornPdb> {
    let spec = pdb.spec.as_ref()?;
    if pdb.metadata.namespace.as_deref() != Some(LONGHORN_NAMESPACE)
        || spec.min_available != Some(IntOrString::Int(1))
        || spec.max_unavailable.is_some()
    {
        return None;
    }
    let pdb_name = name(&pdb.metadata);
    if pdb_name.starts_with("instance-manager") {
        Some(LonghornPdb::InstanceManager)
    } else if pdb_name == "csi-attacher" || pdb_name == "csi-provisioner" {
        Some(LonghornPdb::Csi)
    } else {
        None
    }
}

struct CompiledPdb<'a> {
    pdb: &'a PodDisruptionBudget,
    id: String,
    selector: Selector,
    longhorn: Option<LonghornPdb>,
}

impl super::Check for Params {
    fn inputs(&self) -> &'static [crate::state::Input] {
        use crate::state::Input;
        &[
            Input::Nodes,
            Input::Pods,
            Input::Deployments,
            Input::DaemonSets,
            Input::StatefulSets,
            Input::Pdbs,
            Input::Proxmox,
        ]
    }

    fn evaluate(&self, ctx: Context<'_>) -> Finding {
        evaluate(ctx, self)
    }

    fn instance(&self) -> Option<&str> {
        Some(&self.name)
    }
}

pub fn evaluate(ctx: Context<'_>, params: &Params) -> Finding {
    let (pods, pdbs, nodes) = match (
        ctx.state.pods.get("pods"),
        ctx.state.pdbs.get("PodDisruptionBudgets"),
        ctx.state.nodes.get("nodes"),
    ) {
        (Ok(p), Ok(d), Ok(n)) => (p, d, n),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return e,
    };
    let hosts = Hosts::new(ctx, nodes);
    let wanted = Selector::from_labels(&params.selector);
    let where_ = match &params.namespace {
        Some(ns) => format!("in namespace {ns}"),
        None => "in any namespace".to_string(),
    };
    let in_scope = |ns: Option<&str>| {
        params
            .namespace
            .as_deref()
            .is_none_or(|want| ns == Some(want))
    };

    // The gate file's labels are `matchLabels`: the index of the pods by label gives exactly
    // the pods that carry them all.
    let matched: Vec<&Pod> = ctx
        .indexes
        .pods_labelled(pods, &params.selector)
        .into_iter()
        .filter(|p| in_scope(p.metadata.namespace.as_deref()))
        .filter(|p| !pod_is_terminated(p))
        .collect();
    if matched.is_empty() {
        return Finding::fail(format!("no pods match {wanted} {where_}")).with_evidence([format!(
            "the {} controller is found by the labels in the gate file; check them against `kubectl get pods -A --show-labels`",
            params.name
        )]);
    }
    let namespaces: BTreeSet<&str> = matched
        .iter()
        .filter_map(|p| p.metadata.namespace.as_deref())
        .collect();

    let mut found = Found::default();
    let (ready, ready_nodes) = readiness_and_spread(&matched, &hosts, params, &mut found);
    let (replicas, controller_names) = owners(ctx, &namespaces, &matched, &mut found.evidence);
    let compiled = match compile_pdbs(pdbs, &namespaces) {
        Ok(compiled) => compiled,
        Err(finding) => return finding,
    };
    let used = judge_pdbs(
        Pdbs {
            params,
            wanted: &wanted,
            compiled: &compiled,
            pods,
            matched: &matched,
            controller_names: &controller_names,
            replicas,
            hosts: &hosts,
        },
        &mut found,
    );
    let Found {
        problems,
        errors,
        evidence,
    } = found;
    if let Some(first) = problems.first() {
        let rest = problems.iter().skip(1).chain(errors.iter()).cloned();
        return Finding::fail(first.clone()).with_evidence(rest.chain(evidence));
    }
    if let Some(first) = errors.first() {
        return Finding::error(first.clone())
            .with_evidence(errors.iter().skip(1).cloned().chain(evidence));
    }
    let ready_hosts: BTreeSet<&str> = ready_nodes.iter().filter_map(|n| hosts.of(n)).collect();
    let pdb = used.iter().next().map(|&i| &compiled[i]);
    let allowed = pdb
        .and_then(|c| c.pdb.status.as_ref())
        .map_or(0, |s| s.disruptions_allowed);
    Finding::pass(format!(
        "{} ready on {} nodes and {} hosts; PodDisruptionBudget {} allows {}",
        crate::words::count(ready.len() as i128, "replica"),
        ready_nodes.len(),
        ready_hosts.len(),
        pdb.map_or("<none>", |c| c.id.as_str()),
        crate::words::count(allowed, "disruption"),
    ))
    .with_evidence(evidence)
}

/// The problems (a fail), the errors (unknown) and the evidence of one evaluation.
#[derive(Default)]
struct Found {
    problems: Vec<String>,
    errors: Vec<String>,
    evidence: Vec<String>,
}

/// The matched pods in the evidence; too few ready, or all ready ones on one node or host.
fn readiness_and_spread<'p>(
    matched: &[&'p Pod],
    hosts: &Hosts,
    params: &Params,
    found: &mut Found,
) -> (Vec<&'p Pod>, BTreeSet<&'p str>) {
    for pod in matched {
        let place = match pod_node(pod) {
            Some(node) => format!("on {}", hosts.describe(node)),
            None => "not scheduled".to_string(),
        };
        let state = if pod.metadata.deletion_timestamp.is_some() {
            "Terminating"
        } else if pod_is_ready(pod) {
            "Ready"
        } else {
            "not Ready"
        };
        found
            .evidence
            .push(format!("pod {} {place}: {state}", ns_name(&pod.metadata)));
    }
    let ready: Vec<&Pod> = matched
        .iter()
        .copied()
        .filter(|p| pod_is_ready(p))
        .collect();
    if ready.len() < params.min_replicas {
        found.problems.push(format!(
            "only {} of {} matching pods are Ready; {} needs at least {} ready",
            ready.len(),
            matched.len(),
            params.name,
            crate::words::count(params.min_replicas as i128, "replica")
        ));
    }
    let ready_nodes: BTreeSet<&str> = ready.iter().filter_map(|p| pod_node(p)).collect();
    if ready.len() >= 2 {
        if ready_nodes.len() < 2 {
            let node = ready_nodes.iter().next().copied().unwrap_or("<none>");
            found.problems.push(format!(
                "all {} ready replicas run on one node, {}: losing it stops {}",
                ready.len(),
                hosts.describe(node),
                params.name
            ));
        } else {
            let unknown: Vec<&str> = ready_nodes
                .iter()
                .copied()
                .filter(|n| hosts.of(n).is_none())
                .collect();
            let ready_hosts: BTreeSet<&str> =
                ready_nodes.iter().filter_map(|n| hosts.of(n)).collect();
            if ready_hosts.len() < 2 {
                if unknown.is_empty() {
                    found.problems.push(format!(
                        "the ready replicas run on {} nodes ({}) but all on host {}: losing it stops {}",
                        ready_nodes.len(),
                        ready_nodes.iter().copied().collect::<Vec<_>>().join(", "),
                        ready_hosts.iter().next().copied().unwrap_or("<none>"),
                        params.name
                    ));
                } else if let Some(why) = hosts.unread(unknown.iter().copied()) {
                    found.errors.push(format!(
                        "cannot show the ready replicas sit on two hosts: {why}"
                    ));
                } else {
                    found.problems.push(format!(
                        "cannot show the ready replicas sit on two hosts: {} lack the host label {}",
                        unknown.join(", "),
                        hosts.label()
                    ));
                }
            }
        }
    }

    (ready, ready_nodes)
}

/// The Deployments and StatefulSets whose selectors take the matched pods: their replica
/// count (the pods' count when none does) and names, each in the evidence.
fn owners(
    ctx: Context<'_>,
    namespaces: &BTreeSet<&str>,
    matched: &[&Pod],
    evidence: &mut Vec<String>,
) -> (i64, BTreeSet<String>) {
    let mut replicas: Option<i64> = None;
    let workload_pod_matches =
        |selector: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>| {
            Selector::compile(selector, WhenNil::MatchesNothing)
                .is_ok_and(|s| matched.iter().any(|p| s.matches(labels(&p.metadata))))
        };
    let mut controller_names: BTreeSet<String> = BTreeSet::new();
    for d in ctx.state.deployments.present().into_iter().flatten() {
        if namespaces.contains(d.metadata.namespace.as_deref().unwrap_or(""))
            && d.spec
                .as_ref()
                .is_some_and(|s| workload_pod_matches(Some(&s.selector)))
        {
            let n = i64::from(d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1));
            *replicas.get_or_insert(0) += n;
            controller_names.insert(name(&d.metadata).to_string());
            evidence.push(format!(
                "Deployment {}: {}",
                ns_name(&d.metadata),
                crate::words::count(n, "replica")
            ));
        }
    }
    for s in ctx.state.statefulsets.present().into_iter().flatten() {
        if namespaces.contains(s.metadata.namespace.as_deref().unwrap_or(""))
            && s.spec
                .as_ref()
                .is_some_and(|sp| workload_pod_matches(Some(&sp.selector)))
        {
            let n = i64::from(s.spec.as_ref().and_then(|sp| sp.replicas).unwrap_or(1));
            *replicas.get_or_insert(0) += n;
            controller_names.insert(name(&s.metadata).to_string());
            evidence.push(format!(
                "StatefulSet {}: {}",
                ns_name(&s.metadata),
                crate::words::count(n, "replica")
            ));
        }
    }

    (replicas.unwrap_or(matched.len() as i64), controller_names)
}

/// The PDBs in the pods' namespaces with their selectors compiled (an instance manager's
/// own left out), or the error naming one whose selector is invalid.
fn compile_pdbs<'a>(
    pdbs: &'a [Arc<PodDisruptionBudget>],
    namespaces: &BTreeSet<&str>,
) -> Result<Vec<CompiledPdb<'a>>, Finding> {
    let mut compiled: Vec<CompiledPdb<'_>> = Vec::new();
    for pdb in pdbs {
        if !namespaces.contains(pdb.metadata.namespace.as_deref().unwrap_or("")) {
            continue;
        }
        let longhorn = longhorn_pdb(pdb);
        if longhorn == Some(LonghornPdb::InstanceManager) {
            continue;
        }
        let id = ns_name(&pdb.metadata);
        match Selector::compile(
            pdb.spec.as_ref().and_then(|s| s.selector.as_ref()),
            WhenNil::MatchesNothing,
        ) {
            Ok(selector) => compiled.push(CompiledPdb {
                pdb,
                id,
                selector,
                longhorn,
            }),
            Err(e) => {
                return Err(Finding::error(format!(
                    "PodDisruptionBudget {id} has an invalid selector: {e}"
                )));
            }
        }
    }
    Ok(compiled)
}

/// What `judge_pdbs` reads.
struct Pdbs<'a, 'p> {
    params: &'a Params,
    wanted: &'a Selector,
    compiled: &'a [CompiledPdb<'p>],
    pods: &'p [Arc<Pod>],
    matched: &'a [&'p Pod],
    controller_names: &'a BTreeSet<String>,
    replicas: i64,
    hosts: &'a Hosts,
}

/// Which PDBs cover the matched pods, and what is wrong with them: none, a pod under two or
/// none, a split controller, a budget that blocks every drain or allows nothing now, a status
/// not yet or no longer current. Returns the PDBs in use.
fn judge_pdbs(input: Pdbs<'_, '_>, found: &mut Found) -> BTreeSet<usize> {
    let mut covering: Vec<(&Pod, Vec<usize>)> = Vec::new();
    let mut used: BTreeSet<usize> = BTreeSet::new();
    for pod in input.matched {
        let idx: Vec<usize> = input
            .compiled
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                c.pdb.metadata.namespace == pod.metadata.namespace
                    && c.selector.matches(labels(&pod.metadata))
            })
            .map(|(i, _)| i)
            .collect();
        used.extend(idx.iter().copied());
        covering.push((pod, idx));
    }

    let mut overlap = false;
    for (pod, idx) in covering.iter().filter(|(_, idx)| idx.len() > 1) {
        overlap = true;
        let names: Vec<&str> = idx.iter().map(|&i| input.compiled[i].id.as_str()).collect();
        let node = pod_node(pod)
            .map(|n| input.hosts.describe(n))
            .unwrap_or_else(|| "no node".to_string());
        found.problems.push(format!(
            "pod {} is selected by {} PodDisruptionBudgets ({}): the eviction API refuses pods with more than one PDB (HTTP 500), so draining {node} stalls",
            ns_name(&pod.metadata),
            idx.len(),
            names.join(", ")
        ));
    }

    if used.is_empty() {
        found.problems.push(no_pdb_message(
            input.params,
            input.wanted,
            input.compiled,
            input.pods,
            input.matched,
            input.controller_names,
            &mut found.evidence,
        ));
    } else {
        let uncovered: Vec<String> = covering
            .iter()
            .filter(|(_, idx)| idx.is_empty())
            .map(|(p, _)| ns_name(&p.metadata))
            .collect();
        if !uncovered.is_empty() {
            found.problems.push(format!(
                "{} of {} pods are selected by no PodDisruptionBudget: {}",
                uncovered.len(),
                input.matched.len(),
                uncovered.join(", ")
            ));
        }
        if used.len() > 1 && !overlap {
            let names: Vec<&str> = used
                .iter()
                .map(|&i| input.compiled[i].id.as_str())
                .collect();
            found.problems.push(format!(
                "the pods are split across {} PodDisruptionBudgets ({}); one PDB should cover the whole controller",
                used.len(),
                names.join(", ")
            ));
        }
        for &i in &used {
            judge_budget(&input.compiled[i], input.replicas, found);
        }
    }
    used
}

/// One PDB in use, in the evidence: whether its budget blocks every drain, and whether its
/// status is current and allows a disruption now.
fn judge_budget(c: &CompiledPdb<'_>, replicas: i64, found: &mut Found) {
    found.evidence.push(describe_pdb(c));
    match budget_blocks(c.pdb, replicas) {
        Ok(Some(why)) => found.problems.push(format!(
            "PodDisruptionBudget {} blocks every drain: {why}",
            c.id
        )),
        Ok(None) => {}
        Err(why) => found
            .errors
            .push(format!("PodDisruptionBudget {}: {why}", c.id)),
    }
    let generation = c.pdb.metadata.generation;
    let observed = c.pdb.status.as_ref().and_then(|s| s.observed_generation);
    match (c.pdb.status.as_ref(), generation, observed) {
        (None, _, _) => found.errors.push(format!(
            "PodDisruptionBudget {} has no status yet: the disruption controller has not processed it",
            c.id
        )),
        (Some(_), Some(g), Some(o)) if o < g => found.errors.push(format!(
            "PodDisruptionBudget {} status is stale (observedGeneration {o} < generation {g}); evictions are refused until the disruption controller catches up",
            c.id
        )),
        (Some(status), _, _) if status.disruptions_allowed < 1 => found.problems.push(format!(
            "PodDisruptionBudget {} allows no disruption now (disruptionsAllowed {}, currentHealthy {}, desiredHealthy {}, expectedPods {}): a drain would block",
            c.id, status.disruptions_allowed, status.current_healthy, status.desired_healthy, status.expected_pods
        )),
        _ => {}
    }
}

/// The "no PDB" failure, or the more precise "a PDB meant for these pods selects nothing".
fn no_pdb_message(
    params: &Params,
    wanted: &Selector,
    compiled: &[CompiledPdb<'_>],
    all_pods: &[Arc<Pod>],
    matched: &[&Pod],
    controller_names: &BTreeSet<String>,
    evidence: &mut Vec<String>,
) -> String {
    let wanted_keys: BTreeSet<&str> = params.selector.keys().map(String::as_str).collect();
    let mut related = Vec::new();
    for c in compiled.iter().filter(|c| c.longhorn.is_none()) {
        let selects_any = all_pods.iter().any(|p| {
            p.metadata.namespace == c.pdb.metadata.namespace
                && !pod_is_terminated(p)
                && c.selector.matches(labels(&p.metadata))
        });
        let expected = c.pdb.status.as_ref().map(|s| s.expected_pods);
        if selects_any && expected != Some(0) {
            continue;
        }
        let pdb_name = name(&c.pdb.metadata);
        let shares_key = c
            .selector
            .requirements()
            .into_iter()
            .flatten()
            .any(|r| wanted_keys.contains(r.key()));
        let named_alike = pdb_name == params.name || controller_names.contains(pdb_name);
        if shares_key || named_alike {
            related.push(c);
        } else {
            evidence.push(format!(
                "PodDisruptionBudget {} in the same namespace selects no pod ({})",
                c.id, c.selector
            ));
        }
    }
    if let Some(c) = related.first() {
        let example = matched
            .iter()
            .find(|p| p.metadata.namespace == c.pdb.metadata.namespace)
            .unwrap_or(&matched[0]);
        let why = c.selector.excluded_by(labels(&example.metadata));
        return format!(
            "PodDisruptionBudget {} selects no pod (expectedPods 0): its selector {} excludes pod {} ({} not met), so it protects nothing",
            c.id,
            c.selector,
            ns_name(&example.metadata),
            why.join("; ")
        );
    }
    let mut message = format!(
        "no PodDisruptionBudget selects the pods of {} ({wanted}): a drain may evict every replica at once",
        params.name
    );
    if matched
        .iter()
        .any(|p| p.metadata.namespace.as_deref() == Some(LONGHORN_NAMESPACE))
    {
        message.push_str(
            " (Longhorn creates PDBs itself only for csi-attacher and csi-provisioner, and only while a volume is attached)",
        );
    }
    if matched.iter().any(|p| {
        p.metadata.namespace.as_deref() == Some("kube-system")
            && labels(&p.metadata).get("k8s-app").map(String::as_str) == Some("kube-dns")
    }) {
        // Talos's bootstrap manifest for CoreDNS has no PDB (k8stemplates/coredns.go).
        message.push_str(
            " (CoreDNS as Talos deploys it has no PodDisruptionBudget: add one selecting k8s-app=kube-dns in kube-system, as a manifest in the repository or in the Talos config's cluster.inlineManifests, or set cluster.coreDNS.disabled: true and deploy CoreDNS from its chart with podDisruptionBudget enabled)",
        );
    }
    message
}

fn describe_pdb(c: &CompiledPdb<'_>) -> String {
    let spec = c.pdb.spec.as_ref();
    let budget = match (
        spec.and_then(|s| s.min_available.as_ref()),
        spec.and_then(|s| s.max_unavailable.as_ref()),
    ) {
        (Some(min), _) => format!("minAvailable {}", int_or_string(min)),
        (None, Some(max)) => format!("maxUnavailable {}", int_or_string(max)),
        (None, None) => "no minAvailable or maxUnavailable".to_string(),
    };
    let status = match c.pdb.status.as_ref() {
        Some(s) => format!(
            "disruptionsAllowed {} (currentHealthy {}, desiredHealthy {}, expectedPods {})",
            s.disruptions_allowed, s.current_healthy, s.desired_healthy, s.expected_pods
        ),
        None => "no status".to_string(),
    };
    let owner = if c.longhorn.is_some() {
        " (managed by Longhorn)"
    } else {
        ""
    };
    format!(
        "PodDisruptionBudget {}{owner}: selector {}, {budget}, {status}",
        c.id, c.selector
    )
}

fn int_or_string(v: &IntOrString) -> String {
    match v {
        IntOrString::Int(i) => i.to_string(),
        IntOrString::String(s) => s.clone(),
    }
}

/// A PDB's `minAvailable` or `maxUnavailable` that is neither a number nor a percentage
/// (the API server accepts any string there; the disruption controller then refuses it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is neither a number nor a percentage")]
struct NotAPercentage(String);

/// Scales an int-or-percent against `total`, rounding up like the disruption controller.
fn scaled(v: &IntOrString, total: i64) -> Result<i64, NotAPercentage> {
    match v {
        IntOrString::Int(i) => Ok(i64::from(*i)),
        IntOrString::String(s) => {
            let pct: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| NotAPercentage(s.clone()))?;
            Ok((pct * total + 99).div_euclid(100))
        }
    }
}

/// Why the PDB's spec forbids every voluntary disruption for `replicas` pods, if it does.
fn budget_blocks(
    pdb: &PodDisruptionBudget,
    replicas: i64,
) -> Result<Option<String>, NotAPercentage> {
    let Some(spec) = pdb.spec.as_ref() else {
        return Ok(None);
    };
    if let Some(max) = spec.max_unavailable.as_ref() {
        if scaled(max, replicas)? <= 0 {
            return Ok(Some(format!(
                "maxUnavailable {} lets no pod go",
                int_or_string(max)
            )));
        }
    } else if let Some(min) = spec.min_available.as_ref() {
        let desired = scaled(min, replicas)?;
        if desired >= replicas {
            return Ok(Some(format!(
                "minAvailable {} keeps all {} (needs {desired} healthy)",
                int_or_string(min),
                crate::words::count(replicas, "replica")
            )));
        }
    } else {
        // policy/v1 defaults neither field: the disruption controller counts 0 expected pods
        // and allows 0 disruptions, whatever runs (a chart's PDB enabled with no values).
        return Ok(Some(
            "sets neither minAvailable nor maxUnavailable, so the disruption controller allows no disruption; set maxUnavailable: 1"
                .to_string(),
        ));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::state::State;
    use crate::verdict::Verdict;

    const DNS: &[(&str, &str)] = &[("k8s-app", "kube-dns")];

    fn params() -> Params {
        Params {
            name: "coredns".into(),
            namespace: None,
            selector: BTreeMap::from([("k8s-app".to_string(), "kube-dns".to_string())]),
            min_replicas: 2,
        }
    }

    fn dns_pod(name: &str, node: &str) -> PodBuilder {
        pod("kube-system", name).labels(DNS).on(node)
    }

    /// Two ready CoreDNS pods on cp-1 and cp-2 with a good PDB.
    fn good() -> StateBuilder {
        state()
            .nodes(target_nodes())
            .pods([
                dns_pod("coredns-a", "cp-1").build(),
                dns_pod("coredns-b", "cp-2").build(),
            ])
            .deployments([deployment("kube-system", "coredns", DNS).build()])
            .pdbs([pdb("kube-system", "coredns", DNS).build()])
    }

    fn check(state: &State) -> Finding {
        run(&env(), state, &params(), evaluate)
    }

    fn fails_with(state: &State, needle: &str) -> Finding {
        let f = check(state);
        assert_eq!(f.verdict, Verdict::Fail, "{}", text(&f));
        assert!(
            f.summary.contains(needle),
            "summary {:?} lacks {needle:?}",
            f.summary
        );
        f
    }

    #[test]
    fn two_ready_replicas_on_two_hosts_with_one_pdb_pass() {
        let f = check(&good().build());
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert_eq!(
            f.summary,
            "2 replicas ready on 2 nodes and 2 hosts; PodDisruptionBudget kube-system/coredns allows 1 disruption"
        );
        assert!(
            f.evidence
                .contains(&"pod kube-system/coredns-a on node cp-1 (host pve1): Ready".to_string())
        );
        assert!(text(&f).contains("Deployment kube-system/coredns: 2 replicas"));
    }

    #[test]
    fn one_replica_is_said_in_the_singular() {
        let s = state()
            .nodes(target_nodes())
            .pods([dns_pod("coredns-a", "cp-1").build()])
            .deployments([deployment("kube-system", "coredns", DNS)
                .replicas(1)
                .build()])
            .build();
        let t = text(&check(&s));
        assert!(
            t.contains("Deployment kube-system/coredns: 1 replica"),
            "{t}"
        );
        assert!(!t.contains("1 replicas"), "{t}");
    }

    #[test]
    fn no_pods_match() {
        let f = fails_with(
            &good()
                .with(|s| s.pods = crate::state::Collected::Present(vec![]))
                .build(),
            "no pods match k8s-app=kube-dns in any namespace",
        );
        assert!(text(&f).contains("found by the labels"));
        // Pods with the right labels in another namespace do not count when one is named.
        let mut p = params();
        p.namespace = Some("dns".into());
        let f = run(&env(), &good().build(), &p, evaluate);
        assert!(f.summary.contains("in namespace dns"), "{}", f.summary);
    }

    #[test]
    fn too_few_ready_replicas() {
        let s = good()
            .with(|s| s.pods = crate::state::Collected::Present(vec![]))
            .pods([
                dns_pod("coredns-a", "cp-1").build(),
                dns_pod("coredns-b", "cp-2").not_ready().build(),
            ])
            .build();
        let f = fails_with(
            &s,
            "only 1 of 2 matching pods are Ready; coredns needs at least 2 replicas ready",
        );
        assert!(text(&f).contains("pod kube-system/coredns-b on node cp-2 (host pve2): not Ready"));
    }

    #[test]
    fn terminated_and_terminating_pods_do_not_count() {
        let s = good()
            .pods([
                dns_pod("old", "cp-3").phase("Succeeded").build(),
                dns_pod("going", "cp-3").terminating().build(),
            ])
            .build();
        let f = check(&s);
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert!(text(&f).contains("kube-system/going on node cp-3 (host pve3): Terminating"));
        assert!(!text(&f).contains("kube-system/old"));
    }

    #[test]
    fn replicas_on_the_same_node() {
        let s = good()
            .with(|s| s.pods = crate::state::Collected::Present(vec![]))
            .pods([
                dns_pod("coredns-a", "cp-1").build(),
                dns_pod("coredns-b", "cp-1").build(),
            ])
            .build();
        fails_with(
            &s,
            "all 2 ready replicas run on one node, node cp-1 (host pve1)",
        );
    }

    #[test]
    fn replicas_on_two_nodes_of_one_host() {
        let s = good()
            .with(|s| s.nodes = crate::state::Collected::Present(vec![]))
            .nodes([
                node("cp-1").host("pve1").build(),
                node("cp-2").host("pve1").build(),
            ])
            .build();
        fails_with(&s, "run on 2 nodes (cp-1, cp-2) but all on host pve1");
    }

    #[test]
    fn replicas_on_nodes_without_host_label() {
        let s = good()
            .with(|s| s.nodes = crate::state::Collected::Present(vec![]))
            .nodes([node("cp-1").host("pve1").build(), node("cp-2").build()])
            .build();
        fails_with(
            &s,
            "cannot show the ready replicas sit on two hosts: cp-2 lack the host label",
        );
    }

    #[test]
    fn a_replica_whose_vm_config_could_not_be_read_makes_the_spread_an_error_naming_the_vm() {
        let s = good()
            .with(|s| s.proxmox = proxmox(&[("cp-1", "pve1")], &["VM 102 cp-2 on pve2: timed out"]))
            .build();
        let f = check(&s);
        assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
        assert!(
            f.summary.contains("the host of node cp-2 is unknown"),
            "{}",
            f.summary
        );
        assert!(
            f.summary.contains("VM 102 cp-2 on pve2: timed out"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn an_unreadable_proxmox_makes_the_spread_an_error_not_a_pass_on_labels() {
        let s = good()
            .with(|s| s.proxmox = absent("connection refused"))
            .build();
        let f = check(&s);
        assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
        assert!(
            f.summary
                .contains("Proxmox could not be read (connection refused)"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn replicas_proven_on_two_hosts_pass_though_another_vm_config_could_not_be_read() {
        let s = good()
            .with(|s| {
                s.proxmox = proxmox(
                    &[("cp-1", "pve1"), ("cp-2", "pve2")],
                    &["VM 103 cp-3 on pve3: timed out"],
                )
            })
            .build();
        let f = check(&s);
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
    }

    #[test]
    fn no_pdb() {
        let s = good()
            .with(|s| s.pdbs = crate::state::Collected::Present(vec![]))
            .build();
        let f = fails_with(
            &s,
            "no PodDisruptionBudget selects the pods of coredns (k8s-app=kube-dns)",
        );
        assert!(!f.summary.contains("Longhorn"));
        assert!(
            f.summary
                .contains("CoreDNS as Talos deploys it has no PodDisruptionBudget")
                && f.summary.contains("cluster.coreDNS.disabled: true"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn no_pdb_in_longhorn_system_mentions_what_longhorn_creates() {
        let csi = &[("app", "csi-resizer")];
        let s = state()
            .nodes(target_nodes())
            .pods([
                pod("longhorn-system", "csi-resizer-a")
                    .labels(csi)
                    .on("cp-1")
                    .build(),
                pod("longhorn-system", "csi-resizer-b")
                    .labels(csi)
                    .on("cp-2")
                    .build(),
            ])
            .build();
        let p = Params {
            name: "longhorn-csi-resizer".into(),
            namespace: Some("longhorn-system".into()),
            selector: BTreeMap::from([("app".to_string(), "csi-resizer".to_string())]),
            min_replicas: 2,
        };
        let f = run(&env(), &s, &p, evaluate);
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(
            f.summary
                .contains("only for csi-attacher and csi-provisioner"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn a_pdb_whose_selector_matches_no_pod_is_named_with_the_reason() {
        let s = good()
            .with(|s| s.pdbs = crate::state::Collected::Present(vec![]))
            .pdbs([pdb(
                "kube-system",
                "coredns-pdb",
                &[("k8s-app", "kube-dns-typo")],
            )
            .status_counts(0, 0, 0, 0)
            .build()])
            .build();
        let f = fails_with(
            &s,
            "PodDisruptionBudget kube-system/coredns-pdb selects no pod (expectedPods 0)",
        );
        assert!(
            f.summary
                .contains("excludes pod kube-system/coredns-a (k8s-app=kube-dns-typo not met)"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn an_unrelated_empty_pdb_is_only_a_hint() {
        let s = good()
            .with(|s| s.pdbs = crate::state::Collected::Present(vec![]))
            .pdbs([pdb("kube-system", "other", &[("app", "gone")])
                .status_counts(0, 0, 0, 0)
                .build()])
            .build();
        let f = fails_with(&s, "no PodDisruptionBudget selects the pods of coredns");
        assert!(text(&f).contains(
            "PodDisruptionBudget kube-system/other in the same namespace selects no pod (app=gone)"
        ));
    }

    #[test]
    fn a_nil_pdb_selector_matches_no_pod() {
        let s = good()
            .with(|s| s.pdbs = crate::state::Collected::Present(vec![]))
            .pdbs([pdb("kube-system", "coredns", DNS)
                .nil_selector()
                .status_counts(0, 0, 0, 0)
                .build()])
            .build();
        // Named like the Deployment, so it is taken as meant for these pods.
        let f = fails_with(&s, "PodDisruptionBudget kube-system/coredns selects no pod");
        assert!(
            f.summary.contains("a nil selector matches nothing"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn two_pdbs_over_one_pod_are_both_named() {
        let s = good()
            .pdbs([pdb("kube-system", "coredns-extra", DNS).build()])
            .build();
        let f = fails_with(
            &s,
            "pod kube-system/coredns-a is selected by 2 PodDisruptionBudgets (kube-system/coredns, kube-system/coredns-extra)",
        );
        assert!(f.summary.contains("draining node cp-1 (host pve1) stalls"));
    }

    #[test]
    fn pods_split_across_pdbs_or_partly_uncovered() {
        let s = state()
            .nodes(target_nodes())
            .pods([
                dns_pod("coredns-a", "cp-1")
                    .labels(&[("half", "a")])
                    .build(),
                dns_pod("coredns-b", "cp-2")
                    .labels(&[("half", "b")])
                    .build(),
            ])
            .pdbs([pdb("kube-system", "a", &[("half", "a")]).build()])
            .build();
        fails_with(
            &s,
            "1 of 2 pods are selected by no PodDisruptionBudget: kube-system/coredns-b",
        );
        let s = state()
            .nodes(target_nodes())
            .pods([
                dns_pod("coredns-a", "cp-1")
                    .labels(&[("half", "a")])
                    .build(),
                dns_pod("coredns-b", "cp-2")
                    .labels(&[("half", "b")])
                    .build(),
            ])
            .pdbs([
                pdb("kube-system", "a", &[("half", "a")]).build(),
                pdb("kube-system", "b", &[("half", "b")]).build(),
            ])
            .build();
        fails_with(
            &s,
            "split across 2 PodDisruptionBudgets (kube-system/a, kube-system/b)",
        );
    }

    fn with_pdb(b: PdbBuilder) -> State {
        good()
            .with(|s| s.pdbs = crate::state::Collected::Present(vec![]))
            .pdbs([b.build()])
            .build()
    }

    #[test]
    fn min_available_equal_to_replicas_blocks_every_drain() {
        let s = with_pdb(pdb("kube-system", "coredns", DNS).min_available(2));
        fails_with(
            &s,
            "PodDisruptionBudget kube-system/coredns blocks every drain: minAvailable 2 keeps all 2 replicas",
        );
    }

    #[test]
    fn min_available_percent_rounds_up() {
        // 100% of 2 and 51% of 2 (rounds up to 2) block; 50% of 2 does not.
        fails_with(
            &with_pdb(pdb("kube-system", "coredns", DNS).min_available_str("100%")),
            "minAvailable 100% keeps all 2",
        );
        fails_with(
            &with_pdb(pdb("kube-system", "coredns", DNS).min_available_str("51%")),
            "needs 2 healthy",
        );
        let f = check(&with_pdb(
            pdb("kube-system", "coredns", DNS).min_available_str("50%"),
        ));
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
    }

    #[test]
    fn a_pdb_with_neither_field_blocks_every_drain() {
        // Traefik's chart renders this with podDisruptionBudget.enabled and no values.
        // The status is one a controller has not written yet (as in a repository or a fresh
        // object): the spec alone must say it blocks.
        let mut neither = pdb("kube-system", "coredns", DNS).build();
        neither.spec.as_mut().unwrap().max_unavailable = None;
        let s = good()
            .with(|s| s.pdbs = crate::state::Collected::Present(vec![]))
            .pdbs([neither])
            .build();
        fails_with(&s, "sets neither minAvailable nor maxUnavailable");
    }

    #[test]
    fn max_unavailable_zero_blocks_every_drain() {
        fails_with(
            &with_pdb(pdb("kube-system", "coredns", DNS).max_unavailable(0)),
            "maxUnavailable 0 lets no pod go",
        );
        fails_with(
            &with_pdb(pdb("kube-system", "coredns", DNS).max_unavailable_str("0%")),
            "maxUnavailable 0% lets no pod go",
        );
        // 10% of 2 rounds up to 1: fine.
        let f = check(&with_pdb(
            pdb("kube-system", "coredns", DNS).max_unavailable_str("10%"),
        ));
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
    }

    #[test]
    fn the_replica_count_comes_from_the_owning_controller() {
        // minAvailable 2 with 3 desired replicas (one pod still missing) is fine by spec.
        let s = good()
            .with(|s| s.deployments = crate::state::Collected::Present(vec![]))
            .deployments([deployment("kube-system", "coredns", DNS)
                .replicas(3)
                .build()])
            .with(|s| s.pdbs = crate::state::Collected::Present(vec![]))
            .pdbs([pdb("kube-system", "coredns", DNS)
                .min_available(2)
                .status_counts(2, 2, 2, 0)
                .build()])
            .build();
        // ... but the live status allows nothing.
        fails_with(
            &s,
            "kube-system/coredns allows no disruption now (disruptionsAllowed 0, currentHealthy 2, desiredHealthy 2, expectedPods 2)",
        );
        let s = state()
            .nodes(target_nodes())
            .pods([
                dns_pod("dns-0", "cp-1").build(),
                dns_pod("dns-1", "cp-2").build(),
            ])
            .statefulsets([statefulset("kube-system", "dns", DNS, 2)])
            .pdbs([pdb("kube-system", "dns", DNS).min_available(2).build()])
            .build();
        let f = fails_with(&s, "keeps all 2 replicas");
        assert!(text(&f).contains("StatefulSet kube-system/dns: 2 replicas"));
    }

    #[test]
    fn an_invalid_percentage_is_an_error() {
        let f = check(&with_pdb(
            pdb("kube-system", "coredns", DNS).min_available_str("half"),
        ));
        assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
        assert!(
            f.summary
                .contains("\"half\" is neither a number nor a percentage")
        );
    }

    #[test]
    fn stale_or_missing_status_is_an_error() {
        let f = check(&with_pdb(
            pdb("kube-system", "coredns", DNS).generations(3, 2),
        ));
        assert_eq!(f.verdict, Verdict::Error, "{}", text(&f));
        assert!(
            f.summary
                .contains("status is stale (observedGeneration 2 < generation 3)")
        );
        let f = check(&with_pdb(pdb("kube-system", "coredns", DNS).no_status()));
        assert_eq!(f.verdict, Verdict::Error);
        assert!(f.summary.contains("has no status yet"));
        // A spec that blocks drains fails even when the status is stale.
        let f = check(&with_pdb(
            pdb("kube-system", "coredns", DNS)
                .max_unavailable(0)
                .generations(3, 2),
        ));
        assert_eq!(f.verdict, Verdict::Fail);
        assert!(text(&f).contains("status is stale"));
    }

    #[test]
    fn an_invalid_pdb_selector_is_an_error() {
        let f = check(&with_pdb(
            pdb("kube-system", "coredns", DNS).selector_expression("x", "Like", &["y"]),
        ));
        assert_eq!(f.verdict, Verdict::Error);
        assert!(
            f.summary
                .contains("kube-system/coredns has an invalid selector: unknown operator \"Like\"")
        );
    }

    #[test]
    fn longhorn_system_pdbs_are_not_flagged() {
        let attacher = &[("app", "csi-attacher")];
        let im = &[("longhorn.io/component", "instance-manager")];
        let s = state()
            .nodes(target_nodes())
            .pods([
                pod("longhorn-system", "csi-attacher-a")
                    .labels(attacher)
                    .on("cp-1")
                    .build(),
                pod("longhorn-system", "csi-attacher-b")
                    .labels(attacher)
                    .on("cp-2")
                    .build(),
                pod("longhorn-system", "csi-attacher-c")
                    .labels(attacher)
                    .on("cp-3")
                    .build(),
                pod("longhorn-system", "instance-manager-abc")
                    .labels(im)
                    .on("cp-1")
                    .build(),
            ])
            .deployments([deployment("longhorn-system", "csi-attacher", attacher)
                .replicas(3)
                .build()])
            .pdbs([
                pdb("longhorn-system", "csi-attacher", attacher)
                    .min_available(1)
                    .status_counts(3, 3, 1, 2)
                    .build(),
                // Instance-manager PDBs allow nothing by design and may select nothing for a moment.
                pdb("longhorn-system", "instance-manager-abc", im)
                    .min_available(1)
                    .status_counts(1, 1, 1, 0)
                    .build(),
                pdb("longhorn-system", "instance-manager-gone", &[("x", "y")])
                    .min_available(1)
                    .status_counts(0, 0, 0, 0)
                    .build(),
            ])
            .build();
        let p = Params {
            name: "longhorn-csi-attacher".into(),
            namespace: Some("longhorn-system".into()),
            selector: BTreeMap::from([("app".to_string(), "csi-attacher".to_string())]),
            min_replicas: 2,
        };
        let f = run(&env(), &s, &p, evaluate);
        assert_eq!(f.verdict, Verdict::Pass, "{}", text(&f));
        assert!(text(&f).contains("longhorn-system/csi-attacher (managed by Longhorn): selector app=csi-attacher, minAvailable 1"));
        assert!(!text(&f).contains("instance-manager-gone"));
    }

    #[test]
    fn absent_inputs_are_errors() {
        let f = check(&good().with(|s| s.pdbs = absent("forbidden")).build());
        assert_eq!(f.verdict, Verdict::Error);
        assert!(
            f.summary
                .contains("PodDisruptionBudgets unavailable: forbidden")
        );
        let f = check(&good().with(|s| s.pods = absent("timeout")).build());
        assert_eq!(f.verdict, Verdict::Error);
        let f = check(&good().with(|s| s.nodes = absent("timeout")).build());
        assert_eq!(f.verdict, Verdict::Error);
    }
}
