//! Test PKI shaped like Talos's: an Ed25519 CA (O=talos), an apid server certificate
//! with IP SANs, and an admin client certificate (O=os:admin, EKU clientAuth) whose key
//! is written under Talos's `ED25519 PRIVATE KEY` label.

use std::net::IpAddr;

use rustls::pki_types::pem::PemObject as _;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};

pub struct Ca {
    pub issuer: CertifiedIssuer<'static, KeyPair>,
}

pub struct Leaf {
    pub cert_pem: String,
    pub cert_der: Vec<u8>,
    /// PKCS#8 PEM labelled `PRIVATE KEY`.
    pub key_pem: String,
}

impl Leaf {
    /// The key as Talos writes it: Go's `x509.MarshalPKCS8PrivateKey` output (PKCS#8 v1,
    /// seed only: `30 2e 02 01 00 30 05 06 03 2b 65 70 04 22 04 20 <seed>`) under the label
    /// `ED25519 PRIVATE KEY`. rcgen writes v2 (with the public key); the seed is the same.
    pub fn talos_key_pem(&self) -> String {
        use base64::Engine as _;
        let der = rustls::pki_types::PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .expect("key der");
        let der = der.secret_der();
        const PREFIX: [u8; 16] = [
            0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22,
            0x04, 0x20,
        ];
        assert_eq!(&der[5..16], &PREFIX[5..16], "an Ed25519 PKCS#8 key");
        let mut v1 = PREFIX.to_vec();
        v1.extend_from_slice(&der[16..48]);
        let b64 = base64::engine::general_purpose::STANDARD.encode(&v1);
        format!("-----BEGIN ED25519 PRIVATE KEY-----\n{b64}\n-----END ED25519 PRIVATE KEY-----\n")
    }
}

pub fn ed25519() -> KeyPair {
    KeyPair::generate_for(&rcgen::PKCS_ED25519).expect("ed25519 key")
}

impl Ca {
    pub fn new(org: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, org);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        Ca {
            issuer: CertifiedIssuer::self_signed(params, ed25519()).expect("ca"),
        }
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    fn sign(&self, params: CertificateParams) -> Leaf {
        let key = ed25519();
        let cert = params.signed_by(&key, &self.issuer).expect("sign");
        Leaf {
            cert_pem: cert.pem(),
            cert_der: cert.der().to_vec(),
            key_pem: key.serialize_pem(),
        }
    }

    /// An apid-like server certificate for the given IPs and DNS names.
    pub fn server(&self, ips: &[&str], dns: &[&str], expired: bool) -> Leaf {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        for ip in ips {
            params
                .subject_alt_names
                .push(SanType::IpAddress(ip.parse::<IpAddr>().expect("ip")));
        }
        for name in dns {
            params
                .subject_alt_names
                .push(SanType::DnsName((*name).try_into().expect("dns")));
        }
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        self.sign(params)
    }

    /// A talosctl-like admin client certificate.
    pub fn client(&self, role: &str) -> Leaf {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, role);
        params.distinguished_name = dn;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params)
    }
}
