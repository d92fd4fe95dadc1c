//! Reading a talosconfig the way talosctl does: which file, which context, and the
//! client credentials inside it (base64 of PEM).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;

use super::keys::{PemError, normalize_private_key_pem};

/// Port apid listens on; talosctl appends it to endpoints that have none.
pub const APID_PORT: u16 = 50000;

/// Why a talosconfig could not be used. Each message names the file and what to change.
#[derive(Debug, thiserror::Error)]
pub enum TalosConfigError {
    #[error("no talosconfig found (tried {}); set `talos.talosconfig` in the environment file or $TALOSCONFIG", display_paths(.tried))]
    NotFound { tried: Vec<PathBuf> },
    #[error("cannot read talosconfig {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("talosconfig {path} is not valid YAML for a talosconfig: {source}")]
    Parse {
        path: PathBuf,
        /// Boxed: serde-saphyr's error is large (clippy `result_large_err`).
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    #[error("talosconfig {path} names no context: set `talos.context` in the environment file")]
    NoContext { path: PathBuf },
    #[error("talosconfig {path} has no context {context:?}; available: {}", if .available.is_empty() { "none".to_string() } else { .available.join(", ") })]
    ContextNotFound {
        path: PathBuf,
        context: String,
        available: Vec<String>,
    },
    #[error(
        "talosconfig {path}, context {context:?}: `{field}` is empty; gates needs the CA and a client certificate and key"
    )]
    MissingField {
        path: PathBuf,
        context: String,
        field: &'static str,
    },
    #[error(
        "talosconfig {path}, context {context:?}: `{field}` is not base64-encoded PEM: {reason}"
    )]
    BadPem {
        path: PathBuf,
        context: String,
        field: &'static str,
        reason: String,
    },
}

/// Which part of a client's PEM material is unusable, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{part}: {source}")]
pub struct CredentialsError {
    /// `ca`, `crt` or `key`, as the talosconfig names them.
    pub part: &'static str,
    #[source]
    pub source: PemError,
}

/// Why an endpoint cannot be dialled as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error("endpoint {0:?} has no host")]
    NoHost(String),
    #[error("endpoint {endpoint:?} has an invalid port {port:?}")]
    BadPort { endpoint: String, port: String },
    #[error("endpoint {0:?} has an unclosed '['")]
    UnclosedBracket(String),
    #[error("endpoint {0:?} is malformed")]
    Malformed(String),
}

fn display_paths(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "no candidate path: neither $TALOSCONFIG nor $HOME is set".to_string();
    }
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The file as talosctl writes it (only the keys gates reads).
#[derive(Debug, Deserialize)]
struct RawConfig {
    #[serde(default)]
    context: Option<String>,
    #[serde(default)]
    contexts: BTreeMap<String, RawContext>,
}

#[derive(Debug, Deserialize)]
struct RawContext {
    #[serde(default)]
    endpoints: Vec<String>,
    #[serde(default)]
    nodes: Vec<String>,
    #[serde(default)]
    ca: Option<String>,
    #[serde(default)]
    crt: Option<String>,
    #[serde(default)]
    key: Option<String>,
}

/// PEM material for mutual TLS with apid. The key is kept out of `Debug`.
#[derive(Clone)]
pub struct TalosCredentials {
    /// PEM of the Talos OS CA (may hold several certificates).
    pub ca_pem: Vec<u8>,
    /// PEM of the client certificate and key (the key relabelled to `PRIVATE KEY` when
    /// Talos wrote `ED25519 PRIVATE KEY`); `None` only for [`TalosCredentials::ca_only`].
    identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl TalosCredentials {
    /// Builds credentials from PEM bytes, accepting Talos's `ED25519 PRIVATE KEY` label.
    pub fn from_pem(
        ca_pem: &[u8],
        cert_pem: &[u8],
        key_pem: &[u8],
    ) -> Result<Self, CredentialsError> {
        let part = |part| move |source| CredentialsError { part, source };
        check_certificates(ca_pem).map_err(part("ca"))?;
        check_certificates(cert_pem).map_err(part("crt"))?;
        let key_pem = normalize_private_key_pem(key_pem).map_err(part("key"))?;
        Ok(Self {
            ca_pem: ca_pem.to_vec(),
            identity: Some((cert_pem.to_vec(), key_pem)),
        })
    }

    /// Server verification only, no client certificate: what a node in maintenance mode
    /// accepts. A configured node refuses it (mutual TLS), which the client reports.
    pub fn ca_only(ca_pem: &[u8]) -> Result<Self, CredentialsError> {
        check_certificates(ca_pem).map_err(|source| CredentialsError { part: "ca", source })?;
        Ok(Self {
            ca_pem: ca_pem.to_vec(),
            identity: None,
        })
    }

    /// Client certificate PEM and key PEM (label `PRIVATE KEY`, DER unchanged).
    pub fn identity_pem(&self) -> Option<(&[u8], &[u8])> {
        self.identity
            .as_ref()
            .map(|(c, k)| (c.as_slice(), k.as_slice()))
    }
}

impl fmt::Debug for TalosCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TalosCredentials")
            .field("ca_pem", &format_args!("<{} bytes>", self.ca_pem.len()))
            .field(
                "identity",
                &self
                    .identity
                    .as_ref()
                    .map(|(c, _)| format!("<{} bytes of certificate, key redacted>", c.len())),
            )
            .finish()
    }
}

