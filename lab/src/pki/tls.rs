//! rustls server configurations for the lab's servers (ring provider only), including the
//! client-certificate rule Talos apid enforces.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig,
    SignatureScheme,
};

use super::CertifiedKey;

/// The certificate and key a server presents.
pub struct ServerTls {
    /// Leaf first; Proxmox and Talos serve the leaf only.
    pub cert_chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("certs", &self.cert_chain.len())
            .field("key", &"[secret]")
            .finish()
    }
}

impl ServerTls {
    /// Serves `leaf` alone.
    pub fn from_leaf(leaf: &CertifiedKey) -> Self {
        Self {
            cert_chain: vec![leaf.cert_der().clone()],
            key: leaf.key_der(),
        }
    }

    /// SHA-256 fingerprint of the leaf (Proxmox `ssl_fingerprint`), if any.
    pub fn leaf_fingerprint(&self) -> Option<String> {
        self.cert_chain
            .first()
            .map(|c| super::sha256_fingerprint(c))
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// HTTPS without client certificates, offering only the given ALPN protocols.
pub fn server_config(tls: &ServerTls, alpn: &[&[u8]]) -> Result<Arc<ServerConfig>, rustls::Error> {
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(tls.cert_chain.clone(), tls.key.clone_key())?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// Mutual TLS as Talos apid does it: a client certificate is required, must chain to
/// `client_ca`, and (unlike plain WebPKI, which accepts a certificate without EKU or with extra
/// purposes) its extended key usage must be exactly `clientAuth`. ALPN `h2` only.
pub fn talos_mtls_config(
    tls: &ServerTls,
    client_ca: &CertificateDer<'static>,
) -> Result<Arc<ServerConfig>, rustls::Error> {
    let mut roots = RootCertStore::empty();
    roots.add(client_ca.clone())?;
    let inner = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|e| rustls::Error::General(format!("client verifier: {e}")))?;
    let verifier = Arc::new(ExactClientAuthEku { inner });
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(tls.cert_chain.clone(), tls.key.clone_key())?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// True when the certificate carries an EKU extension listing `clientAuth` and nothing else
/// (apid's `verifyExtKeyUsage`: `ExtKeyUsage` must equal `[ClientAuth]`).
pub fn has_exactly_client_auth_eku(cert_der: &[u8]) -> bool {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(cert_der) else {
        return false;
    };
    match cert.extended_key_usage() {
        Ok(Some(ext)) => {
            let eku = ext.value;
            eku.client_auth
                && !eku.any
                && !eku.server_auth
                && !eku.code_signing
                && !eku.email_protection
                && !eku.time_stamping
                && !eku.ocsp_signing
                && eku.other.is_empty()
        }
        _ => false,
    }
}

/// The organizations (`Subject.O`) of a certificate: Talos reads RBAC roles from them.
pub fn subject_organizations(cert_der: &[u8]) -> Vec<String> {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(cert_der) else {
        return Vec::new();
    };
    cert.subject()
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect()
}

#[derive(Debug)]
struct ExactClientAuthEku {
    inner: Arc<dyn ClientCertVerifier>,
}

impl ClientCertVerifier for ExactClientAuthEku {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        if has_exactly_client_auth_eku(end_entity) {
            Ok(verified)
        } else {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::InvalidPurpose,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
