//! A Talos API client that talks to each node directly (one connection per endpoint,
//! no `node`/`nodes` routing metadata), over mutual TLS verified against the Talos CA
//! and the endpoint's address.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use super::addresses::{ADDRESS_STATUS_TYPE, NETWORK_NAMESPACE, parse_address_spec};
use super::config::{EndpointAddr, TalosContext, TalosCredentials, parse_endpoint};
use super::error::{TalosError, from_status, from_transport};
use super::proto::cosi::resource::{ListRequest, state_client::StateClient};
use super::proto::machine::{
    self as pb, EtcdMemberListRequest, machine_service_client::MachineServiceClient,
};
use super::types::{
    EtcdAlarm, EtcdAlarmKind, EtcdMember, EtcdMemberStatus, NodeAddress, NodeVersion, ServiceState,
};
use crate::retry::RetryPolicy;

/// apid accepts messages up to 32 MiB; accept as much back.
const MAX_MESSAGE: usize = 32 * 1024 * 1024;

/// Timeouts and retries of the Talos client.
#[derive(Debug, Clone, Copy)]
pub struct TalosOptions {
    /// TCP connect plus TLS handshake.
    pub connect_timeout: Duration,
    /// One RPC, from send to reply.
    pub call_timeout: Duration,
    /// Retries of connects and reads on timeouts and unavailability.
    pub retry: RetryPolicy,
}

impl Default for TalosOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            call_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
        }
    }
}

/// Holds the credentials; hands out one [`TalosNode`] per endpoint.
#[derive(Debug, Clone)]
pub struct TalosClient {
    credentials: Arc<TalosCredentials>,
    options: TalosOptions,
}

impl TalosClient {
    pub fn new(credentials: TalosCredentials, options: TalosOptions) -> Self {
        Self {
            credentials: Arc::new(credentials),
            options,
        }
    }

    /// A client with the credentials of a talosconfig context.
    pub fn from_context(context: &TalosContext, options: TalosOptions) -> Self {
        Self::new(context.credentials.clone(), options)
    }

    pub fn options(&self) -> &TalosOptions {
        &self.options
    }

    /// Connects to one node's apid. `endpoint` is `host`, `host:port` or `https://host[:port]`;
    /// the port defaults to 50000. The server certificate must chain to the talosconfig CA
    /// and name `host` (an IP SAN for an address).
    pub async fn connect(&self, endpoint: &str) -> Result<TalosNode, TalosError> {
        let addr = parse_endpoint(endpoint).map_err(|reason| TalosError::InvalidEndpoint {
            endpoint: endpoint.to_string(),
            reason: reason.to_string(),
        })?;
        let shown = addr.to_string();
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.credentials.ca_pem))
            .domain_name(addr.host.clone());
        if let Some((cert, key)) = self.credentials.identity_pem() {
            tls = tls.identity(Identity::from_pem(cert, key));
        }
        let ep = Endpoint::from_shared(addr.uri())
            .map_err(|e| TalosError::InvalidEndpoint {
                endpoint: endpoint.to_string(),
                reason: e.to_string(),
            })?
            .connect_timeout(self.options.connect_timeout)
            .tls_config(tls)
            .map_err(|e| TalosError::Credentials {
                reason: format!(
                    "{e}: {}",
                    std::error::Error::source(&e)
                        .map(|s| s.to_string())
                        .unwrap_or_default()
                ),
            })?;
        let connect_timeout = self.options.connect_timeout;
        let channel = self
            .options
            .retry
            .run(TalosError::is_retryable, || {
                let ep = ep.clone();
                let shown = shown.clone();
                async move {
                    match tokio::time::timeout(connect_timeout, ep.connect()).await {
                        Ok(Ok(channel)) => Ok(channel),
                        // A dead node drops packets: the connect deadline passes inside
                        // the transport, which is a timeout, not an unreachable address.
                        Ok(Err(e)) if timed_out(&e) => Err(TalosError::Timeout {
                            endpoint: shown,
                            what: "connect".to_string(),
                            after: connect_timeout,
                        }),
                        Ok(Err(e)) => Err(from_transport(&shown, &e)),
                        Err(_) => Err(TalosError::Timeout {
                            endpoint: shown,
                            what: "connect".to_string(),
                            after: connect_timeout,
                        }),
                    }
                }
            })
            .await?;
        Ok(TalosNode {
            addr,
            client: MachineServiceClient::new(channel.clone())
                .max_decoding_message_size(MAX_MESSAGE),
            state: StateClient::new(channel).max_decoding_message_size(MAX_MESSAGE),
            options: self.options,
        })
    }
}