fn check_certificates(pem: &[u8]) -> Result<(), PemError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let mut count = 0;
    for cert in CertificateDer::pem_slice_iter(pem) {
        cert.map_err(|e| PemError::InvalidCertificate(e.to_string()))?;
        count += 1;
    }
    if count == 0 {
        return Err(PemError::NoCertificate);
    }
    Ok(())
}

/// One talosconfig context, resolved: where it came from, its endpoints, its credentials.
#[derive(Debug, Clone)]
pub struct TalosContext {
    /// File the context was read from.
    pub path: PathBuf,
    /// Context name.
    pub name: String,
    /// Endpoints exactly as listed (`host`, `host:port` or `https://host`).
    pub endpoints: Vec<String>,
    /// Default target nodes of the context (talosctl `-n`); gates does not use them for routing.
    pub nodes: Vec<String>,
    /// Client credentials for mutual TLS.
    pub credentials: TalosCredentials,
}

impl TalosContext {
    /// The hosts of the listed endpoints (scheme and port stripped), in order, for
    /// the `talos-endpoints` check: every control-plane address listed, the VIP absent.
    /// An endpoint that does not parse is kept as written, so the check still sees it.
    pub fn endpoint_hosts(&self) -> Vec<String> {
        self.endpoints
            .iter()
            .map(|e| {
                parse_endpoint(e)
                    .map(|a| a.host)
                    .unwrap_or_else(|_| e.trim().to_string())
            })
            .collect()
    }
}

/// An apid address: host (IP or DNS name, IPv6 without brackets) and port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EndpointAddr {
    pub host: String,
    pub port: u16,
}

