//! The lab's Kubernetes API over real HTTPS on loopback: auth, discovery, lists with
//! selectors and paging, get, watch; read with kube-rs, a client nobody here wrote.

use crate::common;

use crate::common::start;
use gates_lab::addr::{INGRESS_HTTP_PORT, INGRESS_HTTPS_PORT, KUBE_PORT};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::{ApiResource, Discovery};
use std::net::SocketAddr;

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
    assert_eq!(ip, Some(lab.plan.ingress_ip(0).to_string()));
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_decide_who_may_do_what() {
    let (lab, _dir) = start("adr-007", 21, 1.0).await;
    let http = common::https_client(&lab);
    let base = lab.api_url(0);
    let r = http
        .get(format!("{base}/api/v1/nodes"))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 401);
    let body: serde_json::Value = r.json().await.expect("json");
    assert_eq!(
        (
            body["kind"].as_str(),
            body["reason"].as_str(),
            body["code"].as_i64()
        ),
        (Some("Status"), Some("Unauthorized"), Some(401))
    );
    let r = http
        .get(format!("{base}/api/v1/nodes"))
        .bearer_auth("wrong")
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 401);
    // Health is public.
    let r = http
        .get(format!("{base}/readyz"))
        .send()
        .await
        .expect("send");
    assert_eq!(
        (r.status().as_u16(), r.text().await.expect("text")),
        (200, "ok".to_string())
    );

    let ro = lab.read_only_token();
    let r = http
        .get(format!("{base}/api/v1/nodes"))
        .bearer_auth(ro)
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 200);
    let r = http
        .delete(format!("{base}/api/v1/namespaces/kube-system/pods/x"))
        .bearer_auth(ro)
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 403);
    let body: serde_json::Value = r.json().await.expect("json");
    assert_eq!(body["reason"], "Forbidden");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("cannot delete resource \"pods\"")),
        "{body}"
    );
    let r = http
        .post(format!(
            "{base}/apis/apps/v1/namespaces/default/deployments"
        ))
        .bearer_auth(ro)
        .body("{}")
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 403);

    let admin = lab.admin_token();
    let r = http
        .get(format!("{base}/api/v1/namespaces/kube-system/pods/nope"))
        .bearer_auth(admin)
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 404);
    let body: serde_json::Value = r.json().await.expect("json");
    assert_eq!(body["message"], "pods \"nope\" not found");
    assert_eq!(body["details"]["kind"], "pods");
    // Every request was logged with its client and verb.
    let log = lab.log.snapshot();
    assert!(
        log.iter()
            .any(|r| r.verb == "DELETE" && r.status == 403 && !r.read_only)
    );
    assert!(
        log.iter()
            .filter(|r| r.protocol == gates_lab::reqlog::Protocol::Kube)
            .all(|r| r.client.starts_with("127."))
    );
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_page_and_filter_like_the_real_server() {
    let (lab, _dir) = start("adr-007", 22, 1.0).await;
    let http = common::https_client(&lab);
    let base = lab.api_url(0);
    let token = lab.admin_token();
    let get = |url: String| {
        let http = http.clone();
        async move {
            let r = http.get(url).bearer_auth(token).send().await.expect("send");
            assert_eq!(r.status(), 200);
            r.json::<serde_json::Value>().await.expect("json")
        }
    };
    let all = get(format!("{base}/api/v1/pods")).await;
    let total = all["items"].as_array().expect("items").len();
    assert!(
        all["items"][0].get("kind").is_none(),
        "typed list items carry no kind"
    );
    let mut seen = Vec::new();
    let mut url = format!("{base}/api/v1/pods?limit=7");
    loop {
        let page = get(url.clone()).await;
        let items = page["items"].as_array().expect("items");
        assert!(items.len() <= 7);
        seen.extend(
            items
                .iter()
                .map(|i| format!("{}/{}", i["metadata"]["namespace"], i["metadata"]["name"])),
        );
        match page["metadata"]["continue"].as_str() {
            Some(c) => {
                // Exact while nothing changes, as kube-apiserver's count is.
                assert_eq!(
                    page["metadata"]["remainingItemCount"].as_u64(),
                    Some((total - seen.len()) as u64)
                );
                url = format!("{base}/api/v1/pods?limit=7&continue={c}");
            }
            None => break,
        }
    }
    let unique: std::collections::BTreeSet<_> = seen.iter().collect();
    assert_eq!((seen.len(), unique.len()), (total, total));
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(
        seen, sorted,
        "pages follow one another in (namespace, name) order"
    );

    // A namespace's list pages within the namespace and ends with it.
    let in_ns = get(format!("{base}/api/v1/namespaces/kube-system/pods")).await;
    let in_ns_total = in_ns["items"].as_array().expect("items").len();
    assert!(in_ns_total > 2, "{in_ns_total}");
    let mut in_ns_seen = 0;
    let mut url = format!("{base}/api/v1/namespaces/kube-system/pods?limit=2");
    loop {
        let page = get(url.clone()).await;
        let items = page["items"].as_array().expect("items");
        assert!(
            items
                .iter()
                .all(|p| p["metadata"]["namespace"] == "kube-system")
        );
        in_ns_seen += items.len();
        match page["metadata"]["continue"].as_str() {
            Some(c) => {
                assert_eq!(
                    page["metadata"]["remainingItemCount"].as_u64(),
                    Some((in_ns_total - in_ns_seen) as u64)
                );
                url = format!("{base}/api/v1/namespaces/kube-system/pods?limit=2&continue={c}");
            }
            None => break,
        }
    }
    assert_eq!(in_ns_seen, in_ns_total);

    let sel = get(format!(
        "{base}/api/v1/pods?labelSelector=k8s-app%20in%20(kube-dns,nope),tier!%3Ddb"
    ))
    .await;
    assert_eq!(sel["items"].as_array().expect("items").len(), 2);
    let on = get(format!(
        "{base}/api/v1/pods?fieldSelector=spec.nodeName%3Dtalos-lab-cp-01"
    ))
    .await;
    assert!(
        on["items"]
            .as_array()
            .expect("items")
            .iter()
            .all(|p| p["spec"]["nodeName"] == "talos-lab-cp-01")
    );
    let ns = get(format!("{base}/api/v1/namespaces/kube-system/pods")).await;
    assert!(
        ns["items"]
            .as_array()
            .expect("items")
            .iter()
            .all(|p| p["metadata"]["namespace"] == "kube-system")
    );
    let r = http
        .get(format!(
            "{base}/api/v1/pods?fieldSelector=spec.restartPolicy%3DAlways"
        ))
        .bearer_auth(token)
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 400);
    let crd = get(format!(
        "{base}/apis/cilium.io/v2alpha1/ciliuml2announcementpolicies"
    ))
    .await;
    assert_eq!(
        crd["items"][0]["kind"], "CiliumL2AnnouncementPolicy",
        "custom resources keep their kind in lists"
    );
    let r = http
        .get(format!(
            "{base}/apis/cilium.io/v2alpha1/namespaces/x/ciliuml2announcementpolicies"
        ))
        .bearer_auth(token)
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 404, "cluster-scoped");
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_streams_changes_from_a_list_resource_version() {
    use futures::StreamExt;
    let (lab, _dir) = start("adr-007", 23, 1.0).await;
    let client = common::kube_client(&lab, "lab").await;
    let pods: Api<Pod> = Api::all(client.clone());
    let lp = ListParams::default().fields("spec.nodeName=talos-lab-cp-02");
    let list = pods.list(&lp).await.expect("list");
    let rv = list.metadata.resource_version.clone().expect("rv");
    let wp = kube::api::WatchParams::default()
        .fields("spec.nodeName=talos-lab-cp-02")
        .timeout(30);
    let mut stream = pods.watch(&wp, &rv).await.expect("watch").boxed();
    // cp-02, not cp-01: cp-01 holds the API VIP this watch runs through, and its loss would
    // close the stream before the event could arrive.
    lab.shared.stop_vm(102).expect("stop");
    let next = tokio::time::timeout(std::time::Duration::from_secs(10), stream.next())
        .await
        .expect("an event in time");
    match next {
        Some(Ok(kube::api::WatchEvent::Modified(p))) => {
            assert_eq!(
                p.spec.and_then(|s| s.node_name).as_deref(),
                Some("talos-lab-cp-02")
            );
        }
        other => panic!("expected MODIFIED, got {other:?}"),
    }
    // The node's own API address stalls now, as a powered-off machine drops packets.
    // (Listeners follow the world asynchronously, within milliseconds.)
    common::eventually(5, "a powered-off node stalls connections", || async {
        common::stalls(SocketAddr::from((lab.plan.node_ip(1), KUBE_PORT))).await
    })
    .await;
    // Without a resourceVersion a watch starts with the current objects as ADDED.
    let client2 = common::kube_client(&lab, "lab-production").await;
    let nodes: Api<Node> = Api::all(client2);
    let mut s = nodes
        .watch(&kube::api::WatchParams::default().timeout(5), "0")
        .await
        .expect("watch")
        .boxed();
    let first = tokio::time::timeout(std::time::Duration::from_secs(10), s.next())
        .await
        .expect("event");
    assert!(
        matches!(first, Some(Ok(kube::api::WatchEvent::Added(_)))),
        "{first:?}"
    );
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_vip_ingress_and_readyz_follow_the_world() {
    // Speed 20: the 60 s VIP failover takes 3 s, the 15 s lease 0.75 s.
    let (lab, _dir) = start("adr-007", 24, 20.0).await;
    let http = common::https_client(&lab);
    let plain = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(5))
        .build()
        .expect("client");
    let ingress_url = lab.ingress_url(0);
    let ingress = |host: &'static str| {
        let plain = plain.clone();
        let url = ingress_url.clone();
        async move {
            plain
                .get(url)
                .header("Host", host)
                .send()
                .await
                .map(|r| r.status().as_u16())
        }
    };
    assert_eq!(ingress("whoami.lab.internal").await.expect("up"), 200);
    assert_eq!(ingress("other.example").await.expect("up"), 404);
    let r = http
        .get(format!(
            "https://{}:{INGRESS_HTTPS_PORT}/",
            lab.plan.ingress_ip(0)
        ))
        .header("Host", "whoami.lab.internal")
        .send()
        .await
        .expect("https ingress");
    assert_eq!(r.status(), 200);

    lab.shared.power_loss_host("pve1").expect("power loss");
    // Dead addresses drop packets: connects hang, they are never refused.
    common::eventually(5, "announcing node gone: nothing answers", || async {
        common::stalls(SocketAddr::from((
            lab.plan.ingress_ip(0),
            INGRESS_HTTP_PORT,
        )))
        .await
    })
    .await;
    common::eventually(5, "VIP gone with its holder", || async {
        common::stalls(SocketAddr::from((lab.plan.vip_ip(0), KUBE_PORT))).await
    })
    .await;
    common::eventually(20, "ingress back on another node", || async {
        ingress("whoami.lab.internal").await.ok() == Some(200)
    })
    .await;
    common::eventually(20, "VIP back on another node", || async {
        http.get(format!("{}/readyz", lab.api_url(0)))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
    })
    .await;

    // Second host: etcd loses quorum; the surviving node's API says so, after waiting for
    // etcd as the real one does (2 s health check, 5 s request timeout; at speed 20).
    lab.shared.power_loss_host("pve2").expect("power loss");
    let asked = std::time::Instant::now();
    let r = http
        .get(format!("{}/readyz?verbose", lab.node_api_url(2)))
        .send()
        .await
        .expect("node 3 up");
    assert_eq!(r.status(), 500);
    assert!(r.text().await.expect("text").contains("[-]etcd failed"));
    assert!(
        asked.elapsed() >= std::time::Duration::from_millis(100),
        "readyz blocks for the etcd health check: {:?}",
        asked.elapsed()
    );
    let asked = std::time::Instant::now();
    let r = http
        .get(format!("{}/api/v1/nodes", lab.node_api_url(2)))
        .bearer_auth(lab.admin_token())
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 500);
    assert!(
        asked.elapsed() >= std::time::Duration::from_millis(250),
        "a request blocks for etcd's request timeout: {:?}",
        asked.elapsed()
    );

    let truth = lab.ground_truth();
    let api = &truth.targets["api/lab"].outages;
    assert!(!api.is_empty());
    let failover = api[0].duration_sim().expect("the outage ended");
    assert!((failover - 60.0).abs() < 1e-6, "{failover}");
    // The control endpoint serves the same.
    let events: serde_json::Value = plain
        .get(format!("{}/events", lab.control_url()))
        .send()
        .await
        .expect("control")
        .json()
        .await
        .expect("json");
    assert!(
        events["events"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["kind"] == "quorum-lost"))
    );
    let reqs: serde_json::Value = plain
        .get(format!("{}/requests", lab.control_url()))
        .send()
        .await
        .expect("control")
        .json()
        .await
        .expect("json");
    assert!(reqs.as_array().is_some_and(|r| !r.is_empty()));
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_watchers_list_then_watch_and_stream_lists() {
    use futures::StreamExt;
    use kube::runtime::watcher;
    let (lab, _dir) = start("adr-007", 25, 1.0).await;
    let client = common::kube_client(&lab, "lab").await;
    for config in [
        watcher::Config::default(),
        watcher::Config::default().streaming_lists(),
    ] {
        let api: Api<Node> = Api::all(client.clone());
        let mut stream = watcher(api, config).boxed();
        let mut nodes = 0;
        let done = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while let Some(ev) = stream.next().await {
                match ev.expect("watch event") {
                    watcher::Event::InitApply(_) => nodes += 1,
                    watcher::Event::InitDone => return true,
                    _ => {}
                }
            }
            false
        })
        .await
        .expect("initial listing completes");
        assert!(done);
        assert_eq!(nodes, 3);
    }
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregated_discovery_lists_every_group() {
    let (lab, _dir) = start("adr-007", 26, 1.0).await;
    let client = common::kube_client(&lab, "lab").await;
    let d = Discovery::new(client.clone())
        .run_aggregated()
        .await
        .expect("aggregated discovery");
    let l2 = d.get("cilium.io").expect("cilium.io");
    assert!(
        l2.versioned_resources("v2alpha1")
            .iter()
            .any(|(ar, _)| ar.plural == "ciliuml2announcementpolicies")
    );
    let core = d.get("").expect("core");
    assert!(
        core.recommended_resources()
            .iter()
            .any(|(ar, caps)| ar.plural == "pods"
                && caps.scope == kube::discovery::Scope::Namespaced)
    );
    for g in [
        "apps",
        "policy",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "longhorn.io",
        "metrics.k8s.io",
    ] {
        assert!(d.has_group(g), "{g}");
    }
    // Legacy clients still get the legacy documents.
    let legacy = Discovery::new(client)
        .run()
        .await
        .expect("legacy discovery");
    assert!(legacy.has_group("longhorn.io"));
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_can_be_created_and_replaced_with_the_real_servers_conflicts() {
    let (lab, _dir) = start("adr-007", 29, 1.0).await;
    let client = common::kube_client(&lab, "lab").await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let mut lease: Lease = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "gates-chaos-lab"},
        "spec": {"holderIdentity": "run-1", "leaseDurationSeconds": 600}
    }))
    .unwrap();
    let created = leases
        .create(&Default::default(), &lease)
        .await
        .expect("created");
    assert_eq!(
        created
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref()),
        Some("run-1")
    );
    let again = leases.create(&Default::default(), &lease).await;
    assert!(
        matches!(&again, Err(kube::Error::Api(e)) if e.code == 409 && e.reason == "AlreadyExists"),
        "{again:?}"
    );
    // A replace with the current resourceVersion wins; one with a stale version conflicts.
    let mut newer = created.clone();
    newer.spec.as_mut().unwrap().holder_identity = Some("run-2".into());
    let replaced = leases
        .replace("gates-chaos-lab", &Default::default(), &newer)
        .await
        .expect("replaced");
    assert_eq!(
        leases
            .get("gates-chaos-lab")
            .await
            .unwrap()
            .spec
            .unwrap()
            .holder_identity,
        Some("run-2".into())
    );
    assert_ne!(
        replaced.metadata.resource_version,
        created.metadata.resource_version
    );
    let stale = leases
        .replace("gates-chaos-lab", &Default::default(), &newer)
        .await;
    assert!(
        matches!(&stale, Err(kube::Error::Api(e)) if e.code == 409 && e.reason == "Conflict"),
        "{stale:?}"
    );
    // No such namespace: 404, as the real server answers.
    lease.metadata.namespace = Some("gates-nowhere".into());
    let missing = Api::<Lease>::namespaced(client.clone(), "gates-nowhere")
        .create(&Default::default(), &lease)
        .await;
    assert!(
        matches!(&missing, Err(kube::Error::Api(e)) if e.code == 404),
        "{missing:?}"
    );
    // Every other write is still refused.
    let pods: Api<Pod> = Api::namespaced(client, "kube-system");
    let delete = pods.delete("x", &Default::default()).await;
    assert!(
        matches!(&delete, Err(kube::Error::Api(e)) if e.code == 405),
        "{delete:?}"
    );
    lab.stop().await;
}
