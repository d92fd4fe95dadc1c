//! One kind kept current, as client-go's reflector and kube-runtime's watcher keep it: list,
//! then watch from the list's `resourceVersion` with bookmarks, resume a watch that ended
//! from the last revision seen, list again when the server answers 410 Gone (the revision was
//! compacted away), and back off while the server cannot be reached. The Metrics API serves
//! no watch (its KEP 1013 was never built), so its kinds are listed again at the poll
//! interval instead.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures::TryStreamExt;
use kube::Client;
use kube::api::{ApiResource, DynamicObject, WatchEvent, WatchParams};
use kube::core::Resource;

use super::shared::Shared;
use crate::collect::kinds::Kind;
use crate::collect::kube::{KubeError, ListError, list_typed_at};
use crate::collect::registry::Keyed;

/// How long one watch request runs before the server ends it (client-go picks 5 to 10
/// minutes at random; kube-runtime 290 s): the watch is then resumed, not relisted.
pub const WATCH_SECONDS: u32 = 290;

/// How long a watch may say nothing before it is taken for dead: the API server's cacher
/// sends watchers that allow bookmarks one about every minute (`bookmarkFrequency`), so 90 s
/// of silence is a connection that no longer reaches it.
pub const SILENT_AT_MOST: Duration = Duration::from_secs(90);

/// The timings a feed keeps.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Between lists of a kind that cannot be watched, and between tries of a kind the
    /// cluster does not serve.
    pub interval: Duration,
    /// The first wait after a failure; doubled on each failure after it, up to `backoff_max`.
    pub backoff: Duration,
    pub backoff_max: Duration,
}

/// Whether the kind can be watched (the Metrics API serves no watch).
fn watchable(kind: Kind) -> bool {
    match kind {
        Kind::NodeMetrics | Kind::PodMetrics => false,
        Kind::Node
        | Kind::Pod
        | Kind::Deployment
        | Kind::DaemonSet
        | Kind::StatefulSet
        | Kind::PodDisruptionBudget
        | Kind::Service
        | Kind::Lease
        | Kind::L2AnnouncementPolicy
        | Kind::LonghornNode
        | Kind::LonghornVolume
        | Kind::LonghornReplica
        | Kind::LonghornSetting => true,
    }
}

/// A failure the kind itself answers with (not served, forbidden, a shape gates cannot
/// read): an answer about the cluster, kept as the kind's reason like a one-shot check keeps
/// it; anything else (no answer, credentials refused, a server error) is the feed broken.
fn is_answer(err: &KubeError) -> bool {
    match err {
        KubeError::List(list) => matches!(
            list,
            ListError::NotServed { .. }
                | ListError::Forbidden { .. }
                | ListError::Decode { .. }
                | ListError::NotAList { .. }
        ),
        KubeError::LaterPage { source, .. } => is_answer(source),
        KubeError::Kubeconfig { .. }
        | KubeError::DefaultKubeconfig { .. }
        | KubeError::Context { .. }
        | KubeError::InCluster(_)
        | KubeError::Client { .. }
        | KubeError::Deadline(_) => false,
    }
}

/// Waits that double after each failure, up to a bound, and start over after a success.
struct Backoff {
    timing: Timing,
    next: Duration,
}

impl Backoff {
    fn new(timing: Timing) -> Backoff {
        Backoff {
            timing,
            next: timing.backoff,
        }
    }

    async fn wait(&mut self) {
        tokio::time::sleep(self.next).await;
        self.next = (self.next * 2).min(self.timing.backoff_max);
    }

    fn reset(&mut self) {
        self.next = self.timing.backoff;
    }
}

/// How one watch request ended.
enum Ended {
    /// The server closed it (its timeout, a restart): resume from the last revision.
    Closed,
    /// 410 Gone: the revision is no longer kept; list again.
    Gone,
    /// It failed (after it was open, or before): back off, then resume.
    Failed { opened: bool, why: String },
}

/// Keep `kind` current in `shared` until the task is dropped.
pub async fn run(kind: Kind, client: Client, page_size: u32, timing: Timing, shared: Arc<Shared>) {
    let mut backoff = Backoff::new(timing);
    // When the kind was last known current, once its watch has ended: a feed that cannot
    // get it back has been out of date since then, not since the first retry failed.
    let mut current_until = None;
    loop {
        let revision = match list_typed_at(client.clone(), kind, page_size).await {
            Ok((objects, revision)) => {
                shared.listed(kind, Keyed::from_objects(objects));
                backoff.reset();
                current_until = None;
                revision
            }
            Err(err) if is_answer(&err) => {
                shared.answered(kind, err.to_string());
                tokio::time::sleep(timing.interval).await;
                continue;
            }
            Err(err) => {
                shared.broken(
                    kind,
                    current_until.unwrap_or_else(Utc::now),
                    &err.to_string(),
                );
                backoff.wait().await;
                continue;
            }
        };
        let Some(mut revision) = revision.filter(|_| watchable(kind)) else {
            tokio::time::sleep(timing.interval).await;
            continue;
        };
        // Watch, resuming after each end, until the revision is gone.
        loop {
            match watch_once(kind, &client, &mut revision, &shared).await {
                // Until it is open again the kind is not known current: a watch that cannot
                // be reopened goes stale from here.
                Ended::Closed => {
                    let until = Utc::now();
                    current_until = Some(until);
                    shared.broken(kind, until, "its watch ended and is being resumed");
                    backoff.reset();
                }
                Ended::Gone => {
                    let until = *current_until.get_or_insert_with(Utc::now);
                    shared.broken(
                        kind,
                        until,
                        "its revision was compacted away (410 Gone); listing it again",
                    );
                    break;
                }
                Ended::Failed { opened, why } => {
                    if opened {
                        current_until = Some(Utc::now());
                    }
                    let until = *current_until.get_or_insert_with(Utc::now);
                    shared.broken(kind, until, &why);
                    backoff.wait().await;
                }
            }
        }
    }
}

