//! The Talos client against a tonic apid stand-in over real mutual TLS on loopback.

use std::net::SocketAddr;
use std::time::Duration;

use crate::common::pki::{Ca, Leaf};
use gates_infra::RetryPolicy;
use gates_infra::talos::proto::common::Metadata;
use gates_infra::talos::proto::cosi::resource::{
    self as cosi,
    state_server::{State, StateServer},
};
use gates_infra::talos::proto::machine::{
    self as pb,
    machine_service_server::{MachineService, MachineServiceServer},
};
use gates_infra::talos::{
    EtcdAlarmKind, TalosClient, TalosCredentials, TalosError, TalosOptions, holds_address,
};
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status};

#[derive(Clone, Copy, PartialEq)]
enum Role {
    ControlPlane,
    Worker,
    Denied,
    NoQuorum,
}

struct Apid {
    role: Role,
}

impl Apid {
    /// apid answers a direct call locally; routing metadata would mean a proxied call.
    fn refuse_routing<T>(req: &Request<T>) -> Result<(), Status> {
        for key in ["node", "nodes"] {
            if req.metadata().get(key).is_some() {
                return Err(Status::invalid_argument(format!(
                    "unexpected {key} metadata"
                )));
            }
        }
        Ok(())
    }

    fn etcd_gate<T>(&self, req: &Request<T>, api: &str) -> Result<(), Status> {
        Self::refuse_routing(req)?;
        match self.role {
            Role::ControlPlane => Ok(()),
            Role::Worker => Err(Status::unimplemented(format!(
                "{api} is only available on control plane nodes"
            ))),
            Role::Denied => Err(Status::permission_denied("not authorized")),
            Role::NoQuorum => Err(Status::unavailable("etcdserver: no leader")),
        }
    }
}

fn member(id: u64, name: &str, ip: &str, learner: bool) -> pb::EtcdMember {
    pb::EtcdMember {
        id,
        hostname: name.to_string(),
        peer_urls: vec![format!("https://{ip}:2380")],
        client_urls: vec![format!("https://{ip}:2379")],
        is_learner: learner,
    }
}

#[tonic::async_trait]
impl MachineService for Apid {
    async fn version(&self, req: Request<()>) -> Result<Response<pb::VersionResponse>, Status> {
        Self::refuse_routing(&req)?;
        if self.role == Role::Denied {
            return Err(Status::permission_denied("not authorized"));
        }
        Ok(Response::new(pb::VersionResponse {
            messages: vec![pb::Version {
                metadata: None,
                version: Some(pb::VersionInfo {
                    tag: "v1.13.9".into(),
                    sha: "abc".into(),
                    built: String::new(),
                    go_version: "go1.24".into(),
                    os: "linux".into(),
                    arch: "amd64".into(),
                }),
                platform: Some(pb::PlatformInfo {
                    name: "nocloud".into(),
                    mode: "cloud".into(),
                }),
                features: Some(pb::FeaturesInfo { rbac: true }),
            }],
        }))
    }

    async fn etcd_member_list(
        &self,
        req: Request<pb::EtcdMemberListRequest>,
    ) -> Result<Response<pb::EtcdMemberListResponse>, Status> {
        self.etcd_gate(&req, "member list")?;
        if !req.get_ref().query_local {
            return Err(Status::invalid_argument("test server expects query_local"));
        }
        Ok(Response::new(pb::EtcdMemberListResponse {
            messages: vec![pb::EtcdMembers {
                metadata: None,
                legacy_members: vec![],
                members: vec![
                    member(0x4f3fb4c33808229a, "cp1", "127.0.0.1", false),
                    member(0x5225cca9d46339f4, "cp2", "127.0.0.2", false),
                    member(0x81048da043fcc3f3, "cp3", "127.0.0.3", true),
                ],
            }],
        }))
    }

    async fn etcd_status(
        &self,
        req: Request<()>,
    ) -> Result<Response<pb::EtcdStatusResponse>, Status> {
        self.etcd_gate(&req, "etcd status")?;
        Ok(Response::new(pb::EtcdStatusResponse {
            messages: vec![pb::EtcdStatus {
                metadata: None,
                member_status: Some(pb::EtcdMemberStatus {
                    protocol_version: "3.6.0".into(),
                    db_size: 4096,
                    db_size_in_use: 2048,
                    leader: 0x5225cca9d46339f4,
                    raft_index: 10,
                    raft_term: 2,
                    raft_applied_index: 10,
                    errors: vec![],
                    is_learner: false,
                    member_id: 0x4f3fb4c33808229a,
                    storage_version: "3.6.0".into(),
                }),
            }],
        }))
    }

