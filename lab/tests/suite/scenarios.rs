//! The built-in scenarios have the shapes their names promise: adr-007 satisfies the ADR,
//! staging-today and each variant break what they say they break.

use gates_lab::addr::Plan;
use gates_lab::clock::SimClock;
use gates_lab::resources::Res;
use gates_lab::scenario::Scenario;
use gates_lab::world::{Shared, World};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

fn world(name: &str) -> Arc<Shared> {
    let s = Scenario::load(name).expect("scenario");
    Shared::new(World::build(&s, Plan::new(1), SimClock::new(1.0)).expect("builds"))
}

fn list(w: &Shared, env: usize, res: Res) -> Vec<Value> {
    w.read(|w| {
        w.envs[env]
            .store
            .list(res)
            .into_iter()
            .map(|(_, o)| (*o).clone())
            .collect()
    })
}

fn get(w: &Shared, env: usize, res: Res, ns: &str, name: &str) -> Option<Value> {
    w.read(|w| w.envs[env].store.get(res, ns, name).map(|o| (*o).clone()))
}

fn zone_of(node: &Value) -> String {
    node["metadata"]["labels"]["topology.kubernetes.io/zone"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[tokio::test]
async fn adr_007_satisfies_the_adr() {
    let w = world("adr-007");
    for env in 0..2 {
        let nodes = list(&w, env, Res::Nodes);
        let zones: BTreeSet<String> = nodes.iter().map(zone_of).collect();
        assert_eq!(
            (nodes.len(), zones.len()),
            (3, 3),
            "three control planes on three hosts"
        );
        // Every controller: two ready replicas on distinct nodes, PDB allowing one disruption.
        // Longhorn's CSI runs 3 replicas: its own attacher and provisioner PDBs
        // (minAvailable 1) let two go, the user's resizer and snapshotter ones one.
        for (ns, selector, replicas, allowed) in [
            ("kube-system", ("io.cilium/app", "operator"), 2, 1),
            ("kube-system", ("k8s-app", "kube-dns"), 2, 1),
            ("longhorn-system", ("app", "csi-attacher"), 3, 2),
            ("longhorn-system", ("app", "csi-provisioner"), 3, 2),
            ("longhorn-system", ("app", "csi-resizer"), 3, 1),
            ("longhorn-system", ("app", "csi-snapshotter"), 3, 1),
            ("traefik", ("app.kubernetes.io/name", "traefik"), 2, 1),
            ("cert-manager", ("app.kubernetes.io/name", "webhook"), 2, 1),
            (
                "external-secrets",
                ("app.kubernetes.io/name", "external-secrets"),
                2,
                1,
            ),
            (
                "external-secrets",
                ("app.kubernetes.io/name", "external-secrets-webhook"),
                2,
                1,
            ),
        ] {
            let pods: Vec<Value> = list(&w, env, Res::Pods)
                .into_iter()
                .filter(|p| {
                    p["metadata"]["namespace"] == ns
                        && p["metadata"]["labels"][selector.0] == selector.1
                })
                .collect();
            let nodes: BTreeSet<&str> = pods
                .iter()
                .filter_map(|p| p["spec"]["nodeName"].as_str())
                .collect();
            assert_eq!(
                (pods.len(), nodes.len()),
                (replicas, replicas),
                "{ns} {selector:?}"
            );
            let pdb = list(&w, env, Res::PodDisruptionBudgets)
                .into_iter()
                .find(|p| {
                    p["metadata"]["namespace"] == ns
                        && p["spec"]["selector"]["matchLabels"][selector.0] == selector.1
                })
                .unwrap_or_else(|| panic!("PDB for {selector:?}"));
            assert_eq!(pdb["status"]["disruptionsAllowed"], allowed, "{selector:?}");
        }
        // L2 policy over all nodes, Traefik Cluster, lease held.
        let policy = &list(&w, env, Res::CiliumL2Policies)[0];
        assert_eq!(
            policy["spec"]["nodeSelector"]["matchLabels"],
            serde_json::json!({})
        );
        let svc = get(&w, env, Res::Services, "traefik", "traefik").expect("traefik svc");
        assert_eq!(svc["spec"]["externalTrafficPolicy"], "Cluster");
        assert!(
            get(
                &w,
                env,
                Res::Leases,
                "kube-system",
                "cilium-l2announce-traefik-traefik"
            )
            .is_some()
        );
        // Longhorn: a schedulable disk on every node, healthy attached volumes, spread replicas.
        for n in list(&w, env, Res::LonghornNodes) {
            assert_eq!(
                n["spec"]["disks"].as_object().map(|d| d.len()),
                Some(1),
                "{}",
                n["metadata"]["name"]
            );
        }
        for v in list(&w, env, Res::LonghornVolumes)
            .iter()
            .filter(|v| v["status"]["state"] == "attached")
        {
            assert_eq!(v["status"]["robustness"], "healthy");
        }
        let replicas = list(&w, env, Res::LonghornReplicas);
        for v in list(&w, env, Res::LonghornVolumes) {
            let on: Vec<&str> = replicas
                .iter()
                .filter(|r| r["spec"]["volumeName"] == v["metadata"]["name"])
                .filter_map(|r| r["spec"]["nodeID"].as_str())
                .collect();
            let distinct: BTreeSet<&&str> = on.iter().collect();
            assert_eq!(on.len(), distinct.len());
            assert_eq!(on.len(), 3);
        }
        // More than a third free on every node, by requests and by measured usage.
        let metrics = list(&w, env, Res::NodeMetrics);
        for n in list(&w, env, Res::Nodes) {
            let name = n["metadata"]["name"].as_str().expect("name");
            let alloc_cpu = gates_lab::quantity::cpu_milli(
                n["status"]["allocatable"]["cpu"].as_str().expect("cpu"),
            )
            .expect("q");
            let alloc_mem = gates_lab::quantity::bytes(
                n["status"]["allocatable"]["memory"].as_str().expect("mem"),
            )
            .expect("q");
            let (mut req_cpu, mut req_mem) = (0, 0);
            for p in list(&w, env, Res::Pods)
                .iter()
                .filter(|p| p["spec"]["nodeName"] == name)
            {
                let r = &p["spec"]["containers"][0]["resources"]["requests"];
                req_cpu +=
                    gates_lab::quantity::cpu_milli(r["cpu"].as_str().expect("cpu")).expect("q");
                // An instance manager requests CPU only.
                if let Some(mem) = r["memory"].as_str() {
                    req_mem += gates_lab::quantity::bytes(mem).expect("q");
                }
            }
            assert!(
                req_cpu * 3 < alloc_cpu * 2 && req_mem * 3 < alloc_mem * 2,
                "{name}: requests {req_cpu}m {req_mem}"
            );
            let m = metrics
                .iter()
                .find(|m| m["metadata"]["name"] == name)
                .expect("metrics");
            let use_cpu = gates_lab::quantity::cpu_milli(m["usage"]["cpu"].as_str().expect("cpu"))
                .expect("q");
            let use_mem =
                gates_lab::quantity::bytes(m["usage"]["memory"].as_str().expect("mem")).expect("q");
            assert!(
                use_cpu * 3 < alloc_cpu * 2 && use_mem * 3 < alloc_mem * 2,
                "{name}: usage {use_cpu}m {use_mem}"
            );
        }
    }
    assert!(w.reachability().ingress.iter().all(|&u| u) && w.reachability().vip.iter().all(|&u| u));
}

#[tokio::test]
async fn staging_today_matches_the_implementation_status() {
    let w = world("staging-today");
    let nodes = list(&w, 0, Res::Nodes);
    assert_eq!(nodes.len(), 2);
    let cp = get(&w, 0, Res::Nodes, "", "talos-test-cp-01").expect("cp");
    assert_eq!(
        cp["spec"]["taints"][0]["key"],
        "node-role.kubernetes.io/control-plane"
    );
    let policy = &list(&w, 0, Res::CiliumL2Policies)[0];
    assert_eq!(
        policy["spec"]["nodeSelector"]["matchLabels"]["kubernetes.io/hostname"],
        "talos-test-worker-01"
    );
    let svc = get(&w, 0, Res::Services, "traefik", "traefik").expect("svc");
    // ADR 007: staging's Traefik Service uses Cluster (the shared values still say Local).
    assert_eq!(svc["spec"]["externalTrafficPolicy"], "Cluster");
    let lease = get(
        &w,
        0,
        Res::Leases,
        "kube-system",
        "cilium-l2announce-traefik-traefik",
    )
    .expect("lease");
    assert_eq!(lease["spec"]["holderIdentity"], "talos-test-worker-01");
    let lh: Vec<(String, usize)> = list(&w, 0, Res::LonghornNodes)
        .iter()
        .map(|n| {
            (
                n["metadata"]["name"].as_str().unwrap_or("").to_string(),
                n["spec"]["disks"].as_object().map(|d| d.len()).unwrap_or(0),
            )
        })
        .collect();
    assert!(
        lh.contains(&("talos-test-worker-01".to_string(), 1))
            && lh.contains(&("talos-test-cp-01".to_string(), 0)),
        "{lh:?}"
    );
    // Controllers at their charts' defaults, as in fixtures/snapshots/staging-today.json:
    // the Cilium operator at 2, Longhorn's CSI at 3 with Longhorn's own two PDBs (a volume is
    // attached), and the worker's instance manager with its PDB.
    let dep = get(&w, 0, Res::Deployments, "kube-system", "cilium-operator").expect("operator");
    assert_eq!(dep["spec"]["replicas"], 2);
    let mut pdbs: Vec<String> = list(&w, 0, Res::PodDisruptionBudgets)
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect();
    pdbs.sort();
    assert_eq!(pdbs.len(), 3, "{pdbs:?}");
    assert_eq!(pdbs[..2], ["csi-attacher", "csi-provisioner"], "{pdbs:?}");
    assert!(pdbs[2].starts_with("instance-manager-"), "{pdbs:?}");
}

#[tokio::test]
async fn each_variant_breaks_one_thing() {
    let w = world("adr-007-shared-host");
    let zones: Vec<String> = list(&w, 0, Res::Nodes).iter().map(zone_of).collect();
    assert_eq!(zones, vec!["pve1", "pve1", "pve3"]);

    let w = world("adr-007-l2-excludes-control-planes");
    let p = &list(&w, 0, Res::CiliumL2Policies)[0];
    assert_eq!(
        p["spec"]["nodeSelector"]["matchExpressions"][0]["operator"],
        "DoesNotExist"
    );
    assert!(
        get(
            &w,
            0,
            Res::Leases,
            "kube-system",
            "cilium-l2announce-traefik-traefik"
        )
        .is_none(),
        "no node campaigns"
    );
    assert!(!w.reachability().ingress[0]);
    assert!(w.reachability().ingress[1], "production untouched");

    let w = world("adr-007-single-replica");
    let pods = list(&w, 0, Res::Pods)
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["k8s-app"] == "kube-dns")
        .count();
    assert_eq!(pods, 1);

    let w = world("adr-007-pdb-selects-nothing");
    let pdb = get(&w, 0, Res::PodDisruptionBudgets, "kube-system", "coredns").expect("pdb");
    assert_eq!(
        (
            pdb["status"]["expectedPods"].as_i64(),
            pdb["status"]["disruptionsAllowed"].as_i64()
        ),
        (Some(0), Some(0))
    );
}

/// A sidecar is an init container with `restartPolicy: Always` in the template and in each
/// pod, reported in `initContainerStatuses` and in the pod's metrics; the app container keeps
/// its own request, and the lab places the pods by both together, one 4Gi pod per 7Gi node.
#[tokio::test]
async fn a_sidecar_runs_beside_the_app_container_and_is_placed_with_it() {
    let w = world("adr-007-sidecar-fills-survivors");
    let mib = |v: &Value| v.as_str().map(str::to_string);
    let deployment = get(&w, 0, Res::Deployments, "whoami", "whoami").expect("whoami");
    let template = &deployment["spec"]["template"]["spec"];
    assert_eq!(template["initContainers"][0]["name"], "whoami-sidecar");
    assert_eq!(template["initContainers"][0]["restartPolicy"], "Always");
    assert_eq!(
        mib(&template["initContainers"][0]["resources"]["requests"]["memory"]).as_deref(),
        Some("2Gi")
    );
    assert_eq!(
        mib(&template["containers"][0]["resources"]["requests"]["memory"]).as_deref(),
        Some("2Gi")
    );
    let pods: Vec<Value> = list(&w, 0, Res::Pods)
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["app.kubernetes.io/name"] == "whoami")
        .collect();
    assert_eq!(pods.len(), 3);
    let nodes: BTreeSet<&str> = pods
        .iter()
        .filter_map(|p| p["spec"]["nodeName"].as_str())
        .collect();
    assert_eq!(nodes.len(), 3, "one 4Gi pod per node: {nodes:?}");
    for pod in &pods {
        assert_eq!(pod["spec"]["initContainers"], template["initContainers"]);
        let status = &pod["status"]["initContainerStatuses"][0];
        assert_eq!(status["name"], "whoami-sidecar");
        assert_eq!(status["ready"], true);
        assert!(status["state"]["running"].is_object(), "{status}");
        let name = pod["metadata"]["name"].as_str().unwrap();
        let metrics = get(&w, 0, Res::PodMetrics, "whoami", name).expect("metrics");
        let containers: Vec<&str> = metrics["containers"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(containers, ["whoami", "whoami-sidecar"]);
    }
}

/// The disk's `Schedulable` condition, as longhorn-manager reports it in
/// `status.diskStatus.<disk>.conditions`, on every Longhorn node of `env` that has a disk.
fn disk_schedulable(w: &Shared, env: usize) -> Vec<Value> {
    list(w, env, Res::LonghornNodes)
        .iter()
        .flat_map(|n| {
            n["status"]["diskStatus"]
                .as_object()
                .into_iter()
                .flat_map(|m| m.values())
                .filter_map(|d| {
                    d["conditions"]
                        .as_array()?
                        .iter()
                        .find(|c| c["type"] == "Schedulable")
                        .cloned()
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[tokio::test]
async fn longhorn_nodes_carry_the_conditions_the_replica_scheduler_reads() {
    // Healthy: node Ready and Schedulable True, each disk Schedulable True.
    let w = world("adr-007");
    for n in list(&w, 0, Res::LonghornNodes) {
        for kind in ["Ready", "Schedulable"] {
            let c = n["status"]["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
                .unwrap_or_else(|| panic!("{kind} on {}", n["metadata"]["name"]));
            assert_eq!(c["status"], "True", "{c}");
        }
    }
    let healthy = disk_schedulable(&w, 0);
    assert_eq!(healthy.len(), 3);
    assert!(healthy.iter().all(|c| c["status"] == "True"), "{healthy:?}");

    // Filled: 7Gi of replicas on an 8Gi disk leaves 1Gi, at most Longhorn's default
    // storage-minimal-available-percentage (25%): DiskPressure, allowScheduling still true.
    let s = Scenario::from_yaml(
        "full-disk",
        "name: full-disk\nextends: adr-007\nset:\n  environments[name=lab].longhorn.disk_size: 8Gi\n",
    )
    .expect("scenario");
    let w = Shared::new(World::build(&s, Plan::new(1), SimClock::new(1.0)).expect("builds"));
    let full = disk_schedulable(&w, 0);
    assert_eq!(full.len(), 3);
    for c in &full {
        assert_eq!(c["status"], "False", "{c}");
        assert_eq!(c["reason"], "DiskPressure", "{c}");
        assert!(
            c["message"].as_str().unwrap_or("").contains(
                "is not schedulable for more replica; Actual space usage condition failed"
            ),
            "{c}"
        );
    }
    for n in list(&w, 0, Res::LonghornNodes) {
        for d in n["spec"]["disks"]
            .as_object()
            .into_iter()
            .flat_map(|m| m.values())
        {
            assert_eq!(d["allowScheduling"], true);
        }
    }
}

#[tokio::test]
async fn a_volume_lists_the_pods_of_the_workload_that_mounts_it_as_longhorn_records_them() {
    let s = Scenario::from_yaml(
        "db-volume",
        "name: db-volume\nextends: adr-007\nset:\n  environments[name=lab].longhorn.volumes[name=pvc-3f1c2a4e-0b1d-4c55-9a51-2d7e8f0a1b01].used_by: whoami-db\n",
    )
    .expect("scenario");
    let w = Shared::new(World::build(&s, Plan::new(1), SimClock::new(1.0)).expect("builds"));
    let volumes = list(&w, 0, Res::LonghornVolumes);
    let v = volumes
        .iter()
        .find(|v| v["metadata"]["name"] == "pvc-3f1c2a4e-0b1d-4c55-9a51-2d7e8f0a1b01")
        .expect("the volume");
    let k8s = &v["status"]["kubernetesStatus"];
    assert_eq!(k8s["namespace"], "whoami", "{k8s}");
    assert_eq!(v["spec"]["accessMode"], "rwo");
    let users = k8s["workloadsStatus"].as_array().expect("a list");
    assert_eq!(users.len(), 1, "{k8s}");
    assert!(
        users[0]["podName"]
            .as_str()
            .unwrap_or("")
            .starts_with("whoami-db-"),
        "{k8s}"
    );
    assert_eq!(users[0]["workloadType"], "StatefulSet");
    // Without `used_by`, Longhorn lists no pod.
    let w = world("adr-007");
    let volumes = list(&w, 0, Res::LonghornVolumes);
    assert!(volumes.iter().all(|v| {
        v["status"]["kubernetesStatus"]["workloadsStatus"]
            .as_array()
            .is_none_or(|a| a.is_empty())
    }));
}
