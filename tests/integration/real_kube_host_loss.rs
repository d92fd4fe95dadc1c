//! The host-loss model against the real controllers: for every lab environment the real-plane
//! tests load, each Proxmox host is lost once on a real control plane (its nodes' kwok killed
//! when the lab powers its VMs off, as the node-loss test does), and what the real
//! node-lifecycle controller, taint manager, ReplicaSet and StatefulSet controllers,
//! disruption controller and kube-scheduler do is compared with what `gates predict` said for
//! that host, read from the same plane just before: which pods leave and which stay, where
//! each replacement goes or that it fits nowhere, and each PodDisruptionBudget's healthy
//! count during the outage and after rescheduling.
//!
//! Both sides are written as the same lines (`Deployment whoami/whoami: placed on
//! talos-lab-w-02`), so a difference reads as a diff. The host is brought back before the
//! next one is lost, and the next prediction is read from the plane as it is then.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use gates_lab::{Lab, LabOptions};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::Api;
use serde_json::Value;

use crate::control_plane::{self, ControlPlane, Identity, Kubelets, Timing, clear, load};

/// The plane listens on 127.160.9.1; the labs start looking at 127.162.
const PLANE_SUBNET: u8 = 160;
const FIRST_LAB_SUBNET: u8 = 162;

const GRACE: Duration = Duration::from_secs(5);
const TOLERATION: Duration = Duration::from_secs(3);
/// One node per zone every 10 s: kube-controller-manager's `--node-eviction-rate` default 0.1.
const EVICTION_INTERVAL: Duration = Duration::from_secs(10);

/// `scenario` with the node-monitor grace period and the eviction toleration shortened (the
/// plane gets the same).
fn fast(scenario: &str, dir: &std::path::Path) -> String {
    let path = dir.join(format!("{scenario}-fast.yaml"));
    std::fs::write(
        &path,
        format!(
            "name: {scenario}-fast\nextends: {scenario}\ntimings:\n  node_monitor_grace: {}s\n  toleration: {}s\n  boot: 3s\n",
            GRACE.as_secs(),
            TOLERATION.as_secs()
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// What a pod's owner does when its node is lost, as the model names owners.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    Recreating { kind: &'static str, name: String },
    NodeBound,
    None,
    Other(String),
}

fn owner(pod: &Pod) -> Owner {
    let refs = pod.metadata.owner_references.clone().unwrap_or_default();
    let Some(o) = refs
        .iter()
        .find(|o| o.controller == Some(true))
        .or(refs.first())
    else {
        return Owner::None;
    };
    match o.kind.as_str() {
        "ReplicaSet" => Owner::Recreating {
            kind: "ReplicaSet",
            name: o.name.clone(),
        },
        "StatefulSet" => Owner::Recreating {
            kind: "StatefulSet",
            name: o.name.clone(),
        },
        "DaemonSet" | "Node" => Owner::NodeBound,
        "InstanceManager" if o.api_version.starts_with("longhorn.io/") => Owner::NodeBound,
        kind => Owner::Other(format!("{kind} {}", o.name)),
    }
}

fn id(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
}

fn running_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.status.as_ref().is_some_and(|s| {
            s.phase.as_deref() == Some("Running")
                && s.conditions
                    .as_ref()
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
}

fn unschedulable(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
            })
        })
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// What one side says of one host's loss: lines that must agree, and per controller the
/// nodes its replacements go to (compared and counted, see the module's docs).
#[derive(Debug, Default, PartialEq)]
struct Lines {
    outcome: BTreeSet<String>,
    nodes: BTreeMap<String, Vec<String>>,
}

impl Lines {
    /// Replacements of `controller`: `n` on `node`, or fitting nowhere.
    fn placed(&mut self, placed: BTreeMap<(String, String), usize>) {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for ((controller, node), n) in placed {
            if node == UNSCHEDULABLE {
                self.outcome
                    .insert(format!("{controller}: {n} fit nowhere (unschedulable)"));
                continue;
            }
            if node.ends_with(')') {
                // Not settled: bound but not ready, or not yet decided.
                self.outcome
                    .insert(format!("{controller}: {n} placed {node}"));
                continue;
            }
            *counts.entry(controller.clone()).or_default() += n;
            let nodes = self.nodes.entry(controller).or_default();
            nodes.extend(std::iter::repeat_n(node, n));
            nodes.sort();
        }
        for (controller, n) in counts {
            self.outcome
                .insert(format!("{controller}: {n} placed on a node"));
        }
    }
}

