//! The lab's public key infrastructure: one certificate authority per simulated system, and the
//! leaf certificates its servers and clients present.
//!
//! Each CA mirrors what the real system generates, because clients verify exactly these shapes:
//! the Talos OS CA is Ed25519 with `O=talos` and apid only accepts client certificates whose EKU is
//! exactly `clientAuth` (`research/talos.md` §1.2–1.4); the Kubernetes CA is ECDSA P-256; Proxmox
//! nodes serve a leaf signed by a cluster-local CA whose SHA-256 fingerprint `/nodes` shows
//! (`research/proxmox.md` §1.6). Keys never leave this module except through explicit PEM/DER
//! accessors, and nothing here logs them.

pub mod endpoint;
mod pem;
pub mod talosconfig;
pub mod tls;

use std::net::{IpAddr, Ipv4Addr};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, PKCS_ED25519, SanType,
};
use ring::digest;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use time::{Duration, OffsetDateTime};

pub use pem::{pem_encode, relabel_private_key};

/// Errors while minting certificates. Only key generation or encoding can fail.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("certificate generation failed: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("invalid DNS name in a subject alternative name: {0:?}")]
    BadDnsName(String),
    #[error("key generation failed")]
    KeyGeneration,
}

/// Key algorithm of a CA and of the leaves it signs (leaves follow their CA, as in Talos).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAlgorithm {
    /// Talos API PKI.
    Ed25519,
    /// Kubernetes and Proxmox PKIs.
    EcdsaP256,
}

/// The PKCS#8 v1 prefix of an Ed25519 private key (OID 1.3.101.112), as Go's
/// `x509.MarshalPKCS8PrivateKey` writes it; the 32-byte seed follows.
const ED25519_PKCS8_V1_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

impl KeyAlgorithm {
    /// A fresh key pair. Ed25519 keys are re-encoded as PKCS#8 v1 (48 bytes) so that the key
    /// files the lab writes are byte-for-byte the shape Talos writes (ring produces v2).
    fn generate(self) -> Result<KeyPair, PkiError> {
        match self {
            KeyAlgorithm::EcdsaP256 => Ok(KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?),
            KeyAlgorithm::Ed25519 => {
                let v2 = KeyPair::generate_for(&PKCS_ED25519)?;
                let der = v2.serialized_der();
                // ring's v2 document: 16-byte header identical to v1 except the length and
                // version bytes, then the seed.
                let seed = der.get(16..48).ok_or(PkiError::KeyGeneration)?;
                let mut v1 = ED25519_PKCS8_V1_PREFIX.to_vec();
                v1.extend_from_slice(seed);
                Ok(KeyPair::from_pkcs8_der_and_sign_algo(
                    &PrivatePkcs8KeyDer::from(v1),
                    &PKCS_ED25519,
                )?)
            }
        }
    }
}

/// A certificate and its private key.
pub struct CertifiedKey {
    cert_der: CertificateDer<'static>,
    key_pkcs8: Vec<u8>,
    algorithm: KeyAlgorithm,
}

impl std::fmt::Debug for CertifiedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertifiedKey")
            .field("fingerprint", &self.sha256_fingerprint())
            .field("algorithm", &self.algorithm)
            .field("key", &"[secret]")
            .finish()
    }
}

impl CertifiedKey {
    /// The certificate, DER.
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert_der
    }

    /// The certificate, PEM (`CERTIFICATE`).
    pub fn cert_pem(&self) -> String {
        pem_encode("CERTIFICATE", &self.cert_der)
    }

    /// The private key as PKCS#8 DER, for rustls.
    pub fn key_der(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_pkcs8.clone()))
    }

    /// The private key, PKCS#8 PEM under the standard `PRIVATE KEY` label.
    pub fn key_pem(&self) -> String {
        pem_encode("PRIVATE KEY", &self.key_pkcs8)
    }

    /// The private key as Talos writes it: for Ed25519 the label is `ED25519 PRIVATE KEY`
    /// (same PKCS#8 bytes); other algorithms keep `PRIVATE KEY`.
    pub fn key_pem_talos(&self) -> String {
        match self.algorithm {
            KeyAlgorithm::Ed25519 => pem_encode("ED25519 PRIVATE KEY", &self.key_pkcs8),
            KeyAlgorithm::EcdsaP256 => self.key_pem(),
        }
    }

    /// Key algorithm.
    pub fn algorithm(&self) -> KeyAlgorithm {
        self.algorithm
    }

    /// SHA-256 fingerprint of the certificate as Proxmox shows it (`AB:CD:…`).
    pub fn sha256_fingerprint(&self) -> String {
        sha256_fingerprint(&self.cert_der)
    }
}

