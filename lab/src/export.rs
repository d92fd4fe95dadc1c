//! A lab environment's Kubernetes objects as manifests another API server accepts: what the
//! lab serves, in the order `kubectl create` needs (namespaces first, owners after the
//! objects they adopt), with what a server assigns (uid, resourceVersion, creation time,
//! generation) removed. The conformance tests load these into a real kube-apiserver and
//! compare `gates check` there with the lab.
//!
//! Left out, because a real cluster computes or serves them itself: EndpointSlices (the
//! endpointslice controller), the metrics API (metrics-server, not storable), and the
//! CiliumLoadBalancerIPPool (gates does not read it; no CRD for it is shipped). Owner
//! references are dropped: they name the lab's uids, and the real controllers adopt pods and
//! ReplicaSets by their selectors instead. A Longhorn `InstanceManager`'s is kept: nothing on a
//! real plane without Longhorn adopts an instance-manager pod, and the reference is what tells
//! gates the pod goes with its node (no CRD defines the kind there, so the garbage collector
//! cannot look the owner up and leaves the pod alone). Status is kept; the loader writes it
//! where no real controller or kubelet would (Services, the Cilium and Longhorn objects, Nodes).

use crate::resources::{Res, def};
use crate::world::World;
use serde_json::Value;

/// The order objects are created in: a namespace before what lives in it, nodes before the
/// pods bound to them, pods before the ReplicaSets that adopt them, ReplicaSets before their
/// Deployments (so the Deployment finds its ReplicaSet instead of making a new one).
pub const ORDER: &[Res] = &[
    Res::Namespaces,
    Res::Nodes,
    Res::Services,
    Res::Pods,
    Res::ReplicaSets,
    Res::Deployments,
    Res::DaemonSets,
    Res::StatefulSets,
    Res::PodDisruptionBudgets,
    Res::Leases,
    Res::CiliumL2Policies,
    Res::LonghornNodes,
    Res::LonghornVolumes,
    Res::LonghornReplicas,
    Res::LonghornSettings,
];

/// The CustomResourceDefinitions for the kinds gates reads that Kubernetes does not define,
/// written by this project from the relevant parts of Cilium's and Longhorn's schemas.
pub const CRDS: &[(&str, &str)] = &[
    ("lab/crds/cilium.yaml", include_str!("../crds/cilium.yaml")),
    (
        "lab/crds/longhorn.yaml",
        include_str!("../crds/longhorn.yaml"),
    ),
];

/// Every CRD document of [`CRDS`], parsed.
pub fn crds() -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for (path, text) in CRDS {
        let docs: Vec<Value> = crate::yaml::documents(text).map_err(|e| format!("{path}: {e}"))?;
        out.extend(docs);
    }
    Ok(out)
}

/// The objects of environment `env`, in [`ORDER`].
pub fn manifests(world: &World, env: usize) -> Vec<Value> {
    let store = &world.envs[env].store;
    let mut out = Vec::new();
    for &res in ORDER {
        let d = def(res);
        for (_, object) in store.list(res) {
            let mut object = (*object).clone();
            object["apiVersion"] = Value::from(d.api_version());
            object["kind"] = Value::from(d.kind);
            strip_server_fields(&mut object);
            out.push(object);
        }
    }
    out
}

/// The manifests of `env` as one multi-document YAML stream.
pub fn manifests_yaml(world: &World, env: usize) -> String {
    let mut out = String::new();
    for object in manifests(world, env) {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&object).unwrap_or_default());
    }
    out
}