impl EndpointAddr {
    /// `https://host:port`, IPv6 in brackets, as tonic wants the URI.
    pub fn uri(&self) -> String {
        if self.host.contains(':') {
            format!("https://[{}]:{}", self.host, self.port)
        } else {
            format!("https://{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Display for EndpointAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Parses an endpoint the way talosctl does: strips a URL scheme and path, and adds
/// port 50000 when none is given. `https://h` without a port keeps talosctl's `443`.
pub fn parse_endpoint(endpoint: &str) -> Result<EndpointAddr, EndpointError> {
    let trimmed = endpoint.trim();
    let (rest, scheme_port) = match trimmed.split_once("://") {
        Some((scheme, rest)) => (
            rest,
            if scheme.eq_ignore_ascii_case("https") {
                Some(443)
            } else {
                None
            },
        ),
        None => (trimmed, None),
    };
    let rest = rest.split('/').next().unwrap_or_default();
    if rest.is_empty() {
        return Err(EndpointError::NoHost(endpoint.to_string()));
    }
    let default_port = scheme_port.unwrap_or(APID_PORT);
    let parse_port = |p: &str| {
        p.parse::<u16>().map_err(|_| EndpointError::BadPort {
            endpoint: endpoint.to_string(),
            port: p.to_string(),
        })
    };
    if let Some(inner) = rest.strip_prefix('[') {
        let (host, after) = inner
            .split_once(']')
            .ok_or_else(|| EndpointError::UnclosedBracket(endpoint.to_string()))?;
        let port = match after.strip_prefix(':') {
            Some(p) => parse_port(p)?,
            None if after.is_empty() => default_port,
            None => return Err(EndpointError::Malformed(endpoint.to_string())),
        };
        return Ok(EndpointAddr {
            host: host.to_string(),
            port,
        });
    }
    match rest.matches(':').count() {
        0 => Ok(EndpointAddr {
            host: rest.to_string(),
            port: default_port,
        }),
        1 => {
            let (host, port) = rest.split_once(':').unwrap_or((rest, ""));
            if host.is_empty() {
                return Err(EndpointError::NoHost(endpoint.to_string()));
            }
            Ok(EndpointAddr {
                host: host.to_string(),
                port: parse_port(port)?,
            })
        }
        // A bare IPv6 address.
        _ => Ok(EndpointAddr {
            host: rest.to_string(),
            port: default_port,
        }),
    }
}

/// Candidate files in talosctl's order. An explicit path is the only candidate;
/// otherwise `$TALOSCONFIG`, then `$TALOS_HOME/config` (absolute only) or `~/.talos/config`.
pub fn candidate_paths(
    explicit: Option<&Path>,
    env: impl Fn(&str) -> Option<OsString>,
) -> Vec<PathBuf> {
    if let Some(p) = explicit {
        return vec![p.to_path_buf()];
    }
    let mut out = Vec::new();
    if let Some(v) = env("TALOSCONFIG").filter(|v| !v.is_empty()) {
        out.push(PathBuf::from(v));
    }
    let talos_home = env("TALOS_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    match talos_home {
        Some(home) => out.push(home.join("config")),
        None => {
            if let Some(home) = env("HOME").filter(|v| !v.is_empty()) {
                out.push(PathBuf::from(home).join(".talos").join("config"));
            }
        }
    }
    out
}

/// Finds the talosconfig file: the first candidate that exists.
pub fn locate(
    explicit: Option<&Path>,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<PathBuf, TalosConfigError> {
    let tried = candidate_paths(explicit, env);
    tried
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or(TalosConfigError::NotFound { tried })
}

/// Loads a context from the talosconfig found from `explicit`, `$TALOSCONFIG` or `~/.talos/config`.
/// `context: None` uses the file's current `context:`.
pub fn load_context(
    explicit: Option<&Path>,
    context: Option<&str>,
) -> Result<TalosContext, TalosConfigError> {
    let path = locate(explicit, |k| std::env::var_os(k))?;
    load_context_from(&path, context)
}

/// Loads a context from one talosconfig file.
pub fn load_context_from(
    path: &Path,
    context: Option<&str>,
) -> Result<TalosContext, TalosConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| TalosConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_context(path, &text, context)
}

/// Parses talosconfig text (`path` only labels errors).
pub fn parse_context(
    path: &Path,
    text: &str,
    context: Option<&str>,
) -> Result<TalosContext, TalosConfigError> {
    let raw: RawConfig = crate::yaml::from_str(text).map_err(|source| TalosConfigError::Parse {
        path: path.to_path_buf(),
        source: Box::new(source),
    })?;
    let name = match context.map(str::to_string).or(raw.context.clone()) {
        Some(n) if !n.is_empty() => n,
        _ => {
            return Err(TalosConfigError::NoContext {
                path: path.to_path_buf(),
            });
        }
    };
    let Some(ctx) = raw.contexts.get(&name) else {
        return Err(TalosConfigError::ContextNotFound {
            path: path.to_path_buf(),
            context: name,
            available: raw.contexts.keys().cloned().collect(),
        });
    };
    let field =
        |field: &'static str, value: &Option<String>| -> Result<Vec<u8>, TalosConfigError> {
            let value = value.as_deref().map(str::trim).unwrap_or_default();
            if value.is_empty() {
                return Err(TalosConfigError::MissingField {
                    path: path.to_path_buf(),
                    context: name.clone(),
                    field,
                });
            }
            base64::engine::general_purpose::STANDARD
                .decode(value)
                .map_err(|e| TalosConfigError::BadPem {
                    path: path.to_path_buf(),
                    context: name.clone(),
                    field,
                    reason: format!("invalid base64: {e}"),
                })
        };
    let ca = field("ca", &ctx.ca)?;
    let crt = field("crt", &ctx.crt)?;
    let key = field("key", &ctx.key)?;
    let bad = |field: &'static str, reason: PemError| TalosConfigError::BadPem {
        path: path.to_path_buf(),
        context: name.clone(),
        field,
        reason: reason.to_string(),
    };
    check_certificates(&ca).map_err(|r| bad("ca", r))?;
    check_certificates(&crt).map_err(|r| bad("crt", r))?;
    let key_pem = normalize_private_key_pem(&key).map_err(|r| bad("key", r))?;
    Ok(TalosContext {
        path: path.to_path_buf(),
        name: name.clone(),
        endpoints: ctx.endpoints.clone(),
        nodes: ctx.nodes.clone(),
        credentials: TalosCredentials {
            ca_pem: ca,
            identity: Some((crt, key_pem)),
        },
    })
}
