//! `v1` Node as protobuf carries it (k8s.io/api `core/v1/generated.proto`): every field
//! k8s-openapi's Node has, as gates holds nodes whole.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as api;
use prost::Message;

use super::wire::DecodeError;

use super::meta::{FullObjectMeta, Quantity, Time, always, list, quantities, text, time};

/// `NodeList`.
#[derive(Clone, PartialEq, Message)]
pub struct NodeList {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<super::wire::ListMeta>,
    #[prost(message, repeated, tag = "2")]
    pub items: Vec<Node>,
}

/// `Node`.
#[derive(Clone, PartialEq, Message)]
pub struct Node {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<FullObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<NodeSpec>,
    #[prost(message, optional, tag = "3")]
    pub status: Option<NodeStatus>,
}

/// `NodeSpec`.
#[derive(Clone, PartialEq, Message)]
pub struct NodeSpec {
    #[prost(string, optional, tag = "1")]
    pub pod_cidr: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub external_id: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub provider_id: Option<String>,
    #[prost(bool, optional, tag = "4")]
    pub unschedulable: Option<bool>,
    #[prost(message, repeated, tag = "5")]
    pub taints: Vec<Taint>,
    #[prost(message, optional, tag = "6")]
    pub config_source: Option<NodeConfigSource>,
    #[prost(string, repeated, tag = "7")]
    pub pod_cidrs: Vec<String>,
}

/// `Taint`.
#[derive(Clone, PartialEq, Message)]
pub struct Taint {
    #[prost(string, optional, tag = "1")]
    pub key: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub value: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub effect: Option<String>,
    #[prost(message, optional, tag = "4")]
    pub time_added: Option<Time>,
}

/// `NodeConfigSource`.
#[derive(Clone, PartialEq, Message)]
pub struct NodeConfigSource {
    #[prost(message, optional, tag = "2")]
    pub config_map: Option<ConfigMapNodeConfigSource>,
}

/// `ConfigMapNodeConfigSource`.
#[derive(Clone, PartialEq, Message)]
pub struct ConfigMapNodeConfigSource {
    #[prost(string, optional, tag = "1")]
    pub namespace: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub uid: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub resource_version: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub kubelet_config_key: Option<String>,
}

/// `NodeStatus`.
#[derive(Clone, PartialEq, Message)]
pub struct NodeStatus {
    #[prost(btree_map = "string, message", tag = "1")]
    pub capacity: BTreeMap<String, Quantity>,
    #[prost(btree_map = "string, message", tag = "2")]
    pub allocatable: BTreeMap<String, Quantity>,
    #[prost(string, optional, tag = "3")]
    pub phase: Option<String>,
    #[prost(message, repeated, tag = "4")]
    pub conditions: Vec<NodeCondition>,
    #[prost(message, repeated, tag = "5")]
    pub addresses: Vec<NodeAddress>,
    #[prost(message, optional, tag = "6")]
    pub daemon_endpoints: Option<NodeDaemonEndpoints>,
    #[prost(message, optional, tag = "7")]
    pub node_info: Option<NodeSystemInfo>,
    #[prost(message, repeated, tag = "8")]
    pub images: Vec<ContainerImage>,
    #[prost(string, repeated, tag = "9")]
    pub volumes_in_use: Vec<String>,
    #[prost(message, repeated, tag = "10")]
    pub volumes_attached: Vec<AttachedVolume>,
    #[prost(message, optional, tag = "11")]
    pub config: Option<NodeConfigStatus>,
    #[prost(message, repeated, tag = "12")]
    pub runtime_handlers: Vec<NodeRuntimeHandler>,
    #[prost(message, optional, tag = "13")]
    pub features: Option<NodeFeatures>,
}

/// `NodeCondition`.
#[derive(Clone, PartialEq, Message)]
pub struct NodeCondition {
    #[prost(string, optional, tag = "1")]
    pub type_: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub status: Option<String>,
    #[prost(message, optional, tag = "3")]
    pub last_heartbeat_time: Option<Time>,
    #[prost(message, optional, tag = "4")]
    pub last_transition_time: Option<Time>,
    #[prost(string, optional, tag = "5")]
    pub reason: Option<String>,
    #[prost(string, optional, tag = "6")]
    pub message: Option<String>,
}

