//! A three-host Proxmox cluster on 127.S.0.{1,2,3}:8006 over the in-memory backend, and a
//! reqwest client that trusts the cluster CA. The cluster claims its subnet S as a lab does
//! (binding the subnet's control address, held as long as the cluster): each test starts
//! looking at its own byte, and a taken subnet moves the cluster on, so tests run in parallel
//! and beside a running `gates lab`. Addresses come from [`Cluster::host_ip`] and
//! [`Cluster::url`], never from a literal.

#![allow(dead_code)]

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gates_lab::addr::{Claim, PROXMOX_PORT, Plan, SubnetChoice};
use gates_lab::pki::endpoint::{RequestRecord, ServeError, ServerHandle};
use gates_lab::pki::tls::ServerTls;
use gates_lab::pki::{CaKind, CertificateAuthority};
use gates_lab::proxmox::memory::{GuestSpec, MemoryProxmox};
use gates_lab::proxmox::{ApiToken, ProxmoxApi, ProxmoxOptions, serve};

pub const TOKEN_ID: &str = "gates@pve!lab";
pub const TOKEN_SECRET: &str = "5f2b7c1e-0000-4a1b-9c3d-lab-secret";
pub const AUDIT_TOKEN_ID: &str = "auditor@pve!ro";
pub const AUDIT_TOKEN_SECRET: &str = "0d9c8b7a-read-only-lab-secret";

pub struct Cluster {
    pub backend: Arc<MemoryProxmox>,
    pub ca: CertificateAuthority,
    pub handles: Vec<ServerHandle>,
    pub fingerprints: Vec<String>,
    pub records: Arc<Mutex<Vec<RequestRecord>>>,
    pub subnet: u8,
    /// The subnet's control address, bound: no lab or other cluster takes this subnet.
    pub claim: Claim,
}

/// Host `i` (1-based: pve1 is 1) on subnet `subnet`, from the lab's address plan.
pub fn host_ip(subnet: u8, i: u8) -> IpAddr {
    IpAddr::V4(Plan::new(subnet).host_ip(usize::from(i) - 1))
}

/// Guests: 101 (pve1, running, staging), 102 (pve2, running), 103 (pve3, running, HA),
/// 104 (pve1, stopped).
pub fn guests() -> Vec<GuestSpec> {
    let g = |vmid: u32, node: &str, running: bool, ha: bool| GuestSpec {
        vmid,
        name: format!("talos-cp-{vmid}"),
        node: node.into(),
        running,
        tags: vec!["k8s".into(), "staging".into()],
        ha,
        smbios_uuid: Some(format!("6c3fa683-bef9-4425-b413-eaa45a9d{vmid:04}")),
    };
    vec![
        g(101, "pve1", true, false),
        g(102, "pve2", true, false),
        g(103, "pve3", true, true),
        g(104, "pve1", false, false),
    ]
}

/// Starts the cluster on the first free subnet from 127.`from`.x.y on: one whose control
/// address nobody holds and whose host addresses can all be bound.
pub async fn start(from: u8, options: ProxmoxOptions) -> Cluster {
    let mut from = from;
    for _ in 0..254 {
        let claim = gates_lab::addr::claim(from, SubnetChoice::FirstFree)
            .unwrap_or_else(|(addr, e)| panic!("no free subnet from 127.{from}.x.y ({addr}: {e})"));
        match start_on(claim, options.clone()).await {
            Ok(cluster) => return cluster,
            Err((subnet, ServeError::Io(e))) if e.kind() == std::io::ErrorKind::AddrInUse => {
                from = if subnet >= 254 { 1 } else { subnet + 1 };
            }
            Err((subnet, e)) => panic!("Proxmox cluster on 127.{subnet}.x.y: {e}"),
        }
    }
    panic!("no free subnet from 127.{from}.x.y");
}

async fn start_on(claim: Claim, options: ProxmoxOptions) -> Result<Cluster, (u8, ServeError)> {
    let subnet = claim.subnet;
    let ips: Vec<IpAddr> = (1..=3).map(|i| host_ip(subnet, i)).collect();
    let backend = MemoryProxmox::new("lab", &ips, &guests(), Duration::from_millis(100));
    let ca = CertificateAuthority::new(CaKind::Proxmox).expect("ca");
    let records = Arc::new(Mutex::new(Vec::new()));
    let sink = records.clone();
    let api = ProxmoxApi::new(
        backend.clone(),
        ProxmoxOptions {
            tokens: vec![ApiToken {
                id: TOKEN_ID.into(),
                secret: TOKEN_SECRET.into(),
            }],
            audit_tokens: vec![ApiToken {
                id: AUDIT_TOKEN_ID.into(),
                secret: AUDIT_TOKEN_SECRET.into(),
            }],
            ..options
        },
        Arc::new(move |r| sink.lock().expect("records").push(r)),
    );
    let mut handles = Vec::new();
    let mut fingerprints = Vec::new();
    for (i, ip) in ips.iter().enumerate() {
        let name = format!("pve{}", i + 1);
        let leaf = ca.proxmox_node_cert(&name, *ip).expect("leaf");
        fingerprints.push(leaf.sha256_fingerprint());
        let tls = ServerTls::from_leaf(&leaf);
        // A server that did start stops when its handle is dropped with this attempt.
        let handle = serve(
            api.clone(),
            &name,
            SocketAddr::new(*ip, PROXMOX_PORT),
            &tls,
            backend.power_watch(&name),
        )
        .await
        .map_err(|e| (subnet, e))?;
        handles.push(handle);
    }
    Ok(Cluster {
        backend,
        ca,
        handles,
        fingerprints,
        records,
        subnet,
        claim,
    })
}

/// Fast options for tests: short delays, short tasks.
pub fn fast() -> ProxmoxOptions {
    ProxmoxOptions {
        unauthorized_delay: Duration::from_millis(200),
        unreachable_delay: Duration::from_millis(200),
        task_duration: Duration::from_millis(300),
        stop_duration: Duration::from_millis(500),
        ..ProxmoxOptions::default()
    }
}

impl Cluster {
    /// Host `i` (1-based) of this cluster.
    pub fn host_ip(&self, i: u8) -> IpAddr {
        host_ip(self.subnet, i)
    }

    /// The Proxmox API `path` on host `host` (1-based).
    pub fn url(&self, host: u8, path: &str) -> String {
        format!(
            "https://{}:{PROXMOX_PORT}/api2/json{path}",
            self.host_ip(host)
        )
    }

    pub fn client(&self) -> reqwest::Client {
        let ca = reqwest::Certificate::from_pem(self.ca.cert_pem().as_bytes()).expect("ca pem");
        reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .add_root_certificate(ca)
            .pool_idle_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(20))
            .build()
            .expect("client")
    }

    pub fn auth(&self) -> String {
        format!("PVEAPIToken={TOKEN_ID}={TOKEN_SECRET}")
    }

    pub fn write_ca(&self, dir: &Path) -> std::path::PathBuf {
        let path = dir.join("proxmox-ca.pem");
        std::fs::write(&path, self.ca.cert_pem()).expect("write ca");
        path
    }
}