/// A connection to one node's apid. Cheap to clone; calls may run concurrently.
#[derive(Debug, Clone)]
pub struct TalosNode {
    addr: EndpointAddr,
    client: MachineServiceClient<Channel>,
    /// COSI resource reads, on the same connection.
    state: StateClient<Channel>,
    options: TalosOptions,
}

impl TalosNode {
    /// The address dialled, `host:port`.
    pub fn endpoint(&self) -> String {
        self.addr.to_string()
    }

    pub fn address(&self) -> &EndpointAddr {
        &self.addr
    }

    /// Runs one `MachineService` RPC with the call timeout, retrying retryable failures.
    async fn call<R, F, Fut>(&self, method: &'static str, op: F) -> Result<R, TalosError>
    where
        F: Fn(MachineServiceClient<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<R>, tonic::Status>>,
    {
        self.rpc(&self.client, method, |c| {
            let fut = op(c);
            async move { fut.await.map(tonic::Response::into_inner) }
        })
        .await
    }

    /// Runs one RPC on `client` (a streaming one up to its end) with the call timeout,
    /// retrying retryable failures.
    async fn rpc<C, R, F, Fut>(
        &self,
        client: &C,
        method: &'static str,
        op: F,
    ) -> Result<R, TalosError>
    where
        C: Clone,
        F: Fn(C) -> Fut,
        Fut: Future<Output = Result<R, tonic::Status>>,
    {
        let endpoint = self.endpoint();
        let timeout = self.options.call_timeout;
        self.options
            .retry
            .run(TalosError::is_retryable, || {
                let fut = op(client.clone());
                let endpoint = endpoint.clone();
                async move {
                    match tokio::time::timeout(timeout, fut).await {
                        Ok(Ok(reply)) => Ok(reply),
                        Ok(Err(status)) => Err(from_status(&endpoint, method, &status)),
                        Err(_) => Err(TalosError::Timeout {
                            endpoint,
                            what: method.to_string(),
                            after: timeout,
                        }),
                    }
                }
            })
            .await
    }

    /// Takes the single message of a direct (unproxied) reply, honouring `metadata.error`.
    fn single<T>(
        &self,
        method: &'static str,
        messages: Vec<T>,
        metadata: impl Fn(&T) -> Option<&super::proto::common::Metadata>,
    ) -> Result<T, TalosError> {
        let first = messages
            .into_iter()
            .next()
            .ok_or_else(|| TalosError::EmptyReply {
                endpoint: self.endpoint(),
                method,
            })?;
        if let Some(md) = metadata(&first)
            && !md.error.is_empty()
        {
            return Err(TalosError::NodeError {
                endpoint: self.endpoint(),
                method,
                message: md.error.clone(),
            });
        }
        Ok(first)
    }

    /// `MachineService/Version`.
    pub async fn version(&self) -> Result<NodeVersion, TalosError> {
        let reply = self
            .call("Version", |mut c| async move { c.version(()).await })
            .await?;
        let v = self.single("Version", reply.messages, |m| m.metadata.as_ref())?;
        let info = v.version.unwrap_or_default();
        Ok(NodeVersion {
            tag: info.tag,
            sha: info.sha,
            os: info.os,
            arch: info.arch,
            platform: v.platform.map(|p| p.name).filter(|n| !n.is_empty()),
        })
    }

    /// `MachineService/EtcdMemberList` as this member sees it (`query_local`, like talosctl).
    pub async fn etcd_members(&self) -> Result<Vec<EtcdMember>, TalosError> {
        let reply = self
            .call("EtcdMemberList", |mut c| async move {
                c.etcd_member_list(EtcdMemberListRequest { query_local: true })
                    .await
            })
            .await?;
        let m = self.single("EtcdMemberList", reply.messages, |m| m.metadata.as_ref())?;
        Ok(m.members
            .into_iter()
            .map(|m| EtcdMember {
                id: m.id,
                hostname: m.hostname,
                peer_urls: m.peer_urls,
                client_urls: m.client_urls,
                is_learner: m.is_learner,
            })
            .collect())
    }

    /// `MachineService/EtcdStatus` of the node's local member.
    pub async fn etcd_status(&self) -> Result<EtcdMemberStatus, TalosError> {
        let reply = self
            .call("EtcdStatus", |mut c| async move { c.etcd_status(()).await })
            .await?;
        let s = self.single("EtcdStatus", reply.messages, |m| m.metadata.as_ref())?;
        let st = s.member_status.ok_or_else(|| TalosError::EmptyReply {
            endpoint: self.endpoint(),
            method: "EtcdStatus",
        })?;
        Ok(EtcdMemberStatus {
            member_id: st.member_id,
            leader: st.leader,
            protocol_version: st.protocol_version,
            db_size: st.db_size,
            db_size_in_use: st.db_size_in_use,
            raft_index: st.raft_index,
            raft_term: st.raft_term,
            raft_applied_index: st.raft_applied_index,
            errors: st.errors,
            is_learner: st.is_learner,
            storage_version: st.storage_version,
        })
    }

    /// `MachineService/EtcdAlarmList`; `NONE` entries are dropped.
    pub async fn etcd_alarms(&self) -> Result<Vec<EtcdAlarm>, TalosError> {
        let reply = self
            .call("EtcdAlarmList", |mut c| async move {
                c.etcd_alarm_list(()).await
            })
            .await?;
        let a = self.single("EtcdAlarmList", reply.messages, |m| m.metadata.as_ref())?;
        Ok(a.member_alarms
            .into_iter()
            .map(|a| EtcdAlarm {
                member_id: a.member_id,
                kind: match pb::etcd_member_alarm::AlarmType::try_from(a.alarm) {
                    Ok(pb::etcd_member_alarm::AlarmType::None) => EtcdAlarmKind::None,
                    Ok(pb::etcd_member_alarm::AlarmType::Nospace) => EtcdAlarmKind::NoSpace,
                    Ok(pb::etcd_member_alarm::AlarmType::Corrupt) => EtcdAlarmKind::Corrupt,
                    Err(_) => EtcdAlarmKind::Other(a.alarm),
                },
            })
            .filter(|a| a.kind != EtcdAlarmKind::None)
            .collect())
    }

    /// `MachineService/ServiceList`.
    pub async fn services(&self) -> Result<Vec<ServiceState>, TalosError> {
        let reply = self
            .call(
                "ServiceList",
                |mut c| async move { c.service_list(()).await },
            )
            .await?;
        let s = self.single("ServiceList", reply.messages, |m| m.metadata.as_ref())?;
        Ok(s.services
            .into_iter()
            .map(|s| {
                let health = s.health.unwrap_or_default();
                ServiceState {
                    id: s.id,
                    state: s.state,
                    healthy: if health.unknown {
                        None
                    } else {
                        Some(health.healthy)
                    },
                    last_message: health.last_message,
                }
            })
            .collect())
    }

    /// The node's addresses: COSI `State/List` of `AddressStatuses.net.talos.dev` in
    /// `network` (`talosctl get addresses`). The API VIP is among them on its holder only.
    pub async fn addresses(&self) -> Result<Vec<NodeAddress>, TalosError> {
        const METHOD: &str = "cosi.resource.State/List";
        let resources = self
            .rpc(&self.state, METHOD, |mut c| async move {
                let mut stream = c
                    .list(ListRequest {
                        namespace: NETWORK_NAMESPACE.to_string(),
                        r#type: ADDRESS_STATUS_TYPE.to_string(),
                        options: None,
                    })
                    .await?
                    .into_inner();
                let mut resources = Vec::new();
                while let Some(msg) = stream.message().await? {
                    resources.extend(msg.resource);
                }
                Ok(resources)
            })
            .await?;
        resources
            .into_iter()
            .map(|r| {
                let id = r.metadata.map(|m| m.id).unwrap_or_default();
                let yaml = r.spec.map(|s| s.yaml_spec).unwrap_or_default();
                parse_address_spec(&id, &yaml).map_err(|reason| TalosError::BadResource {
                    endpoint: self.endpoint(),
                    method: METHOD,
                    resource: id,
                    reason: reason.to_string(),
                })
            })
            .collect()
    }
}

/// Whether a connect failed because its deadline passed (tonic's `connect_timeout`).
fn timed_out(err: &tonic::transport::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if e.is::<tokio::time::error::Elapsed>()
            || e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        source = e.source();
    }
    false
}