/// SHA-256 over a DER certificate, colon-separated upper-case hex (Proxmox's `ssl_fingerprint`).
pub fn sha256_fingerprint(cert_der: &[u8]) -> String {
    digest::digest(&digest::SHA256, cert_der)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Which system a CA belongs to; decides algorithm and subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaKind {
    /// Talos OS CA: Ed25519, `O=talos`.
    Talos,
    /// Kubernetes cluster CA: ECDSA P-256, `CN=kubernetes`.
    Kubernetes,
    /// Proxmox cluster CA: ECDSA P-256, subject like `pve-root-ca.pem`.
    Proxmox,
}

/// A certificate authority that signs the lab's leaves.
pub struct CertificateAuthority {
    kind: CaKind,
    cert: CertifiedKey,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority")
            .field("kind", &self.kind)
            .field("cert", &self.cert)
            .finish()
    }
}

/// Validity window starting an hour in the past, so clocks that differ slightly still accept it.
fn validity(params: &mut CertificateParams, lifetime: Duration) {
    let now = OffsetDateTime::now_utc();
    params.not_before = now - Duration::hours(1);
    params.not_after = now + lifetime;
}

/// Leaves live a year: the lab does not rotate certificates (real Talos apid certs live 24 h and
/// are re-issued every 12 h), and a lab run must not outlive its certificates.
const LEAF_LIFETIME: Duration = Duration::days(365);
const CA_LIFETIME: Duration = Duration::days(3650);

