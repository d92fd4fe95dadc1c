//! Ground truth: what really happened in the lab and when, so tests can compare what a
//! harness measured with reality. Times are simulated seconds since start (and the matching
//! real seconds: simulated / speed).

use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Clone, Serialize)]
pub struct TruthEvent {
    /// Simulated seconds since the lab started.
    pub sim_seconds: f64,
    /// Real seconds since the lab started.
    pub real_seconds: f64,
    /// Simulated wall-clock time (RFC 3339).
    pub at: String,
    /// What happened, e.g. `vm-stopped`, `node-not-ready`, `lease-moved`, `quorum-lost`.
    pub kind: String,
    /// The environment, when the event belongs to one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// The object: a VM, node, lease, pod or host name.
    pub subject: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Outage {
    pub start_sim_seconds: f64,
    pub start_real_seconds: f64,
    /// None while the outage is still going on.
    pub end_sim_seconds: Option<f64>,
    pub end_real_seconds: Option<f64>,
}

impl Outage {
    pub fn duration_sim(&self) -> Option<f64> {
        self.end_sim_seconds.map(|e| e - self.start_sim_seconds)
    }
}

/// One thing a client can probe: the API VIP of an environment or one ingress host name.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// `api` or `ingress`.
    pub kind: String,
    pub env: String,
    /// URL a client probes (`https://127.S.2.k:6443`, `http://127.S.3.k:8080/`).
    pub url: String,
    /// The Host header for ingress targets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub outages: Vec<Outage>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct GroundTruth {
    pub scenario: String,
    pub speed: f64,
    pub start: String,
    pub events: Vec<TruthEvent>,
    /// Keyed by `api/<env>` or `ingress/<env>/<host>`.
    pub targets: BTreeMap<String, Target>,
}

impl GroundTruth {
    pub fn push(
        &mut self,
        sim: Duration,
        at: String,
        kind: &str,
        env: Option<&str>,
        subject: &str,
        detail: String,
    ) {
        tracing::info!(target: "gates_lab::truth", sim = sim.as_secs_f64(), kind, env, subject, detail = %detail);
        self.events.push(TruthEvent {
            sim_seconds: round3(sim.as_secs_f64()),
            real_seconds: round3(sim.as_secs_f64() / self.speed),
            at,
            kind: kind.to_string(),
            env: env.map(String::from),
            subject: subject.to_string(),
            detail,
        });
    }

    /// Record that a target became unavailable (`up == false`) or available again.
    pub fn set_available(&mut self, key: &str, up: bool, sim: Duration) {
        let speed = self.speed;
        let Some(t) = self.targets.get_mut(key) else {
            return;
        };
        let open = t
            .outages
            .last()
            .is_some_and(|o| o.end_sim_seconds.is_none());
        let s = round3(sim.as_secs_f64());
        match (up, open) {
            (false, false) => t.outages.push(Outage {
                start_sim_seconds: s,
                start_real_seconds: round3(s / speed),
                end_sim_seconds: None,
                end_real_seconds: None,
            }),
            (true, true) => {
                if let Some(o) = t.outages.last_mut() {
                    o.end_sim_seconds = Some(s);
                    o.end_real_seconds = Some(round3(s / speed));
                }
            }
            _ => {}
        }
    }

    pub fn events_of(&self, kind: &str) -> Vec<&TruthEvent> {
        self.events.iter().filter(|e| e.kind == kind).collect()
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
