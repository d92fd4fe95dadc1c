//! The talosconfig the full lab writes works the way talosctl uses it: base64 PEM `ca`, `crt`,
//! `key` (Ed25519 under Talos's `ED25519 PRIVATE KEY` label), endpoints that each answer apid
//! over mutual TLS with an etcd member list. The lab looks for a free subnet from 246 on.

use crate::talos_support::MachineServiceClient;
use crate::talos_support::proto::machine::EtcdMemberListRequest;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use gates_lab::addr::SubnetChoice;
use gates_lab::pki::relabel_private_key;
use gates_lab::{Lab, LabOptions};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

fn field(ctx: &serde_json::Value, key: &str) -> String {
    let b64 = ctx[key].as_str().unwrap_or_else(|| panic!("{key} missing"));
    String::from_utf8(STANDARD.decode(b64).expect("base64")).expect("utf8 PEM")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lab_talosconfig_reaches_every_control_plane_endpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lab = Lab::start(LabOptions {
        subnet: 246,
        subnet_choice: SubnetChoice::FirstFree,
        state_dir: dir.path().to_path_buf(),
        env_dir: None,
        ..LabOptions::default()
    })
    .await
    .expect("lab starts");
    let text = std::fs::read_to_string(&lab.files.talosconfig).expect("talosconfig");
    let doc: serde_json::Value = gates_lab::yaml::from_str(&text).expect("yaml");
    let current = doc["context"].as_str().expect("context").to_string();
    let ctx = &doc["contexts"][current.as_str()];
    let (ca, crt, key) = (field(ctx, "ca"), field(ctx, "crt"), field(ctx, "key"));
    assert!(
        key.starts_with("-----BEGIN ED25519 PRIVATE KEY-----"),
        "Talos key label"
    );
    let endpoints: Vec<String> = ctx["endpoints"]
        .as_array()
        .expect("endpoints")
        .iter()
        .filter_map(|e| e.as_str().map(str::to_string))
        .collect();
    assert!(!endpoints.is_empty());

    let mut member_sets = Vec::new();
    for endpoint in &endpoints {
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&ca))
            .identity(Identity::from_pem(&crt, relabel_private_key(&key)))
            .domain_name(endpoint.clone());
        let channel = Endpoint::from_shared(format!("https://{endpoint}:50000"))
            .expect("uri")
            .tls_config(tls)
            .expect("tls")
            .connect()
            .await
            .unwrap_or_else(|e| panic!("{endpoint}: {e:?}"));
        let mut client = MachineServiceClient::new(channel);
        let list = client
            .etcd_member_list(EtcdMemberListRequest { query_local: true })
            .await
            .unwrap_or_else(|s| panic!("{endpoint}: {s:?}"))
            .into_inner();
        let mut ids: Vec<u64> = list.messages[0].members.iter().map(|m| m.id).collect();
        ids.sort_unstable();
        member_sets.push(ids);
    }
    assert_eq!(
        member_sets[0].len(),
        endpoints.len(),
        "one member per control plane"
    );
    assert!(
        member_sets.iter().all(|s| *s == member_sets[0]),
        "{member_sets:?}"
    );
}
