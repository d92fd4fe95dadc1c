//! A three-host Proxmox cluster on 127.S.0.{1,2,3}:8006 over the in-memory backend, and a
//! reqwest client that trusts the cluster CA. Each test picks its own subnet byte S so tests can
//! run in parallel.

#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gates_lab::pki::endpoint::{RequestRecord, ServerHandle};
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
}

pub fn host_ip(subnet: u8, i: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, subnet, 0, i))
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

pub async fn start(subnet: u8, options: ProxmoxOptions) -> Cluster {
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
        let handle = serve(
            api.clone(),
            &name,
            SocketAddr::new(*ip, 8006),
            &tls,
            backend.power_watch(&name),
        )
        .await
        .expect("serve");
        handles.push(handle);
    }
    Cluster {
        backend,
        ca,
        handles,
        fingerprints,
        records,
        subnet,
    }
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
    pub fn url(&self, host: u8, path: &str) -> String {
        format!("https://127.{}.0.{host}:8006/api2/json{path}", self.subnet)
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
