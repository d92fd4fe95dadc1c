//! COSI `cosi.resource.State` on apid: `Get` and `List` of the node's
//! `AddressStatuses.net.talos.dev` in the `network` namespace (what `talosctl get addresses`
//! shows), with the same RBAC and node-down behaviour as `MachineService`. Specs are served as
//! YAML only (`yaml_spec`); `proto_spec` stays empty.
//!
//! Wrong requests fail as on Talos: a type or namespace Talos does not register is
//! `PermissionDenied` (machined's access filter), `nodes` metadata is refused (apid proxies
//! COSI one-to-one only), and `List` honours `ListOptions` (label terms and an id regexp).
//! Registered types other than AddressStatuses have no resources in the lab.

use std::net::IpAddr;

use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

use super::backend::LabAddress;
use super::proto::cosi::resource::{
    GetRequest, GetResponse, LabelQuery, ListOptions, ListRequest, ListResponse, Metadata,
    Resource, Spec, label_term::Operation, state_server::State,
};
use super::service::{Apid, Direction, READ_ROLES};

/// Namespaces Talos registers (machined's COSI state).
const NAMESPACES: &[&str] = &[
    "block",
    "cluster",
    "cluster-raw",
    "config",
    "controlplane",
    "cri",
    "etcd",
    "files",
    "hardware",
    "k8s",
    "kubespan",
    "meta",
    "network",
    "network-config",
    "perf",
    "runtime",
    "secrets",
    "siderolink",
    "v1alpha1",
];

/// Resource types Talos registers that clients commonly read (compared case-insensitively, as
/// machined looks definitions up by the lower-cased type). Only AddressStatuses has resources
/// in the lab.
const TYPES: &[&str] = &[
    ADDRESS_STATUS_TYPE,
    "AddressSpecs.net.talos.dev",
    "NodeAddresses.net.talos.dev",
    "HostnameStatuses.net.talos.dev",
    "LinkStatuses.net.talos.dev",
    "RouteStatuses.net.talos.dev",
    "Members.cluster.talos.dev",
    "Affiliates.cluster.talos.dev",
    "Identities.cluster.talos.dev",
    "Services.v1alpha1.talos.dev",
    "MachineConfigs.config.talos.dev",
    "MachineTypes.config.talos.dev",
    "EtcdMembers.etcd.talos.dev",
    "StaticPodStatuses.kubernetes.talos.dev",
    "Nodenames.kubernetes.talos.dev",
    "MachineStatuses.runtime.talos.dev",
    "Versions.runtime.talos.dev",
    "CPUStats.perf.talos.dev",
    "MemoryStats.perf.talos.dev",
];

/// machined's access filter: the type, then the namespace, must be registered.
fn supported(namespace: &str, kind: &str) -> Result<(), Status> {
    if !TYPES.iter().any(|t| t.eq_ignore_ascii_case(kind)) {
        return Err(Status::permission_denied(format!(
            "resource type {kind:?} is not supported"
        )));
    }
    if !NAMESPACES.contains(&namespace) {
        return Err(Status::permission_denied(format!(
            "namespace {namespace:?} is not supported"
        )));
    }
    Ok(())
}