const UNSCHEDULABLE: &str = "nowhere (unschedulable)";

/// The pods the prediction keeps on the lost nodes by the node-lifecycle controller's zone
/// rule (it stops evicting in a small zone in partial disruption). Which of the host's nodes
/// the controller still taints first, while the zone is healthy, depends on the order it finds
/// them NotReady: the pods of at most one lost node may leave anyway.
fn zone_held(host: &Value) -> BTreeSet<String> {
    host["pods"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| {
            m["outcome"] == "stays"
                && m["why"]
                    .as_str()
                    .is_some_and(|w| w.contains("stops evicting"))
        })
        .filter_map(|m| m["pod"].as_str().map(str::to_string))
        .collect()
}

/// The lines the prediction for one host gives, without the pods `held` and the PDBs over
/// them (compared on their own).
fn predicted_lines(host: &Value, held: &BTreeSet<String>, held_pdbs: &BTreeSet<String>) -> Lines {
    let mut lines = Lines::default();
    let mut placed: BTreeMap<(String, String), usize> = BTreeMap::new();
    for m in host["pods"].as_array().into_iter().flatten() {
        let controller = m["controller"].as_str().unwrap_or("").to_string();
        let pod = m["pod"].as_str().unwrap_or("");
        if held.contains(pod) {
            continue;
        }
        match m["outcome"].as_str().unwrap_or("") {
            "placed" if m["waits_for_deletion"] == true => {
                lines
                    .outcome
                    .insert(format!("{controller}: {pod} waits on the lost node"));
            }
            "placed" => {
                let node = m["node"].as_str().unwrap_or("").to_string();
                *placed.entry((controller, node)).or_default() += 1;
            }
            "unschedulable" => {
                *placed
                    .entry((controller, UNSCHEDULABLE.into()))
                    .or_default() += 1;
            }
            "stays" => {
                lines
                    .outcome
                    .insert(format!("{controller}: {pod} stays, not evicted"));
            }
            "not-recreated" => {
                lines
                    .outcome
                    .insert(format!("pod {pod}: evicted, not recreated"));
            }
            other => {
                lines
                    .outcome
                    .insert(format!("{pod}: outcome {other:?} the test does not know"));
            }
        }
    }
    lines.placed(placed);
    for b in host["pdbs"].as_array().into_iter().flatten() {
        if held_pdbs.contains(b["pdb"].as_str().unwrap_or("")) {
            continue;
        }
        lines.outcome.insert(format!(
            "{}: {} healthy while down, {} after rescheduling, {} desired",
            b["pdb"].as_str().unwrap_or(""),
            b["healthy_left"],
            b["healthy_after_rescheduling"],
            b["desired_healthy"]
        ));
    }
    lines
}

/// Everything read from the real plane at one moment.
struct Seen {
    pods: Vec<Pod>,
    pdbs: Vec<PodDisruptionBudget>,
}

async fn see(client: &kube::Client) -> Seen {
    let pods: Api<Pod> = Api::all(client.clone());
    let pdbs: Api<PodDisruptionBudget> = Api::all(client.clone());
    Seen {
        pods: pods.list(&Default::default()).await.unwrap().items,
        pdbs: pdbs.list(&Default::default()).await.unwrap().items,
    }
}

fn pdb_name(pdb: &PodDisruptionBudget) -> String {
    format!(
        "PDB {}/{}",
        pdb.metadata.namespace.as_deref().unwrap_or(""),
        pdb.metadata.name.as_deref().unwrap_or("")
    )
}

