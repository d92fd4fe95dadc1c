//! Collectors: the only code that talks to a system for checks. Each fills a [`State`]
//! once; checks then evaluate it without I/O.

pub mod api;
pub mod kinds;
pub mod kube;
pub mod proxmox;
pub mod raw;
pub mod snapshot;
pub mod snapshot_writer;
pub mod talos;

use crate::config::{Config, Environment};
use crate::state::{Collected, State};

/// Everything live: the Kubernetes lists and, when the environment configures them, the
/// Talos API, the API endpoint and Proxmox, all at once (Proxmox waits for the node list
/// it maps VMs onto).
pub async fn live(config: &Config, env: &Environment) -> State {
    let talos = async {
        match &env.talos {
            Some(access) => talos::collect(env, access)
                .await
                .map_or_else(Collected::Absent, Collected::Present),
            None => {
                Collected::NotApplicable(format!("no `talos` section in {}", env.file.display()))
            }
        }
    };
    let api = async {
        match &env.api {
            Some(spec) => Collected::Present(api::collect(env, &spec.endpoint).await),
            None => Collected::NotApplicable(format!("no `api` section in {}", env.file.display())),
        }
    };
    let (mut state, talos, api) = tokio::join!(kube::collect(env), talos, api);
    state.talos = talos;
    state.api = api;
    state.proxmox = match &env.proxmox {
        Some(access) => proxmox::collect(
            config,
            env,
            access,
            state.nodes.present().map(Vec::as_slice),
        )
        .await
        .map_or_else(Collected::Absent, Collected::Present),
        None => Collected::NotApplicable(format!("no `proxmox` section in {}", env.file.display())),
    };
    state
}

/// Gate 4's evidence: the newest chaos report of the environment under `reports`.
pub fn chaos_report(state: &mut State, env: &Environment, reports: &std::path::Path) {
    state.chaos_report = match crate::chaos::report::newest(reports, &env.name) {
        Ok(Some(summary)) => Collected::Present(summary),
        Ok(None) => Collected::NotApplicable(format!(
            "no chaos report for {} under {}",
            env.name,
            reports.display()
        )),
        Err(err) => Collected::Absent(format!("the newest chaos report: {err}")),
    };
}

/// Offline: what the snapshot files hold, with the live-only parts marked as such.
pub fn offline(mut state: State) -> State {
    let reason = "an offline snapshot run does not read it".to_string();
    state.talos = Collected::NotApplicable(format!("Talos: {reason}"));
    state.proxmox = Collected::NotApplicable(format!("Proxmox: {reason}"));
    state.api = Collected::NotApplicable(format!("the API endpoint: {reason}"));
    state
}
