//! The Kubernetes resources the lab serves: their group, version, names and scope. One table
//! drives discovery, routing and the object store.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Res {
    Namespaces,
    Nodes,
    Pods,
    Events,
    Services,
    Deployments,
    ReplicaSets,
    DaemonSets,
    StatefulSets,
    PodDisruptionBudgets,
    Leases,
    EndpointSlices,
    CiliumL2Policies,
    CiliumLbIpPools,
    LonghornNodes,
    LonghornVolumes,
    LonghornReplicas,
    LonghornSettings,
    NodeMetrics,
    PodMetrics,
}

#[derive(Debug)]
pub struct ResourceDef {
    pub res: Res,
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    /// Built-in (typed) resources omit apiVersion/kind on list items, as the real server does.
    pub typed: bool,
    /// Served by an aggregated API that only supports get and list (metrics.k8s.io).
    pub read_only_api: bool,
    pub field_selectors: &'static [&'static str],
}

impl ResourceDef {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    pub fn verbs(&self) -> &'static [&'static str] {
        if self.read_only_api {
            &["get", "list"]
        } else {
            &["get", "list", "watch"]
        }
    }

    /// The `group` part of error details (empty for core).
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

const META: &[&str] = &["metadata.name", "metadata.namespace"];
const POD_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "status.phase",
];

macro_rules! def {
    ($res:ident, $g:expr, $v:expr, $p:expr, $s:expr, $k:expr, $ns:expr, $short:expr, $cat:expr, $typed:expr, $ro:expr, $fs:expr) => {
        ResourceDef {
            res: Res::$res,
            group: $g,
            version: $v,
            plural: $p,
            singular: $s,
            kind: $k,
            namespaced: $ns,
            short_names: $short,
            categories: $cat,
            typed: $typed,
            read_only_api: $ro,
            field_selectors: $fs,
        }
    };
}

pub static RESOURCES: &[ResourceDef] = &[
    def!(
        Namespaces,
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        false,
        &["ns"],
        &[],
        true,
        false,
        META
    ),
    def!(
        Nodes,
        "",
        "v1",
        "nodes",
        "node",
        "Node",
        false,
        &["no"],
        &[],
        true,
        false,
        META
    ),
    def!(
        Pods,
        "",
        "v1",
        "pods",
        "pod",
        "Pod",
        true,
        &["po"],
        &["all"],
        true,
        false,
        POD_FIELDS
    ),
    def!(
        Events,
        "",
        "v1",
        "events",
        "event",
        "Event",
        true,
        &["ev"],
        &[],
        true,
        false,
        META
    ),
    def!(
        Services,
        "",
        "v1",
        "services",
        "service",
        "Service",
        true,
        &["svc"],
        &["all"],
        true,
        false,
        META
    ),
    def!(
        Deployments,
        "apps",
        "v1",
        "deployments",
        "deployment",
        "Deployment",
        true,
        &["deploy"],
        &["all"],
        true,
        false,
        META
    ),
    def!(
        ReplicaSets,
        "apps",
        "v1",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        true,
        &["rs"],
        &["all"],
        true,
        false,
        META
    ),
    def!(
        DaemonSets,
        "apps",
        "v1",
        "daemonsets",
        "daemonset",
        "DaemonSet",
        true,
        &["ds"],
        &["all"],
        true,
        false,
        META
    ),
    def!(
        StatefulSets,
        "apps",
        "v1",
        "statefulsets",
        "statefulset",
        "StatefulSet",
        true,
        &["sts"],
        &["all"],
        true,
        false,
        META
    ),
    def!(
        PodDisruptionBudgets,
        "policy",
        "v1",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        true,
        &["pdb"],
        &[],
        true,
        false,
        META
    ),
    def!(
        Leases,
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        true,
        &[],
        &[],
        true,
        false,
        META
    ),
    def!(
        EndpointSlices,
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "endpointslice",
        "EndpointSlice",
        true,
        &[],
        &[],
        true,
        false,
        META
    ),
    def!(
        CiliumL2Policies,
        "cilium.io",
        "v2alpha1",
        "ciliuml2announcementpolicies",
        "ciliuml2announcementpolicy",
        "CiliumL2AnnouncementPolicy",
        false,
        &["l2announcement"],
        &["cilium"],
        false,
        false,
        META
    ),
    def!(
        CiliumLbIpPools,
        "cilium.io",
        "v2",
        "ciliumloadbalancerippools",
        "ciliumloadbalancerippool",
        "CiliumLoadBalancerIPPool",
        false,
        &["ippools", "ippool", "lbippool", "lbippools"],
        &["cilium"],
        false,
        false,
        META
    ),
    def!(
        LonghornNodes,
        "longhorn.io",
        "v1beta2",
        "nodes",
        "node",
        "Node",
        true,
        &["lhn"],
        &["longhorn"],
        false,
        false,
        META
    ),
    def!(
        LonghornVolumes,
        "longhorn.io",
        "v1beta2",
        "volumes",
        "volume",
        "Volume",
        true,
        &["lhv"],
        &["longhorn"],
        false,
        false,
        META
    ),
    def!(
        LonghornReplicas,
        "longhorn.io",
        "v1beta2",
        "replicas",
        "replica",
        "Replica",
        true,
        &["lhr"],
        &["longhorn"],
        false,
        false,
        META
    ),
    def!(
        LonghornSettings,
        "longhorn.io",
        "v1beta2",
        "settings",
        "setting",
        "Setting",
        true,
        &["lhs"],
        &["longhorn"],
        false,
        false,
        META
    ),
    def!(
        NodeMetrics,
        "metrics.k8s.io",
        "v1beta1",
        "nodes",
        "",
        "NodeMetrics",
        false,
        &[],
        &[],
        true,
        true,
        META
    ),
    def!(
        PodMetrics,
        "metrics.k8s.io",
        "v1beta1",
        "pods",
        "",
        "PodMetrics",
        true,
        &[],
        &[],
        true,
        true,
        META
    ),
];