    async fn etcd_alarm_list(
        &self,
        req: Request<()>,
    ) -> Result<Response<pb::EtcdAlarmListResponse>, Status> {
        self.etcd_gate(&req, "etcd alarm list")?;
        Ok(Response::new(pb::EtcdAlarmListResponse {
            messages: vec![pb::EtcdAlarm {
                metadata: None,
                member_alarms: vec![
                    pb::EtcdMemberAlarm {
                        member_id: 7,
                        alarm: 1,
                    },
                    pb::EtcdMemberAlarm {
                        member_id: 8,
                        alarm: 0,
                    },
                ],
            }],
        }))
    }

    async fn service_list(
        &self,
        req: Request<()>,
    ) -> Result<Response<pb::ServiceListResponse>, Status> {
        Self::refuse_routing(&req)?;
        Ok(Response::new(pb::ServiceListResponse {
            messages: vec![pb::ServiceList {
                metadata: Some(Metadata::default()),
                services: vec![
                    pb::ServiceInfo {
                        id: "etcd".into(),
                        state: "Running".into(),
                        events: None,
                        health: Some(pb::ServiceHealth {
                            unknown: false,
                            healthy: true,
                            last_message: "".into(),
                            last_change: None,
                        }),
                    },
                    pb::ServiceInfo {
                        id: "machined".into(),
                        state: "Running".into(),
                        events: None,
                        health: Some(pb::ServiceHealth {
                            unknown: true,
                            healthy: false,
                            last_message: "".into(),
                            last_change: None,
                        }),
                    },
                ],
            }],
        }))
    }
}

/// COSI `State` of the stand-in: the node's AddressStatuses as (id, YAML spec).
struct Cosi {
    role: Role,
    addresses: Vec<(String, String)>,
}

/// The YAML Talos renders for an AddressStatus spec (the fields gates reads and a few more).
fn address_yaml(cidr: &str, link: &str) -> String {
    let ip = cidr.split('/').next().unwrap_or_default();
    let scope = if link == "lo" { "host" } else { "global" };
    format!(
        "address: {cidr}\nlocal: {ip}\nbroadcast: \"\"\nanycast: \"\"\nmulticast: \"\"\n\
         linkIndex: 2\nlinkName: {link}\nfamily: inet4\nscope: {scope}\nflags: permanent\n\
         priority: 1024\n"
    )
}

/// Addresses of a node at `ip`, plus the VIP 10.5.0.10 when `vip`.
fn node_addresses(ip: &str, vip: bool) -> Vec<(String, String)> {
    let mut list = vec![
        (
            "lo/127.0.0.1/8".to_string(),
            address_yaml("127.0.0.1/8", "lo"),
        ),
        (
            format!("eth0/{ip}/24"),
            address_yaml(&format!("{ip}/24"), "eth0"),
        ),
    ];
    if vip {
        list.push((
            "eth0/10.5.0.10/32".to_string(),
            address_yaml("10.5.0.10/32", "eth0"),
        ));
    }
    list
}

fn resource(id: &str, yaml: &str) -> cosi::Resource {
    cosi::Resource {
        metadata: Some(cosi::Metadata {
            namespace: "network".into(),
            r#type: "AddressStatuses.net.talos.dev".into(),
            id: id.to_string(),
            version: "1".into(),
            owner: "network.AddressStatusController".into(),
            phase: "running".into(),
            ..cosi::Metadata::default()
        }),
        spec: Some(cosi::Spec {
            proto_spec: Vec::new(),
            yaml_spec: yaml.to_string(),
        }),
    }
}

type ListStream =
    tonic::codegen::tokio_stream::Iter<std::vec::IntoIter<Result<cosi::ListResponse, Status>>>;

#[tonic::async_trait]
impl State for Cosi {
    async fn get(
        &self,
        req: Request<cosi::GetRequest>,
    ) -> Result<Response<cosi::GetResponse>, Status> {
        Apid::refuse_routing(&req)?;
        if self.role == Role::Denied {
            return Err(Status::permission_denied("not authorized"));
        }
        let r = req.get_ref();
        self.addresses
            .iter()
            .find(|(id, _)| {
                r.namespace == "network"
                    && r.r#type == "AddressStatuses.net.talos.dev"
                    && *id == r.id
            })
            .map(|(id, yaml)| {
                Response::new(cosi::GetResponse {
                    resource: Some(resource(id, yaml)),
                })
            })
            .ok_or_else(|| Status::not_found(format!("resource {} doesn't exist", r.id)))
    }

