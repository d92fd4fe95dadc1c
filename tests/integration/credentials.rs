//! Each environment is its own cluster with its own Talos CA, client certificate, Kubernetes
//! CA and tokens, as real clusters are. These tests prove the lab keeps them apart (another
//! environment's credentials are refused) and that `gates check` only ever presents an
//! environment's own credentials to that environment's endpoints.

use std::path::{Path, PathBuf};

use gates_lab::reqlog::{Protocol, RequestRecord};
use gates_lab::{Lab, LabOptions};

use crate::support::*;

/// Subnets 120..=124 belong to these tests.
async fn lab(subnet: u8, dir: &Path) -> Lab {
    Lab::start(LabOptions {
        scenario: "adr-007".to_string(),
        subnet,
        speed: 1.0,
        state_dir: dir.to_path_buf(),
        env_dir: Some(dir.join("environments")),
        ..LabOptions::default()
    })
    .await
    .unwrap_or_else(|err| panic!("the lab starts on 127.{subnet}.x.y: {err}"))
}

/// The addresses (`ip`, without port) that belong to environment `k`: its VIP and its nodes.
fn addresses_of(lab: &Lab, k: usize) -> Vec<String> {
    lab.shared.read(|w| {
        let mut ips = vec![w.plan.vip_ip(k).to_string()];
        ips.extend(
            w.envs[k]
                .nodes
                .iter()
                .map(|&j| w.plan.node_ip(j).to_string()),
        );
        ips
    })
}

fn ip_of(server: &str) -> &str {
    server.rsplit_once(':').map(|(ip, _)| ip).unwrap_or(server)
}

fn rejected(record: &RequestRecord) -> bool {
    match record.protocol {
        Protocol::Kube => record.status == 401,
        Protocol::Talos => record.path == gates_lab::talos::HANDSHAKE_REJECTED,
        Protocol::Proxmox | Protocol::Ingress => false,
    }
}

async fn check(env_dir: PathBuf, env: &'static str) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        let reports = tempfile::tempdir().unwrap();
        gates_with_config(reports.path())
            .arg("--env-dir")
            .arg(&env_dir)
            .args(["check", env, "--format", "json", "--reports"])
            .arg(reports.path())
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gates_check_presents_each_environment_only_its_own_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab(120, dir.path()).await;
    let envs = dir.path().join("environments");
    for env in ["lab", "lab-production"] {
        let out = check(envs.clone(), env).await;
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{env}: {}\n{}",
            stdout(&out),
            stderr(&out)
        );
    }
    let log = lab.log.snapshot();
    for (k, name) in ["lab", "lab-production"].iter().enumerate() {
        let ours = addresses_of(&lab, k);
        let served: Vec<&RequestRecord> = log
            .iter()
            .filter(|r| ours.iter().any(|ip| ip == ip_of(&r.server)))
            .collect();
        for protocol in [Protocol::Kube, Protocol::Talos] {
            assert!(
                served
                    .iter()
                    .any(|r| r.protocol == protocol && !rejected(r)),
                "{name}'s {protocol:?} endpoints were asked something"
            );
        }
        let refused: Vec<String> = served
            .iter()
            .filter(|r| rejected(r))
            .map(|r| format!("{:?} {} {} -> {}", r.protocol, r.server, r.path, r.status))
            .collect();
        assert!(
            refused.is_empty(),
            "{name}'s endpoints refused a credential: {refused:#?}"
        );
    }
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_environments_credentials_are_refused_by_the_others_endpoints() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab(121, dir.path()).await;
    let prod_vip = lab.api_url(1);

    // The CA of lab does not vouch for lab-production's API server.
    let lab_ca = reqwest::Certificate::from_pem(lab.kube_ca_pem_of(0).as_bytes()).unwrap();
    let trusting_lab = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(lab_ca)
        .timeout(std::time::Duration::from_secs(5))
        .build()
        .unwrap();
    let err = trusting_lab
        .get(format!("{prod_vip}/readyz"))
        .send()
        .await
        .expect_err("another cluster's CA");
    assert!(err.is_connect(), "{err:?}");

    // lab's admin token is unknown to lab-production's API: 401.
    let prod_ca = reqwest::Certificate::from_pem(lab.kube_ca_pem_of(1).as_bytes()).unwrap();
    let trusting_prod = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(prod_ca)
        .timeout(std::time::Duration::from_secs(5))
        .build()
        .unwrap();
    assert_ne!(lab.admin_token_of(0), lab.admin_token_of(1));
    let status = trusting_prod
        .get(format!("{prod_vip}/api/v1/nodes"))
        .bearer_auth(lab.admin_token_of(0))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 401);
    let own = trusting_prod
        .get(format!("{prod_vip}/api/v1/nodes"))
        .bearer_auth(lab.admin_token_of(1))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(own, 200);

    // lab's Talos context against a lab-production node: apid refuses the handshake.
    let prod_endpoint = addresses_of(&lab, 1)[1].clone();
    let context = gates_infra::talos::load_context(Some(&lab.files.talosconfig), Some("lab"))
        .expect("the lab context");
    let client = gates_infra::talos::TalosClient::from_context(
        &context,
        gates_infra::talos::TalosOptions {
            connect_timeout: std::time::Duration::from_secs(5),
            call_timeout: std::time::Duration::from_secs(5),
            retry: gates_infra::RetryPolicy::NONE,
        },
    );
    let answer = match client.connect(&prod_endpoint).await {
        Ok(node) => node.version().await.map(|_| ()),
        Err(err) => Err(err),
    };
    assert!(answer.is_err(), "lab's certificate opened {prod_endpoint}");
    // The server logs the refusal on its own side of the handshake, which may finish after
    // the client has already seen the failure: wait for it, a bounded while.
    let logged = || {
        lab.log.snapshot().iter().any(|r| {
            r.protocol == Protocol::Talos
                && ip_of(&r.server) == prod_endpoint
                && r.path == gates_lab::talos::HANDSHAKE_REJECTED
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !logged() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        logged(),
        "apid of {prod_endpoint} logged the refused handshake"
    );
    lab.stop().await;
}
