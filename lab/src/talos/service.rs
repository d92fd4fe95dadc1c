//! `machine.MachineService` as apid answers it: RBAC from the client certificate's
//! organizations, routing by the `node` / `nodes` metadata (`research/talos.md` §1.4–1.7), and
//! per-node answers from the backend.

use std::sync::Arc;

use tonic::metadata::MetadataMap;
use tonic::{Code, Request, Response, Status};

use crate::power::DownMode;

use super::backend::{AlarmKind, EtcdError, NodeRole, TalosBackend};
use super::proto::common::Metadata;
use super::proto::google::rpc::Status as RpcStatus;
use super::proto::machine::{
    self, EtcdAlarm, EtcdAlarmListResponse, EtcdMemberListRequest, EtcdMemberListResponse,
    EtcdMembers, EtcdStatus, EtcdStatusResponse, ServiceList, ServiceListResponse, Version,
    VersionResponse, machine_service_server::MachineService,
};

/// Roles (`Subject.O`) of the client certificate on the connection, inserted per request.
#[derive(Debug, Clone, Default)]
pub struct PeerRoles(pub Vec<String>);

/// Where a call goes after apid's director.
pub(super) enum Direction<'a> {
    /// Answered by this node.
    Local,
    /// Proxied to one node (`node` metadata).
    One(&'a str),
    /// Proxied to each node, answers aggregated (`nodes` metadata).
    Many(Vec<&'a str>),
}

/// Services whose calls apid proxies one-to-many.
const ONE_TO_MANY_PREFIXES: &[&str] = &[
    "/machine.MachineService/",
    "/cluster.ClusterService/",
    "/inspect.InspectService/",
    "/storage.StorageService/",
    "/time.TimeService/",
];

/// Roles allowed to read versions, services and COSI resources.
pub(super) const READ_ROLES: &[&str] = &["os:admin", "os:operator", "os:reader"];
/// Roles allowed to read etcd state.
const ETCD_ROLES: &[&str] = &["os:admin", "os:operator", "os:reader", "os:etcd:backup"];

/// The apid of one node.
pub struct Apid {
    /// This node's name.
    pub node: String,
    pub backend: Arc<dyn TalosBackend>,
    /// How a powered-off node looks when this apid dials it.
    pub down: DownMode,
}

/// A reply element (`Version`, `EtcdMembers`, …): each carries `common.Metadata metadata = 1`.
trait Element: Default {
    fn set_metadata(&mut self, metadata: Metadata);
}

macro_rules! element {
    ($($t:ty),*) => {
        $(impl Element for $t {
            fn set_metadata(&mut self, metadata: Metadata) {
                self.metadata = Some(metadata);
            }
        })*
    };
}
element!(Version, EtcdMembers, EtcdStatus, EtcdAlarm, ServiceList);

pub(super) fn values<'a>(md: &'a MetadataMap, key: &str) -> Vec<&'a str> {
    md.get_all(key)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect()
}

/// How dialling `target` failed, in grpc-go's words.
enum Dial {
    /// A name nobody resolves.
    NoSuchHost,
    /// An address that does not answer (a powered-off node, or an address nobody has).
    Dead(DownMode),
}

fn dial_error(target: &str, how: Dial) -> Status {
    let detail = match how {
        Dial::NoSuchHost => format!("dial tcp: lookup {target}: no such host"),
        Dial::Dead(DownMode::Stall) => format!("dial tcp {target}:50000: i/o timeout"),
        Dial::Dead(DownMode::Refuse) => {
            format!("dial tcp {target}:50000: connect: connection refused")
        }
    };
    Status::unavailable(format!(
        "connection error: desc = \"transport: Error while dialing: {detail}\""
    ))
}

fn etcd_status_error(err: EtcdError) -> Status {
    match err {
        EtcdError::NoQuorum => Status::unavailable(err.to_string()),
        EtcdError::Failed(text) => Status::unknown(text),
    }
}

impl Apid {
    pub(super) fn authorize<T>(&self, req: &Request<T>, allowed: &[&str]) -> Result<(), Status> {
        let roles = req
            .extensions()
            .get::<PeerRoles>()
            .cloned()
            .unwrap_or_default();
        if roles.0.iter().any(|r| allowed.contains(&r.as_str())) {
            Ok(())
        } else {
            Err(Status::permission_denied("not authorized"))
        }
    }