/// One watch request from `revision`, applying its events to `shared` and moving `revision`
/// on with each.
async fn watch_once(kind: Kind, client: &Client, revision: &mut String, shared: &Shared) -> Ended {
    let c = kind.coordinates();
    let resource = ApiResource {
        group: c.group.to_string(),
        version: c.version.to_string(),
        api_version: c.api_version(),
        kind: c.kind.to_string(),
        plural: c.plural.to_string(),
    };
    let request = kube::core::Request::new(DynamicObject::url_path(&resource, None));
    let params = WatchParams {
        bookmarks: true,
        ..WatchParams::default()
    }
    .timeout(WATCH_SECONDS);
    let request = match request.watch(&params, revision) {
        Ok(request) => request,
        Err(err) => {
            return Ended::Failed {
                opened: false,
                why: format!("watching {}: {err}", c.resource_name()),
            };
        }
    };
    let stream = match client.request_events::<serde_json::Value>(request).await {
        Ok(stream) => stream,
        Err(kube::Error::Api(status)) if status.code == 410 => return Ended::Gone,
        Err(err) => {
            return Ended::Failed {
                opened: false,
                why: format!(
                    "watching {}: {}",
                    c.resource_name(),
                    crate::collect::kube::chain(&err)
                ),
            };
        }
    };
    shared.watching(kind);
    futures::pin_mut!(stream);
    loop {
        let event = match stream.try_next().await {
            Ok(Some(event)) => event,
            Ok(None) => return Ended::Closed,
            Err(kube::Error::Api(status)) if status.code == 410 => return Ended::Gone,
            Err(err) => {
                return Ended::Failed {
                    opened: true,
                    why: format!(
                        "watching {}: {}",
                        c.resource_name(),
                        crate::collect::kube::chain(&err)
                    ),
                };
            }
        };
        let moved_to = match event {
            WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                let at = revision_of(&object);
                shared.upsert(kind, object);
                at
            }
            WatchEvent::Deleted(object) => {
                let at = revision_of(&object);
                shared.remove(kind, &object);
                at
            }
            WatchEvent::Bookmark(bookmark) => {
                shared.watching(kind);
                Some(bookmark.metadata.resource_version)
            }
            WatchEvent::Error(status) if status.code == 410 => return Ended::Gone,
            WatchEvent::Error(status) => {
                return Ended::Failed {
                    opened: true,
                    why: format!(
                        "watching {}: the server ended the watch with {} {}: {}",
                        c.resource_name(),
                        status.code,
                        status.reason,
                        status.message
                    ),
                };
            }
        };
        if let Some(at) = moved_to.filter(|r| !r.is_empty()) {
            *revision = at;
        }
    }
}

fn revision_of(object: &serde_json::Value) -> Option<String> {
    object["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_that_is_not_served_or_forbidden_is_an_answer_and_no_answer_is_a_broken_feed() {
        let not_served = KubeError::List(ListError::NotServed {
            resource: "ciliuml2announcementpolicies.cilium.io/v2alpha1".into(),
            hint: "Cilium",
        });
        let unreachable = KubeError::List(ListError::Unreachable {
            resource: "pods/v1".into(),
            causes: "connection refused".into(),
        });
        assert!(is_answer(&not_served));
        assert!(!is_answer(&unreachable));
        let later = KubeError::LaterPage {
            listed: 500,
            source: Box::new(unreachable),
        };
        assert!(!is_answer(&later));
    }

    #[tokio::test(start_paused = true)]
    async fn the_backoff_doubles_up_to_its_bound_and_starts_over_after_a_success() {
        let mut backoff = Backoff::new(Timing {
            interval: Duration::from_secs(60),
            backoff: Duration::from_millis(500),
            backoff_max: Duration::from_secs(3),
        });
        let mut waited = Vec::new();
        for _ in 0..5 {
            let start = tokio::time::Instant::now();
            backoff.wait().await;
            waited.push(start.elapsed().as_millis());
        }
        assert_eq!(waited, [500, 1000, 2000, 3000, 3000]);
        backoff.reset();
        let start = tokio::time::Instant::now();
        backoff.wait().await;
        assert_eq!(start.elapsed().as_millis(), 500);
    }
}