    type ListStream = ListStream;

    async fn list(&self, req: Request<cosi::ListRequest>) -> Result<Response<ListStream>, Status> {
        Apid::refuse_routing(&req)?;
        if self.role == Role::Denied {
            return Err(Status::permission_denied("not authorized"));
        }
        let r = req.get_ref();
        // A type with no resources lists nothing, as COSI does.
        let items = if r.namespace == "network" && r.r#type == "AddressStatuses.net.talos.dev" {
            self.addresses
                .iter()
                .map(|(id, yaml)| {
                    Ok(cosi::ListResponse {
                        resource: Some(resource(id, yaml)),
                    })
                })
                .collect()
        } else {
            Vec::new()
        };
        Ok(Response::new(tonic::codegen::tokio_stream::iter(items)))
    }
}

/// Starts an apid stand-in on 127.0.0.1:0 presenting `server` and trusting `client_ca`.
async fn serve(server: &Leaf, client_ca: &Ca, role: Role) -> SocketAddr {
    serve_with(server, client_ca, role, node_addresses("10.5.0.2", false)).await
}

/// Like [`serve`], with the node's COSI address resources given.
async fn serve_with(
    server: &Leaf,
    client_ca: &Ca,
    role: Role,
    addresses: Vec<(String, String)>,
) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(&server.cert_pem, &server.key_pem))
        .client_ca_root(Certificate::from_pem(client_ca.pem()));
    let router = Server::builder()
        .tls_config(tls)
        .expect("server tls")
        .add_service(MachineServiceServer::new(Apid { role }))
        .add_service(StateServer::new(Cosi { role, addresses }));
    tokio::spawn(router.serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)));
    addr
}

/// A loopback address where nothing listens (not in the lab's address plan).
const NOBODY: &str = "127.83.91.7";

fn fast() -> TalosOptions {
    TalosOptions {
        connect_timeout: Duration::from_secs(5),
        call_timeout: Duration::from_secs(5),
        retry: RetryPolicy::NONE,
    }
}

/// Credentials as a talosconfig carries them: Ed25519 key under the Talos label.
fn creds(ca: &Ca, client: &Leaf) -> TalosCredentials {
    TalosCredentials::from_pem(
        ca.pem().as_bytes(),
        client.cert_pem.as_bytes(),
        client.talos_key_pem().as_bytes(),
    )
    .expect("credentials")
}

async fn setup(role: Role) -> (TalosClient, String) {
    let ca = Ca::new("talos");
    let server = ca.server(&["127.0.0.1"], &["cp1"], false);
    let addr = serve(&server, &ca, role).await;
    let client = TalosClient::new(creds(&ca, &ca.client("os:admin")), fast());
    (client, addr.to_string())
}

#[tokio::test]
async fn mtls_calls_return_typed_results() {
    let (client, endpoint) = setup(Role::ControlPlane).await;
    let node = client.connect(&endpoint).await.expect("connect");
    assert_eq!(node.endpoint(), endpoint);

    let version = node.version().await.expect("version");
    assert_eq!(version.tag, "v1.13.9");
    assert_eq!(version.platform.as_deref(), Some("nocloud"));

    let members = node.etcd_members().await.expect("members");
    assert_eq!(members.len(), 3);
    assert_eq!(members[0].hostname, "cp1");
    assert_eq!(members[0].id_hex(), "4f3fb4c33808229a");
    assert_eq!(
        members[1].peer_urls,
        vec!["https://127.0.0.2:2380".to_string()]
    );
    assert!(members[2].is_learner);

    let status = node.etcd_status().await.expect("status");
    assert_eq!(status.member_id, 0x4f3fb4c33808229a);
    assert_eq!(status.leader, 0x5225cca9d46339f4);
    assert_eq!(status.storage_version, "3.6.0");

    let alarms = node.etcd_alarms().await.expect("alarms");
    assert_eq!(alarms.len(), 1, "NONE entries are dropped: {alarms:?}");
    assert_eq!(alarms[0].kind, EtcdAlarmKind::NoSpace);
    assert_eq!(alarms[0].member_id, 7);

    let services = node.services().await.expect("services");
    let etcd = services.iter().find(|s| s.id == "etcd").expect("etcd");
    assert_eq!(etcd.state, "Running");
    assert_eq!(etcd.healthy, Some(true));
    let machined = services
        .iter()
        .find(|s| s.id == "machined")
        .expect("machined");
    assert_eq!(machined.healthy, None);
}