/// `NodeAddress`.
#[derive(Clone, PartialEq, Message)]
pub struct NodeAddress {
    #[prost(string, optional, tag = "1")]
    pub type_: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub address: Option<String>,
}

/// `NodeDaemonEndpoints`.
#[derive(Clone, PartialEq, Message)]
pub struct NodeDaemonEndpoints {
    #[prost(message, optional, tag = "1")]
    pub kubelet_endpoint: Option<DaemonEndpoint>,
}

/// `DaemonEndpoint`.
#[derive(Clone, PartialEq, Message)]
pub struct DaemonEndpoint {
    #[prost(int32, optional, tag = "1")]
    pub port: Option<i32>,
}

/// `NodeSystemInfo`.
#[derive(Clone, PartialEq, Message)]
pub struct NodeSystemInfo {
    #[prost(string, optional, tag = "1")]
    pub machine_id: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub system_uuid: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub boot_id: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub kernel_version: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub os_image: Option<String>,
    #[prost(string, optional, tag = "6")]
    pub container_runtime_version: Option<String>,
    #[prost(string, optional, tag = "7")]
    pub kubelet_version: Option<String>,
    #[prost(string, optional, tag = "8")]
    pub kube_proxy_version: Option<String>,
    #[prost(string, optional, tag = "9")]
    pub operating_system: Option<String>,
    #[prost(string, optional, tag = "10")]
    pub architecture: Option<String>,
    #[prost(message, optional, tag = "11")]
    pub swap: Option<NodeSwapStatus>,
}

/// `NodeSwapStatus`.
#[derive(Clone, PartialEq, Message)]
pub struct NodeSwapStatus {
    #[prost(int64, optional, tag = "1")]
    pub capacity: Option<i64>,
}

/// `ContainerImage`.
#[derive(Clone, PartialEq, Message)]
pub struct ContainerImage {
    #[prost(string, repeated, tag = "1")]
    pub names: Vec<String>,
    #[prost(int64, optional, tag = "2")]
    pub size_bytes: Option<i64>,
}

/// `AttachedVolume`.
#[derive(Clone, PartialEq, Message)]
pub struct AttachedVolume {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub device_path: Option<String>,
}

/// `NodeConfigStatus`.
#[derive(Clone, PartialEq, Message)]
pub struct NodeConfigStatus {
    #[prost(message, optional, tag = "1")]
    pub assigned: Option<NodeConfigSource>,
    #[prost(message, optional, tag = "2")]
    pub active: Option<NodeConfigSource>,
    #[prost(message, optional, tag = "3")]
    pub last_known_good: Option<NodeConfigSource>,
    #[prost(string, optional, tag = "4")]
    pub error: Option<String>,
}

/// `NodeRuntimeHandler`.
#[derive(Clone, PartialEq, Message)]
pub struct NodeRuntimeHandler {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "2")]
    pub features: Option<NodeRuntimeHandlerFeatures>,
}

/// `NodeRuntimeHandlerFeatures`.
#[derive(Clone, PartialEq, Message)]
pub struct NodeRuntimeHandlerFeatures {
    #[prost(bool, optional, tag = "1")]
    pub recursive_read_only_mounts: Option<bool>,
    #[prost(bool, optional, tag = "2")]
    pub user_namespaces: Option<bool>,
}

/// `NodeFeatures`.
#[derive(Clone, PartialEq, Message)]
pub struct NodeFeatures {
    #[prost(bool, optional, tag = "1")]
    pub supplemental_groups_policy: Option<bool>,
}

impl TryFrom<Node> for api::Node {
    type Error = DecodeError;

    fn try_from(n: Node) -> Result<Self, DecodeError> {
        Ok(api::Node {
            metadata: n
                .metadata
                .map(TryInto::try_into)
                .transpose()?
                .unwrap_or_default(),
            spec: n.spec.map(spec).transpose()?,
            status: n.status.map(status).transpose()?,
        })
    }
}

