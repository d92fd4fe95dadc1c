//! The resource kinds gates reads, with their API coordinates, shared by the live collector,
//! the snapshot reader and the snapshot writer so the three always agree.

/// One kind of object in a [`State`](crate::state::State).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Node,
    Pod,
    Deployment,
    DaemonSet,
    StatefulSet,
    PodDisruptionBudget,
    Service,
    Lease,
    L2AnnouncementPolicy,
    LonghornNode,
    LonghornVolume,
    LonghornReplica,
    LonghornSetting,
    NodeMetrics,
    PodMetrics,
}

/// Where a kind lives in the API.
#[derive(Debug, Clone, Copy)]
pub struct Coordinates {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
}

impl Coordinates {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `ciliuml2announcementpolicies.cilium.io/v2alpha1`, as operators know it.
    pub fn resource_name(&self) -> String {
        if self.group.is_empty() {
            format!("{}/{}", self.plural, self.version)
        } else {
            format!("{}.{}/{}", self.plural, self.group, self.version)
        }
    }
}

impl Kind {
    pub const ALL: [Kind; 15] = [
        Kind::Node,
        Kind::Pod,
        Kind::Deployment,
        Kind::DaemonSet,
        Kind::StatefulSet,
        Kind::PodDisruptionBudget,
        Kind::Service,
        Kind::Lease,
        Kind::L2AnnouncementPolicy,
        Kind::LonghornNode,
        Kind::LonghornVolume,
        Kind::LonghornReplica,
        Kind::LonghornSetting,
        Kind::NodeMetrics,
        Kind::PodMetrics,
    ];

    pub fn coordinates(self) -> Coordinates {
        let c = |group, version, kind, plural, namespaced| Coordinates {
            group,
            version,
            kind,
            plural,
            namespaced,
        };
        match self {
            Kind::Node => c("", "v1", "Node", "nodes", false),
            Kind::Pod => c("", "v1", "Pod", "pods", true),
            Kind::Deployment => c("apps", "v1", "Deployment", "deployments", true),
            Kind::DaemonSet => c("apps", "v1", "DaemonSet", "daemonsets", true),
            Kind::StatefulSet => c("apps", "v1", "StatefulSet", "statefulsets", true),
            Kind::PodDisruptionBudget => c(
                "policy",
                "v1",
                "PodDisruptionBudget",
                "poddisruptionbudgets",
                true,
            ),
            Kind::Service => c("", "v1", "Service", "services", true),
            Kind::Lease => c("coordination.k8s.io", "v1", "Lease", "leases", true),
            Kind::L2AnnouncementPolicy => c(
                "cilium.io",
                "v2alpha1",
                "CiliumL2AnnouncementPolicy",
                "ciliuml2announcementpolicies",
                false,
            ),
            Kind::LonghornNode => c("longhorn.io", "v1beta2", "Node", "nodes", true),
            Kind::LonghornVolume => c("longhorn.io", "v1beta2", "Volume", "volumes", true),
            Kind::LonghornReplica => c("longhorn.io", "v1beta2", "Replica", "replicas", true),
            Kind::LonghornSetting => c("longhorn.io", "v1beta2", "Setting", "settings", true),
            Kind::NodeMetrics => c("metrics.k8s.io", "v1beta1", "NodeMetrics", "nodes", false),
            Kind::PodMetrics => c("metrics.k8s.io", "v1beta1", "PodMetrics", "pods", true),
        }
    }

    /// The kind of an object by its `apiVersion` and `kind`; the version is not compared
    /// so that a snapshot from a slightly different release still reads.
    pub fn from_object(api_version: &str, kind: &str) -> Option<Kind> {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        Kind::ALL.into_iter().find(|k| {
            let c = k.coordinates();
            c.group == group && c.kind == kind
        })
    }

    /// What an operator can do when the cluster does not serve this kind.
    pub fn absent_hint(self) -> &'static str {
        match self {
            Kind::L2AnnouncementPolicy => "is Cilium installed with l2announcements.enabled=true?",
            Kind::LonghornNode
            | Kind::LonghornVolume
            | Kind::LonghornReplica
            | Kind::LonghornSetting => "is Longhorn installed?",
            Kind::NodeMetrics | Kind::PodMetrics => {
                "install metrics-server, or set `capacity: {basis: requests}` in the environment"
            }
            Kind::Node
            | Kind::Pod
            | Kind::Deployment
            | Kind::DaemonSet
            | Kind::StatefulSet
            | Kind::PodDisruptionBudget
            | Kind::Service
            | Kind::Lease => "check the credentials' RBAC permissions",
        }
    }
}
