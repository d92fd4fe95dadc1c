//! How the Proxmox client trusts the server: the cluster CA, a pinned SHA-256
//! fingerprint of the node certificate (as `GET /nodes` shows it), or nothing at all.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, OtherError, SignatureScheme};

use super::error::ProxmoxError;
use crate::transport::FingerprintMismatch;

/// Server trust for the Proxmox API.
#[derive(Clone, PartialEq, Eq)]
pub enum TlsTrust {
    /// PEM of the CA(s) that sign the node certificates (`/etc/pve/pve-root-ca.pem`).
    CaPem(Vec<u8>),
    /// SHA-256 of the server's leaf certificate (DER). Neither CA nor name is checked:
    /// the pin is the whole trust. Breaks when the certificate is renewed.
    Fingerprint([u8; 32]),
    /// No verification. The caller must warn on every run.
    Insecure,
}

impl std::fmt::Debug for TlsTrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsTrust::CaPem(pem) => write!(f, "CaPem(<{} bytes>)", pem.len()),
            TlsTrust::Fingerprint(fp) => write!(f, "Fingerprint({})", format_fingerprint(fp)),
            TlsTrust::Insecure => f.write_str("Insecure"),
        }
    }
}

impl TlsTrust {
    /// Reads and checks a CA file.
    pub fn ca_file(path: &Path) -> Result<Self, ProxmoxError> {
        let pem = std::fs::read(path).map_err(|e| ProxmoxError::InvalidSettings {
            reason: format!("cannot read CA file {}: {e}", path.display()),
        })?;
        Self::ca_pem(pem).map_err(|e| match e {
            ProxmoxError::InvalidSettings { reason } => ProxmoxError::InvalidSettings {
                reason: format!("CA file {}: {reason}", path.display()),
            },
            other => other,
        })
    }

    /// Checks CA PEM bytes (at least one certificate).
    pub fn ca_pem(pem: Vec<u8>) -> Result<Self, ProxmoxError> {
        roots_from_pem(&pem)?;
        Ok(TlsTrust::CaPem(pem))
    }

    /// Parses a fingerprint as Proxmox shows it: 32 bytes of hex, colons optional.
    pub fn fingerprint(text: &str) -> Result<Self, ProxmoxError> {
        parse_fingerprint(text).map(TlsTrust::Fingerprint)
    }

    pub fn is_insecure(&self) -> bool {
        matches!(self, TlsTrust::Insecure)
    }
}

/// `AB:CD:...` from 32 bytes, the form `GET /nodes` uses in `ssl_fingerprint`.
pub fn format_fingerprint(fp: &[u8]) -> String {
    fp.iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// SHA-256 of a DER certificate, as colon-separated uppercase hex.
pub fn certificate_fingerprint(der: &[u8]) -> String {
    format_fingerprint(ring::digest::digest(&ring::digest::SHA256, der).as_ref())
}

/// Parses 64 hex digits, with or without colons, in either case.
pub fn parse_fingerprint(text: &str) -> Result<[u8; 32], ProxmoxError> {
    let hex: String = text.trim().chars().filter(|c| *c != ':').collect();
    let bad = || ProxmoxError::InvalidSettings {
        reason: format!(
            "fingerprint {text:?} is not a SHA-256 fingerprint (64 hex digits, colons optional)"
        ),
    };
    if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

fn roots_from_pem(pem: &[u8]) -> Result<rustls::RootCertStore, ProxmoxError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| ProxmoxError::InvalidSettings {
            reason: format!("invalid PEM certificate: {e}"),
        })?;
        roots.add(cert).map_err(|e| ProxmoxError::InvalidSettings {
            reason: format!("unusable CA certificate: {e}"),
        })?;
    }
    if roots.is_empty() {
        return Err(ProxmoxError::InvalidSettings {
            reason: "no PEM CERTIFICATE block".into(),
        });
    }
    Ok(roots)
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The rustls client configuration for a trust mode (HTTP/1.1 only: pveproxy has no h2).
pub(crate) fn client_config(trust: &TlsTrust) -> Result<rustls::ClientConfig, ProxmoxError> {
    let provider = provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| ProxmoxError::InvalidSettings {
            reason: format!("TLS setup: {e}"),
        })?;
    let algorithms = provider.signature_verification_algorithms;
    let config = match trust {
        TlsTrust::CaPem(pem) => builder
            .with_root_certificates(roots_from_pem(pem)?)
            .with_no_client_auth(),
        TlsTrust::Fingerprint(expected) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedVerifier {
                expected: Some(*expected),
                algorithms,
            }))
            .with_no_client_auth(),
        TlsTrust::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedVerifier {
                expected: None,
                algorithms,
            }))
            .with_no_client_auth(),
    };
    Ok(config)
}

/// Accepts exactly the leaf whose SHA-256 is `expected` (`None`: any leaf). Handshake
/// signatures are still verified, so the server must hold the certificate's key.
#[derive(Debug)]
struct PinnedVerifier {
    expected: Option<[u8; 32]>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(expected) = self.expected else {
            return Ok(ServerCertVerified::assertion());
        };
        let actual = ring::digest::digest(&ring::digest::SHA256, end_entity.as_ref());
        if actual.as_ref() == expected.as_slice() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(CertificateError::Other(
                OtherError(Arc::new(FingerprintMismatch {
                    actual: format_fingerprint(actual.as_ref()),
                })),
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