    /// Answers for one target named in `node`/`nodes` metadata, as this node's apid would
    /// after proxying: itself, another node, or a dial error.
    pub(super) fn answer_for<X>(
        &self,
        target: &str,
        answer: &impl Fn(&str) -> Result<X, Status>,
    ) -> Result<X, Status> {
        let Some(node) = self.backend.resolve(target) else {
            return if self.backend.role(&self.node) == NodeRole::Worker {
                Err(Status::permission_denied("no request forwarding"))
            } else if target.parse::<std::net::IpAddr>().is_ok() {
                // An address is dialled, never looked up: nothing answers there.
                Err(dial_error(target, Dial::Dead(DownMode::Stall)))
            } else {
                Err(dial_error(target, Dial::NoSuchHost))
            };
        };
        if node == self.node {
            return answer(&node);
        }
        // Workers hold no client certificate, so they cannot forward.
        if self.backend.role(&self.node) == NodeRole::Worker {
            return Err(Status::permission_denied("no request forwarding"));
        }
        if !self.backend.is_up(&node) {
            return Err(dial_error(target, Dial::Dead(self.down)));
        }
        answer(&node)
    }

    /// Whether `target` names this node (its address or hostname), as apid's local-target test.
    fn is_local(&self, target: &str) -> bool {
        self.backend.resolve(target).as_deref() == Some(self.node.as_str())
    }

    /// Where apid's director sends a call of `method`: `nodes` (one-to-many) wins over
    /// `node` (one-to-one); a multi-valued `node` is invalid; one-to-many is refused for
    /// services outside MachineService and friends (COSI among them); a worker, which has
    /// no client certificate, serves only calls for itself.
    pub(super) fn direct<'a>(
        &self,
        md: &'a MetadataMap,
        method: &str,
    ) -> Result<Direction<'a>, Status> {
        if md.contains_key("proxyfrom") {
            return Ok(Direction::Local);
        }
        let nodes = values(md, "nodes");
        let node = values(md, "node");
        let (mut many, mut one) = (md.contains_key("nodes"), md.contains_key("node"));
        if one && node.len() != 1 {
            return Err(Status::invalid_argument(
                "node metadata must be single-valued",
            ));
        }
        let forwards = self.backend.role(&self.node) != NodeRole::Worker;
        if !forwards {
            if one && self.is_local(node[0]) {
                one = false;
            }
            if many && nodes.len() == 1 && self.is_local(nodes[0]) {
                many = false;
            }
        }
        if many {
            if !ONE_TO_MANY_PREFIXES.iter().any(|p| method.starts_with(p)) {
                return Err(Status::invalid_argument(format!(
                    "one-2-many proxying is not supported for method {method}"
                )));
            }
            if !forwards {
                return Err(Status::permission_denied("no request forwarding"));
            }
            return Ok(Direction::Many(nodes));
        }
        if one {
            if !forwards {
                return Err(Status::permission_denied("no request forwarding"));
            }
            return Ok(Direction::One(node[0]));
        }
        Ok(Direction::Local)
    }

    /// Applies apid's routing to a unary call.
    fn route<X: Element>(
        &self,
        md: &MetadataMap,
        answer: impl Fn(&str) -> Result<X, Status>,
    ) -> Result<Vec<X>, Status> {
        if !self.backend.is_up(&self.node) {
            return Err(Status::unavailable("node is shutting down"));
        }
        let nodes = match self.direct(md, "/machine.MachineService/")? {
            Direction::Local => return answer(&self.node).map(|x| vec![x]),
            Direction::One(target) => return self.answer_for(target, &answer).map(|x| vec![x]),
            Direction::Many(nodes) => nodes,
        };
        // One-to-many: every target becomes an element tagged with the target string; failures
        // become elements with only metadata, and the call itself succeeds.
        Ok(nodes
            .iter()
            .map(|target| {
                let hostname = target.to_string();
                match self.answer_for(target, &answer) {
                    Ok(mut x) => {
                        x.set_metadata(Metadata {
                            hostname,
                            ..Metadata::default()
                        });
                        x
                    }
                    Err(status) => {
                        let mut x = X::default();
                        x.set_metadata(Metadata {
                            hostname,
                            error: format!(
                                "rpc error: code = {:?} desc = {}",
                                status.code(),
                                status.message()
                            ),
                            status: Some(RpcStatus {
                                code: status.code() as i32,
                                message: status.message().to_string(),
                                details: Vec::new(),
                            }),
                        });
                        x
                    }
                }
            })
            .collect())
    }

    fn control_plane_only(&self, node: &str, api: &str) -> Result<(), Status> {
        if self.backend.role(node) == NodeRole::Worker {
            Err(Status::new(
                Code::Unimplemented,
                format!("{api} is only available on control plane nodes"),
            ))
        } else {
            Ok(())
        }
    }
}

