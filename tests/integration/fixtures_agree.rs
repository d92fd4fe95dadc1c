//! The two pictures of staging today (the offline snapshot and the lab scenario) follow ADR
//! 007's implementation status and agree with each other: the same nodes and roles, the
//! same L2 policy, Traefik's Service on Cluster (the shared values' Local is overridden in
//! staging), the same controllers with the same replicas and the same PodDisruptionBudgets.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::support::{fixture, root};

fn snapshot() -> Vec<Value> {
    let core: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("staging-today.json")).unwrap())
            .unwrap();
    let crds: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("staging-today-crds.json")).unwrap())
            .unwrap();
    [core, crds]
        .into_iter()
        .flat_map(|l| l["items"].as_array().unwrap().clone())
        .collect()
}

fn scenario() -> Value {
    let text = std::fs::read_to_string(root().join("fixtures/lab/staging-today.yaml")).unwrap();
    let yaml: serde_json::Value = gates_core::yaml::from_str(&text).unwrap();
    let json = serde_json::to_value(yaml).unwrap();
    json["environments"][0].clone()
}

fn of_kind<'a>(items: &'a [Value], kind: &str) -> Vec<&'a Value> {
    items.iter().filter(|i| i["kind"] == kind).collect()
}

#[test]
fn staging_today_snapshot_and_lab_scenario_agree_and_follow_the_adr() {
    let items = snapshot();
    let lab = scenario();

    let snap_nodes: BTreeMap<String, bool> = of_kind(&items, "Node")
        .iter()
        .map(|n| {
            (
                n["metadata"]["name"].as_str().unwrap().to_string(),
                n["metadata"]["labels"]
                    .get("node-role.kubernetes.io/control-plane")
                    .is_some(),
            )
        })
        .collect();
    let lab_nodes: BTreeMap<String, bool> = lab["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().to_string(),
                n["role"] == "control-plane",
            )
        })
        .collect();
    assert_eq!(snap_nodes, lab_nodes, "nodes and roles");
    assert_eq!(
        snap_nodes.values().filter(|cp| **cp).count(),
        1,
        "ADR: one control plane"
    );

    let traefik = of_kind(&items, "Service")
        .into_iter()
        .find(|s| s["metadata"]["name"] == "traefik")
        .unwrap();
    assert_eq!(
        traefik["spec"]["externalTrafficPolicy"], "Cluster",
        "ADR: staging Traefik uses Cluster"
    );
    assert_eq!(lab["ingress"]["external_traffic_policy"], "Cluster");

    let policy = of_kind(&items, "CiliumL2AnnouncementPolicy")[0];
    assert_eq!(
        policy["spec"]["nodeSelector"], lab["l2_policies"][0]["node_selector"],
        "the L2 policy selects only the worker in both"
    );

    let snap_replicas: BTreeMap<String, i64> = of_kind(&items, "Deployment")
        .iter()
        .map(|d| {
            (
                d["metadata"]["name"].as_str().unwrap().to_string(),
                d["spec"]["replicas"].as_i64().unwrap(),
            )
        })
        .collect();
    let lab_replicas: BTreeMap<String, i64> = lab["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| {
            w["kind"] == "Deployment" && snap_replicas.contains_key(w["name"].as_str().unwrap())
        })
        .map(|w| {
            (
                w["name"].as_str().unwrap().to_string(),
                w["replicas"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        snap_replicas, lab_replicas,
        "controllers and their replicas"
    );

    let mut snap_pdbs: Vec<String> = of_kind(&items, "PodDisruptionBudget")
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    // What the lab serves: the scenario's own PDBs and those longhorn-manager makes (for
    // csi-attacher and csi-provisioner while a volume is attached). The instance managers'
    // PDBs, one per Longhorn node, are not in the snapshot, which predates them.
    let world = gates_lab::world::World::build(
        &gates_lab::scenario::Scenario::load("staging-today").unwrap(),
        gates_lab::addr::Plan::new(1),
        gates_lab::clock::SimClock::new(1.0),
    )
    .unwrap();
    let mut lab_pdbs: Vec<String> = world.envs[0]
        .store
        .list(gates_lab::resources::Res::PodDisruptionBudgets)
        .into_iter()
        .map(|(_, p)| p["metadata"]["name"].as_str().unwrap().to_string())
        .filter(|name| !name.starts_with("instance-manager-"))
        .collect();
    snap_pdbs.sort();
    lab_pdbs.sort();
    assert_eq!(snap_pdbs, lab_pdbs, "PodDisruptionBudgets");
}
