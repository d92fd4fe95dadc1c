//! What can go wrong between gates and a Kubernetes API: building the client from the
//! environment's kubeconfig and context, and listing one kind of resource page by page.
//! Each error names what was being read and, where the user can act, how to fix it. A list
//! that fails becomes the kind's `Collected::Absent` reason (its text), which the checks
//! that needed the kind turn into `error` verdicts.

use std::path::PathBuf;

use kube::config::KubeconfigError;

use super::completeness::NOT_SERVED;

/// Why the environment's Kubernetes API could not be read.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// The kubeconfig named in the environment file (`kube.kubeconfig`).
    #[error("cannot read kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: KubeconfigError,
    },
    /// No `kube.kubeconfig`, and neither `$KUBECONFIG` nor `~/.kube/config` is readable.
    #[error(
        "cannot read the kubeconfig ($KUBECONFIG or ~/.kube/config): {source}; set kube.kubeconfig in {}",
        env_file.display()
    )]
    DefaultKubeconfig {
        env_file: PathBuf,
        #[source]
        source: KubeconfigError,
    },
    /// The kubeconfig was read, but the context (or the current one) is unusable.
    #[error("{}: {source}", match context {
        Some(context) => format!("kubeconfig context `{context}`"),
        None => "kubeconfig".to_string(),
    })]
    Context {
        context: Option<String>,
        #[source]
        source: KubeconfigError,
    },
    /// In a pod, the service account's files could not be used.
    #[error("{0}")]
    InCluster(String),
    #[error("cannot build a Kubernetes client: {source}")]
    Client {
        #[source]
        source: kube::Error,
    },
    /// A list of one resource failed.
    #[error(transparent)]
    List(#[from] ListError),
    /// A page after the first failed: the objects listed so far are not the whole list.
    #[error("{source} (a later page, after {listed} objects)")]
    LaterPage {
        listed: usize,
        #[source]
        source: Box<KubeError>,
    },
    /// The phase ran out of the environment's `deadline` (the text names phase and fix).
    #[error("{0}")]
    Deadline(String),
}

/// How listing one resource failed.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    /// 404: the API group is not installed; `hint` says what would serve it.
    #[error("{NOT_SERVED} {resource} ({hint})")]
    NotServed {
        resource: String,
        hint: &'static str,
    },
    #[error("listing {resource}: unauthorized: the kubeconfig credentials were rejected")]
    Unauthorized { resource: String },
    #[error("listing {resource}: forbidden: {message} ({hint})")]
    Forbidden {
        resource: String,
        message: String,
        hint: &'static str,
    },
    #[error("listing {resource}: HTTP {code}: {message}")]
    Http {
        resource: String,
        code: u16,
        message: String,
    },
    /// No answer at all: connection, TLS, timeout. `causes` is the error and its causes.
    #[error("cannot reach the Kubernetes API while listing {resource}: {causes}")]
    Unreachable { resource: String, causes: String },
    /// The list request could not even be built (a bad continue token).
    #[error("listing {resource}: {reason}")]
    Request { resource: String, reason: String },
    #[error("listing {resource}: the answer is not a list: {reason}")]
    NotAList { resource: String, reason: String },
    /// A listed object does not decode as the type the checks read.
    #[error("{reason}")]
    Decode { resource: String, reason: String },
}
