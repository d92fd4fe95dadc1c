//! etcd leader changes the etcd probe saw, named by member, onto the timeline.

use std::collections::BTreeMap;

use tokio::time::Instant;

use super::events::Events;
use super::probes::LeaderLog;
use crate::state::State;

pub fn leader_events(leaders: &LeaderLog, state: &State, origin: Instant, events: &Events) {
    let names: BTreeMap<String, String> = state
        .talos
        .present()
        .map(|t| {
            t.endpoints
                .iter()
                .filter_map(|e| e.view.as_ref().ok())
                .flat_map(|v| v.members.iter())
                .map(|m| (m.id.clone(), m.hostname.clone()))
                .collect()
        })
        .unwrap_or_default();
    let name = |id: u64| {
        let hex = format!("{id:016x}");
        names.get(&hex).cloned().unwrap_or(hex)
    };
    let log = leaders.lock().map(|l| l.clone()).unwrap_or_default();
    for pair in log.windows(2) {
        let ((_, from), (at, to)) = (pair[0], pair[1]);
        events.push(
            at.saturating_duration_since(origin),
            "etcd-leader-changed",
            "etcd",
            format!("{} -> {}", name(from), name(to)),
        );
    }
}
