//! Talos nodes 127.S.1.{1,2,3} (control planes) and 127.S.1.4 (worker) serving apid over mTLS
//! with the in-memory backend, and a tonic client generated from the same protos. The nodes
//! claim their subnet S as a lab does (binding the subnet's control address, held as long as
//! the nodes): each test starts looking at its own byte, and a taken subnet moves the nodes on,
//! so tests run in parallel and beside a running `gates lab`. Addresses come from
//! [`Nodes::ip`], never from a literal.

#![allow(dead_code)]

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use gates_lab::addr::{APID_PORT, Claim, Plan, SubnetChoice};
use gates_lab::pki::endpoint::{RequestRecord, ServeError, ServerHandle};
use gates_lab::pki::tls::ServerTls;
use gates_lab::pki::{CaKind, CertificateAuthority, CertifiedKey, relabel_private_key};
use gates_lab::talos::memory::MemoryTalos;
use gates_lab::talos::{NodeRole, serve};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// The same generated code the lab serves; its client stubs call the lab here.
pub use gates_proto as proto;

pub use proto::cosi::resource::state_client::StateClient;
pub use proto::machine::machine_service_client::MachineServiceClient;

pub struct Nodes {
    pub backend: Arc<MemoryTalos>,
    pub ca: CertificateAuthority,
    pub admin: CertifiedKey,
    pub handles: Vec<ServerHandle>,
    pub records: Arc<Mutex<Vec<RequestRecord>>>,
    pub subnet: u8,
    /// The subnet's control address, bound: no lab or other test's nodes take this subnet.
    pub claim: Claim,
}

pub const NAMES: [&str; 4] = ["talos-cp-1", "talos-cp-2", "talos-cp-3", "talos-worker-1"];

/// Node `j` (1-based: talos-cp-1 is 1) on subnet `subnet`, from the lab's address plan.
pub fn node_ip(subnet: u8, j: u8) -> IpAddr {
    IpAddr::V4(Plan::new(subnet).node_ip(usize::from(j) - 1))
}

/// An address as gRPC metadata (`node`, `nodes`), as talosctl sends it.
pub fn metadata(ip: IpAddr) -> MetadataValue<Ascii> {
    ip.to_string().parse().expect("an address is ASCII")
}

/// Starts the nodes on the first free subnet from 127.`from`.x.y on: one whose control address
/// nobody holds and whose node addresses can all be bound.
pub async fn start(from: u8) -> Nodes {
    let mut from = from;
    for _ in 0..254 {
        let claim = gates_lab::addr::claim(from, SubnetChoice::FirstFree)
            .unwrap_or_else(|(addr, e)| panic!("no free subnet from 127.{from}.x.y ({addr}: {e})"));
        match start_on(claim).await {
            Ok(nodes) => return nodes,
            Err((subnet, ServeError::Io(e))) if e.kind() == std::io::ErrorKind::AddrInUse => {
                from = if subnet >= 254 { 1 } else { subnet + 1 };
            }
            Err((subnet, e)) => panic!("Talos nodes on 127.{subnet}.x.y: {e}"),
        }
    }
    panic!("no free subnet from 127.{from}.x.y");
}

async fn start_on(claim: Claim) -> Result<Nodes, (u8, ServeError)> {
    let subnet = claim.subnet;
    let specs: Vec<(&str, IpAddr, NodeRole)> = NAMES
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let role = if i < 3 {
                NodeRole::ControlPlane
            } else {
                NodeRole::Worker
            };
            (*name, node_ip(subnet, i as u8 + 1), role)
        })
        .collect();
    let backend = MemoryTalos::new(&specs);
    let ca = CertificateAuthority::new(CaKind::Talos).expect("ca");
    let admin = ca.talos_admin_cert().expect("admin");
    let records = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for (name, ip, _) in &specs {
        let leaf = ca.talos_server_cert(name, &[*ip]).expect("leaf");
        let sink = records.clone();
        // A server that did start stops when its handle is dropped with this attempt.
        let handle = serve(
            backend.clone(),
            name,
            SocketAddr::new(*ip, APID_PORT),
            &ServerTls::from_leaf(&leaf),
            ca.cert_der(),
            backend.power_watch(name),
            Arc::new(move |r| sink.lock().expect("records").push(r)),
        )
        .await
        .map_err(|e| (subnet, e))?;
        handles.push(handle);
    }
    Ok(Nodes {
        backend,
        ca,
        admin,
        handles,
        records,
        subnet,
        claim,
    })
}

impl Nodes {
    /// Node `j` (1-based) of these nodes.
    pub fn ip(&self, j: u8) -> IpAddr {
        node_ip(self.subnet, j)
    }

    /// A client for node `j` (1-based) presenting `identity` (cert, Talos-labelled key) or none.
    pub async fn client_with(
        &self,
        j: u8,
        identity: Option<&CertifiedKey>,
        ca_pem: &str,
    ) -> Result<MachineServiceClient<Channel>, tonic::transport::Error> {
        Ok(MachineServiceClient::new(
            self.channel_with(j, identity, ca_pem).await?,
        ))
    }

    /// A COSI `State` client for node `j` (1-based) presenting `identity`.
    pub async fn state_client(&self, j: u8, identity: &CertifiedKey) -> StateClient<Channel> {
        StateClient::new(
            self.channel_with(j, Some(identity), &self.ca.cert_pem())
                .await
                .expect("connect"),
        )
    }

    /// An mTLS channel to node `j` (1-based).
    pub async fn channel_with(
        &self,
        j: u8,
        identity: Option<&CertifiedKey>,
        ca_pem: &str,
    ) -> Result<Channel, tonic::transport::Error> {
        let ip = self.ip(j);
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(ca_pem))
            .domain_name(ip.to_string());
        if let Some(id) = identity {
            // Talos writes the key as `ED25519 PRIVATE KEY`; rustls needs `PRIVATE KEY`.
            let key = relabel_private_key(&id.key_pem_talos());
            tls = tls.identity(Identity::from_pem(id.cert_pem(), key));
        }
        let channel = Endpoint::from_shared(format!("https://{ip}:{APID_PORT}"))
            .expect("uri")
            .tls_config(tls)?
            .connect_timeout(std::time::Duration::from_secs(5))
            .connect()
            .await?;
        Ok(channel)
    }

    /// An admin client for node `j`.
    pub async fn admin_client(&self, j: u8) -> MachineServiceClient<Channel> {
        self.client_with(j, Some(&self.admin), &self.ca.cert_pem())
            .await
            .expect("connect")
    }
}

/// Whether node `j`'s apid address hangs on connect (a powered-off machine drops packets)
/// instead of answering or refusing: no outcome within 300 ms.
pub async fn stalls(subnet: u8, j: u8) -> bool {
    let addr = SocketAddr::new(node_ip(subnet, j), APID_PORT);
    tokio::time::timeout(
        std::time::Duration::from_millis(300),
        tokio::net::TcpStream::connect(addr),
    )
    .await
    .is_err()
}

/// Poll until node `j` stalls, for at most five seconds (listeners follow power within ms).
pub async fn until_stalled(subnet: u8, j: u8) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !stalls(subnet, j).await {
        assert!(
            std::time::Instant::now() < deadline,
            "{} still answers connections",
            node_ip(subnet, j)
        );
    }
}
