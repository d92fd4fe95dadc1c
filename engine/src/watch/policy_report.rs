//! `gates watch ENV --policy-report`: the environment's ClusterPolicyReport kept as current as
//! the served verdicts. A task of its own reads the newest published evaluation, so a slow or
//! refusing API server never delays an evaluation or what is served; one write is in flight at
//! a time, and evaluations published meanwhile are skipped for the newest. The report is
//! written once the watch is ready, then again only when a trial's verdict or message changed
//! since the last report written (an evaluation that changed nothing a reader of the report
//! sees would only churn its resourceVersion). A write that fails does not stop the watch: it
//! is tried again every `retry` and after each evaluation, and the terminal hears of it once
//! when writes start failing (again only if they fail for another reason, which names another
//! fix) and once when they succeed again.

use std::mem::Discriminant;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::Published;
use crate::config::{Config, Environment};
use crate::policy_report::{PolicyReportError, Writer};
use crate::record::CheckRecord;
use gates_core::verdict::Verdict;

/// How the writes have gone, as `/metrics` serves it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStatus {
    /// Whether the last write succeeded; `None` before the first was tried.
    pub up: Option<bool>,
    /// Writes that succeeded since the watch started.
    pub written: u64,
    /// Writes that failed since the watch started.
    pub failed: u64,
}

/// What the terminal is told: the changes in how writes go, never each write.
#[derive(Debug)]
pub enum WriteEvent {
    /// Written for the first time (`recovered: false`) or the first time after failing.
    Written { name: String, recovered: bool },
    /// A write failed after one that did not, or failed for another reason than the last.
    Failing(PolicyReportError),
}

/// Each trial's name, verdict and message: what a reader of the report would see change.
pub type Verdicts = Vec<(String, Verdict, String)>;

/// The verdicts of `record`, in its order.
pub fn verdicts(record: &CheckRecord) -> Verdicts {
    record
        .trials
        .iter()
        .map(|t| (t.name.clone(), t.finding.verdict, t.finding.summary.clone()))
        .collect()
}

/// What the writer remembers between writes, apart from the writing (so the decisions are
/// tested without a cluster).
#[derive(Debug, Default)]
pub struct Memory {
    /// The verdicts of the last report written.
    written: Option<Verdicts>,
    /// Why the last write failed, while writes fail.
    failing: Option<Discriminant<PolicyReportError>>,
    pub status: WriteStatus,
}

impl Memory {
    /// Whether an evaluation with these verdicts is to be written: the watch is ready, and
    /// they are not what the last report written holds (a failed write is no report: the same
    /// verdicts are wanted again).
    pub fn wants(&self, ready: bool, verdicts: &Verdicts) -> bool {
        ready && self.written.as_ref() != Some(verdicts)
    }

    /// Take in the outcome of writing `verdicts`; what the terminal is to be told, if anything.
    pub fn outcome(
        &mut self,
        verdicts: Verdicts,
        result: Result<String, PolicyReportError>,
    ) -> Option<WriteEvent> {
        match result {
            Ok(name) => {
                let first = self.written.is_none();
                let recovered = self.failing.take().is_some();
                self.written = Some(verdicts);
                self.status.up = Some(true);
                self.status.written += 1;
                (first || recovered).then_some(WriteEvent::Written { name, recovered })
            }
            Err(err) => {
                let why = std::mem::discriminant(&err);
                let news = self.failing != Some(why);
                self.failing = Some(why);
                self.status.up = Some(false);
                self.status.failed += 1;
                news.then_some(WriteEvent::Failing(err))
            }
        }
    }

    pub fn failing(&self) -> bool {
        self.failing.is_some()
    }
}

/// Write `env`'s report from the evaluations on `newest` until the task is dropped (or the
/// watch stops publishing), with `status` and `events` saying how it goes.
pub async fn run(
    config: Config,
    env: Environment,
    newest: watch::Receiver<Option<Arc<Published>>>,
    retry: Duration,
    status: watch::Sender<WriteStatus>,
    events: mpsc::UnboundedSender<WriteEvent>,
) {
    let cluster = Cluster {
        config,
        env,
        writer: None,
    };
    follow(newest, retry, cluster, status, events).await;
}

