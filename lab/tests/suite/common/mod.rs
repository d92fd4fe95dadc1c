//! Helpers shared by the lab's integration tests.
#![allow(dead_code)]

use gates_lab::addr::SubnetChoice;
use gates_lab::{Lab, LabOptions};

/// Starts `scenario` on the first free subnet from 127.`from`.x.y on. Each test starts looking
/// at its own byte (kube_api 20..=39, kubectl 70..=79, runner 80..=89, kube_python 90..=94,
/// go_clients 95..=99, talos_vip 248), so tests running in parallel rarely have to move; a
/// subnet that is taken (a user's `gates lab`, a second run of this suite, another test) moves
/// the lab to the next free one. So a test never knows its subnet in advance: every address
/// it uses comes from the lab's plan (`lab.plan`, `lab.api_url(k)`, `lab.apid_addr(j)`, ...).
pub async fn start(scenario: &str, from: u8, speed: f64) -> (Lab, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let lab = Lab::start(LabOptions {
        scenario: scenario.into(),
        subnet: from,
        subnet_choice: SubnetChoice::FirstFree,
        speed,
        state_dir: dir.path().join("state"),
        env_dir: Some(dir.path().join("env")),
        ..LabOptions::default()
    })
    .await
    .unwrap_or_else(|e| panic!("lab {scenario} on a free subnet from 127.{from}.x.y: {e}"));
    (lab, dir)
}

pub async fn kube_client(lab: &Lab, context: &str) -> kube::Client {
    let kubeconfig =
        kube::config::Kubeconfig::read_from(&lab.files.kubeconfig).expect("kubeconfig");
    let opts = kube::config::KubeConfigOptions {
        context: Some(context.to_string()),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &opts)
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

/// A reqwest client that trusts the lab's kube CA (also used for the ingress's HTTPS).
pub fn https_client(lab: &Lab) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(lab.kube_ca_pem().as_bytes()).expect("ca");
    reqwest::Client::builder()
        .add_root_certificate(ca)
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .expect("client")
}

/// Poll `f` until it returns true, for at most `secs` real seconds.
pub async fn eventually<F, Fut>(secs: u64, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
    while tokio::time::Instant::now() < deadline {
        if f().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// Whether a TCP connect to `addr` hangs (packets dropped, as to a powered-off machine)
/// rather than being answered or refused: no outcome within 300 ms.
pub async fn stalls(addr: std::net::SocketAddr) -> bool {
    tokio::time::timeout(
        std::time::Duration::from_millis(300),
        tokio::net::TcpStream::connect(addr),
    )
    .await
    .is_err()
}