fn strip_server_fields(object: &mut Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
            "selfLink",
        ] {
            meta.remove(field);
        }
        let longhorn_owners: Vec<Value> = meta
            .remove("ownerReferences")
            .and_then(|refs| refs.as_array().cloned())
            .unwrap_or_default()
            .into_iter()
            .filter(|r| {
                r["apiVersion"]
                    .as_str()
                    .is_some_and(|v| v.starts_with("longhorn.io/"))
                    && r["kind"] == "InstanceManager"
            })
            .collect();
        if !longhorn_owners.is_empty() {
            meta.insert("ownerReferences".into(), Value::from(longhorn_owners));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Plan;
    use crate::clock::SimClock;
    use crate::scenario::Scenario;

    fn world(scenario: &str) -> World {
        let scenario = Scenario::load(scenario).expect("built-in scenario");
        World::build(&scenario, Plan::new(90), SimClock::new(1.0)).expect("world builds")
    }

    fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
        objects.iter().filter(|o| o["kind"] == kind).collect()
    }

    #[test]
    fn manifests_carry_no_field_a_server_assigns() {
        let objects = manifests(&world("adr-007"), 0);
        assert!(objects.len() > 50, "{}", objects.len());
        for o in &objects {
            let meta = &o["metadata"];
            for field in ["uid", "resourceVersion", "creationTimestamp"] {
                assert!(meta.get(field).is_none(), "{field} left in {o:#}");
            }
            // Only an instance manager's owner, which nothing on a real plane adopts.
            for owner in meta["ownerReferences"].as_array().into_iter().flatten() {
                assert_eq!(owner["kind"], "InstanceManager", "{o:#}");
            }
            assert!(
                o["apiVersion"].is_string() && o["kind"].is_string(),
                "{o:#}"
            );
        }
    }

    #[test]
    fn an_instance_manager_pod_keeps_its_owner_and_its_pdb_is_exported() {
        let objects = manifests(&world("adr-007"), 0);
        let managers: Vec<&Value> = of_kind(&objects, "Pod")
            .into_iter()
            .filter(|p| p["metadata"]["labels"]["longhorn.io/component"] == "instance-manager")
            .collect();
        assert_eq!(managers.len(), 3, "one per node");
        for pod in managers {
            let name = pod["metadata"]["name"].as_str().unwrap();
            assert_eq!(pod["metadata"]["ownerReferences"][0]["name"], name);
            assert!(
                of_kind(&objects, "PodDisruptionBudget")
                    .iter()
                    .any(|b| b["metadata"]["name"] == name && b["spec"]["minAvailable"] == 1),
                "{name}"
            );
        }
    }

    #[test]
    fn namespaces_come_first_and_replica_sets_before_their_deployments() {
        let objects = manifests(&world("adr-007"), 0);
        // Built-in kinds only (Longhorn has a `Node` kind of its own).
        let builtin =
            |o: &Value, kind: &str| o["kind"] == kind && !o["apiVersion"].to_string().contains('.');
        let first = |kind: &str| objects.iter().position(|o| builtin(o, kind)).unwrap();
        let last = |kind: &str| objects.iter().rposition(|o| builtin(o, kind)).unwrap();
        assert_eq!(first("Namespace"), 0);
        assert!(last("Namespace") < first("Pod"));
        assert!(last("Node") < first("Pod"));
        assert!(last("Pod") < first("ReplicaSet"));
        assert!(last("ReplicaSet") < first("Deployment"));
    }

    #[test]
    fn what_a_real_cluster_computes_itself_is_left_out() {
        let objects = manifests(&world("adr-007"), 0);
        for kind in [
            "EndpointSlice",
            "NodeMetrics",
            "PodMetrics",
            "CiliumLoadBalancerIPPool",
        ] {
            assert!(of_kind(&objects, kind).is_empty(), "{kind} exported");
        }
        assert!(!of_kind(&objects, "CiliumL2AnnouncementPolicy").is_empty());
        assert!(!of_kind(&objects, "Volume").is_empty());
    }

    #[test]
    fn every_kind_exported_has_a_crd_or_is_built_in() {
        let crds = crds().unwrap();
        let defined: Vec<(String, String)> = crds
            .iter()
            .map(|c| {
                (
                    c["spec"]["group"].as_str().unwrap().to_string(),
                    c["spec"]["names"]["kind"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(defined.len(), 5);
        for o in manifests(&world("adr-007"), 0) {
            let api_version = o["apiVersion"].as_str().unwrap();
            let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
            if group.contains('.') && !group.ends_with(".k8s.io") {
                let kind = o["kind"].as_str().unwrap().to_string();
                assert!(
                    defined.contains(&(group.to_string(), kind.clone())),
                    "no CRD for {group} {kind}"
                );
            }
        }
    }

    #[test]
    fn the_yaml_stream_reads_back_as_the_same_objects() {
        let w = world("staging-today");
        let text = manifests_yaml(&w, 0);
        let back: Vec<Value> = crate::yaml::documents(&text).unwrap();
        assert_eq!(back, manifests(&w, 0));
    }
}