/// Where the loop writes: the cluster, or a test's stand-in.
trait Sink {
    fn write(
        &mut self,
        published: &Published,
    ) -> impl Future<Output = Result<String, PolicyReportError>> + Send;
}

/// The environment's cluster.
struct Cluster {
    config: Config,
    env: Environment,
    /// Made at the first write (and again after it could not be made), not before: a
    /// kubeconfig that cannot be used is a failed write, said and retried like any other.
    writer: Option<Writer>,
}

impl Sink for Cluster {
    async fn write(&mut self, published: &Published) -> Result<String, PolicyReportError> {
        let made = match self.writer.take() {
            Some(made) => made,
            None => Writer::new(&self.config, &self.env).await?,
        };
        let result = made.write(&published.record, published.at).await;
        self.writer = Some(made);
        result
    }
}

/// The writer's loop, with where it writes given (a test's stand-in, or the cluster).
async fn follow(
    mut newest: watch::Receiver<Option<Arc<Published>>>,
    retry: Duration,
    mut sink: impl Sink,
    status: watch::Sender<WriteStatus>,
    events: mpsc::UnboundedSender<WriteEvent>,
) {
    let mut memory = Memory::default();
    loop {
        // Only the newest evaluation: those published during the last write are skipped.
        let published = newest.borrow_and_update().clone();
        if let Some(published) = published {
            let now = verdicts(&published.record);
            if memory.wants(published.ready, &now) {
                let result = sink.write(&published).await;
                if let Some(event) = memory.outcome(now, result) {
                    let _ = events.send(event);
                }
                status.send_replace(memory.status);
            }
        }
        tokio::select! {
            changed = newest.changed() => if changed.is_err() {
                return;
            },
            // While failing, the same verdicts again after a while: a report that cannot be
            // written now (the CRDs not installed yet, the role not bound) is written once it
            // can be, even when nothing changes.
            _ = tokio::time::sleep(retry), if memory.failing() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdicts(list: &[(&str, Verdict, &str)]) -> Verdicts {
        list.iter()
            .map(|(n, v, m)| (n.to_string(), *v, m.to_string()))
            .collect()
    }

    fn not_served() -> PolicyReportError {
        PolicyReportError::NotServed {
            name: "gates-lab".into(),
        }
    }

    fn forbidden() -> PolicyReportError {
        PolicyReportError::Forbidden {
            name: "gates-lab".into(),
            message: "no".into(),
        }
    }

    #[test]
    fn nothing_is_written_before_the_watch_is_ready_and_then_only_what_changed() {
        let mut memory = Memory::default();
        let first = verdicts(&[("a", Verdict::Pass, "ok")]);
        assert!(!memory.wants(false, &first));
        assert!(memory.wants(true, &first));
        memory.outcome(first.clone(), Ok("gates-lab".into()));
        // The same verdicts and messages: no write.
        assert!(!memory.wants(true, &first));
        // A verdict changed, or only a message: a write.
        assert!(memory.wants(true, &verdicts(&[("a", Verdict::Fail, "ok")])));
        assert!(memory.wants(true, &verdicts(&[("a", Verdict::Pass, "ok, 3 of 3")])));
        // A trial more (or fewer) changes what the report holds too.
        assert!(memory.wants(
            true,
            &verdicts(&[("a", Verdict::Pass, "ok"), ("b", Verdict::Skip, "")])
        ));
    }

    #[test]
    fn a_failed_write_is_wanted_again_with_the_same_verdicts() {
        let mut memory = Memory::default();
        let now = verdicts(&[("a", Verdict::Pass, "ok")]);
        memory.outcome(now.clone(), Err(not_served()));
        assert!(memory.failing());
        assert!(memory.wants(true, &now));
        memory.outcome(now.clone(), Ok("gates-lab".into()));
        assert!(!memory.failing());
        assert!(!memory.wants(true, &now));
    }

    #[test]
    fn the_terminal_hears_of_the_first_write_of_failing_once_per_reason_and_of_recovering() {
        let mut memory = Memory::default();
        let now = verdicts(&[("a", Verdict::Pass, "ok")]);
        let said = |event: Option<WriteEvent>| match event {
            None => "nothing".to_string(),
            Some(WriteEvent::Written { recovered, .. }) => {
                format!("written, recovered {recovered}")
            }
            Some(WriteEvent::Failing(err)) => format!("failing: {err}"),
        };
        assert_eq!(
            said(memory.outcome(now.clone(), Ok("gates-lab".into()))),
            "written, recovered false"
        );
        assert_eq!(
            said(memory.outcome(now.clone(), Ok("gates-lab".into()))),
            "nothing"
        );
        assert!(said(memory.outcome(now.clone(), Err(not_served()))).contains("install the"));
        assert_eq!(
            said(memory.outcome(now.clone(), Err(not_served()))),
            "nothing"
        );
        assert!(said(memory.outcome(now.clone(), Err(forbidden()))).contains("forbidden"));
        assert_eq!(
            said(memory.outcome(now.clone(), Err(forbidden()))),
            "nothing"
        );
        assert_eq!(
            said(memory.outcome(now.clone(), Ok("gates-lab".into()))),
            "written, recovered true"
        );
        assert_eq!(
            memory.status,
            WriteStatus {
                up: Some(true),
                written: 3,
                failed: 4
            }
        );
        // Failing again after recovering is news again, for the same reason as before.
        assert!(said(memory.outcome(now, Err(forbidden()))).contains("forbidden"));
        assert_eq!(memory.status.up, Some(false));
    }

    /// An evaluation whose one trial has `verdict` and `message`.
    fn published(evaluation: u64, ready: bool, verdict: Verdict, message: &str) -> Arc<Published> {
        use crate::runner::{Tally, TrialResult};
        let trials = vec![TrialResult {
            name: "gate1::lab::a".into(),
            gate: 1,
            kind: "a".into(),
            instance: None,
            finding: gates_core::verdict::Finding {
                verdict,
                summary: message.into(),
                evidence: Vec::new(),
                warnings: Vec::new(),
            },
            duration: Duration::ZERO,
        }];
        let at = chrono::Utc::now();
        Arc::new(Published {
            record: CheckRecord {
                schema_version: gates_core::schema::SCHEMA_VERSION,
                environment: "lab".into(),
                provenance: Some(crate::state::provenance::Provenance {
                    environment: "lab".into(),
                    collected_at: at,
                    cluster: Default::default(),
                    topology: Default::default(),
                }),
                decision: "adr-007".into(),
                started_at: at,
                source: crate::state::Source::Live {
                    context: "lab".into(),
                },
                collect_time: Duration::ZERO,
                tally: Tally::of(&trials),
                gates: Vec::new(),
                trials,
                promotion: None,
            },
            sources: Vec::new(),
            ready,
            evaluation,
            reevaluated: Vec::new(),
            evaluated_in: Default::default(),
            at,
        })
    }

    /// A write that records which evaluation it was given and waits for `release` before it
    /// answers (failing while `fail` says so), and the loop following `newest` with it.
    struct Harness {
        publish: watch::Sender<Option<Arc<Published>>>,
        written: Arc<std::sync::Mutex<Vec<u64>>>,
        release: Arc<tokio::sync::Semaphore>,
        fail: Arc<std::sync::atomic::AtomicBool>,
        status: watch::Receiver<WriteStatus>,
        events: mpsc::UnboundedReceiver<WriteEvent>,
        task: tokio::task::JoinHandle<()>,
    }

    struct Fake {
        written: Arc<std::sync::Mutex<Vec<u64>>>,
        release: Arc<tokio::sync::Semaphore>,
        fail: Arc<std::sync::atomic::AtomicBool>,
    }

    impl Sink for Fake {
        async fn write(&mut self, published: &Published) -> Result<String, PolicyReportError> {
            self.written.lock().unwrap().push(published.evaluation);
            self.release.acquire().await.unwrap().forget();
            if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
                Err(not_served())
            } else {
                Ok("gates-lab".to_string())
            }
        }
    }

    impl Harness {
        fn start() -> Harness {
            let (publish, newest) = watch::channel(None);
            let (status_tx, status) = watch::channel(WriteStatus::default());
            let (events_tx, events) = mpsc::unbounded_channel();
            let written = Arc::new(std::sync::Mutex::new(Vec::new()));
            let release = Arc::new(tokio::sync::Semaphore::new(0));
            let fail = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let write = Fake {
                written: written.clone(),
                release: release.clone(),
                fail: fail.clone(),
            };
            let task = tokio::spawn(follow(
                newest,
                Duration::from_secs(60),
                write,
                status_tx,
                events_tx,
            ));
            Harness {
                publish,
                written,
                release,
                fail,
                status,
                events,
                task,
            }
        }

        fn written(&self) -> Vec<u64> {
            self.written.lock().unwrap().clone()
        }

        /// Let the loop run until it waits again.
        async fn settle() {
            for _ in 0..20 {
                tokio::task::yield_now().await;
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn one_write_is_in_flight_and_the_evaluations_published_meanwhile_give_only_the_newest() {
        let mut h = Harness::start();
        // Not ready: nothing written.
        h.publish
            .send_replace(Some(published(0, false, Verdict::Error, "not read yet")));
        Harness::settle().await;
        assert_eq!(h.written(), Vec::<u64>::new());
        h.publish
            .send_replace(Some(published(1, true, Verdict::Pass, "ok")));
        Harness::settle().await;
        assert_eq!(h.written(), [1]);
        // While evaluation 1 is being written, three more come: no second write starts.
        for (evaluation, message) in [(2, "two"), (3, "three"), (4, "four")] {
            h.publish
                .send_replace(Some(published(evaluation, true, Verdict::Fail, message)));
            Harness::settle().await;
        }
        assert_eq!(h.written(), [1]);
        h.release.add_permits(1);
        Harness::settle().await;
        assert_eq!(h.written(), [1, 4]);
        h.release.add_permits(1);
        Harness::settle().await;
        assert_eq!(h.status.borrow().written, 2);
        // An evaluation that changed nothing in the report (its verdicts and messages are
        // the last written): no write, however long.
        h.publish
            .send_replace(Some(published(5, true, Verdict::Fail, "four")));
        Harness::settle().await;
        tokio::time::sleep(Duration::from_secs(600)).await;
        Harness::settle().await;
        assert_eq!(h.written(), [1, 4]);
        assert!(matches!(
            h.events.try_recv(),
            Ok(WriteEvent::Written {
                recovered: false,
                ..
            })
        ));
        assert!(h.events.try_recv().is_err());
        h.task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_write_is_tried_again_after_the_retry_interval_though_nothing_changed() {
        let mut h = Harness::start();
        h.fail.store(true, std::sync::atomic::Ordering::SeqCst);
        h.release.add_permits(2);
        h.publish
            .send_replace(Some(published(0, true, Verdict::Pass, "ok")));
        Harness::settle().await;
        assert_eq!(h.written(), [0]);
        assert_eq!(h.status.borrow().up, Some(false));
        assert!(matches!(h.events.try_recv(), Ok(WriteEvent::Failing(_))));
        tokio::time::sleep(Duration::from_secs(61)).await;
        Harness::settle().await;
        assert_eq!(h.written(), [0, 0]);
        // Failing again for the same reason: not said again.
        assert!(h.events.try_recv().is_err());
        h.fail.store(false, std::sync::atomic::Ordering::SeqCst);
        h.release.add_permits(1);
        tokio::time::sleep(Duration::from_secs(61)).await;
        Harness::settle().await;
        assert_eq!(h.written(), [0, 0, 0]);
        assert_eq!(
            *h.status.borrow(),
            WriteStatus {
                up: Some(true),
                written: 1,
                failed: 2
            }
        );
        assert!(matches!(
            h.events.try_recv(),
            Ok(WriteEvent::Written {
                recovered: true,
                ..
            })
        ));
        // Written: no more retries.
        tokio::time::sleep(Duration::from_secs(600)).await;
        Harness::settle().await;
        assert_eq!(h.written(), [0, 0, 0]);
        h.task.abort();
    }
}
