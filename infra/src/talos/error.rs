//! Errors of the Talos client, each saying what to fix, and their classification
//! from tonic transport errors and gRPC statuses.

use std::error::Error as StdError;
use std::time::Duration;

use crate::transport::{TransportCause, chain_text, transport_cause};

/// A failed Talos API call or connection. `endpoint` is `host:port` as dialled.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TalosError {
    #[error("Talos endpoint {endpoint:?} is invalid: {reason}")]
    InvalidEndpoint { endpoint: String, reason: String },
    #[error("Talos client credentials are unusable: {reason}")]
    Credentials { reason: String },
    #[error("{endpoint}: connection refused: is the node up and apid listening on this port?")]
    Refused { endpoint: String },
    #[error(
        "{endpoint}: unreachable ({detail}): check the address and the network path to port 50000"
    )]
    Unreachable { endpoint: String, detail: String },
    #[error("{endpoint}: {what} timed out after {after:?}: the node may be down or filtered")]
    Timeout {
        endpoint: String,
        what: String,
        after: Duration,
    },
    #[error(
        "{endpoint}: the node's certificate is not signed by the talosconfig CA: use the context of this cluster, or regenerate the talosconfig"
    )]
    UnknownCa { endpoint: String },
    #[error(
        "{endpoint}: the node's certificate does not name this address: list the node by an address in its certificate, or add it to machine.certSANs"
    )]
    NameMismatch { endpoint: String },
    #[error(
        "{endpoint}: the node's certificate has expired or is not yet valid: check the node's clock and certificate rotation"
    )]
    CertificateExpired { endpoint: String },
    #[error(
        "{endpoint}: the node rejected our client certificate ({alert}): the talosconfig crt/key must be issued by this cluster's Talos CA and still valid"
    )]
    ClientCertificateRejected { endpoint: String, alert: String },
    #[error("{endpoint}: TLS handshake failed: {detail}")]
    Tls { endpoint: String, detail: String },
    #[error(
        "{endpoint}: {method} is not implemented there ({message}): etcd calls only work on control-plane nodes; is this endpoint a worker?"
    )]
    Unimplemented {
        endpoint: String,
        method: &'static str,
        message: String,
    },
    #[error(
        "{endpoint}: {method} denied ({message}): the talosconfig certificate's role (os:reader or higher) does not allow it"
    )]
    PermissionDenied {
        endpoint: String,
        method: &'static str,
        message: String,
    },
    #[error(
        "{endpoint}: {method}: etcd did not answer ({message}): no quorum, no leader, or etcd not running on this node"
    )]
    EtcdNoQuorum {
        endpoint: String,
        method: &'static str,
        message: String,
    },
    #[error("{endpoint}: {method}: service unavailable ({message})")]
    Unavailable {
        endpoint: String,
        method: &'static str,
        message: String,
    },
    #[error("{endpoint}: {method} failed on the node: {message}")]
    NodeError {
        endpoint: String,
        method: &'static str,
        message: String,
    },
    #[error("{endpoint}: {method} returned no message")]
    EmptyReply {
        endpoint: String,
        method: &'static str,
    },
    #[error("{endpoint}: {method}: resource {resource:?} is malformed: {reason}")]
    BadResource {
        endpoint: String,
        method: &'static str,
        resource: String,
        reason: String,
    },
    #[error("{endpoint}: {method} failed: {code}: {message}")]
    Rpc {
        endpoint: String,
        method: &'static str,
        code: String,
        message: String,
    },
}

impl TalosError {
    /// Whether a read may succeed when tried again shortly (the node was busy or a
    /// connection dropped). TLS, permission and "wrong node kind" errors are final.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            TalosError::Timeout { .. }
                | TalosError::Unavailable { .. }
                | TalosError::EtcdNoQuorum { .. }
                | TalosError::Unreachable { .. }
        )
    }

    /// The endpoint the error concerns, when there is one.
    pub fn endpoint(&self) -> Option<&str> {
        match self {
            TalosError::Credentials { .. } => None,
            TalosError::InvalidEndpoint { endpoint, .. }
            | TalosError::Refused { endpoint }
            | TalosError::Unreachable { endpoint, .. }
            | TalosError::Timeout { endpoint, .. }
            | TalosError::UnknownCa { endpoint }
            | TalosError::NameMismatch { endpoint }
            | TalosError::CertificateExpired { endpoint }
            | TalosError::ClientCertificateRejected { endpoint, .. }
            | TalosError::Tls { endpoint, .. }
            | TalosError::Unimplemented { endpoint, .. }
            | TalosError::PermissionDenied { endpoint, .. }
            | TalosError::EtcdNoQuorum { endpoint, .. }
            | TalosError::Unavailable { endpoint, .. }
            | TalosError::NodeError { endpoint, .. }
            | TalosError::EmptyReply { endpoint, .. }
            | TalosError::BadResource { endpoint, .. }
            | TalosError::Rpc { endpoint, .. } => Some(endpoint),
        }
    }
}

pub(crate) fn from_cause(endpoint: &str, cause: TransportCause) -> TalosError {
    let endpoint = endpoint.to_string();
    match cause {
        TransportCause::Refused => TalosError::Refused { endpoint },
        TransportCause::Unreachable(detail) => TalosError::Unreachable { endpoint, detail },
        TransportCause::UnknownCa => TalosError::UnknownCa { endpoint },
        TransportCause::NameMismatch => TalosError::NameMismatch { endpoint },
        TransportCause::Expired => TalosError::CertificateExpired { endpoint },
        TransportCause::ClientRejected(alert) => {
            TalosError::ClientCertificateRejected { endpoint, alert }
        }
        TransportCause::Tls(detail) => TalosError::Tls { endpoint, detail },
        // Only the Proxmox client pins fingerprints.
        TransportCause::FingerprintMismatch(actual) => TalosError::Tls {
            endpoint,
            detail: format!("certificate fingerprint {actual} rejected"),
        },
    }
}

/// Classifies a failed connect.
pub(crate) fn from_transport(endpoint: &str, err: &tonic::transport::Error) -> TalosError {
    match transport_cause(err) {
        Some(cause) => from_cause(endpoint, cause),
        None => TalosError::Unreachable {
            endpoint: endpoint.to_string(),
            detail: chain_text(err),
        },
    }
}

/// Classifies a gRPC status from a call; transport failures hidden in the status
/// (for example a client certificate rejected after a TLS 1.3 handshake) win.
pub(crate) fn from_status(
    endpoint: &str,
    method: &'static str,
    status: &tonic::Status,
) -> TalosError {
    if let Some(cause) = StdError::source(status).and_then(transport_cause) {
        return from_cause(endpoint, cause);
    }
    let endpoint = endpoint.to_string();
    let message = status.message().to_string();
    match status.code() {
        tonic::Code::Unimplemented => TalosError::Unimplemented {
            endpoint,
            method,
            message,
        },
        tonic::Code::PermissionDenied | tonic::Code::Unauthenticated => {
            TalosError::PermissionDenied {
                endpoint,
                method,
                message,
            }
        }
        tonic::Code::Unavailable
            if method.starts_with("Etcd")
                && !message.contains("transport")
                && !message.contains("connection") =>
        {
            TalosError::EtcdNoQuorum {
                endpoint,
                method,
                message,
            }
        }
        tonic::Code::Unavailable => TalosError::Unavailable {
            endpoint,
            method,
            message,
        },
        code => TalosError::Rpc {
            endpoint,
            method,
            code: format!("{code:?}"),
            message,
        },
    }
}
