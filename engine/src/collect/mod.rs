//! Collectors: the only code that talks to a system for checks. Each fills a [`State`]
//! once; checks then evaluate it without I/O.

pub mod api;
pub mod completeness;
pub mod deadline;
mod file_text;
pub mod identity;
pub mod in_cluster;
pub mod infra_record;
pub mod json_spans;
pub mod kinds;
pub mod kube;
pub mod kube_error;
pub mod origin;
pub mod prometheus;
pub mod protobuf;
pub mod proxmox;
pub mod raw;
pub mod registry;
pub mod snapshot;
pub mod snapshot_bounds;
pub mod snapshot_writer;
pub mod talos;
#[cfg(test)]
mod typed_decode_tests;

use crate::config::{Config, Environment};
use crate::state::{Collected, State};

/// Everything live: the Kubernetes lists and, when the environment configures them, the
/// Talos API, the API endpoint and Proxmox, all at once (only matching Proxmox VMs to nodes
/// waits for the node list).
pub async fn live(config: &Config, env: &Environment) -> State {
    live_with(config, env, &kube::client(env).await).await
}

/// [`live`] through a Kubernetes client the caller built once (the chaos step reads the
/// cluster again and again while it waits for recovery). The Talos, API endpoint and
/// Proxmox readers keep their own clients: their retries and timeouts are those of a
/// collection, not of the chaos step's samples.
pub async fn live_with(
    config: &Config,
    env: &Environment,
    kube: &Result<::kube::Client, kube::KubeError>,
) -> State {
    // Proxmox is read beside the Kubernetes lists; only matching its VMs to the nodes waits
    // for them.
    let (mut state, talos, api, identity, proxmox, load) = tokio::join!(
        kube::collect(env, kube),
        talos_part(env),
        api_part(env),
        deadline::within(
            env,
            "reading the cluster identity",
            identity::live(env, kube.as_ref().ok()),
            |_| { identity::offline(env) }
        ),
        proxmox_read(config, env),
        load_part(env, chrono::Utc::now())
    );
    if let Some((node_metrics, node_load)) = load {
        state.node_metrics = node_metrics;
        state.node_load = node_load;
    }
    state.talos = talos;
    state.api = api;
    state.cluster_identity = identity;
    state.proxmox = proxmox_place(proxmox, state.nodes.present().map(Vec::as_slice));
    state
}

/// With `capacity.basis: prometheus`, each node's load over the window ending at `end` and
/// the node metrics it stands for (in place of metrics-server's sample).
pub async fn load_part(
    env: &Environment,
    end: chrono::DateTime<chrono::Utc>,
) -> Option<(
    Collected<Vec<std::sync::Arc<crate::state::NodeMetrics>>>,
    Collected<gates_core::load::NodeLoad>,
)> {
    let spec = env.capacity.prometheus.as_ref()?;
    if env.capacity.basis != crate::config::CapacityBasis::Prometheus {
        return None;
    }
    Some(
        deadline::within(
            env,
            "Prometheus",
            prometheus::collect(env, spec, end),
            |why| (Collected::Absent(why.clone()), Collected::Absent(why)),
        )
        .await,
    )
}

/// The Talos API of each control plane, when the environment has a `talos` section.
pub async fn talos_part(env: &Environment) -> Collected<crate::state::TalosState> {
    match &env.talos {
        Some(access) => {
            deadline::within(env, "the Talos API", talos::collect(env, access), |why| {
                Err(crate::state::Unanswered(why))
            })
            .await
            .map_or_else(|why| Collected::Absent(why.0), Collected::Present)
        }
        None => Collected::NotApplicable(format!("no `talos` section in {}", env.file.display())),
    }
}

/// The API endpoint (the VIP), when the environment has an `api` section.
pub async fn api_part(env: &Environment) -> Collected<crate::state::ApiState> {
    match &env.api {
        Some(spec) => {
            deadline::within(
                env,
                "the API endpoint",
                async { Collected::Present(api::collect(env, &spec.endpoint).await) },
                Collected::Absent,
            )
            .await
        }
        None => Collected::NotApplicable(format!("no `api` section in {}", env.file.display())),
    }
}

/// What Proxmox answers, within the environment's deadline; its VMs are not yet matched to
/// the nodes ([`proxmox_place`]).
pub async fn proxmox_read(config: &Config, env: &Environment) -> Collected<proxmox::Read> {
    match &env.proxmox {
        Some(access) => {
            deadline::within(env, "Proxmox", proxmox::read(config, env, access), |why| {
                Err(proxmox::ProxmoxReadError::Late(why))
            })
            .await
            .map_or_else(|why| Collected::Absent(why.to_string()), Collected::Present)
        }
        None => Collected::NotApplicable(format!("no `proxmox` section in {}", env.file.display())),
    }
}

/// The Proxmox state, with the VMs matched to `nodes`.
pub fn proxmox_place(
    read: Collected<proxmox::Read>,
    nodes: Option<&[std::sync::Arc<k8s_openapi::api::core::v1::Node>]>,
) -> Collected<crate::state::ProxmoxState> {
    match read {
        Collected::Present(read) => Collected::Present(proxmox::place(read, nodes)),
        Collected::Absent(why) => Collected::Absent(why),
        Collected::NotApplicable(why) => Collected::NotApplicable(why),
    }
}

/// Gate 4's evidence: the newest chaos report of the environment under `reports`.
pub fn chaos_report(state: &mut State, env: &Environment, reports: &std::path::Path) {
    state.chaos_report = newest_chaos_report(env, reports);
}

/// The newest chaos report of the environment under `reports`, or why there is none.
pub fn newest_chaos_report(
    env: &Environment,
    reports: &std::path::Path,
) -> Collected<crate::state::ChaosEvidence> {
    match crate::report_files::newest_chaos(reports, &env.name) {
        Ok(Some(evidence)) => Collected::Present(evidence),
        Ok(None) => Collected::NotApplicable(format!(
            "no chaos report for {} under {}",
            env.name,
            reports.display()
        )),
        Err(err) => Collected::Absent(format!("the newest chaos report: {err}")),
    }
}

#[cfg(test)]
mod live_tests {
    use super::*;

    #[tokio::test]
    async fn the_collector_reads_through_the_client_it_is_given_and_builds_none_of_its_own() {
        let config = Config::load(
            &std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("gates"),
            &[],
        )
        .unwrap();
        let mut env = crate::checks::testing::env();
        // A kubeconfig the collector would fail on differently, were it to build a client.
        env.kube.kubeconfig = Some("/nonexistent/kubeconfig".into());
        let given = Err(kube::KubeError::Deadline("the run's client: none".into()));
        let state = live_with(&config, &env, &given).await;
        // The given client's error is the run's one reason, said once; each list refers to it.
        assert_eq!(state.sources_down.len(), 1);
        assert_eq!(state.sources_down[0].reason, "the run's client: none");
        assert!(state.nodes.present().is_none() && state.pods.present().is_none());
        assert!(
            matches!(&state.nodes, Collected::Absent(why) if why.starts_with("the Kubernetes API cannot be used (its deadline passed;")),
            "{:?}",
            state.nodes
        );
    }
}