/// The lines for what the real plane did, from the pods before the loss, the lowest healthy
/// count each PDB fell to, and the plane after it settled.
fn real_lines(
    before: &Seen,
    lowest: &BTreeMap<String, i32>,
    after: &Seen,
    lost: &BTreeSet<String>,
    deployments: &BTreeMap<(String, String), String>,
    held: &BTreeSet<String>,
    held_pdbs: &BTreeSet<String>,
) -> Lines {
    let mut lines = Lines::default();
    let known: BTreeSet<String> = before.pods.iter().map(id).collect();
    let now: BTreeMap<String, &Pod> = after.pods.iter().map(|p| (id(p), p)).collect();
    let controller = |namespace: &str, kind: &str, name: &str| match kind {
        "ReplicaSet" => deployments
            .get(&(namespace.to_string(), name.to_string()))
            .map(|d| format!("Deployment {namespace}/{d}"))
            .unwrap_or_else(|| format!("ReplicaSet {namespace}/{name}")),
        _ => format!("{kind} {namespace}/{name}"),
    };
    let mut touched: BTreeSet<(String, &'static str, String)> = BTreeSet::new();
    for pod in &before.pods {
        if !node_of(pod).is_some_and(|n| lost.contains(n))
            || pod.metadata.deletion_timestamp.is_some()
            || held.contains(&id(pod))
        {
            continue;
        }
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let still = now.get(&id(pod));
        let evicted = still.is_none_or(|p| p.metadata.deletion_timestamp.is_some());
        match owner(pod) {
            Owner::NodeBound => {}
            Owner::None | Owner::Other(_) => {
                lines.outcome.insert(if evicted {
                    format!("pod {}: evicted, not recreated", id(pod))
                } else {
                    format!("pod {}: not evicted", id(pod))
                });
            }
            Owner::Recreating { kind, name } => {
                let c = controller(&namespace, kind, &name);
                if !evicted {
                    lines
                        .outcome
                        .insert(format!("{c}: {} stays, not evicted", id(pod)));
                } else if kind == "StatefulSet" && still.is_some() {
                    // The old pod object is still there, so no replacement can be made.
                    lines
                        .outcome
                        .insert(format!("{c}: {} waits on the lost node", id(pod)));
                } else {
                    touched.insert((namespace, kind, name));
                }
            }
        }
    }
    let mut placed: BTreeMap<(String, String), usize> = BTreeMap::new();
    for pod in &after.pods {
        if known.contains(&id(pod)) && kind_of(pod) != Some("StatefulSet") {
            continue;
        }
        let Owner::Recreating { kind, name } = owner(pod) else {
            continue;
        };
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        if !touched.contains(&(namespace.clone(), kind, name.clone())) {
            continue;
        }
        // A StatefulSet's replacement has the old name: new only if it was not there before
        // on a node that is not lost.
        if kind == "StatefulSet"
            && before
                .pods
                .iter()
                .any(|b| id(b) == id(pod) && !node_of(b).is_some_and(|n| lost.contains(n)))
        {
            continue;
        }
        let c = controller(&namespace, kind, &name);
        let target = match node_of(pod) {
            Some(node) if running_ready(pod) => node.to_string(),
            Some(node) => format!("on {node} (not ready yet)"),
            None if unschedulable(pod) => UNSCHEDULABLE.to_string(),
            None => "(no decision yet)".to_string(),
        };
        *placed.entry((c, target)).or_default() += 1;
    }
    lines.placed(placed);
    for pdb in &after.pdbs {
        let name = pdb_name(pdb);
        let Some(&low) = lowest.get(&name) else {
            continue;
        };
        if held_pdbs.contains(&name) {
            continue;
        }
        let status = pdb.status.clone().unwrap_or_default();
        lines.outcome.insert(format!(
            "{name}: {low} healthy while down, {} after rescheduling, {} desired",
            status.current_healthy, status.desired_healthy
        ));
    }
    lines
}

fn kind_of(pod: &Pod) -> Option<&'static str> {
    match owner(pod) {
        Owner::Recreating { kind, .. } => Some(kind),
        _ => None,
    }
}

/// The PDBs the loss touches (one of their pods is on a lost node), with their healthy count.
fn touched_pdbs(seen: &Seen, before: &Seen, lost: &BTreeSet<String>) -> BTreeMap<String, i32> {
    pdbs_over(seen, before, |p| {
        node_of(p).is_some_and(|n| lost.contains(n))
    })
}

/// The PDBs of `seen` over a controller-owned pod of `before` that `pick` picks, with their
/// healthy count.
fn pdbs_over(seen: &Seen, before: &Seen, pick: impl Fn(&Pod) -> bool) -> BTreeMap<String, i32> {
    let on_lost: Vec<&Pod> = before
        .pods
        .iter()
        .filter(|p| pick(p))
        .filter(|p| matches!(owner(p), Owner::Recreating { .. }))
        .collect();
    seen.pdbs
        .iter()
        .filter(|pdb| {
            let selector = pdb
                .spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .and_then(|s| s.match_labels.clone())
                .unwrap_or_default();
            on_lost.iter().any(|p| {
                p.metadata.namespace == pdb.metadata.namespace
                    && !selector.is_empty()
                    && selector.iter().all(|(k, v)| {
                        p.metadata
                            .labels
                            .as_ref()
                            .is_some_and(|l| l.get(k) == Some(v))
                    })
            })
        })
        .map(|pdb| {
            (
                pdb_name(pdb),
                pdb.status.as_ref().map_or(0, |s| s.current_healthy),
            )
        })
        .collect()
}

