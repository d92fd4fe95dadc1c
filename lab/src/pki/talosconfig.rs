//! The `talosconfig` file that talosctl (and the gates Talos client) reads: a current context
//! name and a map of contexts, each with endpoints and base64-encoded PEM `ca`, `crt` and `key`
//! (`research/talos.md` §2). The key keeps Talos's `ED25519 PRIVATE KEY` label.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;

use super::{CertificateAuthority, CertifiedKey};

/// One talosconfig context.
#[derive(Debug, Clone)]
pub struct TalosContext {
    /// Context name (`lab`, `lab-production`).
    pub name: String,
    /// Addresses talosctl dials (port 50000 implied when absent).
    pub endpoints: Vec<String>,
    /// Default target nodes; usually empty.
    pub nodes: Vec<String>,
    /// PEM of the Talos OS CA.
    pub ca_pem: String,
    /// PEM of the client certificate.
    pub crt_pem: String,
    /// PEM of the client key (Talos label for Ed25519).
    pub key_pem: String,
}

impl TalosContext {
    /// A context that authenticates with `client` (typically the admin certificate).
    pub fn new(
        name: &str,
        endpoints: Vec<String>,
        ca: &CertificateAuthority,
        client: &CertifiedKey,
    ) -> Self {
        Self {
            name: name.to_string(),
            endpoints,
            nodes: Vec::new(),
            ca_pem: ca.cert_pem(),
            crt_pem: client.cert_pem(),
            key_pem: client.key_pem_talos(),
        }
    }
}

#[derive(Serialize)]
struct File<'a> {
    context: &'a str,
    contexts: BTreeMap<&'a str, Context<'a>>,
}

#[derive(Serialize)]
struct Context<'a> {
    endpoints: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    nodes: &'a [String],
    ca: String,
    crt: String,
    key: String,
}

/// Renders a talosconfig with `current` as the active context.
pub fn talosconfig_yaml(
    current: &str,
    contexts: &[TalosContext],
) -> Result<String, serde_saphyr::SerializeError> {
    let file = File {
        context: current,
        contexts: contexts
            .iter()
            .map(|c| {
                (
                    c.name.as_str(),
                    Context {
                        endpoints: &c.endpoints,
                        nodes: &c.nodes,
                        ca: STANDARD.encode(c.ca_pem.as_bytes()),
                        crt: STANDARD.encode(c.crt_pem.as_bytes()),
                        key: STANDARD.encode(c.key_pem.as_bytes()),
                    },
                )
            })
            .collect(),
    };
    // Each base64 PEM on one plain line, as this file was written before serde-saphyr: by
    // default it writes a string over 80 characters as a folded `>-` block scalar, which
    // reads back the same but changes the file's look for no reader's benefit.
    let mut options = serde_saphyr::SerializerOptions::default();
    options.prefer_block_scalars = false;
    serde_saphyr::to_string_with_options(&file, options)
}
