//! What longhorn-manager and Talos put into a cluster besides what a scenario lists, as the
//! lab serves it: Longhorn's CSI PDBs while a volume is attached, an instance manager per node
//! with its owner and PDB, and Talos's exclude-from-external-load-balancers label. Runs on
//! tokio's paused clock.

use gates_lab::addr::Plan;
use gates_lab::clock::SimClock;
use gates_lab::resources::Res;
use gates_lab::scenario::Scenario;
use gates_lab::world::{Shared, World};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

const LONGHORN: &str = "longhorn-system";
const EXCLUDE: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

fn world_of(s: &Scenario) -> Arc<Shared> {
    let w = Shared::new(World::build(s, Plan::new(1), SimClock::new(1.0)).expect("builds"));
    tokio::spawn(w.clone().drive());
    w
}

fn get(w: &Shared, res: Res, ns: &str, name: &str) -> Option<Value> {
    w.read(|w| w.envs[0].store.get(res, ns, name).map(|o| (*o).clone()))
}

fn list(w: &Shared, res: Res) -> Vec<Value> {
    w.read(|w| {
        w.envs[0]
            .store
            .list(res)
            .into_iter()
            .map(|(_, o)| (*o).clone())
            .collect()
    })
}

fn instance_managers(w: &Shared) -> Vec<Value> {
    list(w, Res::Pods)
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["longhorn.io/component"] == "instance-manager")
        .collect()
}

#[tokio::test(start_paused = true)]
async fn longhorn_makes_the_csi_attacher_and_provisioner_pdbs_only_while_a_volume_is_attached() {
    let w = world_of(&Scenario::load("adr-007").expect("scenario"));
    tokio::time::sleep(Duration::from_secs(5)).await;
    for name in ["csi-attacher", "csi-provisioner"] {
        let pdb = get(&w, Res::PodDisruptionBudgets, LONGHORN, name).expect(name);
        assert_eq!(pdb["spec"]["minAvailable"], 1, "{pdb:#}");
        assert!(pdb["spec"].get("maxUnavailable").is_none(), "{pdb:#}");
        assert_eq!(pdb["spec"]["selector"]["matchLabels"]["app"], name);
        // Three replicas, as Longhorn deploys CSI: two may go.
        assert_eq!(pdb["status"]["disruptionsAllowed"], 2, "{pdb:#}");
    }
    // Every volume detached: longhorn-manager deletes its two; the user's resizer PDB stays.
    w.change(|w, _| {
        for v in &mut w.envs[0].volumes {
            v.attached_to = None;
        }
        w.envs[0].dirty.longhorn = true;
    });
    for name in ["csi-attacher", "csi-provisioner"] {
        assert!(
            get(&w, Res::PodDisruptionBudgets, LONGHORN, name).is_none(),
            "{name}"
        );
    }
    let resizer = get(&w, Res::PodDisruptionBudgets, LONGHORN, "csi-resizer").expect("resizer");
    assert_eq!(resizer["spec"]["maxUnavailable"], 1);
    // One attached again: they are made again.
    w.change(|w, _| {
        w.envs[0].volumes[0].attached_to = Some(w.envs[0].nodes[0]);
        w.envs[0].dirty.longhorn = true;
    });
    assert!(get(&w, Res::PodDisruptionBudgets, LONGHORN, "csi-attacher").is_some());
}

#[tokio::test(start_paused = true)]
async fn a_pdb_the_scenario_names_like_longhorns_stands_in_for_it() {
    let mut s = Scenario::load("adr-007").expect("scenario");
    let attacher = s.environments[0]
        .workloads
        .iter_mut()
        .find(|x| x.name == "csi-attacher")
        .unwrap();
    attacher.pdb = Some(gates_lab::scenario::PdbRule {
        name: None,
        min_available: None,
        max_unavailable: Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1)),
        selector: None,
    });
    let w = world_of(&s);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let pdb = get(&w, Res::PodDisruptionBudgets, LONGHORN, "csi-attacher").expect("the PDB");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1, "{pdb:#}");
    assert!(pdb["spec"].get("minAvailable").is_none(), "{pdb:#}");
}

