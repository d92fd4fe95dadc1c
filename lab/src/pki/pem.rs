//! PEM encoding and the label rewrite Talos keys need.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// PEM-encodes DER bytes under `label`, with 64-character lines.
pub fn pem_encode(label: &str, der: &[u8]) -> String {
    let b64 = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        // base64 output is ASCII, so every chunk is valid UTF-8.
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// Rewrites a Talos `ED25519 PRIVATE KEY` PEM block to the standard `PRIVATE KEY` label that
/// rustls understands; the PKCS#8 bytes are unchanged. Other PEM text is returned as is.
pub fn relabel_private_key(pem: &str) -> String {
    pem.replace(
        "-----BEGIN ED25519 PRIVATE KEY-----",
        "-----BEGIN PRIVATE KEY-----",
    )
    .replace(
        "-----END ED25519 PRIVATE KEY-----",
        "-----END PRIVATE KEY-----",
    )
}