pub fn def(res: Res) -> &'static ResourceDef {
    // The table holds every variant; the fallback is never reached but avoids a panic path.
    RESOURCES
        .iter()
        .find(|d| d.res == res)
        .unwrap_or(&RESOURCES[0])
}

/// Find a resource by group, version and plural.
pub fn lookup(group: &str, version: &str, plural: &str) -> Option<&'static ResourceDef> {
    RESOURCES
        .iter()
        .find(|d| d.group == group && d.version == version && d.plural == plural)
}

/// Groups in discovery order (core excluded), with their versions, preferred first.
pub fn groups() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for d in RESOURCES.iter().filter(|d| !d.group.is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == d.group) {
            Some((_, vs)) => {
                if !vs.contains(&d.version) {
                    vs.push(d.version);
                }
            }
            None => out.push((d.group, vec![d.version])),
        }
    }
    // cilium.io serves v2 (preferred) and v2alpha1.
    for (_, vs) in out.iter_mut() {
        vs.sort_by_key(|v| version_rank(v));
    }
    out
}

/// Kubernetes version priority: GA before beta before alpha, higher numbers first.
fn version_rank(v: &str) -> (u8, i64, i64) {
    let rest = v.trim_start_matches('v');
    let (major, tail) = rest.split_at(
        rest.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len()),
    );
    let major: i64 = major.parse().unwrap_or(0);
    let (level, minor) = if let Some(m) = tail.strip_prefix("beta") {
        (1, m.parse().unwrap_or(0))
    } else if let Some(m) = tail.strip_prefix("alpha") {
        (2, m.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    (level, -major, -minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_a_definition_and_groups_prefer_ga() {
        assert_eq!(def(Res::PodMetrics).kind, "PodMetrics");
        assert_eq!(def(Res::LonghornVolumes).group, "longhorn.io");
        let g = groups();
        let cilium = g.iter().find(|(g, _)| *g == "cilium.io").expect("cilium");
        assert_eq!(cilium.1, vec!["v2", "v2alpha1"]);
    }
}
