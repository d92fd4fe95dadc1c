//! Private-key PEM handling. Talos writes Ed25519 keys as PKCS#8 under the label
//! `ED25519 PRIVATE KEY`, which rustls-pki-types (and so tonic) does not know; the DER
//! is ordinary PKCS#8, so relabelling it `PRIVATE KEY` is enough.

use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject as _;

const TALOS_ED25519_LABEL: &str = "ED25519 PRIVATE KEY";

/// Returns PEM that rustls accepts: the Talos `ED25519 PRIVATE KEY` label becomes
/// `PRIVATE KEY`; `PRIVATE KEY`, `EC PRIVATE KEY` and `RSA PRIVATE KEY` pass unchanged.
/// Fails with a reason (never the key material) when no usable key is present.
pub fn normalize_private_key_pem(pem: &[u8]) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(pem).map_err(|_| "key PEM is not UTF-8 text".to_string())?;
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
        rustls::pki_types::pem::Error::NoItemsFound => {
            "no private key PEM block (expected PRIVATE KEY or ED25519 PRIVATE KEY)".to_string()
        }
        other => format!("unreadable private key PEM: {other}"),
    })?;
    Ok(bytes)
}
