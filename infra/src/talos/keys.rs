//! Private-key PEM handling. Talos writes Ed25519 keys as PKCS#8 under the label
//! `ED25519 PRIVATE KEY`, which rustls-pki-types (and so tonic) does not know; the DER
//! is ordinary PKCS#8, so relabelling it `PRIVATE KEY` is enough.

use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject as _;

const TALOS_ED25519_LABEL: &str = "ED25519 PRIVATE KEY";

/// Why PEM material from a talosconfig (or given to the client) cannot be used. The text
/// never holds the key material: it names what is missing or which parser refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PemError {
    #[error("key PEM is not UTF-8 text")]
    KeyNotText,
    #[error("no private key PEM block (expected PRIVATE KEY or ED25519 PRIVATE KEY)")]
    NoKey,
    #[error("unreadable private key PEM: {0}")]
    UnreadableKey(String),
    #[error("invalid PEM certificate: {0}")]
    InvalidCertificate(String),
    #[error("no PEM CERTIFICATE block")]
    NoCertificate,
}

/// Returns PEM that rustls accepts: the Talos `ED25519 PRIVATE KEY` label becomes
/// `PRIVATE KEY`; `PRIVATE KEY`, `EC PRIVATE KEY` and `RSA PRIVATE KEY` pass unchanged.
/// Fails with a reason (never the key material) when no usable key is present.
pub fn normalize_private_key_pem(pem: &[u8]) -> Result<Vec<u8>, PemError> {
    let text = std::str::from_utf8(pem).map_err(|_| PemError::KeyNotText)?;
    let relabelled = text
        .replace(
            &format!("-----BEGIN {TALOS_ED25519_LABEL}-----"),
            "-----BEGIN PRIVATE KEY-----",
        )
        .replace(
            &format!("-----END {TALOS_ED25519_LABEL}-----"),
            "-----END PRIVATE KEY-----",
        );
    let bytes = relabelled.into_bytes();
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => PemError::NoKey,
        other => PemError::UnreadableKey(other.to_string()),
    })?;
    Ok(bytes)
}
