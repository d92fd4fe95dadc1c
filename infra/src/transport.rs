//! Classification of socket and TLS failures found in an error chain, shared by the
//! Talos and Proxmox clients so both can say "unknown CA" rather than "transport error".

use std::error::Error as StdError;

use rustls::{AlertDescription, CertificateError};

/// Raised by the Proxmox fingerprint verifier; found again by [`transport_cause`].
#[derive(Debug)]
pub(crate) struct FingerprintMismatch {
    /// SHA-256 of the certificate the server presented, colon-separated uppercase hex.
    pub actual: String,
}

impl std::fmt::Display for FingerprintMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{FINGERPRINT_MARKER}{}", self.actual)
    }
}

impl StdError for FingerprintMismatch {}

const FINGERPRINT_MARKER: &str = "certificate fingerprint mismatch: server presented ";

/// What a TLS or socket failure in an error chain amounts to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TransportCause {
    Refused,
    Unreachable(String),
    UnknownCa,
    NameMismatch,
    Expired,
    ClientRejected(String),
    Tls(String),
    /// The pinned SHA-256 did not match; holds the presented fingerprint.
    FingerprintMismatch(String),
}

/// Walks an error chain (looking inside `io::Error`, whose `source()` skips its payload)
/// for a rustls error or a socket error, and classifies it.
pub(crate) fn transport_cause(err: &(dyn StdError + 'static)) -> Option<TransportCause> {
    let mut current: Option<&(dyn StdError + 'static)> = Some(err);
    let mut io_fallback: Option<TransportCause> = None;
    let mut depth = 0;
    while let Some(e) = current {
        depth += 1;
        if depth > 32 {
            break;
        }
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(classify_rustls(tls));
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if let Some(inner) = io.get_ref()
                && let Some(found) = transport_cause(inner)
            {
                return Some(found);
            }
            if io_fallback.is_none() {
                io_fallback = classify_io(io);
            }
            // hyper and tonic sometimes carry the TLS error only as text.
            if let Some(alert) = io
                .get_ref()
                .and_then(|inner| cause_from_text(&inner.to_string()))
            {
                return Some(alert);
            }
        }
        current = e.source();
    }
    io_fallback
}

/// Recognises rustls's "received fatal alert: <Name>" (and our fingerprint mismatch)
/// when only the text survived.
fn cause_from_text(text: &str) -> Option<TransportCause> {
    if let Some(actual) = text.split(FINGERPRINT_MARKER).nth(1) {
        return Some(TransportCause::FingerprintMismatch(
            actual.trim().to_string(),
        ));
    }
    let name = text.split("received fatal alert: ").nth(1)?.trim();
    Some(if CLIENT_REJECTION_ALERTS.contains(&name) {
        TransportCause::ClientRejected(name.to_string())
    } else {
        TransportCause::Tls(format!("server sent alert {name}"))
    })
}

/// Alerts a server sends when it refuses the client certificate. `DecryptError` is what a
/// certificate from another Talos CA gets: every Talos CA is named `O=talos`, so the
/// server finds an issuer by name and the signature check fails.
const CLIENT_REJECTION_ALERTS: &[&str] = &[
    "CertificateRequired",
    "BadCertificate",
    "UnknownCA",
    "CertificateExpired",
    "CertificateRevoked",
    "CertificateUnknown",
    "UnsupportedCertificate",
    "AccessDenied",
    "DecryptError",
];

fn classify_io(io: &std::io::Error) -> Option<TransportCause> {
    use std::io::ErrorKind as K;
    match io.kind() {
        K::ConnectionRefused => Some(TransportCause::Refused),
        K::HostUnreachable | K::NetworkUnreachable | K::AddrNotAvailable | K::NetworkDown => {
            Some(TransportCause::Unreachable(io.to_string()))
        }
        K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof => {
            Some(TransportCause::Unreachable(io.to_string()))
        }
        _ => None,
    }
}

pub(crate) fn classify_rustls(err: &rustls::Error) -> TransportCause {
    match err {
        rustls::Error::InvalidCertificate(cert) => match cert {
            CertificateError::UnknownIssuer | CertificateError::BadSignature => {
                TransportCause::UnknownCa
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                TransportCause::NameMismatch
            }
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. } => TransportCause::Expired,
            CertificateError::Other(other) => match other.0.downcast_ref::<FingerprintMismatch>() {
                Some(m) => TransportCause::FingerprintMismatch(m.actual.clone()),
                None => TransportCause::Tls(format!("invalid server certificate: {other}")),
            },
            other => TransportCause::Tls(format!("invalid server certificate: {other:?}")),
        },
        rustls::Error::AlertReceived(alert) => match alert {
            AlertDescription::CertificateRequired
            | AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateRevoked
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::AccessDenied
            | AlertDescription::DecryptError => {
                TransportCause::ClientRejected(format!("{alert:?}"))
            }
            other => TransportCause::Tls(format!("server sent alert {other:?}")),
        },
        other => TransportCause::Tls(other.to_string()),
    }
}

/// Text of an error and its sources, without repeats.
pub(crate) fn chain_text(err: &(dyn StdError + 'static)) -> String {
    let mut parts = vec![err.to_string()];
    let mut current = err.source();
    while let Some(e) = current {
        let text = e.to_string();
        if !parts.iter().any(|p| p == &text) {
            parts.push(text);
        }
        current = e.source();
    }
    parts.join(": ")
}