/// Whether `labels` satisfy every term of `query`.
fn labels_match(
    labels: &std::collections::HashMap<String, String>,
    query: &LabelQuery,
) -> Result<bool, Status> {
    for term in &query.terms {
        let value = labels.get(&term.key);
        let first = term.value.first().map(String::as_str).unwrap_or("");
        let numeric = |v: &str| v.parse::<i64>().ok();
        let holds = match Operation::try_from(term.op) {
            Ok(Operation::Exists) => value.is_some(),
            Ok(Operation::NotExists) => value.is_none(),
            Ok(Operation::Equal) => value.is_some_and(|v| v == first),
            Ok(Operation::In) => value.is_some_and(|v| term.value.iter().any(|x| x == v)),
            Ok(Operation::Lt) => value.is_some_and(|v| v.as_str() < first),
            Ok(Operation::Lte) => value.is_some_and(|v| v.as_str() <= first),
            Ok(Operation::LtNumeric) => value
                .and_then(|v| numeric(v))
                .zip(numeric(first))
                .is_some_and(|(v, x)| v < x),
            Ok(Operation::LteNumeric) => value
                .and_then(|v| numeric(v))
                .zip(numeric(first))
                .is_some_and(|(v, x)| v <= x),
            Err(_) => {
                return Err(Status::invalid_argument(format!(
                    "unsupported label query operator: {}",
                    term.op
                )));
            }
        };
        if holds == term.invert {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The resources `options` keeps.
fn filter(
    resources: Vec<Resource>,
    options: Option<&ListOptions>,
) -> Result<Vec<Resource>, Status> {
    let Some(options) = options else {
        return Ok(resources);
    };
    let id_re = match options.id_query.as_ref().map(|q| q.regexp.as_str()) {
        Some(re) if !re.is_empty() => Some(
            regex::Regex::new(re)
                .map_err(|e| Status::invalid_argument(format!("invalid id query: {e}")))?,
        ),
        _ => None,
    };
    let mut kept = Vec::new();
    for r in resources {
        let Some(md) = r.metadata.as_ref() else {
            continue;
        };
        if id_re.as_ref().is_some_and(|re| !re.is_match(&md.id)) {
            continue;
        }
        if let Some(query) = &options.label_query
            && !labels_match(&md.labels, query)?
        {
            continue;
        }
        kept.push(r);
    }
    Ok(kept)
}

/// COSI namespace of the network resources.
pub const NETWORK_NAMESPACE: &str = "network";
/// COSI type of a node's addresses.
pub const ADDRESS_STATUS_TYPE: &str = "AddressStatuses.net.talos.dev";
/// The controller Talos names as the owner of AddressStatuses.
const OWNER: &str = "network.AddressStatusController";

/// The resource id Talos gives an address: `<link>/<address>/<prefix>`.
pub fn address_id(a: &LabAddress) -> String {
    format!("{}/{}/{}", a.link, a.address, a.prefix_len)
}

/// The spec as Talos renders it in YAML (field names and value forms of `AddressStatusSpec`).
fn address_yaml(a: &LabAddress) -> String {
    let (family, broadcast) = match a.address {
        IpAddr::V4(ip) if a.prefix_len < 31 => {
            let host_bits = u32::MAX.checked_shr(u32::from(a.prefix_len)).unwrap_or(0);
            let b = std::net::Ipv4Addr::from(u32::from(ip) | host_bits);
            ("inet4", b.to_string())
        }
        IpAddr::V4(_) => ("inet4", String::new()),
        IpAddr::V6(_) => ("inet6", String::new()),
    };
    let (link_index, scope) = if a.link == "lo" {
        (1, "host")
    } else {
        (2, "global")
    };
    format!(
        "address: {}/{}\nlocal: {}\nbroadcast: \"{broadcast}\"\nanycast: \"\"\nmulticast: \"\"\n\
         linkIndex: {link_index}\nlinkName: {}\nfamily: {family}\nscope: {scope}\n\
         flags: permanent\npriority: 1024\n",
        a.address, a.prefix_len, a.address, a.link
    )
}

fn address_resource(a: &LabAddress) -> Resource {
    let at = prost_types::Timestamp::from(a.since);
    Resource {
        metadata: Some(Metadata {
            namespace: NETWORK_NAMESPACE.into(),
            r#type: ADDRESS_STATUS_TYPE.into(),
            id: address_id(a),
            version: "1".into(),
            owner: OWNER.into(),
            phase: "running".into(),
            created: Some(at),
            updated: Some(at),
            ..Metadata::default()
        }),
        spec: Some(Spec {
            proto_spec: Vec::new(),
            yaml_spec: address_yaml(a),
        }),
    }
}

impl Apid {
    /// The node a COSI call is answered for: this one, or the one `node` metadata names
    /// (apid proxies COSI to a single node; a multi-valued target is refused).
    fn cosi_target(&self, md: &MetadataMap, method: &str) -> Result<String, Status> {
        if !self.backend.is_up(&self.node) {
            return Err(Status::unavailable("node is shutting down"));
        }
        match self.direct(md, method)? {
            Direction::Local => Ok(self.node.clone()),
            Direction::One(target) => self.answer_for(target, &|node: &str| Ok(node.to_string())),
            // `direct` refuses one-to-many for COSI before it gets here.
            Direction::Many(_) => Err(Status::invalid_argument(format!(
                "one-2-many proxying is not supported for method {method}"
            ))),
        }
    }

    /// The node's resources of (`namespace`, `type`).
    fn resources(&self, node: &str, namespace: &str, kind: &str) -> Result<Vec<Resource>, Status> {
        supported(namespace, kind)?;
        if namespace != NETWORK_NAMESPACE || !kind.eq_ignore_ascii_case(ADDRESS_STATUS_TYPE) {
            return Ok(Vec::new());
        }
        Ok(self
            .backend
            .addresses(node)
            .iter()
            .map(address_resource)
            .collect())
    }
}

/// The `List` reply stream: every resource is known before the first is sent.
type ListStream =
    tonic::codegen::tokio_stream::Iter<std::vec::IntoIter<Result<ListResponse, Status>>>;

#[tonic::async_trait]
impl State for Apid {
    async fn get(&self, req: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        self.authorize(&req, READ_ROLES)?;
        let node = self.cosi_target(req.metadata(), "/cosi.resource.State/Get")?;
        let r = req.get_ref();
        self.resources(&node, &r.namespace, &r.r#type)?
            .into_iter()
            .find(|res| res.metadata.as_ref().is_some_and(|m| m.id == r.id))
            .map(|resource| {
                Response::new(GetResponse {
                    resource: Some(resource),
                })
            })
            .ok_or_else(|| {
                Status::not_found(format!(
                    "resource {}({}/{}@undefined) doesn't exist",
                    r.r#type, r.namespace, r.id
                ))
            })
    }

    type ListStream = ListStream;

    async fn list(&self, req: Request<ListRequest>) -> Result<Response<ListStream>, Status> {
        self.authorize(&req, READ_ROLES)?;
        let node = self.cosi_target(req.metadata(), "/cosi.resource.State/List")?;
        let r = req.get_ref();
        let resources = self.resources(&node, &r.namespace, &r.r#type)?;
        let items: Vec<Result<ListResponse, Status>> = filter(resources, r.options.as_ref())?
            .into_iter()
            .map(|resource| {
                Ok(ListResponse {
                    resource: Some(resource),
                })
            })
            .collect();
        Ok(Response::new(tonic::codegen::tokio_stream::iter(items)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn addr(link: &str, ip: &str, prefix_len: u8) -> LabAddress {
        LabAddress {
            link: link.into(),
            address: ip.parse().expect("ip"),
            prefix_len,
            since: SystemTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn ids_and_yaml_follow_talos() {
        let own = addr("eth0", "127.9.1.2", 24);
        assert_eq!(address_id(&own), "eth0/127.9.1.2/24");
        let yaml = address_yaml(&own);
        assert!(yaml.contains("address: 127.9.1.2/24\n"), "{yaml}");
        assert!(yaml.contains("broadcast: \"127.9.1.255\"\n"), "{yaml}");
        assert!(yaml.contains("linkName: eth0\n"), "{yaml}");
        assert!(yaml.contains("scope: global\n"), "{yaml}");
        let vip = address_yaml(&addr("eth0", "127.9.2.1", 32));
        assert!(vip.contains("broadcast: \"\"\n"), "{vip}");
        assert!(vip.contains("family: inet4\n"), "{vip}");
        let lo = address_yaml(&addr("lo", "127.0.0.1", 8));
        assert!(lo.contains("scope: host\n"), "{lo}");
        let parsed: serde_json::Value = crate::yaml::from_str(&vip).expect("valid YAML");
        assert_eq!(parsed["address"].as_str(), Some("127.9.2.1/32"));
        assert_eq!(parsed["flags"].as_str(), Some("permanent"));
    }
}