/// What a host loss on the Kubernetes side depends on: the nodes, the pods, their controllers
/// and the PDBs, by kind, name, labels and spec (annotations and status left out).
fn scheduling_objects(world: &gates_lab::world::World, env: usize) -> Vec<Value> {
    const KINDS: [&str; 6] = [
        "Node",
        "Pod",
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "PodDisruptionBudget",
    ];
    let mut objects: Vec<Value> = gates_lab::export::manifests(world, env)
        .into_iter()
        .filter(|o| {
            o["apiVersion"] != "longhorn.io/v1beta2"
                && KINDS.contains(&o["kind"].as_str().unwrap_or(""))
        })
        .map(|o| {
            serde_json::json!({
                "kind": o["kind"],
                "name": gates::collect::registry::object_name(&o),
                "labels": o["metadata"]["labels"],
                "spec": o["spec"],
            })
        })
        .collect();
    objects.sort_by_key(|o| o.to_string());
    objects
}

/// The environments of a built-in scenario whose host losses say something new: all of a
/// scenario of its own; of a variant, those whose scheduling objects differ from its base's
/// (a variant that changes only Longhorn, L2 or Proxmox objects loses hosts as its base does).
fn environments_to_lose(scenario: &str) -> Vec<usize> {
    use crate::real_kube::{base_of, builtin_world};
    let variant = builtin_world(scenario);
    let all = 0..variant.envs.len();
    let Some(base) = base_of(scenario).map(|b| builtin_world(&b)) else {
        return all.collect();
    };
    all.filter(|&k| {
        k >= base.envs.len() || scheduling_objects(&variant, k) != scheduling_objects(&base, k)
    })
    .collect()
}

/// `gates predict lab --host HOST --format json` against the real plane.
async fn predict(envs: &std::path::Path, env: &str, host: &str) -> Value {
    let (envs, env, wanted) = (envs.to_path_buf(), env.to_string(), host.to_string());
    let out = tokio::task::spawn_blocking(move || {
        let reports = tempfile::tempdir().unwrap();
        crate::support::gates_with_config(reports.path())
            .arg("--env-dir")
            .arg(&envs)
            .args(["predict", &env, "--host", &wanted, "--format", "json"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "predict prints JSON ({e}):\n{}\n{}",
            crate::support::stdout(&out),
            crate::support::stderr(&out)
        )
    });
    json["prediction"]["hosts"]
        .as_array()
        .and_then(|h| h.iter().find(|h| h["host"] == host))
        .cloned()
        .unwrap_or_else(|| panic!("a prediction for {host}: {json:#}"))
}

/// Every ReplicaSet's Deployment, by (namespace, ReplicaSet).
async fn deployments(client: &kube::Client) -> BTreeMap<(String, String), String> {
    let sets: Api<ReplicaSet> = Api::all(client.clone());
    sets.list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|rs| {
            let d = rs
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.kind == "Deployment")?
                .name
                .clone();
            Some((
                (rs.metadata.namespace.clone()?, rs.metadata.name.clone()?),
                d,
            ))
        })
        .collect()
}

