//! The Kubernetes API as an endpoint: `/readyz` through the API virtual IP, verified with the
//! cluster CA from the environment's kubeconfig. Used by the `api-endpoint` check and by the
//! chaos step's API probe (on a new connection each time, and on a kept-alive one).

use std::time::Duration;

use base64::Engine;
use kube::config::Kubeconfig;

use super::kube::resolve;
use crate::config::Environment;
use crate::state::Unanswered;

/// What the kubeconfig says about the environment's cluster.
#[derive(Debug, Clone)]
pub struct ClusterAccess {
    pub context: String,
    pub server: String,
    /// PEM of the cluster CA.
    pub ca_pem: Option<Vec<u8>>,
    pub insecure: bool,
}

/// Read the cluster of the environment's kubeconfig context.
pub fn cluster_access(env: &Environment) -> Result<ClusterAccess, Unanswered> {
    if env.kube.kubeconfig.is_none()
        && let Some(in_cluster) = super::in_cluster::from_process()
    {
        return Ok(ClusterAccess {
            context: "(in-cluster service account)".to_string(),
            server: in_cluster.server.clone(),
            ca_pem: Some(in_cluster.ca_pem().map_err(|err| err.to_string())?),
            insecure: false,
        });
    }
    let kubeconfig = match &env.kube.kubeconfig {
        Some(path) => {
            let path = resolve(&env.file, path);
            Kubeconfig::read_from(&path)
                .map_err(|err| format!("cannot read kubeconfig {}: {err}", path.display()))?
        }
        None => Kubeconfig::read().map_err(|err| format!("cannot read the kubeconfig: {err}"))?,
    };
    let context_name = env
        .kube
        .context
        .clone()
        .or_else(|| kubeconfig.current_context.clone())
        .ok_or("the kubeconfig has no current context; set kube.context")?;
    let context = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.as_ref())
        .ok_or_else(|| format!("the kubeconfig has no context `{context_name}`"))?;
    let cluster = kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.as_ref())
        .ok_or_else(|| format!("the kubeconfig has no cluster `{}`", context.cluster))?;
    let ca_pem = match (
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
    ) {
        (Some(data), _) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .map_err(|err| {
                    format!(
                        "certificate-authority-data of cluster `{}`: {err}",
                        context.cluster
                    )
                })?,
        ),
        (None, Some(file)) => Some(
            std::fs::read(file).map_err(|err| format!("certificate-authority {file}: {err}"))?,
        ),
        (None, None) => None,
    };
    Ok(ClusterAccess {
        context: context_name,
        server: cluster.server.clone().unwrap_or_default(),
        ca_pem,
        insecure: cluster.insecure_skip_tls_verify.unwrap_or(false),
    })
}

/// An HTTPS client for `/readyz` that trusts only the cluster CA.
pub fn readyz_client(
    access: &ClusterAccess,
    timeout: Duration,
    keep_alive: bool,
) -> Result<reqwest::Client, Unanswered> {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .timeout(timeout)
        .connect_timeout(timeout)
        .tls_built_in_root_certs(false);
    if let Some(pem) = &access.ca_pem {
        let certs = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|err| format!("cluster CA: {err}"))?;
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    if access.insecure {
        builder = builder.danger_accept_invalid_certs(true);
    }
    if !keep_alive {
        builder = builder.pool_max_idle_per_host(0);
    }
    builder
        .build()
        .map_err(|err| Unanswered(format!("cannot build an HTTPS client: {err}")))
}

/// `GET <endpoint>/readyz`: Ok when the API answers 200, otherwise what went wrong.
pub async fn readyz(client: &reqwest::Client, endpoint: &str) -> Result<(), Unanswered> {
    readyz_answer(client, endpoint).await.0
}

/// `/readyz` and the HTTP status it answered with (`None`: no answer at all, so an
/// unreachable VIP, a TLS failure or a timeout is told apart from an API that says "not ready").
pub async fn readyz_answer(
    client: &reqwest::Client,
    endpoint: &str,
) -> (Result<(), Unanswered>, Option<u16>) {
    let url = format!("{}/readyz", endpoint.trim_end_matches('/'));
    match client.get(&url).send().await {
        Ok(response) if response.status().is_success() => {
            (Ok(()), Some(response.status().as_u16()))
        }
        Ok(response) => {
            let status = response.status();
            let body = response.text().await.unwrap_or_default();
            let first = body
                .lines()
                .find(|l| l.contains("failed"))
                .unwrap_or_else(|| body.lines().next().unwrap_or(""));
            (
                Err(format!(
                    "{url} answered {status}{}",
                    if first.is_empty() {
                        String::new()
                    } else {
                        format!(": {first}")
                    }
                )
                .into()),
                Some(status.as_u16()),
            )
        }
        Err(err) => (
            Err(format!("{url}: {}", super::kube::chain(&err)).into()),
            None,
        ),
    }
}

/// The API endpoint state for the `api-endpoint` check.
pub async fn collect(env: &Environment, vip: &str) -> crate::state::ApiState {
    let timeout: Duration = env.kube.timeout.into();
    let access = cluster_access(env);
    let (readyz, readyz_status) = match &access {
        Ok(access) => match readyz_client(access, timeout, false) {
            Ok(client) => readyz_answer(&client, vip).await,
            Err(err) => (Err(err), None),
        },
        Err(err) => (Err(err.clone()), None),
    };
    crate::state::ApiState {
        vip_endpoint: Some(vip.to_string()),
        vip_addresses: resolve_host(vip).await,
        kubeconfig_server: access.map(|a| a.server),
        readyz,
        readyz_status,
    }
}

/// The addresses of a URL's host: the literal, or what the name resolves to (none when the
/// URL has no host or the name does not resolve; the check then simply cannot name a holder).
async fn resolve_host(url: &str) -> Vec<std::net::IpAddr> {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return Vec::new();
    };
    let Some(host) = parsed.host_str() else {
        return Vec::new();
    };
    if let Ok(ip) = host.trim_matches(['[', ']']).parse::<std::net::IpAddr>() {
        return vec![ip];
    }
    let port = parsed.port_or_known_default().unwrap_or(6443);
    match tokio::net::lookup_host((host, port)).await {
        Ok(found) => {
            let mut ips: Vec<std::net::IpAddr> = found.map(|a| a.ip()).collect();
            ips.sort();
            ips.dedup();
            ips
        }
        Err(_) => Vec::new(),
    }
}
