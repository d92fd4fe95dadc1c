//! Continuous sampling: a probe is sent on a fixed schedule, each send in its own task so a
//! slow or hanging request never delays the next one, and each sample is stamped with its
//! send time on the run's timeline. Every sample is also pushed to a shared live list, so
//! progress and early budget verdicts can follow the run while it goes on.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior};

use crate::chaos::timeline::{Observation, Sample};

/// The samples of one probe so far, in the order they completed.
pub type Live = Arc<Mutex<Vec<Sample>>>;

/// Sample `probe` every `interval` until `stop` turns true; each attempt may take `timeout`.
pub async fn sample<F, Fut>(
    origin: Instant,
    interval: Duration,
    timeout: Duration,
    mut stop: watch::Receiver<bool>,
    live: Live,
    probe: F,
) -> Vec<Sample>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Observation> + Send + 'static,
{
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut in_flight = JoinSet::new();
    let mut samples = Vec::new();
    loop {
        tokio::select! {
            biased;
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    break;
                }
            }
            _ = ticker.tick() => {
                let at = origin.elapsed();
                let attempt = probe();
                in_flight.spawn(async move {
                    let observation = match tokio::time::timeout(timeout, attempt).await {
                        Ok(observation) => observation,
                        Err(_) => Observation::Down(format!("no answer within {:.1}s", timeout.as_secs_f64())),
                    };
                    Sample { at, observation }
                });
            }
            Some(done) = in_flight.join_next(), if !in_flight.is_empty() => {
                if let Ok(sample) = done {
                    publish(&live, &sample);
                    samples.push(sample);
                }
            }
        }
    }
    while let Some(done) = in_flight.join_next().await {
        if let Ok(sample) = done {
            publish(&live, &sample);
            samples.push(sample);
        }
    }
    samples.sort_by_key(|s| s.at);
    samples
}

fn publish(live: &Live, sample: &Sample) {
    if let Ok(mut list) = live.lock() {
        list.push(sample.clone());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn samples_on_schedule_even_when_a_probe_hangs() {
        let origin = Instant::now();
        let (stop_tx, stop_rx) = watch::channel(false);
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let live: Live = Arc::default();
        let sampler = tokio::spawn(sample(
            origin,
            Duration::from_millis(100),
            Duration::from_millis(300),
            stop_rx,
            live.clone(),
            move || {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                async move {
                    if n == 2 {
                        // The third probe hangs past its timeout.
                        tokio::time::sleep(Duration::from_secs(10)).await;
                    }
                    Observation::Up
                }
            },
        ));
        tokio::time::sleep(Duration::from_millis(950)).await;
        stop_tx.send(true).unwrap();
        let samples = sampler.await.unwrap();
        assert_eq!(samples.len(), 10, "{samples:?}");
        assert_eq!(
            live.lock().unwrap().len(),
            10,
            "every sample is published live"
        );
        let hung = &samples[2];
        assert_eq!(hung.at, Duration::from_millis(200));
        assert_eq!(
            hung.observation,
            Observation::Down("no answer within 0.3s".into())
        );
        assert!(
            samples
                .iter()
                .enumerate()
                .all(|(i, s)| s.at == Duration::from_millis(100 * i as u64))
        );
    }
}
