//! Talos apid (`127.S.1.j:50000`): gRPC over mutual TLS, `machine.MachineService` `Version`,
//! `EtcdMemberList`, `EtcdStatus`, `EtcdAlarmList` and `ServiceList`, and COSI
//! `cosi.resource.State` `Get`/`List` of the node's addresses, answered from a
//! [`TalosBackend`]. Client certificates must chain to the Talos OS CA and carry EKU exactly
//! `clientAuth`; roles come from their organizations. A powered-off node refuses connections.
//! Facts: `research/talos.md`.

mod backend;
mod cosi;
pub mod memory;
pub mod proto;
mod service;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::CertificateDer;
use tonic::codegen::Service;

use crate::pki::endpoint::{Recorder, RequestRecord, ServeError, ServerHandle, serve_tls};
use crate::pki::tls::{ServerTls, subject_organizations, talos_mtls_config};

pub use backend::{
    AlarmKind, EtcdAlarm, EtcdError, EtcdMember, EtcdMemberStatus, LabAddress, NodeRole,
    ServiceEvent, ServiceState, TalosBackend, TalosVersion,
};
pub use cosi::{ADDRESS_STATUS_TYPE, NETWORK_NAMESPACE, address_id};
pub use service::PeerRoles;

use proto::cosi::resource::state_server::StateServer;
use proto::machine::machine_service_server::MachineServiceServer;
use service::Apid;

/// apid's maximum gRPC message size (32 MiB).
const MAX_MESSAGE_SIZE: usize = 32 * 1024 * 1024;

/// Serves apid for node `node` on `addr` while `power` is true. `tls` is the node's server
/// certificate; `talos_ca` verifies client certificates. Returns once listening.
/// The request-log path of a TLS handshake apid refused (status 16, `Unauthenticated`).
pub const HANDSHAKE_REJECTED: &str = "(TLS handshake refused)";

pub async fn serve(
    backend: Arc<dyn TalosBackend>,
    node: &str,
    addr: SocketAddr,
    tls: &ServerTls,
    talos_ca: &CertificateDer<'static>,
    power: impl Into<crate::power::Power>,
    recorder: Recorder,
) -> Result<ServerHandle, ServeError> {
    let config = talos_mtls_config(tls, talos_ca)?;
    let power = power.into();
    let apid = Arc::new(Apid {
        node: node.to_string(),
        backend,
        down: power.down,
    });
    // Handshakes apid refused (a certificate of another CA) go into the request log too, so
    // tests can prove no client presented another environment's credentials.
    let rejected: crate::pki::endpoint::Rejected = {
        let recorder = recorder.clone();
        Arc::new(move |client, server| {
            recorder(RequestRecord {
                system: "talos",
                client,
                server,
                verb: "TLS".into(),
                path: HANDSHAKE_REJECTED.into(),
                status: 16,
                read_only: true,
            })
        })
    };
    let handle = serve_tls(addr, config, power, Some(rejected), move |stream, info| {
        let server = MachineServiceServer::from_arc(apid.clone())
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE);
        let state = StateServer::from_arc(apid.clone())
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE);
        let recorder = recorder.clone();
        let roles = PeerRoles(
            info.peer_certs
                .first()
                .map(|c| subject_organizations(c))
                .unwrap_or_default(),
        );
        async move {
            let service = service_fn(move |mut req: http::Request<Incoming>| {
                req.extensions_mut().insert(roles.clone());
                let mut server = server.clone();
                let mut state = state.clone();
                let recorder = recorder.clone();
                let path = req.uri().path().to_string();
                let (peer, local) = (info.peer, info.local);
                async move {
                    // Both services share the connection; the path names the service.
                    let resp = if path.starts_with("/cosi.resource.State/") {
                        state.call(req).await
                    } else {
                        server.call(req).await
                    };
                    let resp = match resp {
                        Ok(resp) => resp,
                        Err(never) => match never {},
                    };
                    // Errors are trailers-only responses: grpc-status is in the headers.
                    let code = resp
                        .headers()
                        .get("grpc-status")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<u16>().ok())
                        .unwrap_or(0);
                    recorder(RequestRecord {
                        system: "talos",
                        client: peer,
                        server: local,
                        verb: "POST".into(),
                        path,
                        status: code,
                        read_only: true,
                    });
                    Ok::<_, Infallible>(resp)
                }
            });
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
    })
    .await?;
    Ok(handle)
}
