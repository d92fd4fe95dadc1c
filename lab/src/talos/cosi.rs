//! COSI `cosi.resource.State` on apid: `Get` and `List` of the node's
//! `AddressStatuses.net.talos.dev` in the `network` namespace (what `talosctl get addresses`
//! shows), with the same RBAC and node-down behaviour as `MachineService`. Specs are served as
//! YAML only (`yaml_spec`); `proto_spec` stays empty. Other types and namespaces have no
//! resources here: `List` streams nothing and `Get` answers `NotFound`, as COSI does for a
//! type without resources.

use std::net::IpAddr;

use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

use super::backend::LabAddress;
use super::proto::cosi::resource::{
    GetRequest, GetResponse, ListRequest, ListResponse, Metadata, Resource, Spec,
    state_server::State,
};
use super::service::{Apid, READ_ROLES, values};

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
    fn cosi_target(&self, md: &MetadataMap) -> Result<String, Status> {
        if !self.backend.is_up(&self.node) {
            return Err(Status::unavailable("node is shutting down"));
        }
        if md.contains_key("proxyfrom") {
            return Ok(self.node.clone());
        }
        let mut targets = values(md, "node");
        if targets.is_empty() {
            targets = values(md, "nodes");
        }
        match targets.as_slice() {
            [] => Ok(self.node.clone()),
            [one] => self.answer_for(one, &|node: &str| Ok(node.to_string())),
            _ => Err(Status::invalid_argument(
                "node metadata must be single-valued",
            )),
        }
    }

    /// The node's resources of (`namespace`, `type`).
    fn resources(&self, node: &str, namespace: &str, kind: &str) -> Vec<Resource> {
        if namespace != NETWORK_NAMESPACE || kind != ADDRESS_STATUS_TYPE {
            return Vec::new();
        }
        self.backend
            .addresses(node)
            .iter()
            .map(address_resource)
            .collect()
    }
}

/// The `List` reply stream: every resource is known before the first is sent.
type ListStream =
    tonic::codegen::tokio_stream::Iter<std::vec::IntoIter<Result<ListResponse, Status>>>;

#[tonic::async_trait]
impl State for Apid {
    async fn get(&self, req: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        self.authorize(&req, READ_ROLES)?;
        let node = self.cosi_target(req.metadata())?;
        let r = req.get_ref();
        self.resources(&node, &r.namespace, &r.r#type)
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
        let node = self.cosi_target(req.metadata())?;
        let r = req.get_ref();
        let items: Vec<Result<ListResponse, Status>> = self
            .resources(&node, &r.namespace, &r.r#type)
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
        let parsed: serde_yaml_ng::Value = serde_yaml_ng::from_str(&vip).expect("valid YAML");
        assert_eq!(parsed["address"].as_str(), Some("127.9.2.1/32"));
        assert_eq!(parsed["flags"].as_str(), Some("permanent"));
    }
}