#[tonic::async_trait]
impl MachineService for Apid {
    async fn version(&self, req: Request<()>) -> Result<Response<VersionResponse>, Status> {
        self.authorize(&req, READ_ROLES)?;
        let messages = self.route(req.metadata(), |node| {
            let v = self.backend.version(node);
            Ok(Version {
                metadata: None,
                version: Some(machine::VersionInfo {
                    tag: v.tag,
                    sha: v.sha,
                    built: v.built,
                    go_version: v.go_version,
                    os: v.os,
                    arch: v.arch,
                }),
                platform: v
                    .platform
                    .map(|(name, mode)| machine::PlatformInfo { name, mode }),
                features: Some(machine::FeaturesInfo { rbac: true }),
            })
        })?;
        Ok(Response::new(VersionResponse { messages }))
    }

    async fn etcd_member_list(
        &self,
        req: Request<EtcdMemberListRequest>,
    ) -> Result<Response<EtcdMemberListResponse>, Status> {
        self.authorize(&req, ETCD_ROLES)?;
        let messages = self.route(req.metadata(), |node| {
            self.control_plane_only(node, "member list")?;
            let members = self.backend.etcd_members(node).map_err(etcd_status_error)?;
            Ok(EtcdMembers {
                metadata: None,
                legacy_members: Vec::new(),
                members: members
                    .into_iter()
                    .map(|m| machine::EtcdMember {
                        id: m.id,
                        hostname: m.hostname,
                        peer_urls: m.peer_urls,
                        client_urls: m.client_urls,
                        is_learner: m.is_learner,
                    })
                    .collect(),
            })
        })?;
        Ok(Response::new(EtcdMemberListResponse { messages }))
    }

    async fn etcd_status(&self, req: Request<()>) -> Result<Response<EtcdStatusResponse>, Status> {
        self.authorize(&req, ETCD_ROLES)?;
        let messages = self.route(req.metadata(), |node| {
            self.control_plane_only(node, "etcd status")?;
            let s = self.backend.etcd_status(node).map_err(etcd_status_error)?;
            Ok(EtcdStatus {
                metadata: None,
                member_status: Some(machine::EtcdMemberStatus {
                    protocol_version: s.protocol_version,
                    db_size: s.db_size,
                    db_size_in_use: s.db_size_in_use,
                    leader: s.leader,
                    raft_index: s.raft_index,
                    raft_term: s.raft_term,
                    raft_applied_index: s.raft_applied_index,
                    errors: s.errors,
                    is_learner: s.is_learner,
                    member_id: s.member_id,
                    storage_version: s.storage_version,
                }),
            })
        })?;
        Ok(Response::new(EtcdStatusResponse { messages }))
    }

    async fn etcd_alarm_list(
        &self,
        req: Request<()>,
    ) -> Result<Response<EtcdAlarmListResponse>, Status> {
        self.authorize(&req, ETCD_ROLES)?;
        let messages = self.route(req.metadata(), |node| {
            self.control_plane_only(node, "etcd alarm list")?;
            let alarms = self.backend.etcd_alarms(node).map_err(etcd_status_error)?;
            Ok(EtcdAlarm {
                metadata: None,
                member_alarms: alarms
                    .into_iter()
                    .map(|a| machine::EtcdMemberAlarm {
                        member_id: a.member_id,
                        alarm: match a.alarm {
                            AlarmKind::None => machine::etcd_member_alarm::AlarmType::None,
                            AlarmKind::NoSpace => machine::etcd_member_alarm::AlarmType::Nospace,
                            AlarmKind::Corrupt => machine::etcd_member_alarm::AlarmType::Corrupt,
                        } as i32,
                    })
                    .collect(),
            })
        })?;
        Ok(Response::new(EtcdAlarmListResponse { messages }))
    }

    async fn service_list(
        &self,
        req: Request<()>,
    ) -> Result<Response<ServiceListResponse>, Status> {
        self.authorize(&req, READ_ROLES)?;
        let messages = self.route(req.metadata(), |node| {
            let services = self.backend.services(node);
            Ok(ServiceList {
                metadata: None,
                services: services
                    .into_iter()
                    .map(|s| machine::ServiceInfo {
                        id: s.id,
                        state: s.state,
                        events: Some(machine::ServiceEvents {
                            events: s
                                .events
                                .into_iter()
                                .map(|e| machine::ServiceEvent {
                                    msg: e.msg,
                                    state: e.state,
                                    ts: Some(e.at.into()),
                                })
                                .collect(),
                        }),
                        health: Some(machine::ServiceHealth {
                            unknown: s.healthy.is_none(),
                            healthy: s.healthy.unwrap_or(false),
                            last_message: s.last_message,
                            last_change: Some(s.last_change.into()),
                        }),
                    })
                    .collect(),
            })
        })?;
        Ok(Response::new(ServiceListResponse { messages }))
    }
}