/// One host of one environment lost and brought back; the differences, if any.
async fn lose(
    plane: &ControlPlane,
    lab: &Lab,
    env: usize,
    envs: &std::path::Path,
    host: &str,
    settled: &[load::Settled],
) -> Loss {
    let name = lab.shared.read(|w| w.envs[env].name().to_string());
    let predicted = predict(envs, &name, host).await;
    let client = plane.client(Identity::Admin).await.unwrap();
    let (lost, vmids): (BTreeSet<String>, Vec<u32>) = lab.shared.read(|w| {
        w.envs[env]
            .nodes
            .iter()
            .filter(|&&n| w.hosts[w.nodes[n].host].name == host)
            .map(|&n| (w.nodes[n].name.clone(), w.nodes[n].vmid))
            .unzip()
    });
    let before = see(&client).await;
    let deployments = deployments(&client).await;
    let held = zone_held(&predicted);
    let held_pdbs: BTreeSet<String> = pdbs_over(&before, &before, |p| held.contains(&id(p)))
        .into_keys()
        .collect();
    let mut lowest = touched_pdbs(&before, &before, &lost);
    let off = Instant::now();
    for &vmid in &vmids {
        lab.shared.stop_vm(vmid).expect("the VM stops");
    }
    // Past NotReady and the eviction, then until two reads a second apart say the same. The
    // node-lifecycle controller taints the NotReady nodes of one zone (here: one host) at
    // `--node-eviction-rate`, 0.1 nodes a second, so the k-th node of a host is tainted up to
    // 10 s after the one before it (the token bucket of a zone starts empty when the zone
    // changes state).
    let earliest = GRACE
        + TOLERATION
        + Duration::from_secs(3)
        + EVICTION_INTERVAL * lost.len().saturating_sub(1) as u32
        + if lost.len() > 1 {
            EVICTION_INTERVAL
        } else {
            Duration::ZERO
        };
    let mut last: Option<Lines> = None;
    let (real, seen_last) = loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = see(&client).await;
        for (pdb, healthy) in touched_pdbs(&now, &before, &lost) {
            let low = lowest.entry(pdb).or_insert(healthy);
            *low = (*low).min(healthy);
        }
        if off.elapsed() < earliest {
            continue;
        }
        let lines = real_lines(
            &before,
            &lowest,
            &now,
            &lost,
            &deployments,
            &held,
            &held_pdbs,
        );
        // A pod not evicted yet looks like one that stays: give the zone's rate limiter one
        // more interval (a zone's bucket can start empty after its state changed) before
        // taking "stays" for an answer.
        let pending = lines.outcome.iter().any(|l| {
            l.contains("not ready yet")
                || l.contains("no decision yet")
                || (l.contains("stays, not evicted")
                    && off.elapsed() < earliest + EVICTION_INTERVAL)
        });
        if (!pending && last.as_ref() == Some(&lines)) || off.elapsed() > Duration::from_secs(75) {
            break (lines, now);
        }
        last = Some(lines);
    };
    let expected = predicted_lines(&predicted, &held, &held_pdbs);
    let mut loss = Loss::default();
    // The pods the zone rule holds: the real controller evicted those of at most one node.
    {
        let now = &seen_last;
        let gone: BTreeSet<&str> = before
            .pods
            .iter()
            .filter(|p| held.contains(&id(p)))
            .filter(|p| {
                now.pods
                    .iter()
                    .find(|q| id(q) == id(p))
                    .is_none_or(|q| q.metadata.deletion_timestamp.is_some())
            })
            .filter_map(node_of)
            .collect();
        if gone.len() > 1 {
            loss.differences.push(format!(
                "{name}, {host} lost: the zone rule holds {} pods, yet the controller evicted those of {} nodes: {gone:?}",
                held.len(),
                gone.len()
            ));
        }
        eprintln!(
            "{name}, {host} lost: {} pods held by the zone rule; the controller evicted those of {gone:?}",
            held.len()
        );
    }
    for line in expected.outcome.difference(&real.outcome) {
        loss.differences
            .push(format!("{name}, {host} lost: predicted only: {line}"));
    }
    for line in real.outcome.difference(&expected.outcome) {
        loss.differences
            .push(format!("{name}, {host} lost: real only:      {line}"));
    }
    for (controller, predicted_nodes) in &expected.nodes {
        let real_nodes = real.nodes.get(controller).cloned().unwrap_or_default();
        let mut left = real_nodes.clone();
        for node in predicted_nodes {
            loss.replacements += 1;
            match left.iter().position(|n| n == node) {
                Some(at) => {
                    left.remove(at);
                    loss.on_the_predicted_node += 1;
                }
                None => loss.elsewhere.push(format!(
                    "{name}, {host} lost: {controller}: predicted {predicted_nodes:?}, the scheduler chose {real_nodes:?}"
                )),
            }
        }
    }
    loss.elsewhere.dedup();
    for d in loss.differences.iter().chain(&loss.elsewhere) {
        eprintln!("  {d}");
    }
    eprintln!(
        "{name}, {host} lost: {} lines, {} differ; {} of {} replacements on the predicted node; {:.1}s to settle",
        expected.outcome.len().max(real.outcome.len()),
        loss.differences.len(),
        loss.on_the_predicted_node,
        loss.replacements,
        off.elapsed().as_secs_f64()
    );
    // Bring the host back and wait until the workloads are as they were.
    for &vmid in &vmids {
        lab.shared.start_vm(vmid).expect("the VM starts");
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    let back = Instant::now();
    loop {
        let ready = nodes
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|n| lost.contains(n.metadata.name.as_deref().unwrap_or("")))
            .all(node_ready);
        let terminating = pods
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|p| p.metadata.deletion_timestamp.is_some());
        if ready && !terminating {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(90),
            "{name}: {host}'s nodes are not Ready (or pods still terminate) 90 s after its VMs started"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    load::wait_settled(plane, settled, Duration::from_secs(90))
        .await
        .unwrap_or_else(|err| panic!("{name}: after {host} came back: {err}"));
    loss
}

