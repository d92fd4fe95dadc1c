//! Everything that watches a run at once: one sampler per probe, the API event watcher and
//! the VIP watcher, started together at the timeline's zero and stopped together before the
//! verdicts. In between, what the probes saw so far is read live (progress, budget, steady
//! state).

use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::events::{self, Events};
use super::probes::Probe;
use super::sampler::{self, Live};
use super::split_brain::{self, BrainLog, BrainWatch};
use super::timeline::{Observation, Sample};
use super::vip::{self, VipWatch};
use crate::chaos::budget::judge;
use crate::chaos::context::Ctx;
use crate::chaos::plan::timings::Timings;
use crate::chaos::reporters::{ProbeLine, RunEvent};
use crate::checks::replicated_controller::Params as Controller;
use crate::verdict::Verdict;

/// The Kubernetes API events to watch: through this client, for these controllers' pods.
pub struct ApiWatch {
    pub client: kube::Client,
    pub controllers: Vec<Controller>,
}

pub struct Observers<'p> {
    probes: &'p [Probe],
    lives: Vec<Live>,
    samplers: Vec<JoinHandle<Vec<Sample>>>,
    watchers: Vec<JoinHandle<()>>,
    stop: watch::Sender<bool>,
}

impl<'p> Observers<'p> {
    pub fn start(
        ctx: &Ctx<'_>,
        probes: &'p [Probe],
        timings: &Timings,
        api: Option<ApiWatch>,
        vip: Option<VipWatch>,
        events: &Events,
    ) -> Observers<'p> {
        let (stop, stop_rx) = watch::channel(false);
        let mut lives = Vec::new();
        let mut samplers = Vec::new();
        for probe in probes {
            let live: Live = Arc::default();
            let sample = probe.sample.clone();
            samplers.push(tokio::spawn(sampler::sample(
                ctx.origin,
                timings.interval,
                timings.timeout,
                stop_rx.clone(),
                live.clone(),
                move || sample(),
            )));
            lives.push(live);
        }
        let mut watchers = Vec::new();
        if let Some(api) = api {
            watchers.push(tokio::spawn(events::watch(
                api.client,
                api.controllers,
                ctx.origin,
                timings.interval,
                events.clone(),
                stop_rx.clone(),
            )));
        }
        if let Some(vip) = vip {
            watchers.push(tokio::spawn(vip::watch(
                vip,
                ctx.origin,
                timings.interval,
                timings.timeout.mul_f64(0.75),
                events.clone(),
                stop_rx,
            )));
        }
        Observers {
            probes,
            lives,
            samplers,
            watchers,
            stop,
        }
    }

    /// Watch for a split brain too (a partition run), into the log returned; stopped with
    /// the rest.
    pub fn watch_split_brain(
        &mut self,
        ctx: &Ctx<'_>,
        timings: &Timings,
        brain: BrainWatch,
    ) -> BrainLog {
        let log = BrainLog::default();
        self.watchers.push(tokio::spawn(split_brain::watch(
            brain,
            ctx.origin,
            timings.interval,
            timings.timeout.mul_f64(0.75),
            log.clone(),
            self.stop.subscribe(),
        )));
        log
    }

    /// The probes' states to the reporters, with a phase line first when given.
    pub fn show(&self, ctx: &Ctx<'_>, phase: Option<&str>) {
        if let Some(phase) = phase {
            ctx.phase(phase);
        }
        ctx.out.emit(RunEvent::Probes(&self.lines()));
    }

    /// Each probe's line for the progress display, from the samples so far.
    pub fn lines(&self) -> Vec<ProbeLine> {
        self.probes
            .iter()
            .zip(&self.lives)
            .map(|(probe, live)| {
                let samples = snapshot(live);
                let outcome = judge(&probe.name, &samples, probe.budget);
                let last = samples.iter().max_by_key(|s| s.at).map(|s| &s.observation);
                ProbeLine {
                    name: probe.name.clone(),
                    state: match last {
                        Some(Observation::Up) => "up",
                        Some(Observation::Down(_)) => "DOWN",
                        Some(Observation::Unknown(_)) => "unknown",
                        None => "waiting",
                    },
                    longest: outcome.longest,
                    total: outcome.total,
                    budget_longest: outcome.budget_longest,
                    budget_total: outcome.budget_total,
                }
            })
            .collect()
    }

    /// The first probe whose outages so far are over its budget: its name and why.
    pub fn over_budget(&self) -> Option<(String, String)> {
        self.probes
            .iter()
            .zip(&self.lives)
            .find_map(|(probe, live)| {
                let outcome = judge(&probe.name, &snapshot(live), probe.budget);
                (outcome.finding.verdict == Verdict::Fail)
                    .then(|| (probe.name.clone(), outcome.finding.summary))
            })
    }

    /// Probes that are down now, or took no sample: not the steady state a fault needs.
    pub fn unsteady(&self) -> Vec<String> {
        self.probes
            .iter()
            .zip(&self.lives)
            .filter_map(|(probe, live)| {
                let samples = snapshot(live);
                match samples.iter().max_by_key(|s| s.at).map(|s| &s.observation) {
                    Some(Observation::Down(reason)) => {
                        Some(format!("{} is down: {reason}", probe.name))
                    }
                    None => Some(format!("{} took no sample", probe.name)),
                    _ => None,
                }
            })
            .collect()
    }

    /// Stop every watcher; every probe's samples, in the probes' order.
    pub async fn stop(self) -> Vec<Vec<Sample>> {
        let _ = self.stop.send(true);
        let mut samples = Vec::new();
        for handle in self.samplers {
            samples.push(handle.await.unwrap_or_default());
        }
        for handle in self.watchers {
            let _ = handle.await;
        }
        samples
    }
}

fn snapshot(live: &Live) -> Vec<Sample> {
    live.lock().map(|l| l.clone()).unwrap_or_default()
}
