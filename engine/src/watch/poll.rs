//! The sources that cannot be watched, read at an interval: the Talos API, the API endpoint,
//! Proxmox, the measured load, the newest chaos report and the cluster's identity (each with
//! the collector a one-shot check uses, so a watch and a check read them alike).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::shared::{Polled, Shared};
use crate::collect;
use crate::config::{Config, Environment};

/// Read every polled source at once, then again every `interval`, until the task is dropped.
pub async fn run(
    config: Config,
    env: Environment,
    kube: Option<kube::Client>,
    reports: PathBuf,
    interval: Duration,
    shared: Arc<Shared>,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        shared.polled(once(&config, &env, kube.as_ref(), &reports).await);
    }
}

/// One round of reads.
pub async fn once(
    config: &Config,
    env: &Environment,
    kube: Option<&kube::Client>,
    reports: &std::path::Path,
) -> Polled {
    let (talos, api, proxmox, load, identity) = tokio::join!(
        collect::talos_part(env),
        collect::api_part(env),
        collect::proxmox_read(config, env),
        collect::load_part(env, chrono::Utc::now()),
        collect::deadline::within(
            env,
            "reading the cluster identity",
            collect::identity::live(env, kube),
            |_| collect::identity::offline(env)
        ),
    );
    Polled {
        talos: Some(talos),
        api: Some(api),
        proxmox: Some(proxmox),
        load: Some(load),
        chaos_report: Some(collect::newest_chaos_report(env, reports)),
        identity: Some(identity),
    }
}
