use std::net::IpAddr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::talosconfig::{TalosContext, talosconfig_yaml};
use super::tls::{has_exactly_client_auth_eku, subject_organizations};
use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address")
}

#[test]
fn fingerprint_is_colon_separated_upper_hex_of_sha256() {
    let fp = sha256_fingerprint(b"abc");
    // SHA-256("abc") = ba7816bf...
    assert!(fp.starts_with("BA:78:16:BF:"), "{fp}");
    assert_eq!(fp.len(), 32 * 3 - 1);
}

#[test]
fn talos_keys_are_pkcs8_v1_ed25519_with_talos_label() {
    let ca = CertificateAuthority::new(CaKind::Talos).expect("ca");
    let admin = ca.talos_admin_cert().expect("admin");
    assert_eq!(admin.algorithm(), KeyAlgorithm::Ed25519);
    let pem = admin.key_pem_talos();
    assert!(
        pem.starts_with("-----BEGIN ED25519 PRIVATE KEY-----\n"),
        "{pem}"
    );
    assert!(pem.ends_with("-----END ED25519 PRIVATE KEY-----\n"));
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let der = STANDARD.decode(body).expect("base64");
    assert_eq!(der.len(), 48, "PKCS#8 v1 as Go writes it");
    assert_eq!(&der[..16], &ED25519_PKCS8_V1_PREFIX);
    assert_eq!(relabel_private_key(&pem), admin.key_pem());
    assert!(admin.key_pem().starts_with("-----BEGIN PRIVATE KEY-----\n"));
}

#[test]
fn talos_admin_cert_has_os_admin_role_and_only_client_auth() {
    let ca = CertificateAuthority::new(CaKind::Talos).expect("ca");
    let admin = ca.talos_admin_cert().expect("admin");
    assert!(has_exactly_client_auth_eku(admin.cert_der()));
    assert_eq!(subject_organizations(admin.cert_der()), vec!["os:admin"]);
    let server = ca
        .talos_server_cert("talos-cp-1", &[ip("127.77.1.1")])
        .expect("server");
    assert!(!has_exactly_client_auth_eku(server.cert_der()));
    let both = ca
        .issue(&LeafSpec {
            organizations: vec!["os:admin".into()],
            extended_key_usages: vec![Eku::ClientAuth, Eku::ServerAuth],
            ..LeafSpec::default()
        })
        .expect("both");
    assert!(!has_exactly_client_auth_eku(both.cert_der()));
    let none = ca.issue(&LeafSpec::default()).expect("no eku");
    assert!(!has_exactly_client_auth_eku(none.cert_der()));
}

#[test]
fn talos_server_cert_has_node_ip_localhost_and_hostname() {
    let ca = CertificateAuthority::new(CaKind::Talos).expect("ca");
    let cert = ca
        .talos_server_cert("talos-cp-1", &[ip("127.77.1.1")])
        .expect("server");
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.cert_der()).expect("parse");
    let names = &parsed
        .subject_alternative_name()
        .expect("ext")
        .expect("present")
        .value
        .general_names;
    let ips: Vec<&[u8]> = names
        .iter()
        .filter_map(|n| match n {
            x509_parser::extensions::GeneralName::IPAddress(b) => Some(*b),
            _ => None,
        })
        .collect();
    assert!(ips.contains(&&[127u8, 77, 1, 1][..]), "{ips:?}");
    assert!(ips.contains(&&[127u8, 0, 0, 1][..]), "{ips:?}");
    assert!(names.iter().any(|n| matches!(
        n,
        x509_parser::extensions::GeneralName::DNSName("talos-cp-1")
    )));
    let eku = parsed
        .extended_key_usage()
        .expect("eku")
        .expect("present")
        .value;
    assert!(eku.server_auth && !eku.client_auth);
}

#[test]
fn kubernetes_and_proxmox_cas_are_ecdsa_and_sign_leaves() {
    for kind in [CaKind::Kubernetes, CaKind::Proxmox] {
        let ca = CertificateAuthority::new(kind).expect("ca");
        assert_eq!(ca.certified_key().algorithm(), KeyAlgorithm::EcdsaP256);
        let leaf = ca
            .server_cert(&[ip("127.77.0.1")], &["pve1"])
            .expect("leaf");
        assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----\n"));
        assert_ne!(
            leaf.sha256_fingerprint(),
            ca.certified_key().sha256_fingerprint()
        );
    }
}

#[test]
fn talosconfig_holds_base64_pem_per_context() {
    let ca = CertificateAuthority::new(CaKind::Talos).expect("ca");
    let admin = ca.talos_admin_cert().expect("admin");
    let ctx = TalosContext::new("lab", vec!["127.77.1.1".into()], &ca, &admin);
    let prod = TalosContext::new("lab-production", vec!["127.77.1.4".into()], &ca, &admin);
    let yaml = talosconfig_yaml("lab", &[ctx, prod]).expect("yaml");
    let doc: serde_json::Value = crate::yaml::from_str(&yaml).expect("parse");
    assert_eq!(doc["context"].as_str(), Some("lab"));
    let lab = &doc["contexts"]["lab"];
    assert_eq!(lab["endpoints"][0].as_str(), Some("127.77.1.1"));
    let key = STANDARD
        .decode(lab["key"].as_str().expect("key"))
        .expect("base64");
    assert!(
        String::from_utf8(key)
            .expect("utf8")
            .starts_with("-----BEGIN ED25519 PRIVATE KEY-----")
    );
    let ca_pem = STANDARD
        .decode(lab["ca"].as_str().expect("ca"))
        .expect("b64");
    assert_eq!(String::from_utf8(ca_pem).expect("utf8"), ca.cert_pem());
    assert!(doc["contexts"]["lab-production"].is_object());
}

#[test]
fn talosconfig_writes_each_pem_on_one_plain_line() {
    let ca = CertificateAuthority::new(CaKind::Talos).expect("ca");
    let admin = ca.talos_admin_cert().expect("admin");
    let ctx = TalosContext::new("lab", vec!["127.77.1.1".into()], &ca, &admin);
    let yaml = talosconfig_yaml("lab", &[ctx]).expect("yaml");
    for field in ["ca", "crt", "key"] {
        let line = yaml
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{field}: ")))
            .unwrap_or_else(|| panic!("{field} in {yaml}"));
        let value = line.trim_start()[field.len() + 2..].to_string();
        assert!(value.len() > 80, "{line}");
        assert!(
            value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+/=".contains(c)),
            "{line}"
        );
    }
}
