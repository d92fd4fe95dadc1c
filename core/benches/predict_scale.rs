//! How long the host-loss model takes to predict the loss of every host of a large cluster:
//! 5,000 nodes on 500 hosts and 100,000 pods (Deployments of five replicas, a tenth with
//! required anti-affinity per node, a tenth with a DoNotSchedule spread over hosts, a PDB per
//! tenth, a Deployment object per ReplicaSet). Run with `cargo bench -p gates-core --bench predict_scale` (`just bench`). Prints a table;
//! nothing here asserts a time.

use std::collections::BTreeMap;
use std::time::Instant;

use chrono::Utc;
use serde_json::{Value, json};

use gates_core::config::{CapacityBasis, Environment};
use gates_core::hostloss::{self, Input, Outcome};
use gates_core::state::{Collected, Source, State};

const HOSTS: usize = 500;
const NODES_PER_HOST: usize = 10;
const PODS: usize = 100_000;
const REPLICAS: usize = 5;
const NAMESPACES: usize = 200;
const RUNS: usize = 3;

fn main() {
    let nodes = HOSTS * NODES_PER_HOST;
    let built = Instant::now();
    let state = state(nodes);
    println!(
        "state: {nodes} nodes on {HOSTS} hosts, {PODS} pods (built in {:.1}s)",
        built.elapsed().as_secs_f64()
    );
    let mut env: Environment = gates_core::yaml::from_str("{}").expect("defaults parse");
    env.name = "scale".into();
    env.capacity.basis = CapacityBasis::Requests;
    env.ingress.services.clear();

    let mut times = Vec::new();
    let mut cpu = Vec::new();
    let mut last = None;
    for _ in 0..RUNS {
        let started = Instant::now();
        let cpu_started = cpu_seconds();
        let prediction = hostloss::predict(
            Input {
                env: &env,
                state: &state,
                protected: &[],
                pause: &gates_core::pause::NEVER,
            },
            None,
        );
        times.push(started.elapsed().as_secs_f64());
        cpu.push(cpu_seconds() - cpu_started);
        last = Some(prediction);
    }
    let prediction = last.expect("at least one run");
    let count = |o: Outcome| prediction.hosts.iter().filter(|h| h.outcome == o).count();
    let moved: usize = prediction.hosts.iter().map(|h| h.pods.len()).sum();
    times.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    println!(
        "predicted {} hosts ({} survive, {} degraded, {} lost, {} unknown); {moved} pod moves simulated",
        prediction.hosts.len(),
        count(Outcome::Survives),
        count(Outcome::Degraded),
        count(Outcome::Lost),
        count(Outcome::Unknown)
    );
    println!(
        "every host: median {:.2}s, best {:.2}s, worst {:.2}s over {RUNS} runs",
        times[times.len() / 2],
        times[0],
        times[times.len() - 1]
    );
    // On a shared machine wall time says more about the neighbours than about the model.
    println!(
        "every host: median {:.2}s of CPU time (user + system) per run",
        cpu[cpu.len() / 2]
    );
    println!(
        "peak resident memory: {} MiB (state and model)",
        peak_rss_mib()
    );
}

/// This process's peak resident set size, from /proc/self/status (Linux; 0 elsewhere).
fn peak_rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib / 1024)
}

/// This process's CPU time so far, from /proc/self/stat (Linux; 0 elsewhere).
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name: utime and stime are the 12th and 13th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Linux reports in USER_HZ, which is 100 on every mainstream architecture.
    (ticks(11) + ticks(12)) / 100.0
}

fn state(nodes: usize) -> State {
    let mut state = State::empty(
        Source::Snapshot {
            files: vec!["bench".into()],
        },
        Utc::now(),
    );
    let node_list: Vec<Value> = (0..nodes)
        .map(|i| {
            let name = format!("node-{i:05}");
            let host = format!("pve-{:03}", i / NODES_PER_HOST);
            let mut labels = json!({
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": host,
            });
            if i % (nodes / 3) == 0 {
                labels["node-role.kubernetes.io/control-plane"] = json!("");
            }
            json!({
                "metadata": {"name": name, "labels": labels},
                "spec": {},
                "status": {
                    "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            })
        })
        .collect();
    let deployments = PODS / REPLICAS;
    let mut pods = Vec::with_capacity(PODS);
    let mut pdbs = Vec::new();
    let mut deployment_list = Vec::with_capacity(deployments);
    for d in 0..deployments {
        let ns = format!("ns-{:03}", d % NAMESPACES);
        let app = format!("app-{d:05}");
        let labels: BTreeMap<&str, &str> = BTreeMap::from([("app", app.as_str())]);
        let mut spec = json!({
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}],
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ],
        });
        match d % 10 {
            0 => {
                spec["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}
                ]}});
            }
            1 => {
                spec["topologySpreadConstraints"] = json!([{
                    "maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": labels},
                }]);
            }
            _ => {}
        }
        deployment_list.push(json!({
            "metadata": {"name": app, "namespace": ns},
            "spec": {"replicas": REPLICAS, "selector": {"matchLabels": labels}, "template": {}},
        }));
        if d % 10 == 2 {
            pdbs.push(json!({
                "metadata": {"name": app, "namespace": ns},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}},
            }));
        }
        for r in 0..REPLICAS {
            // Replicas spread over hosts: a deployment's pods never share a node.
            let node = (d * 7 + r * (nodes / REPLICAS) + r) % nodes;
            let mut spec = spec.clone();
            spec["nodeName"] = json!(format!("node-{node:05}"));
            pods.push(json!({
                "metadata": {
                    "name": format!("{app}-7d9f8c6b5d-{r:05}"),
                    "namespace": ns,
                    "labels": labels,
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-7d9f8c6b5d"), "uid": format!("{d}"), "controller": true}],
                },
                "spec": spec,
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
            }));
        }
    }
    state.nodes =
        Collected::Present(serde_json::from_value(Value::Array(node_list)).expect("nodes"));
    state.pods = Collected::Present(serde_json::from_value(Value::Array(pods)).expect("pods"));
    state.pdbs = Collected::Present(serde_json::from_value(Value::Array(pdbs)).expect("pdbs"));
    state.deployments = Collected::Present(
        serde_json::from_value(Value::Array(deployment_list)).expect("deployments"),
    );
    for list in [
        &mut state.services as &mut dyn SetEmpty,
        &mut state.leases,
        &mut state.l2_policies,
        &mut state.longhorn_volumes,
        &mut state.longhorn_replicas,
        &mut state.statefulsets,
        &mut state.daemonsets,
    ] {
        list.set_empty();
    }
    state
}

/// Marks a collected list as read and empty.
trait SetEmpty {
    fn set_empty(&mut self);
}

impl<T> SetEmpty for Collected<Vec<T>> {
    fn set_empty(&mut self) {
        *self = Collected::Present(Vec::new());
    }
}
