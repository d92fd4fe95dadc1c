//! Talos apid over real mutual TLS on loopback, against the in-memory backend.
//! These tests start looking for a free subnet at 241..=247 (see `talos_support`).

use crate::talos_support::StateClient;
use crate::talos_support::proto::cosi::resource::{GetRequest, ListRequest, Resource};
use crate::talos_support::proto::machine::EtcdMemberListRequest;
use crate::talos_support::{NAMES, Nodes, metadata, start};
use gates_lab::addr::Plan;
use gates_lab::pki::{CaKind, CertificateAuthority, Eku, LeafSpec};
use std::net::IpAddr;
use tonic::Code;
use tonic::transport::Channel;

/// Connects and calls Version; any failure (handshake, transport, status) becomes text.
async fn version_with(
    nodes: &Nodes,
    identity: Option<&gates_lab::pki::CertifiedKey>,
    ca_pem: &str,
) -> Result<String, String> {
    let mut client = nodes
        .client_with(1, identity, ca_pem)
        .await
        .map_err(|e| format!("connect: {e:?}"))?;
    let resp = client.version(()).await.map_err(|s| format!("{s:?}"))?;
    Ok(resp.into_inner().messages[0]
        .version
        .as_ref()
        .map(|v| v.tag.clone())
        .unwrap_or_default())
}

#[tokio::test]
async fn mtls_with_the_admin_certificate_serves_version_and_services() {
    let nodes = start(241).await;
    let mut client = nodes.admin_client(1).await;
    let version = client.version(()).await.expect("version").into_inner();
    assert_eq!(version.messages.len(), 1);
    let v = &version.messages[0];
    assert!(v.metadata.is_none(), "a direct call carries no metadata");
    assert_eq!(v.version.as_ref().expect("info").tag, "v1.13.9");
    assert!(v.features.as_ref().expect("features").rbac);

    let services = client
        .service_list(())
        .await
        .expect("services")
        .into_inner();
    let list = &services.messages[0].services;
    let etcd = list.iter().find(|s| s.id == "etcd").expect("etcd service");
    assert_eq!(etcd.state, "Running");
    assert!(etcd.health.as_ref().expect("health").healthy);
    assert!(!etcd.events.as_ref().expect("events").events.is_empty());

    // The worker has no etcd service.
    let mut worker = nodes.admin_client(4).await;
    let services = worker
        .service_list(())
        .await
        .expect("services")
        .into_inner();
    assert!(services.messages[0].services.iter().all(|s| s.id != "etcd"));

    let records = nodes.records.lock().expect("records").clone();
    assert!(
        records
            .iter()
            .any(|r| r.path == "/machine.MachineService/Version" && r.status == 0 && r.read_only)
    );
}

#[tokio::test]
async fn client_certificates_must_chain_to_the_talos_ca_and_be_client_auth_only() {
    let nodes = start(242).await;
    let ca_pem = nodes.ca.cert_pem();
    assert_eq!(
        version_with(&nodes, Some(&nodes.admin), &ca_pem).await,
        Ok("v1.13.9".to_string())
    );

    // Rejections happen in the TLS handshake, before any RPC authorization.
    let tls_rejected = |r: Result<String, String>| match r {
        Ok(v) => panic!("accepted: {v}"),
        Err(e) => assert!(!e.contains("PermissionDenied"), "{e}"),
    };
    tls_rejected(version_with(&nodes, None, &ca_pem).await);

    let both = nodes
        .ca
        .issue(&LeafSpec {
            organizations: vec!["os:admin".into()],
            extended_key_usages: vec![Eku::ClientAuth, Eku::ServerAuth],
            ..LeafSpec::default()
        })
        .expect("cert");
    tls_rejected(version_with(&nodes, Some(&both), &ca_pem).await);

    let no_eku = nodes
        .ca
        .issue(&LeafSpec {
            organizations: vec!["os:admin".into()],
            ..LeafSpec::default()
        })
        .expect("cert");
    tls_rejected(version_with(&nodes, Some(&no_eku), &ca_pem).await);

    let other_ca = CertificateAuthority::new(CaKind::Talos).expect("ca");
    let stranger = other_ca.talos_admin_cert().expect("admin");
    tls_rejected(version_with(&nodes, Some(&stranger), &ca_pem).await);

    // Roles come from Subject.O.
    let reader = nodes.ca.talos_client_cert(&["os:reader"]).expect("reader");
    assert!(version_with(&nodes, Some(&reader), &ca_pem).await.is_ok());
    let nobody = nodes.ca.talos_client_cert(&["os:nothing"]).expect("cert");
    let denied = version_with(&nodes, Some(&nobody), &ca_pem)
        .await
        .expect_err("denied");
    assert!(
        denied.contains("PermissionDenied") && denied.contains("not authorized"),
        "{denied}"
    );
}