#[tokio::test(start_paused = true)]
async fn every_longhorn_node_runs_an_instance_manager_owned_by_its_instance_manager_whose_pdb_allows_no_disruption()
 {
    let w = world_of(&Scenario::load("adr-007").expect("scenario"));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let managers = instance_managers(&w);
    assert_eq!(managers.len(), 3, "{managers:#?}");
    let nodes: std::collections::BTreeSet<&str> = managers
        .iter()
        .map(|p| p["spec"]["nodeName"].as_str().unwrap())
        .collect();
    assert_eq!(nodes.len(), 3, "one on each node: {nodes:?}");
    for pod in &managers {
        let name = pod["metadata"]["name"].as_str().unwrap();
        assert!(
            name.starts_with("instance-manager-") && name.len() == 17 + 32,
            "{name}"
        );
        let owner = &pod["metadata"]["ownerReferences"][0];
        assert_eq!(owner["apiVersion"], "longhorn.io/v1beta2");
        assert_eq!(owner["kind"], "InstanceManager");
        assert_eq!(owner["name"], name);
        assert_eq!(owner["controller"], true);
        // 12 % of the allocatable 1950m (2 CPUs less the 50m the kubelet reserves).
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "234m"
        );
        assert_eq!(
            pod["metadata"]["labels"]["longhorn.io/node"],
            pod["spec"]["nodeName"]
        );
        let pdb = get(&w, Res::PodDisruptionBudgets, LONGHORN, name).expect("its PDB");
        assert_eq!(pdb["spec"]["minAvailable"], 1);
        assert_eq!(
            pdb["spec"]["selector"]["matchLabels"],
            pod["metadata"]["labels"]
        );
        assert_eq!(pdb["status"]["disruptionsAllowed"], 0, "{pdb:#}");
        assert_eq!(pdb["status"]["currentHealthy"], 1, "{pdb:#}");
    }
    // A replica names the instance manager of its node.
    let replica = list(&w, Res::LonghornReplicas).remove(0);
    let on = replica["spec"]["nodeID"].as_str().unwrap();
    let im = managers
        .iter()
        .find(|p| p["spec"]["nodeName"] == on)
        .unwrap();
    assert_eq!(
        replica["status"]["instanceManagerName"],
        im["metadata"]["name"]
    );
}

#[tokio::test(start_paused = true)]
async fn an_instance_manager_runs_only_where_longhorn_manager_does() {
    // staging-today: longhorn-manager does not tolerate the control plane's taint.
    let w = world_of(&Scenario::load("staging-today").expect("scenario"));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let managers = instance_managers(&w);
    let nodes: Vec<&str> = managers
        .iter()
        .map(|p| p["spec"]["nodeName"].as_str().unwrap())
        .collect();
    assert_eq!(nodes, ["talos-test-worker-01"]);
}

