//! Events on the probes' timeline: what the harness did (VMs stopped and started) and what
//! the cluster did, seen by polling the API every sample interval (node NotReady and Ready
//! again, lease holder changes, protected pods replaced).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gates_core::state::Pod;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

use crate::checks::replicated_controller::Params as Controller;
use crate::cluster::{node_name, node_ready, selects};
use crate::hostloss::lineage::Lineage;

pub use gates_core::record::event::Event;

/// The run's events, appended by the harness and by the watcher.
#[derive(Debug, Clone, Default)]
pub struct Events {
    list: Arc<Mutex<Vec<Event>>>,
}

impl Events {
    pub fn push(&self, at: Duration, kind: &str, subject: &str, detail: impl Into<String>) {
        self.push_event(Event {
            at,
            kind: kind.to_string(),
            subject: subject.to_string(),
            detail: detail.into(),
            lineage: None,
        });
    }

    pub fn push_event(&self, event: Event) {
        if let Ok(mut list) = self.list.lock() {
            list.push(event);
        }
    }

    /// Sorted by time.
    pub fn all(&self) -> Vec<Event> {
        let mut all = self.list.lock().map(|l| l.clone()).unwrap_or_default();
        all.sort_by_key(|e| e.at);
        all
    }
}

/// A watched pod: its controller, `namespace/name on node`, and its lineage.
type SeenPod = (String, String, Option<Lineage>);

/// What the watcher saw last, to report changes only.
#[derive(Debug, Default)]
struct Seen {
    ready: Option<BTreeMap<String, bool>>,
    holders: Option<BTreeMap<String, String>>,
    pods: Option<BTreeMap<String, SeenPod>>,
    api_down: bool,
}

/// Poll the API every `interval` until `stop`; record changes into `events`.
pub async fn watch(
    client: kube::Client,
    controllers: Vec<Controller>,
    origin: Instant,
    interval: Duration,
    events: Events,
    mut stop: watch::Receiver<bool>,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut seen = Seen::default();
    loop {
        tokio::select! {
            biased;
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
            }
            _ = ticker.tick() => {
                let at = origin.elapsed();
                let nodes_api = Api::<Node>::all(client.clone());
                let leases_api = Api::<Lease>::all(client.clone());
                let pods_api = Api::<Pod>::all(client.clone());
                let params = ListParams::default();
                let poll = tokio::time::timeout(interval.max(Duration::from_secs(1)) * 2, async {
                    tokio::join!(
                        nodes_api.list(&params),
                        leases_api.list(&params),
                        pods_api.list(&params),
                    )
                })
                .await;
                match poll {
                    Ok((Ok(nodes), Ok(leases), Ok(pods))) => {
                        if seen.api_down {
                            events.push(at, "api-answers-again", "watcher", "");
                            seen.api_down = false;
                        }
                        nodes_changed(&mut seen, &nodes.items, at, &events);
                        leases_changed(&mut seen, &leases.items, at, &events);
                        pods_changed(&mut seen, &pods.items, &controllers, at, &events);
                    }
                    _ => {
                        if !seen.api_down {
                            events.push(at, "api-unanswered", "watcher", "the API did not answer the watcher's lists");
                            seen.api_down = true;
                        }
                    }
                }
            }
        }
    }
}

fn nodes_changed(seen: &mut Seen, nodes: &[Node], at: Duration, events: &Events) {
    let now: BTreeMap<String, bool> = nodes
        .iter()
        .map(|n| (node_name(n).to_string(), node_ready(n)))
        .collect();
    if let Some(before) = &seen.ready {
        for (name, ready) in &now {
            if before.get(name) != Some(ready) {
                let kind = if *ready {
                    "node-ready"
                } else {
                    "node-not-ready"
                };
                events.push(at, kind, name, "");
            }
        }
    }
    seen.ready = Some(now);
}

fn leases_changed(seen: &mut Seen, leases: &[Lease], at: Duration, events: &Events) {
    let now: BTreeMap<String, String> = leases
        .iter()
        .filter(|l| {
            // Node heartbeats change every few seconds and say nothing about failover.
            l.metadata.namespace.as_deref() != Some("kube-node-lease")
        })
        .map(|l| {
            (
                format!(
                    "{}/{}",
                    l.metadata.namespace.as_deref().unwrap_or_default(),
                    l.metadata.name.as_deref().unwrap_or_default()
                ),
                l.spec
                    .as_ref()
                    .and_then(|s| s.holder_identity.clone())
                    .unwrap_or_default(),
            )
        })
        .collect();
    if let Some(before) = &seen.holders {
        for (name, holder) in &now {
            if let Some(old) = before.get(name)
                && old != holder
            {
                let shown = |h: &str| {
                    if h.is_empty() {
                        "nobody".to_string()
                    } else {
                        h.to_string()
                    }
                };
                events.push(
                    at,
                    "lease-holder-changed",
                    name,
                    format!("{} -> {}", shown(old), shown(holder)),
                );
            }
        }
    }
    seen.holders = Some(now);
}

fn pods_changed(
    seen: &mut Seen,
    pods: &[Pod],
    controllers: &[Controller],
    at: Duration,
    events: &Events,
) {
    // uid -> (controller, namespace/name on node, lineage)
    let now: BTreeMap<String, SeenPod> = pods
        .iter()
        .filter_map(|p| {
            let c = controllers.iter().find(|c| selects(c, p))?;
            let uid = p.metadata.uid.clone()?;
            let node = p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_else(|| "unscheduled".into());
            Some((
                uid,
                (
                    c.name.clone(),
                    format!(
                        "{}/{} on {node}",
                        p.metadata.namespace.as_deref().unwrap_or_default(),
                        p.metadata.name.as_deref().unwrap_or_default()
                    ),
                    Lineage::of(p),
                ),
            ))
        })
        .collect();
    if let Some(before) = &seen.pods {
        let old: BTreeSet<&String> = before.keys().collect();
        let new: BTreeSet<&String> = now.keys().collect();
        let pod_event = |kind: &str, (controller, pod, lineage): &SeenPod| Event {
            at,
            kind: kind.to_string(),
            subject: controller.clone(),
            detail: pod.clone(),
            lineage: lineage.clone(),
        };
        for uid in old.difference(&new) {
            events.push_event(pod_event("pod-removed", &before[*uid]));
        }
        for uid in new.difference(&old) {
            events.push_event(pod_event("pod-created", &now[*uid]));
        }
    }
    seen.pods = Some(now);
}