#[tokio::test]
async fn etcd_calls_on_a_worker_are_unimplemented() {
    let nodes = start(243).await;
    let mut worker = nodes.admin_client(4).await;
    let err = worker
        .etcd_member_list(EtcdMemberListRequest { query_local: true })
        .await
        .expect_err("worker");
    assert_eq!(err.code(), Code::Unimplemented);
    assert_eq!(
        err.message(),
        "member list is only available on control plane nodes"
    );
    let err = worker.etcd_status(()).await.expect_err("worker");
    assert_eq!(err.code(), Code::Unimplemented);
    let err = worker.etcd_alarm_list(()).await.expect_err("worker");
    assert_eq!(err.code(), Code::Unimplemented);
    assert!(worker.version(()).await.is_ok());
}

#[tokio::test]
async fn member_list_and_status_have_talos_shapes() {
    let nodes = start(244).await;
    let mut cp1 = nodes.admin_client(1).await;
    let list = cp1
        .etcd_member_list(EtcdMemberListRequest { query_local: true })
        .await
        .expect("members")
        .into_inner();
    assert_eq!(list.messages.len(), 1);
    let members = &list.messages[0].members;
    assert_eq!(members.len(), 3);
    let mut hostnames: Vec<&str> = members.iter().map(|m| m.hostname.as_str()).collect();
    hostnames.sort_unstable();
    assert_eq!(hostnames, &NAMES[..3]);
    let cp2 = members
        .iter()
        .find(|m| m.hostname == "talos-cp-2")
        .expect("cp2");
    assert_eq!(cp2.peer_urls, vec![format!("https://{}:2380", nodes.ip(2))]);
    assert!(!cp2.is_learner);
    assert_eq!(Some(cp2.id), nodes.backend.member_id("talos-cp-2"));

    let status = cp1.etcd_status(()).await.expect("status").into_inner();
    let s = status.messages[0]
        .member_status
        .as_ref()
        .expect("member status");
    assert_eq!(Some(s.member_id), nodes.backend.member_id("talos-cp-1"));
    assert_ne!(s.leader, 0);
    let alarms = cp1.etcd_alarm_list(()).await.expect("alarms").into_inner();
    assert!(alarms.messages[0].member_alarms.is_empty());

    // `node` routing: one message for the target, no metadata.
    let mut req = tonic::Request::new(());
    req.metadata_mut().insert("node", metadata(nodes.ip(2)));
    let routed = cp1.etcd_status(req).await.expect("routed").into_inner();
    assert!(routed.messages[0].metadata.is_none());
    assert_eq!(
        routed.messages[0]
            .member_status
            .as_ref()
            .expect("status")
            .member_id,
        nodes.backend.member_id("talos-cp-2").expect("id")
    );

    // Deprecated `nodes` fan-out: one element per target, tagged with the target string.
    let mut req = tonic::Request::new(());
    req.metadata_mut().append("nodes", metadata(nodes.ip(1)));
    req.metadata_mut().append("nodes", metadata(nodes.ip(3)));
    let fanned = cp1.version(req).await.expect("fan-out").into_inner();
    let hosts: Vec<&str> = fanned
        .messages
        .iter()
        .map(|m| m.metadata.as_ref().expect("metadata").hostname.as_str())
        .collect();
    assert_eq!(
        hosts,
        vec![nodes.ip(1).to_string(), nodes.ip(3).to_string()]
    );
}

#[tokio::test]
async fn down_nodes_stall_connections_and_quorum_loss_is_unavailable() {
    let nodes = start(245).await;
    let mut cp1 = nodes.admin_client(1).await;
    nodes.backend.set_up("talos-cp-3", false);

    // cp3's address drops packets now: a connect hangs, it is not refused.
    crate::talos_support::until_stalled(nodes.subnet, 3).await;

    // Two of three members up: the member list still works and still lists cp3.
    let list = cp1
        .etcd_member_list(EtcdMemberListRequest { query_local: true })
        .await
        .expect("quorum holds")
        .into_inner();
    assert_eq!(list.messages[0].members.len(), 3);

    // Fan-out to the dead node yields an error element, not a failed call.
    let mut req = tonic::Request::new(());
    req.metadata_mut().append("nodes", metadata(nodes.ip(3)));
    let fanned = cp1.version(req).await.expect("call succeeds").into_inner();
    let md = fanned.messages[0].metadata.as_ref().expect("metadata");
    assert_eq!(md.hostname, nodes.ip(3).to_string());
    assert!(md.error.contains("i/o timeout"), "{}", md.error);
    assert_eq!(
        md.status.as_ref().expect("status").code,
        Code::Unavailable as i32
    );
    assert!(fanned.messages[0].version.is_none());

    // `node` routing to the dead node fails the call itself.
    let mut req = tonic::Request::new(());
    req.metadata_mut().insert("node", metadata(nodes.ip(3)));
    assert_eq!(
        cp1.version(req).await.expect_err("dead").code(),
        Code::Unavailable
    );

    nodes.backend.set_up("talos-cp-2", false);
    let err = cp1
        .etcd_member_list(EtcdMemberListRequest { query_local: true })
        .await
        .expect_err("no quorum");
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(err.message(), "etcdserver: no leader");
}