#[tokio::test(start_paused = true)]
async fn an_instance_manager_on_a_dead_node_is_evicted_but_not_made_elsewhere_and_returns_with_the_node()
 {
    let w = world_of(&Scenario::load("adr-007").expect("scenario"));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let node = "talos-lab-cp-02";
    let before = instance_managers(&w)
        .into_iter()
        .find(|p| p["spec"]["nodeName"] == node)
        .unwrap();
    let name = before["metadata"]["name"].as_str().unwrap().to_string();
    super::attachment::power_off(&w, node);
    // Node-monitor grace (50 s) and the 300 s toleration, then some.
    tokio::time::sleep(Duration::from_secs(50 + 300 + 30)).await;
    let evicted = get(&w, Res::Pods, LONGHORN, &name).expect("still there, Terminating");
    assert!(
        evicted["metadata"]["deletionTimestamp"].is_string(),
        "{evicted:#}"
    );
    let ready = |p: &Value| {
        p["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    };
    assert!(!ready(&evicted));
    assert_eq!(instance_managers(&w).len(), 3, "no replacement elsewhere");
    let vmid = w.read(|w| w.nodes[w.node_by_name(node).unwrap()].vmid);
    w.start_vm(vmid).expect("starts");
    tokio::time::sleep(Duration::from_secs(120)).await;
    let after = get(&w, Res::Pods, LONGHORN, &name).expect("made again");
    assert!(
        after["metadata"].get("deletionTimestamp").is_none(),
        "{after:#}"
    );
    assert_ne!(after["metadata"]["uid"], before["metadata"]["uid"]);
    assert!(ready(&after), "{after:#}");
}

#[tokio::test(start_paused = true)]
async fn talos_labels_control_planes_for_load_balancers_to_leave_out_from_1_8_unless_a_patch_deletes_it()
 {
    let label = |w: &Shared, node: &str| {
        get(w, Res::Nodes, "", node).expect("node")["metadata"]["labels"]
            .get(EXCLUDE)
            .cloned()
    };
    let today = world_of(&Scenario::load("staging-today").expect("scenario"));
    assert_eq!(label(&today, "talos-test-cp-01"), Some(Value::from("")));
    assert_eq!(label(&today, "talos-test-worker-01"), None);
    // adr-007 runs workloads on its control planes and deletes it, as Talos's docs say.
    let decided = world_of(&Scenario::load("adr-007").expect("scenario"));
    assert_eq!(label(&decided, "talos-lab-cp-01"), None);
    let mut older = Scenario::load("staging-today").expect("scenario");
    older.environments[0].talos_version = "v1.7.6".into();
    assert_eq!(label(&world_of(&older), "talos-test-cp-01"), None);
    let mut unreadable = Scenario::load("staging-today").expect("scenario");
    unreadable.environments[0].talos_version = "latest".into();
    let err = World::build(&unreadable, Plan::new(1), SimClock::new(1.0))
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("talos_version \"latest\""), "{err}");
}

#[tokio::test(start_paused = true)]
async fn an_unreadable_guaranteed_instance_manager_cpu_setting_is_refused() {
    let mut s = Scenario::load("adr-007").expect("scenario");
    s.environments[0]
        .longhorn
        .as_mut()
        .unwrap()
        .settings
        .insert("guaranteed-instance-manager-cpu".into(), "lots".into());
    let err = World::build(&s, Plan::new(1), SimClock::new(1.0))
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("guaranteed-instance-manager-cpu \"lots\""),
        "{err}"
    );
    s.environments[0]
        .longhorn
        .as_mut()
        .unwrap()
        .settings
        .insert(
            "guaranteed-instance-manager-cpu".into(),
            "{\"v1\":\"20\",\"v2\":\"12\"}".into(),
        );
    let w = world_of(&s);
    tokio::time::sleep(Duration::from_secs(5)).await;
    // 20 % of 1950m.
    assert_eq!(
        instance_managers(&w)[0]["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "390m"
    );
}

#[tokio::test(start_paused = true)]
async fn a_pdb_with_neither_field_expects_no_pods_and_allows_no_disruption() {
    let mut s = Scenario::load("adr-007").expect("scenario");
    s.environments[0].pdbs.push(gates_lab::scenario::PdbSpec {
        namespace: "whoami".into(),
        name: "whoami-neither".into(),
        selector: Some([("app.kubernetes.io/name".to_string(), "whoami".to_string())].into()),
        min_available: None,
        max_unavailable: None,
    });
    let w = world_of(&s);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let pdb = get(&w, Res::PodDisruptionBudgets, "whoami", "whoami-neither").expect("the PDB");
    assert_eq!(pdb["status"]["currentHealthy"], 2, "{pdb:#}");
    assert_eq!(pdb["status"]["expectedPods"], 0, "{pdb:#}");
    assert_eq!(pdb["status"]["disruptionsAllowed"], 0, "{pdb:#}");
}