/// What one host's loss showed.
#[derive(Debug, Default)]
struct Loss {
    /// Lines of one side the other does not have.
    differences: Vec<String>,
    /// Replacements the model placed, and how many of them the scheduler put on that node.
    replacements: usize,
    on_the_predicted_node: usize,
    /// The controllers whose replacements went elsewhere than predicted.
    elsewhere: Vec<String>,
}

/// Every environment the real-plane tests load, every host lost once: the real controllers
/// and scheduler do what the host-loss model predicted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_host_lost_on_the_real_control_plane_goes_as_predicted() {
    let Some(bin) = control_plane::binaries() else {
        return;
    };
    let _one = control_plane::ONE_AT_A_TIME.lock().await;
    let timing = Timing {
        node_monitor_grace: GRACE,
        toleration: TOLERATION,
        node_lease: Duration::from_secs(4),
        ..Timing::default()
    };
    let plane = ControlPlane::start(&bin, PLANE_SUBNET, timing, Kubelets::PerNode)
        .await
        .unwrap_or_else(|err| panic!("the real control plane starts: {err}"));
    load::install_crds(&plane).await.unwrap();
    let mut differences = Vec::new();
    let mut elsewhere = Vec::new();
    let (mut replacements, mut on_the_predicted_node) = (0, 0);
    let mut losses = 0;
    let only = std::env::var("GATES_HOST_LOSS_SCENARIO").ok();
    for (i, (scenario, _)) in gates_lab::scenario::BUILTIN.iter().enumerate() {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|s| s == *scenario))
        {
            continue;
        }
        let envs = environments_to_lose(scenario);
        eprintln!("{scenario}: environments {envs:?} lose their hosts");
        for env in envs {
            let dir = tempfile::tempdir().unwrap();
            let lab = Lab::start(LabOptions {
                scenario: fast(scenario, dir.path()),
                subnet: FIRST_LAB_SUBNET + i as u8,
                speed: 1.0,
                state_dir: dir.path().to_path_buf(),
                env_dir: Some(dir.path().join("environments")),
                ..LabOptions::default()
            })
            .await
            .unwrap_or_else(|err| panic!("the lab starts: {err}"));
            let objects = lab.shared.read(|w| gates_lab::export::manifests(w, env));
            let settled = load::expected_ready(&objects);
            load::load_manifests(&plane, objects).await.unwrap();
            load::wait_settled(&plane, &settled, Duration::from_secs(90))
                .await
                .unwrap_or_else(|err| panic!("{scenario}: {err}"));
            let envs = crate::real_kube::real_env_dir(
                &lab,
                &plane,
                Identity::Reader,
                dir.path(),
                Some("requests"),
            );
            let bridge = crate::real_kube_node_loss::bridge(&lab, &plane, env);
            let hosts: BTreeSet<String> = lab.shared.read(|w| {
                w.envs[env]
                    .nodes
                    .iter()
                    .map(|&n| w.hosts[w.nodes[n].host].name.clone())
                    .collect()
            });
            for host in &hosts {
                let loss = lose(&plane, &lab, env, &envs, host, &settled).await;
                differences.extend(
                    loss.differences
                        .into_iter()
                        .map(|d| format!("{scenario}: {d}")),
                );
                elsewhere.extend(
                    loss.elsewhere
                        .into_iter()
                        .map(|d| format!("{scenario}: {d}")),
                );
                replacements += loss.replacements;
                on_the_predicted_node += loss.on_the_predicted_node;
                losses += 1;
            }
            bridge.abort();
            clear::clear(&plane, Duration::from_secs(60))
                .await
                .unwrap_or_else(|err| panic!("{err}"));
            lab.stop().await;
        }
    }
    assert!(losses > 0 || only.is_some(), "no host was lost");
    // The figure the README gives: the model scores nodes by what they have left only, the
    // scheduler also by balanced allocation and its default spreading of a workload's pods.
    eprintln!(
        "host loss on the real plane: {losses} hosts lost, {on_the_predicted_node} of {replacements} replacements on the node the model named; elsewhere:\n  {}",
        elsewhere.join("\n  ")
    );
    assert!(
        differences.is_empty(),
        "the real controllers did otherwise than predicted ({} lines over {losses} host losses):\n{}",
        differences.len(),
        differences.join("\n")
    );
}