impl CertificateAuthority {
    /// A new self-signed CA of the given kind.
    pub fn new(kind: CaKind) -> Result<Self, PkiError> {
        let algorithm = match kind {
            CaKind::Talos => KeyAlgorithm::Ed25519,
            CaKind::Kubernetes | CaKind::Proxmox => KeyAlgorithm::EcdsaP256,
        };
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        match kind {
            CaKind::Talos => dn.push(DnType::OrganizationName, "talos"),
            CaKind::Kubernetes => dn.push(DnType::CommonName, "kubernetes"),
            CaKind::Proxmox => {
                dn.push(DnType::CommonName, "Proxmox Virtual Environment");
                dn.push(DnType::OrganizationalUnitName, "gates-lab");
                dn.push(DnType::OrganizationName, "PVE Cluster Manager CA");
            }
        }
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
        ];
        validity(&mut params, CA_LIFETIME);
        let key = algorithm.generate()?;
        let cert = params.self_signed(&key)?;
        let cert = CertifiedKey {
            cert_der: cert.der().clone(),
            key_pkcs8: key.serialized_der().to_vec(),
            algorithm,
        };
        Ok(Self {
            kind,
            cert,
            issuer: Issuer::new(params, key),
        })
    }

    /// Which system this CA serves.
    pub fn kind(&self) -> CaKind {
        self.kind
    }

    /// The CA certificate, DER.
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        self.cert.cert_der()
    }

    /// The CA certificate, PEM: what clients put in their trust store (`ca`, `proxmox-ca.pem`).
    pub fn cert_pem(&self) -> String {
        self.cert.cert_pem()
    }

    /// The CA's own certificate and key (e.g. to persist it).
    pub fn certified_key(&self) -> &CertifiedKey {
        &self.cert
    }

    /// A leaf certificate signed by this CA with the given parameters.
    pub fn issue(&self, spec: &LeafSpec) -> Result<CertifiedKey, PkiError> {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        if let Some(cn) = &spec.common_name {
            dn.push(DnType::CommonName, cn.as_str());
        }
        for o in &spec.organizations {
            dn.push(DnType::OrganizationName, o.as_str());
        }
        if let Some(ou) = &spec.organizational_unit {
            dn.push(DnType::OrganizationalUnitName, ou.as_str());
        }
        params.distinguished_name = dn;
        let mut sans = Vec::new();
        for ip in &spec.ip_sans {
            sans.push(SanType::IpAddress(*ip));
        }
        for name in &spec.dns_sans {
            let ia5 = name
                .as_str()
                .try_into()
                .map_err(|_| PkiError::BadDnsName(name.clone()))?;
            sans.push(SanType::DnsName(ia5));
        }
        params.subject_alt_names = sans;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = spec.extended_key_usages.iter().map(|e| e.rcgen()).collect();
        params.use_authority_key_identifier_extension = true;
        validity(&mut params, spec.lifetime.unwrap_or(LEAF_LIFETIME));
        let algorithm = self.cert.algorithm;
        let key = algorithm.generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(CertifiedKey {
            cert_der: cert.der().clone(),
            key_pkcs8: key.serialized_der().to_vec(),
            algorithm,
        })
    }

    /// A server certificate (EKU serverAuth only) for the given addresses and names; the first
    /// DNS name (or else the first IP) becomes the common name.
    pub fn server_cert(&self, ips: &[IpAddr], dns: &[&str]) -> Result<CertifiedKey, PkiError> {
        let common_name = dns
            .first()
            .map(|d| d.to_string())
            .or_else(|| ips.first().map(|ip| ip.to_string()));
        self.issue(&LeafSpec {
            common_name,
            ip_sans: ips.to_vec(),
            dns_sans: dns.iter().map(|d| d.to_string()).collect(),
            extended_key_usages: vec![Eku::ServerAuth],
            ..LeafSpec::default()
        })
    }

    /// A Proxmox node certificate shaped like `pve-ssl.pem`: SANs 127.0.0.1, ::1, localhost,
    /// the node address and name; subject `OU=PVE Cluster Node, O=Proxmox Virtual Environment`.
    pub fn proxmox_node_cert(&self, node: &str, ip: IpAddr) -> Result<CertifiedKey, PkiError> {
        self.issue(&LeafSpec {
            common_name: Some(format!("{node}.lab.internal")),
            organizations: vec!["Proxmox Virtual Environment".into()],
            organizational_unit: Some("PVE Cluster Node".into()),
            ip_sans: vec![
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                "::1".parse().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)),
                ip,
            ],
            dns_sans: vec![
                "localhost".into(),
                node.to_string(),
                format!("{node}.lab.internal"),
            ],
            extended_key_usages: vec![Eku::ServerAuth],
            lifetime: None,
        })
    }

    /// A Talos apid server certificate: EKU serverAuth only, SANs = the node's addresses plus
    /// 127.0.0.1 and its hostname, CN = hostname (as `generateControlPlane` does).
    pub fn talos_server_cert(
        &self,
        hostname: &str,
        ips: &[IpAddr],
    ) -> Result<CertifiedKey, PkiError> {
        let mut all_ips = ips.to_vec();
        let localhost = IpAddr::V4(Ipv4Addr::LOCALHOST);
        if !all_ips.contains(&localhost) {
            all_ips.push(localhost);
        }
        self.issue(&LeafSpec {
            common_name: Some(hostname.to_string()),
            ip_sans: all_ips,
            dns_sans: vec![hostname.to_string()],
            extended_key_usages: vec![Eku::ServerAuth],
            ..LeafSpec::default()
        })
    }

    /// The talosctl admin client certificate: `O=os:admin`, no CN, EKU clientAuth only.
    pub fn talos_admin_cert(&self) -> Result<CertifiedKey, PkiError> {
        self.talos_client_cert(&["os:admin"])
    }

    /// A Talos API client certificate carrying the given roles in `Subject.O`.
    pub fn talos_client_cert(&self, roles: &[&str]) -> Result<CertifiedKey, PkiError> {
        self.issue(&LeafSpec {
            organizations: roles.iter().map(|r| r.to_string()).collect(),
            extended_key_usages: vec![Eku::ClientAuth],
            ..LeafSpec::default()
        })
    }
}

/// Extended key usages the lab issues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eku {
    ServerAuth,
    ClientAuth,
}

impl Eku {
    fn rcgen(self) -> ExtendedKeyUsagePurpose {
        match self {
            Eku::ServerAuth => ExtendedKeyUsagePurpose::ServerAuth,
            Eku::ClientAuth => ExtendedKeyUsagePurpose::ClientAuth,
        }
    }
}

/// Everything that varies between leaf certificates.
#[derive(Debug, Clone, Default)]
pub struct LeafSpec {
    pub common_name: Option<String>,
    pub organizations: Vec<String>,
    pub organizational_unit: Option<String>,
    pub ip_sans: Vec<IpAddr>,
    pub dns_sans: Vec<String>,
    /// Empty means the certificate carries no EKU extension at all.
    pub extended_key_usages: Vec<Eku>,
    /// Defaults to one year.
    pub lifetime: Option<Duration>,
}

#[cfg(test)]
mod tests;