fn spec(s: NodeSpec) -> Result<api::NodeSpec, DecodeError> {
    Ok(api::NodeSpec {
        config_source: s.config_source.map(config_source),
        external_id: text(s.external_id),
        pod_cidr: text(s.pod_cidr),
        pod_cidrs: list(s.pod_cidrs, |c| c),
        provider_id: text(s.provider_id),
        // A Go `bool` with `omitempty`: false is left out of JSON.
        unschedulable: s.unschedulable.filter(|&u| u),
        taints: (!s.taints.is_empty())
            .then(|| {
                s.taints
                    .into_iter()
                    .map(|t| {
                        Ok(api::Taint {
                            key: always(t.key),
                            value: text(t.value),
                            effect: always(t.effect),
                            time_added: t
                                .time_added
                                .map(Time::timestamp)
                                .transpose()?
                                .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time),
                        })
                    })
                    .collect::<Result<Vec<_>, DecodeError>>()
            })
            .transpose()?,
    })
}

fn config_source(s: NodeConfigSource) -> api::NodeConfigSource {
    api::NodeConfigSource {
        config_map: s.config_map.map(|c| api::ConfigMapNodeConfigSource {
            namespace: always(c.namespace),
            name: always(c.name),
            uid: text(c.uid),
            resource_version: text(c.resource_version),
            kubelet_config_key: always(c.kubelet_config_key),
        }),
    }
}

fn status(s: NodeStatus) -> Result<api::NodeStatus, DecodeError> {
    let conditions = s
        .conditions
        .into_iter()
        .map(|c| {
            Ok(api::NodeCondition {
                type_: always(c.type_),
                status: always(c.status),
                last_heartbeat_time: time(c.last_heartbeat_time)?,
                last_transition_time: time(c.last_transition_time)?,
                reason: text(c.reason),
                message: text(c.message),
            })
        })
        .collect::<Result<Vec<_>, DecodeError>>()?;
    Ok(api::NodeStatus {
        addresses: list(s.addresses, |a| api::NodeAddress {
            type_: always(a.type_),
            address: always(a.address),
        }),
        allocatable: quantities(s.allocatable),
        capacity: quantities(s.capacity),
        conditions: (!conditions.is_empty()).then_some(conditions),
        config: s.config.map(|c| api::NodeConfigStatus {
            active: c.active.map(config_source),
            assigned: c.assigned.map(config_source),
            error: text(c.error),
            last_known_good: c.last_known_good.map(config_source),
        }),
        daemon_endpoints: s.daemon_endpoints.map(|d| api::NodeDaemonEndpoints {
            kubelet_endpoint: d.kubelet_endpoint.map(|e| api::DaemonEndpoint {
                port: e.port.unwrap_or(0),
            }),
        }),
        features: s.features.map(|f| api::NodeFeatures {
            supplemental_groups_policy: f.supplemental_groups_policy,
        }),
        images: list(s.images, |i| api::ContainerImage {
            names: list(i.names, |n| n),
            size_bytes: i.size_bytes.filter(|&b| b != 0),
        }),
        node_info: s.node_info.map(|i| api::NodeSystemInfo {
            architecture: always(i.architecture),
            boot_id: always(i.boot_id),
            container_runtime_version: always(i.container_runtime_version),
            kernel_version: always(i.kernel_version),
            kube_proxy_version: always(i.kube_proxy_version),
            kubelet_version: always(i.kubelet_version),
            machine_id: always(i.machine_id),
            operating_system: always(i.operating_system),
            os_image: always(i.os_image),
            swap: i.swap.map(|s| api::NodeSwapStatus {
                capacity: s.capacity,
            }),
            system_uuid: always(i.system_uuid),
        }),
        phase: text(s.phase),
        runtime_handlers: list(s.runtime_handlers, |h| api::NodeRuntimeHandler {
            name: Some(always(h.name)),
            features: h.features.map(|f| api::NodeRuntimeHandlerFeatures {
                recursive_read_only_mounts: f.recursive_read_only_mounts,
                user_namespaces: f.user_namespaces,
            }),
        }),
        volumes_attached: list(s.volumes_attached, |v| api::AttachedVolume {
            name: always(v.name),
            device_path: always(v.device_path),
        }),
        volumes_in_use: list(s.volumes_in_use, |v| v),
    })
}
