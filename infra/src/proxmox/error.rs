//! Errors of the Proxmox VE client, mapped from Proxmox's non-RESTful error shapes
//! (401 with an empty body, 500 for missing objects, 595/596 for a node that is down).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::transport::TransportCause;

/// A failed Proxmox request or power action. Messages say what to fix and never hold
/// the token secret.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProxmoxError {
    #[error("Proxmox settings are invalid: {reason}")]
    InvalidSettings { reason: String },
    #[error("Proxmox token secret from {from} is unusable: {reason}")]
    Secret { from: String, reason: String },
    #[error("{url}: connection refused: is pveproxy running on this host and port?")]
    Refused { url: String },
    #[error("{url}: unreachable ({detail})")]
    Unreachable { url: String, detail: String },
    #[error("{url}: no answer within {after:?}")]
    Timeout { url: String, after: Duration },
    #[error(
        "{url}: the server certificate is not signed by the configured CA: set proxmox.ca_file to the cluster CA (/etc/pve/pve-root-ca.pem) or pin its fingerprint"
    )]
    UnknownCa { url: String },
    #[error(
        "{url}: the server certificate does not name this host: use an address in its SANs or pin its fingerprint"
    )]
    NameMismatch { url: String },
    #[error("{url}: the server certificate has expired or is not yet valid")]
    CertificateExpired { url: String },
    #[error(
        "{url}: the server certificate's SHA-256 fingerprint is {actual}, not the pinned one: the certificate changed (renewal?) or this is not the expected host"
    )]
    FingerprintMismatch { url: String, actual: String },
    #[error("{url}: TLS failed: {detail}")]
    Tls { url: String, detail: String },
    #[error(
        "{path}: authentication failed (401 {reason}): check token_id and the token secret, and that the token is not expired"
    )]
    Unauthorized { path: String, reason: String },
    #[error(
        "{path}: permission denied (403): {message}: grant the token the named privilege (privilege-separated tokens need their own ACL)"
    )]
    Forbidden { path: String, message: String },
    #[error("{path}: not found: {message}")]
    NotFound { path: String, message: String },
    #[error(
        "{path}: Proxmox node unreachable from the API node (HTTP {status} {reason}): the host that owns this object is down or cut off"
    )]
    NodeUnreachable {
        path: String,
        status: u16,
        reason: String,
    },
    #[error("{path}: not implemented by this server (501): {message}")]
    NotImplemented { path: String, message: String },
    #[error("{path}: rejected parameters (400): {message}{}", format_errors(.errors))]
    BadRequest {
        path: String,
        message: String,
        errors: BTreeMap<String, String>,
    },
    #[error("{path}: HTTP {status}: {message}")]
    Http {
        path: String,
        status: u16,
        message: String,
    },
    #[error("{path}: unexpected response: {detail}")]
    Decode { path: String, detail: String },
    #[error(
        "VM {vmid} is not in /cluster/resources: check the VM id and the token's VM.Audit privilege"
    )]
    VmNotFound { vmid: u32 },
    #[error("{upid}: not a Proxmox task id: {reason}")]
    InvalidUpid { upid: String, reason: String },
    #[error("task {upid} failed: {exitstatus}")]
    TaskFailed { upid: String, exitstatus: String },
    #[error("task {upid} still running after {after:?}")]
    TaskTimeout { upid: String, after: Duration },
    #[error("VM {vmid} is {last:?}, not {wanted:?}, {after:?} after the request")]
    StateTimeout {
        vmid: u32,
        wanted: String,
        last: String,
        after: Duration,
    },
    #[error("host {host} did not become {wanted} within {after:?} (last seen: {last})")]
    HostStateTimeout {
        host: String,
        wanted: String,
        last: String,
        after: Duration,
    },
}

fn format_errors(errors: &BTreeMap<String, String>) -> String {
    if errors.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = errors.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!(" ({})", parts.join("; "))
}

impl ProxmoxError {
    /// Whether an idempotent read may succeed if tried again (a dropped or slow connection).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ProxmoxError::Unreachable { .. } | ProxmoxError::Timeout { .. }
        )
    }

    /// Whether the object's host is down (595/596), as opposed to a wrong request.
    pub fn is_node_unreachable(&self) -> bool {
        matches!(self, ProxmoxError::NodeUnreachable { .. })
    }

    pub(crate) fn with_secret_source(self, from: &str) -> Self {
        match self {
            ProxmoxError::Secret { reason, .. } => ProxmoxError::Secret {
                from: from.to_string(),
                reason,
            },
            other => other,
        }
    }
}

pub(crate) fn from_cause(url: &str, cause: TransportCause) -> ProxmoxError {
    let url = url.to_string();
    match cause {
        TransportCause::Refused => ProxmoxError::Refused { url },
        TransportCause::Unreachable(detail) => ProxmoxError::Unreachable { url, detail },
        TransportCause::UnknownCa => ProxmoxError::UnknownCa { url },
        TransportCause::NameMismatch => ProxmoxError::NameMismatch { url },
        TransportCause::Expired => ProxmoxError::CertificateExpired { url },
        TransportCause::FingerprintMismatch(actual) => {
            ProxmoxError::FingerprintMismatch { url, actual }
        }
        TransportCause::ClientRejected(alert) => ProxmoxError::Tls {
            url,
            detail: format!("server sent alert {alert}"),
        },
        TransportCause::Tls(detail) => ProxmoxError::Tls { url, detail },
    }
}

/// Maps an HTTP error answer. `message` is the best text found: JSON `message`, else
/// the body, else the reason phrase.
pub(crate) fn from_status(
    path: &str,
    status: u16,
    reason: &str,
    message: &str,
    errors: BTreeMap<String, String>,
) -> ProxmoxError {
    let path = path.to_string();
    let message = message.trim().to_string();
    match status {
        401 => ProxmoxError::Unauthorized {
            path,
            reason: if reason.is_empty() {
                message
            } else {
                reason.to_string()
            },
        },
        403 => ProxmoxError::Forbidden { path, message },
        400 => ProxmoxError::BadRequest {
            path,
            message,
            errors,
        },
        501 => ProxmoxError::NotImplemented { path, message },
        595..=599 => ProxmoxError::NodeUnreachable {
            path,
            status,
            reason: if reason.is_empty() {
                message
            } else {
                reason.to_string()
            },
        },
        500 if message.contains("does not exist") || message.contains("no such") => {
            ProxmoxError::NotFound { path, message }
        }
        _ => ProxmoxError::Http {
            path,
            status,
            message,
        },
    }
}
