//! The Talos collector: each configured control-plane endpoint is called directly (never
//! through the API VIP), concurrently, for its version, etcd member list, member status and
//! alarms. An endpoint that cannot be reached is recorded with the reason.

use std::time::Duration;

use futures::future::join_all;
use gates_infra::RetryPolicy;
use gates_infra::talos::{self, EtcdAlarmKind, TalosClient, TalosOptions};

use super::kube::resolve;
use crate::config::{Environment, TalosAccess};
use crate::state::{EtcdMemberView, EtcdView, TalosEndpoint, TalosState, Unanswered};

pub async fn collect(env: &Environment, access: &TalosAccess) -> Result<TalosState, Unanswered> {
    let explicit = access.talosconfig.as_ref().map(|p| resolve(&env.file, p));
    let context = talos::load_context(explicit.as_deref(), Some(&access.context))
        .map_err(|err| err.to_string())?;
    let client = TalosClient::from_context(&context, options(access.timeout.into()));
    let endpoints = join_all(access.endpoints.iter().map(|endpoint| {
        let client = client.clone();
        async move {
            let (view, addresses) = view(&client, endpoint).await;
            TalosEndpoint {
                endpoint: endpoint.clone(),
                view,
                addresses,
            }
        }
    }))
    .await;
    Ok(TalosState {
        talosconfig: context.path.display().to_string(),
        context: context.name.clone(),
        context_endpoints: context.endpoint_hosts(),
        endpoints,
    })
}

/// Timeouts for reads: a short connect, a bounded retry with backoff.
pub fn options(timeout: Duration) -> TalosOptions {
    TalosOptions {
        connect_timeout: timeout.min(Duration::from_secs(5)),
        call_timeout: timeout,
        retry: RetryPolicy::default(),
    }
}

type Addresses = Result<Vec<std::net::IpAddr>, Unanswered>;

async fn view(client: &TalosClient, endpoint: &str) -> (Result<EtcdView, Unanswered>, Addresses) {
    let node = match client.connect(endpoint).await {
        Ok(node) => node,
        Err(err) => return (Err(err.to_string().into()), Err(err.to_string().into())),
    };
    let (view, addresses) = tokio::join!(etcd_view(&node), node.addresses());
    let addresses = addresses
        .map(|list| list.iter().map(|a| a.address).collect())
        .map_err(|err| Unanswered(err.to_string()));
    (view, addresses)
}

async fn etcd_view(node: &talos::TalosNode) -> Result<EtcdView, Unanswered> {
    let (version, members, status, alarms) = tokio::join!(
        node.version(),
        node.etcd_members(),
        node.etcd_status(),
        node.etcd_alarms()
    );
    let members = members.map_err(|err| err.to_string())?;
    let status = status.map_err(|err| err.to_string())?;
    Ok(EtcdView {
        talos_version: version
            .map(|v| v.tag)
            .unwrap_or_else(|err| format!("unknown ({err})")),
        members: members
            .iter()
            .map(|m| EtcdMemberView {
                id: m.id_hex(),
                hostname: m.hostname.clone(),
                peer_urls: m.peer_urls.clone(),
                learner: m.is_learner,
            })
            .collect(),
        member_id: format!("{:016x}", status.member_id),
        leader: if status.leader == 0 {
            String::new()
        } else {
            format!("{:016x}", status.leader)
        },
        alarms: match alarms {
            Ok(alarms) => alarms
                .iter()
                .filter(|a| a.kind != EtcdAlarmKind::None)
                .map(|a| format!("{:?} on member {:016x}", a.kind, a.member_id))
                .collect(),
            Err(err) => vec![format!("alarms unknown: {err}")],
        },
        errors: status.errors,
    })
}
