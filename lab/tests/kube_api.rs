//! The lab's Kubernetes API over real HTTPS on loopback: auth, discovery, lists with
//! selectors and paging, get, watch; read with kube-rs, a client nobody here wrote.

mod common;

use common::start;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::{ApiResource, Discovery};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_lists_every_resource_of_adr_007() {
    let (lab, _dir) = start("adr-007", 20, 1.0).await;
    let client = common::kube_client(&lab, "lab").await;

    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("nodes");
    assert_eq!(nodes.items.len(), 3);
    let n0 = &nodes.items[0];
    let labels = n0.metadata.labels.as_ref().expect("labels");
    assert_eq!(
        labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some("pve1")
    );
    assert!(labels.contains_key("node-role.kubernetes.io/control-plane"));
    let uuid = &n0
        .status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .expect("nodeInfo")
        .system_uuid;
    assert_eq!(uuid, &uuid.to_lowercase());

    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("pods");
    assert!(pods.items.len() > 20, "{} pods", pods.items.len());
    let coredns = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().labels("k8s-app=kube-dns"))
        .await
        .expect("coredns");
    assert_eq!(coredns.items.len(), 2);
    let on: std::collections::BTreeSet<_> = coredns
        .items
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    assert_eq!(on.len(), 2, "two replicas on distinct nodes");

    assert!(
        !Api::<Deployment>::all(client.clone())
            .list(&ListParams::default())
            .await
            .expect("deploys")
            .items
            .is_empty()
    );
    assert!(
        !Api::<ReplicaSet>::all(client.clone())
            .list(&ListParams::default())
            .await
            .expect("rs")
            .items
            .is_empty()
    );
    assert!(
        !Api::<DaemonSet>::all(client.clone())
            .list(&ListParams::default())
            .await
            .expect("ds")
            .items
            .is_empty()
    );
    assert!(
        !Api::<StatefulSet>::all(client.clone())
            .list(&ListParams::default())
            .await
            .expect("sts")
            .items
            .is_empty()
    );
    assert!(
        !Api::<Namespace>::all(client.clone())
            .list(&ListParams::default())
            .await
            .expect("ns")
            .items
            .is_empty()
    );
    assert!(
        !Api::<EndpointSlice>::all(client.clone())
            .list(&ListParams::default())
            .await
            .expect("eps")
            .items
            .is_empty()
    );

    let pdbs = Api::<PodDisruptionBudget>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("pdbs");
    let pdb = pdbs
        .items
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("coredns"))
        .expect("coredns pdb");
    let st = pdb.status.as_ref().expect("status");
    assert_eq!(
        (
            st.expected_pods,
            st.current_healthy,
            st.desired_healthy,
            st.disruptions_allowed
        ),
        (2, 2, 1, 1)
    );

    let svcs = Api::<Service>::namespaced(client.clone(), "traefik")
        .list(&ListParams::default())
        .await
        .expect("svcs");
    let traefik = &svcs.items[0];
    let ip = traefik
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref())
        .and_then(|i| i[0].ip.clone());
    assert_eq!(ip, Some("127.20.3.1".to_string()));
    assert_eq!(
        traefik
            .spec
            .as_ref()
            .and_then(|s| s.external_traffic_policy.clone())
            .as_deref(),
        Some("Cluster")
    );

    let lease = Api::<Lease>::namespaced(client.clone(), "kube-system")
        .get("cilium-l2announce-traefik-traefik")
        .await
        .expect("lease");
    assert_eq!(
        lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .as_deref(),
        Some("talos-lab-cp-01")
    );

    // CRDs and metrics through discovery, as a harness would use DynamicObject.
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    for (group, plural, min) in [
        ("cilium.io", "ciliuml2announcementpolicies", 1),
        ("longhorn.io", "nodes", 3),
        ("longhorn.io", "volumes", 2),
        ("longhorn.io", "replicas", 6),
        ("longhorn.io", "settings", 5),
        ("metrics.k8s.io", "nodes", 3),
        ("metrics.k8s.io", "pods", 20),
    ] {
        let g = discovery
            .get(group)
            .unwrap_or_else(|| panic!("group {group}"));
        let (ar, _caps) = g
            .versions()
            .flat_map(|v| g.versioned_resources(v))
            .find(|(ar, _)| ar.plural == plural)
            .unwrap_or_else(|| panic!("{group}/{plural}"));
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let list = api
            .list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("{group}/{plural}: {e}"));
        assert!(
            list.items.len() >= min,
            "{group}/{plural}: {}",
            list.items.len()
        );
    }
    let ar = ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("metrics.k8s.io", "v1beta1", "NodeMetrics"),
        "nodes",
    );
    let m = Api::<DynamicObject>::all_with(client.clone(), &ar)
        .list(&ListParams::default())
        .await
        .expect("node metrics");
    assert!(
        m.items[0].data["usage"]["cpu"]
            .as_str()
            .is_some_and(|c| c.ends_with('n'))
    );
    lab.stop().await;
}