/// Lists (`namespace`, `type`) on a node; the ids in stream order.
async fn list_ids(
    client: &mut StateClient<Channel>,
    namespace: &str,
    kind: &str,
    node: Option<std::net::IpAddr>,
) -> Result<Vec<Resource>, tonic::Status> {
    let mut req = tonic::Request::new(ListRequest {
        namespace: namespace.into(),
        r#type: kind.into(),
        options: None,
    });
    if let Some(n) = node {
        req.metadata_mut().insert("node", metadata(n));
    }
    let mut stream = client.list(req).await?.into_inner();
    let mut out = Vec::new();
    while let Some(msg) = stream.message().await? {
        out.extend(msg.resource);
    }
    Ok(out)
}

fn ids(resources: &[Resource]) -> Vec<String> {
    resources
        .iter()
        .map(|r| {
            r.metadata
                .as_ref()
                .map(|m| m.id.clone())
                .unwrap_or_default()
        })
        .collect()
}

const ADDRESSES: &str = "AddressStatuses.net.talos.dev";

#[tokio::test]
async fn cosi_serves_addresses_and_the_vip_only_on_its_holder() {
    let nodes = start(247).await;
    let vip = IpAddr::V4(Plan::new(nodes.subnet).vip_ip(0));
    nodes.backend.set_vip_holder(Some("talos-cp-2"), vip);
    let eth0 = |ip: IpAddr, prefix: u8| format!("eth0/{ip}/{prefix}");
    let reader = nodes.ca.talos_client_cert(&["os:reader"]).expect("reader");

    let mut cp1 = nodes.state_client(1, &reader).await;
    let listed = list_ids(&mut cp1, "network", ADDRESSES, None)
        .await
        .expect("list");
    assert_eq!(
        ids(&listed),
        ["lo/127.0.0.1/8".to_string(), eth0(nodes.ip(1), 24)]
    );
    let md = listed[1].metadata.as_ref().expect("metadata");
    assert_eq!(
        (md.namespace.as_str(), md.r#type.as_str()),
        ("network", ADDRESSES)
    );
    assert!(md.created.is_some() && md.updated.is_some());
    let yaml = &listed[1].spec.as_ref().expect("spec").yaml_spec;
    let spec: serde_json::Value = gates_lab::yaml::from_str(yaml).expect("yaml");
    assert_eq!(
        spec["address"].as_str(),
        Some(format!("{}/24", nodes.ip(1)).as_str())
    );
    assert_eq!(spec["linkName"].as_str(), Some("eth0"));

    let mut cp2 = nodes.state_client(2, &reader).await;
    let holder = list_ids(&mut cp2, "network", ADDRESSES, None)
        .await
        .expect("list");
    assert_eq!(
        ids(&holder),
        [
            "lo/127.0.0.1/8".to_string(),
            eth0(nodes.ip(2), 24),
            eth0(vip, 32)
        ]
    );

    // Get by id; a missing id is NotFound; another type lists nothing.
    let got = cp2
        .get(GetRequest {
            namespace: "network".into(),
            r#type: ADDRESSES.into(),
            id: eth0(vip, 32),
            options: None,
        })
        .await
        .expect("get")
        .into_inner();
    assert_eq!(ids(&[got.resource.expect("resource")]), [eth0(vip, 32)]);
    let missing = cp1
        .get(GetRequest {
            namespace: "network".into(),
            r#type: ADDRESSES.into(),
            id: eth0(vip, 32),
            options: None,
        })
        .await
        .expect_err("cp1 does not hold the VIP");
    assert_eq!(missing.code(), Code::NotFound);
    assert!(
        list_ids(&mut cp1, "network", "LinkStatuses.net.talos.dev", None)
            .await
            .expect("list")
            .is_empty()
    );

    // `node` routing: cp1 answers for cp2.
    let routed = list_ids(&mut cp1, "network", ADDRESSES, Some(nodes.ip(2)))
        .await
        .expect("routed");
    assert_eq!(ids(&routed).len(), 3);

    // RBAC: a role outside admin/operator/reader is denied.
    let backup = nodes
        .ca
        .talos_client_cert(&["os:etcd:backup"])
        .expect("cert");
    let mut denied = nodes.state_client(1, &backup).await;
    let err = list_ids(&mut denied, "network", ADDRESSES, None)
        .await
        .expect_err("denied");
    assert_eq!(err.code(), Code::PermissionDenied);

    // Without quorum the VIP is released; a down holder stalls connections.
    nodes.backend.set_up("talos-cp-3", false);
    nodes.backend.set_up("talos-cp-1", false);
    let released = list_ids(&mut cp2, "network", ADDRESSES, None)
        .await
        .expect("list");
    assert_eq!(ids(&released).len(), 2, "{:?}", ids(&released));
    nodes.backend.set_up("talos-cp-2", false);
    crate::talos_support::until_stalled(nodes.subnet, 2).await;
}
