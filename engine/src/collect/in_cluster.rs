//! Running in a pod (the Helm chart's CronJob): the API server's address from
//! `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT`, the service account's token and CA
//! from its mounted directory, as client-go's `rest.InClusterConfig` reads them
//! (docs/reality.md). Used only when the environment file names no kubeconfig and neither
//! `$KUBECONFIG` nor `~/.kube/config` exists, the order clientcmd falls back in. The token is
//! read from its file on every refresh (kube's `token_file`), so a rotated projected token is
//! picked up; it is never printed.

use std::path::{Path, PathBuf};

/// Where the kubelet mounts the service account's token, CA and namespace.
pub const DEFAULT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// Another directory holding `token` and `ca.crt` (a token projected elsewhere; the tests).
pub const DIR_VARIABLE: &str = "GATES_SERVICE_ACCOUNT_DIR";

/// The API server and the service account's files, when gates runs in a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InCluster {
    /// `https://HOST:PORT`, an IPv6 host in brackets.
    pub server: String,
    pub token_file: PathBuf,
    pub ca_file: PathBuf,
}

/// Why the in-cluster configuration cannot be used although gates runs in a pod.
#[derive(Debug, thiserror::Error)]
pub enum InClusterError {
    #[error("running in a pod, but the service account's {what} {} cannot be read: {source}; mount the service account token (automountServiceAccountToken) or set kube.kubeconfig", path.display())]
    Unreadable {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "running in a pod, but the API server address https://{host}:{port} is not a URL: {reason}"
    )]
    Address {
        host: String,
        port: String,
        reason: String,
    },
    #[error("cannot build a Kubernetes client from the service account: {0}")]
    Client(String),
}

/// The in-cluster configuration, when both service variables are set and no kubeconfig is
/// there to take precedence. `lookup` reads an environment variable (the process's in use).
pub fn detect(lookup: impl Fn(&str) -> Option<String>) -> Option<InCluster> {
    let host = lookup("KUBERNETES_SERVICE_HOST").filter(|h| !h.is_empty())?;
    let port = lookup("KUBERNETES_SERVICE_PORT").filter(|p| !p.is_empty())?;
    if lookup("KUBECONFIG").is_some_and(|k| !k.is_empty()) {
        return None;
    }
    if let Some(home) = lookup("HOME")
        && Path::new(&home).join(".kube/config").exists()
    {
        return None;
    }
    let dir = PathBuf::from(lookup(DIR_VARIABLE).unwrap_or_else(|| DEFAULT_DIR.to_string()));
    let server = if host.contains(':') {
        format!("https://[{host}]:{port}")
    } else {
        format!("https://{host}:{port}")
    };
    Some(InCluster {
        server,
        token_file: dir.join("token"),
        ca_file: dir.join("ca.crt"),
    })
}

/// [`detect`] over the process's environment, read once: a run asks when it builds its
/// client, names its source and reads the API endpoint, and the environment does not change
/// under it.
pub fn from_process() -> Option<InCluster> {
    static DETECTED: std::sync::OnceLock<Option<InCluster>> = std::sync::OnceLock::new();
    DETECTED
        .get_or_init(|| detect(|name| std::env::var(name).ok()))
        .clone()
}

impl InCluster {
    /// The CA that signed the API server's certificate (PEM).
    pub fn ca_pem(&self) -> Result<Vec<u8>, InClusterError> {
        std::fs::read(&self.ca_file).map_err(|source| InClusterError::Unreadable {
            what: "CA",
            path: self.ca_file.clone(),
            source,
        })
    }

    /// A client that trusts only that CA and sends the token from its file.
    pub fn client(
        &self,
        timeout: std::time::Duration,
        read_timeout: Option<std::time::Duration>,
    ) -> Result<kube::Client, InClusterError> {
        std::fs::metadata(&self.token_file).map_err(|source| InClusterError::Unreadable {
            what: "token",
            path: self.token_file.clone(),
            source,
        })?;
        let pem = self.ca_pem()?;
        let certs: Vec<Vec<u8>> = rustls_pemfile_certs(&pem)?;
        let url: http::Uri = self.server.parse().map_err(|e: http::uri::InvalidUri| {
            let (host, port) = self
                .server
                .trim_start_matches("https://")
                .rsplit_once(':')
                .unwrap_or((&self.server, ""));
            InClusterError::Address {
                host: host.to_string(),
                port: port.to_string(),
                reason: e.to_string(),
            }
        })?;
        let mut config = kube::Config::new(url);
        config.root_cert = Some(certs);
        config.auth_info.token_file = Some(self.token_file.display().to_string());
        config.connect_timeout = Some(timeout);
        config.read_timeout = read_timeout;
        kube::Client::try_from(config).map_err(|e| InClusterError::Client(e.to_string()))
    }
}

/// The DER of each certificate in a PEM bundle.
fn rustls_pemfile_certs(pem: &[u8]) -> Result<Vec<Vec<u8>>, InClusterError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let certs: Vec<Vec<u8>> = CertificateDer::pem_slice_iter(pem)
        .filter_map(Result::ok)
        .map(|c| c.to_vec())
        .collect();
    if certs.is_empty() {
        return Err(InClusterError::Client(
            "the service account's ca.crt holds no PEM certificate".to_string(),
        ));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn both_service_variables_make_the_in_cluster_configuration() {
        let found = detect(env(&[
            ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
        ]))
        .unwrap();
        assert_eq!(found.server, "https://10.96.0.1:443");
        assert_eq!(found.token_file, Path::new(DEFAULT_DIR).join("token"));
        assert_eq!(found.ca_file, Path::new(DEFAULT_DIR).join("ca.crt"));
        let v6 = detect(env(&[
            ("KUBERNETES_SERVICE_HOST", "fd00::1"),
            ("KUBERNETES_SERVICE_PORT", "6443"),
            (DIR_VARIABLE, "/run/sa"),
        ]))
        .unwrap();
        assert_eq!(v6.server, "https://[fd00::1]:6443");
        assert_eq!(v6.token_file, Path::new("/run/sa/token"));
    }

    #[test]
    fn one_variable_missing_or_a_kubeconfig_present_is_not_in_cluster() {
        assert!(detect(env(&[("KUBERNETES_SERVICE_HOST", "10.96.0.1")])).is_none());
        assert!(
            detect(env(&[
                ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
                ("KUBERNETES_SERVICE_PORT", "443"),
                ("KUBECONFIG", "/etc/kubeconfig"),
            ]))
            .is_none()
        );
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".kube")).unwrap();
        std::fs::write(home.path().join(".kube/config"), "").unwrap();
        assert!(
            detect(env(&[
                ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
                ("KUBERNETES_SERVICE_PORT", "443"),
                ("HOME", home.path().to_str().unwrap()),
            ]))
            .is_none()
        );
    }
}