#[tokio::test]
async fn default_port_is_50000() {
    let addr = gates_infra::talos::parse_endpoint("10.0.50.11").expect("parse");
    assert_eq!(addr.port, 50000);
    assert_eq!(addr.to_string(), "10.0.50.11:50000");
}

#[tokio::test]
async fn worker_etcd_call_is_unimplemented() {
    let (client, endpoint) = setup(Role::Worker).await;
    let node = client.connect(&endpoint).await.expect("connect");
    node.version().await.expect("version works on workers");
    let err = node.etcd_members().await.expect_err("worker");
    assert!(
        matches!(
            err,
            TalosError::Unimplemented {
                method: "EtcdMemberList",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("control-plane"), "{err}");
}

#[tokio::test]
async fn denied_call_is_permission_denied() {
    let (client, endpoint) = setup(Role::Denied).await;
    let node = client.connect(&endpoint).await.expect("connect");
    let err = node.version().await.expect_err("denied");
    assert!(
        matches!(err, TalosError::PermissionDenied { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn etcd_without_leader_is_no_quorum_and_retried_boundedly() {
    let ca = Ca::new("talos");
    let server = ca.server(&["127.0.0.1"], &[], false);
    let addr = serve(&server, &ca, Role::NoQuorum).await;
    let options = TalosOptions {
        retry: RetryPolicy {
            attempts: 3,
            initial_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(10),
        },
        ..fast()
    };
    let client = TalosClient::new(creds(&ca, &ca.client("os:reader")), options);
    let node = client.connect(&addr.to_string()).await.expect("connect");
    let err = node.etcd_status().await.expect_err("no quorum");
    assert!(matches!(err, TalosError::EtcdNoQuorum { .. }), "{err:?}");
    assert!(err.is_retryable());
}

#[tokio::test]
async fn server_signed_by_another_ca_is_unknown_ca() {
    let ours = Ca::new("talos");
    let theirs = Ca::new("talos");
    let server = theirs.server(&["127.0.0.1"], &[], false);
    let addr = serve(&server, &ours, Role::ControlPlane).await;
    let client = TalosClient::new(creds(&ours, &ours.client("os:admin")), fast());
    let err = client
        .connect(&addr.to_string())
        .await
        .expect_err("wrong ca");
    assert!(matches!(err, TalosError::UnknownCa { .. }), "{err:?}");
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn certificate_for_another_address_is_name_mismatch() {
    let ca = Ca::new("talos");
    let server = ca.server(&["127.0.0.2"], &["cp2"], false);
    let addr = serve(&server, &ca, Role::ControlPlane).await;
    let client = TalosClient::new(creds(&ca, &ca.client("os:admin")), fast());
    let err = client
        .connect(&addr.to_string())
        .await
        .expect_err("mismatch");
    assert!(matches!(err, TalosError::NameMismatch { .. }), "{err:?}");
    assert!(err.to_string().contains("certSANs"), "{err}");
}

#[tokio::test]
async fn expired_server_certificate_is_reported() {
    let ca = Ca::new("talos");
    let server = ca.server(&["127.0.0.1"], &[], true);
    let addr = serve(&server, &ca, Role::ControlPlane).await;
    let client = TalosClient::new(creds(&ca, &ca.client("os:admin")), fast());
    let err = client
        .connect(&addr.to_string())
        .await
        .expect_err("expired");
    assert!(
        matches!(err, TalosError::CertificateExpired { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn client_certificate_from_another_ca_is_rejected() {
    let ca = Ca::new("talos");
    let stranger = Ca::new("talos");
    let server = ca.server(&["127.0.0.1"], &[], false);
    let addr = serve(&server, &ca, Role::ControlPlane).await;
    // Trusts the right server CA but presents a certificate the server does not know.
    let foreign = stranger.client("os:admin");
    let credentials = TalosCredentials::from_pem(
        ca.pem().as_bytes(),
        foreign.cert_pem.as_bytes(),
        foreign.talos_key_pem().as_bytes(),
    )
    .expect("credentials");
    let client = TalosClient::new(credentials, fast());
    let result = match client.connect(&addr.to_string()).await {
        Ok(node) => node.version().await.map(|_| ()),
        Err(e) => Err(e),
    };
    let err = result.expect_err("rejected");
    assert!(
        matches!(err, TalosError::ClientCertificateRejected { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn missing_client_certificate_is_rejected() {
    let ca = Ca::new("talos");
    let server = ca.server(&["127.0.0.1"], &[], false);
    let addr = serve(&server, &ca, Role::ControlPlane).await;
    let client = TalosClient::new(
        TalosCredentials::ca_only(ca.pem().as_bytes()).expect("ca"),
        fast(),
    );
    let result = match client.connect(&addr.to_string()).await {
        Ok(node) => node.version().await.map(|_| ()),
        Err(e) => Err(e),
    };
    let err = result.expect_err("rejected");
    assert!(
        matches!(&err, TalosError::ClientCertificateRejected { alert, .. } if alert == "CertificateRequired"),
        "{err:?}"
    );
}

#[tokio::test]
async fn credentials_debug_never_shows_the_key() {
    let ca = Ca::new("talos");
    let client = ca.client("os:admin");
    let credentials = creds(&ca, &client);
    let shown = format!("{credentials:?}");
    let body: String = client
        .key_pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    assert!(!shown.contains(&body), "{shown}");
    assert!(shown.contains("redacted"), "{shown}");
}

#[tokio::test]
async fn refused_connection_is_named() {
    let ca = Ca::new("talos");
    let client = TalosClient::new(creds(&ca, &ca.client("os:admin")), fast());
    // Nothing listens there (outside the lab address plan); the default port is used.
    let err = client.connect(NOBODY).await.expect_err("refused");
    assert!(matches!(err, TalosError::Refused { .. }), "{err:?}");
    assert_eq!(err.endpoint(), Some("127.83.91.7:50000"));
}

#[tokio::test]
async fn silent_endpoint_times_out() {
    // A listener that accepts TCP but never speaks TLS.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
        }
    });
    let ca = Ca::new("talos");
    let options = TalosOptions {
        connect_timeout: Duration::from_millis(300),
        ..fast()
    };
    let client = TalosClient::new(creds(&ca, &ca.client("os:admin")), options);
    let err = client
        .connect(&addr.to_string())
        .await
        .expect_err("timeout");
    assert!(matches!(err, TalosError::Timeout { .. }), "{err:?}");
}

#[tokio::test]
async fn etcd_views_keep_order_and_name_the_failing_endpoint() {
    let ca = Ca::new("talos");
    let cp = serve(
        &ca.server(&["127.0.0.1"], &[], false),
        &ca,
        Role::ControlPlane,
    )
    .await;
    let worker = serve(&ca.server(&["127.0.0.1"], &[], false), &ca, Role::Worker).await;
    let client = TalosClient::new(creds(&ca, &ca.client("os:admin")), fast());
    let endpoints = vec![NOBODY.to_string(), cp.to_string(), worker.to_string()];
    let views = client.etcd_views(&endpoints).await;
    assert_eq!(
        views.iter().map(|v| v.endpoint.clone()).collect::<Vec<_>>(),
        endpoints
    );
    assert!(matches!(
        views[0].first_error(),
        Some(TalosError::Refused { .. })
    ));
    assert!(matches!(views[0].members, Err(TalosError::Refused { .. })));
    assert!(
        views[1].first_error().is_none(),
        "{:?}",
        views[1].first_error()
    );
    assert_eq!(views[1].members.as_ref().map(Vec::len).ok(), Some(3));
    assert!(views[2].version.is_ok());
    assert!(matches!(
        views[2].members,
        Err(TalosError::Unimplemented { .. })
    ));
}

#[tokio::test]
async fn plain_pkcs8_client_key_also_works() {
    let ca = Ca::new("talos");
    let addr = serve(
        &ca.server(&["127.0.0.1"], &[], false),
        &ca,
        Role::ControlPlane,
    )
    .await;
    let leaf = ca.client("os:admin");
    let credentials = TalosCredentials::from_pem(
        ca.pem().as_bytes(),
        leaf.cert_pem.as_bytes(),
        leaf.key_pem.as_bytes(),
    )
    .expect("credentials");
    let node = TalosClient::new(credentials, fast())
        .connect(&addr.to_string())
        .await
        .expect("connect");
    assert_eq!(node.version().await.expect("version").tag, "v1.13.9");
}

#[tokio::test]
async fn addresses_are_listed_from_cosi_and_parsed() {
    let (client, endpoint) = setup(Role::ControlPlane).await;
    let node = client.connect(&endpoint).await.expect("connect");
    let addrs = node.addresses().await.expect("addresses");
    let ids: Vec<&str> = addrs.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["lo/127.0.0.1/8", "eth0/10.5.0.2/24"]);
    assert_eq!(addrs[1].link, "eth0");
    assert_eq!(
        addrs[1].address,
        "10.5.0.2".parse::<std::net::IpAddr>().unwrap()
    );
    assert_eq!(addrs[1].prefix_len, 24);
    assert_eq!(addrs[0].link, "lo");
    assert_eq!(addrs[0].prefix_len, 8);
}

#[tokio::test]
async fn denied_address_list_is_permission_denied() {
    let (client, endpoint) = setup(Role::Denied).await;
    let node = client.connect(&endpoint).await.expect("connect");
    let err = node.addresses().await.expect_err("denied");
    assert!(
        matches!(err, TalosError::PermissionDenied { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn address_list_on_an_apid_without_cosi_is_unimplemented() {
    // Only MachineService here: tonic answers Unimplemented for the unknown service.
    let ca = Ca::new("talos");
    let server = ca.server(&["127.0.0.1"], &[], false);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(&server.cert_pem, &server.key_pem))
        .client_ca_root(Certificate::from_pem(ca.pem()));
    let router = Server::builder()
        .tls_config(tls)
        .expect("server tls")
        .add_service(MachineServiceServer::new(Apid {
            role: Role::ControlPlane,
        }));
    tokio::spawn(router.serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)));
    let client = TalosClient::new(creds(&ca, &ca.client("os:admin")), fast());
    let node = client.connect(&addr.to_string()).await.expect("connect");
    let err = node.addresses().await.expect_err("no State service");
    assert!(
        matches!(
            err,
            TalosError::Unimplemented {
                method: "cosi.resource.State/List",
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_malformed_address_resource_is_a_typed_error_naming_it() {
    let ca = Ca::new("talos");
    let mut addresses = node_addresses("10.5.0.2", false);
    addresses.push((
        "eth0/garbage".to_string(),
        "address: not-an-ip/24\nlinkName: eth0\n".to_string(),
    ));
    let addr = serve_with(
        &ca.server(&["127.0.0.1"], &[], false),
        &ca,
        Role::ControlPlane,
        addresses,
    )
    .await;
    let client = TalosClient::new(creds(&ca, &ca.client("os:reader")), fast());
    let node = client.connect(&addr.to_string()).await.expect("connect");
    let err = node.addresses().await.expect_err("malformed");
    match &err {
        TalosError::BadResource { resource, .. } => assert_eq!(resource, "eth0/garbage"),
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("eth0/garbage"), "{err}");
}

#[tokio::test]
async fn the_vip_is_found_on_exactly_one_control_plane_node() {
    let ca = Ca::new("talos");
    let mut endpoints = Vec::new();
    for (ip, holder) in [("10.5.0.2", false), ("10.5.0.3", true), ("10.5.0.4", false)] {
        let addr = serve_with(
            &ca.server(&["127.0.0.1"], &[], false),
            &ca,
            Role::ControlPlane,
            node_addresses(ip, holder),
        )
        .await;
        endpoints.push(addr.to_string());
    }
    endpoints.push(NOBODY.to_string());
    let client = TalosClient::new(creds(&ca, &ca.client("os:reader")), fast());
    let vip: std::net::IpAddr = "10.5.0.10".parse().unwrap();

    // One node at a time, through TalosNode::addresses.
    let mut holders = Vec::new();
    for endpoint in &endpoints[..3] {
        let node = client.connect(endpoint).await.expect("connect");
        let addrs = node.addresses().await.expect("addresses");
        if holds_address(&addrs, vip) {
            holders.push(endpoint.clone());
            let a = addrs.iter().find(|a| a.address == vip).expect("vip entry");
            assert_eq!((a.link.as_str(), a.prefix_len), ("eth0", 32));
        }
    }
    assert_eq!(holders, [endpoints[1].clone()]);

    // The sweep keeps order and names the endpoint it could not read.
    let views = client.addresses_of(&endpoints).await;
    let held: Vec<Option<bool>> = views.iter().map(|v| v.holds(vip)).collect();
    assert_eq!(held, [Some(false), Some(true), Some(false), None]);
    assert_eq!(views[3].endpoint, NOBODY);
    assert!(
        matches!(views[3].addresses, Err(TalosError::Refused { .. })),
        "{:?}",
        views[3].addresses
    );
}
