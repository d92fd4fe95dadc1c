//! The live collector: lists every kind gates reads from the Kubernetes API with kube-rs,
//! once each, paged, all at the same time. Each page is decoded as it arrives, straight from
//! its text into the types the checks read (through the [registry](super::registry)), while
//! the next page is on its way. Anything the cluster does not serve, or refuses, is recorded
//! as absent with the reason.

use chrono::Utc;
use futures::future::join_all;
use kube::Resource;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::Value;

use super::json_spans;
use super::kinds::Kind;
pub use super::kube_error::{KubeError, ListError};
use super::protobuf;
use super::registry::{self, Objects};
use crate::config::Environment;
pub use crate::config::resolve;
use crate::state::{Source, State};

/// Build a client for the environment's kubeconfig and context.
pub async fn client(env: &Environment) -> Result<Client, KubeError> {
    client_reading(env, Some(env.kube.timeout.into())).await
}

/// A client whose reads may wait `read_timeout` (`None`: as long as the server keeps the
/// connection): a watch is quiet for as long as nothing changes, so it cannot have a list's
/// read timeout.
pub async fn client_reading(
    env: &Environment,
    read_timeout: Option<std::time::Duration>,
) -> Result<Client, KubeError> {
    let options = KubeConfigOptions {
        context: env.kube.context.clone(),
        cluster: None,
        user: None,
    };
    let kubeconfig = match &env.kube.kubeconfig {
        Some(path) => {
            let path = resolve(&env.file, path);
            Kubeconfig::read_from(&path).map_err(|source| KubeError::Kubeconfig { path, source })?
        }
        None => match super::in_cluster::from_process() {
            // In a pod with no kubeconfig: the service account.
            Some(in_cluster) => {
                return in_cluster
                    .client(env.kube.timeout.into(), read_timeout)
                    .map_err(|err| KubeError::InCluster(err.to_string()));
            }
            None => Kubeconfig::read().map_err(|source| KubeError::DefaultKubeconfig {
                env_file: env.file.clone(),
                source,
            })?,
        },
    };
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|source| KubeError::Context {
            context: env.kube.context.clone(),
            source,
        })?;
    config.connect_timeout = Some(env.kube.timeout.into());
    config.read_timeout = read_timeout;
    Client::try_from(config).map_err(|source| KubeError::Client { source })
}

/// Every kind's objects from the environment's cluster, listed concurrently, as JSON values
/// with apiVersion and kind set (what `gates snapshot` writes). A kind that could not be
/// listed carries the reason it is absent.
pub async fn collect_raw(
    env: &Environment,
    client: Client,
) -> Vec<(Kind, Result<Vec<Value>, registry::KindUnread>)> {
    each_kind(env, move |kind| {
        let client = client.clone();
        let page_size = env.kube.page_size;
        async move {
            let c = kind.coordinates();
            let mut items = Vec::new();
            list_pages(client, kind, page_size, |texts, _| {
                for text in texts {
                    let mut value: Value =
                        serde_json::from_str(text).map_err(|err| ListError::Decode {
                            resource: c.resource_name(),
                            reason: err.to_string(),
                        })?;
                    value["apiVersion"] = Value::from(c.api_version());
                    value["kind"] = Value::from(c.kind);
                    items.push(value);
                }
                Ok(())
            })
            .await
            .map(|_| items)
        }
    })
    .await
    .into_iter()
    .map(|(kind, listed)| {
        (
            kind,
            listed.map_err(|err| registry::KindUnread(err.to_string())),
        )
    })
    .collect()
}

/// List every kind at once under one deadline for the whole phase: kinds listed in time
/// keep their objects.
async fn each_kind<T, F, Fut>(env: &Environment, list: F) -> Vec<(Kind, Result<T, KubeError>)>
where
    F: Fn(Kind) -> Fut,
    Fut: std::future::Future<Output = Result<T, KubeError>>,
{
    let deadline = tokio::time::Instant::now() + super::deadline::of(env);
    join_all(Kind::ALL.into_iter().map(|kind| {
        let listing = list(kind);
        async move {
            let listed = tokio::time::timeout_at(deadline, listing)
                .await
                .unwrap_or_else(|_| {
                    Err(KubeError::Deadline(super::deadline::message(
                        env,
                        &format!("listing {}", kind.coordinates().resource_name()),
                    )))
                });
            (kind, listed)
        }
    }))
    .await
}

/// Collect the state of an environment from its cluster through `client` (or record for
/// every kind why there is none).
pub async fn collect(env: &Environment, client: &Result<Client, KubeError>) -> State {
    let mut state = State::empty(source(env), Utc::now());
    match client {
        Ok(client) => {
            let listed = each_kind(env, |kind| {
                list_typed(client.clone(), kind, env.kube.page_size)
            })
            .await;
            match whole_api_down(listed.iter().map(|(_, listed)| listed)) {
                Some((short, reason)) => api_down(&mut state, short, reason),
                None => {
                    for (kind, objects) in listed {
                        registry::store(
                            &mut state,
                            kind,
                            objects.map_err(|err| registry::KindUnread(err.to_string())),
                        );
                    }
                }
            }
        }
        Err(err) => api_down(&mut state, short_cause(err), err.to_string()),
    }
    state.collected_at = Utc::now();
    state
}

/// Where a live state comes from: the kubeconfig context, or in a pod the service account
/// (used whatever context the file names).
pub fn source(env: &Environment) -> Source {
    let context = match (&env.kube.context, &env.kube.kubeconfig) {
        (_, None) if super::in_cluster::from_process().is_some() => {
            "(in-cluster service account)".to_string()
        }
        (Some(context), _) => context.clone(),
        (None, _) => "(current context)".to_string(),
    };
    Source::Live { context }
}

/// The Kubernetes API could not be used at all: the whole reason once, in
/// [`State::sources_down`], and every kind absent with a short reference to it.
fn api_down(state: &mut State, short: &str, reason: String) {
    state.sources_down.push(crate::state::SourceDown {
        source: "the Kubernetes API".to_string(),
        reason,
    });
    let brief = format!(
        "the Kubernetes API cannot be used ({short}; the run's first error says why and how to fix it)"
    );
    for kind in Kind::ALL {
        registry::store(state, kind, Err(registry::KindUnread(brief.clone())));
    }
}

/// What made the whole API unusable, in a few words.
fn short_cause(err: &KubeError) -> &'static str {
    match err {
        KubeError::Kubeconfig { .. } | KubeError::DefaultKubeconfig { .. } => {
            "no readable kubeconfig"
        }
        KubeError::Context { .. } => "the kubeconfig context is unusable",
        KubeError::InCluster(_) => "the service account's files are unusable",
        KubeError::Client { .. } => "no Kubernetes client",
        KubeError::Deadline(_) => "its deadline passed",
        KubeError::List(ListError::Unreachable { .. }) => "it does not answer",
        KubeError::List(ListError::Unauthorized { .. }) => "the credentials were refused",
        KubeError::List(_) | KubeError::LaterPage { .. } => "every list failed",
    }
}

/// When every list failed the same whole-API way (no answer, credentials refused), that
/// cause in short and the first list's full reason; `None` when any list succeeded or the
/// failures are a kind's own (not served, forbidden), or the phase's deadline cut them (each
/// says which list it cut, which is short).
fn whole_api_down<'a, T: 'a>(
    mut listed: impl Iterator<Item = &'a Result<T, KubeError>>,
) -> Option<(&'static str, String)> {
    let first = listed.next()?.as_ref().err()?;
    let same_way = |err: &KubeError| {
        matches!(
            (first, err),
            (
                KubeError::List(ListError::Unreachable { .. }),
                KubeError::List(ListError::Unreachable { .. })
            ) | (
                KubeError::List(ListError::Unauthorized { .. }),
                KubeError::List(ListError::Unauthorized { .. })
            )
        )
    };
    if !same_way(first) {
        return None;
    }
    listed
        .all(|l| l.as_ref().err().is_some_and(same_way))
        .then(|| (short_cause(first), first.to_string()))
}

/// Every object of one kind, typed page by page.
pub async fn list_typed(client: Client, kind: Kind, page_size: u32) -> Result<Objects, KubeError> {
    list_typed_at(client, kind, page_size)
        .await
        .map(|(objects, _)| objects)
}

/// [`list_typed`], with the revision the list is of (what a watch resumes from). Built-in
/// kinds gates reads from protobuf ([`protobuf::reads`]) are asked for in it, with JSON as
/// the fallback; whichever the server answers in is decoded.
pub async fn list_typed_at(
    client: Client,
    kind: Kind,
    page_size: u32,
) -> Result<(Objects, Option<String>), KubeError> {
    list_typed_in(client, kind, page_size, Encoding::Preferred).await
}

/// The encoding a list is asked for in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// JSON only: what the tests and benchmarks compare protobuf against.
    Json,
    /// Protobuf for the kinds gates decodes from it, with JSON as the fallback; JSON for
    /// the rest.
    Preferred,
}

/// [`list_typed_at`] in a chosen encoding.
pub async fn list_typed_in(
    client: Client,
    kind: Kind,
    page_size: u32,
    encoding: Encoding,
) -> Result<(Objects, Option<String>), KubeError> {
    let resource = || kind.coordinates().resource_name();
    let mut all: Option<Objects> = None;
    let accept = match encoding {
        Encoding::Preferred if protobuf::reads(kind) => protobuf::ACCEPT,
        Encoding::Preferred | Encoding::Json => JSON,
    };
    let revision = each_page(client, kind, page_size, accept, |body, next| {
        let decode_error = |reason| ListError::Decode {
            resource: resource(),
            reason,
        };
        let (objects, seen) = match body {
            Body::Json(text) => {
                let page = Page::split_asking_next(kind, &text, next)?;
                let items = page.items();
                let expected = room(items.len(), page.remaining);
                // The first page makes room for the whole list, so that later pages are
                // appended without moving what came before.
                let objects = match all {
                    None => Objects::decode_with_room(kind, &items, expected),
                    Some(_) => Objects::decode(kind, &items),
                }
                .map_err(|why| decode_error(why.0))?;
                (objects, page.revision)
            }
            Body::Protobuf(bytes) => {
                // The envelope is opened once; its metadata first, to ask for the next page.
                let not_a_list = |reason: protobuf::wire::DecodeError| ListError::NotAList {
                    resource: resource(),
                    reason: reason.0,
                };
                let opened = protobuf::open(&bytes).map_err(not_a_list)?;
                let head = opened.head().map_err(not_a_list)?;
                next(head.next());
                let page = opened.decode(kind).map_err(|why| decode_error(why.0))?;
                (page.objects, head.revision())
            }
        };
        let listed = objects.len();
        match &mut all {
            None => all = Some(objects),
            Some(all) => all.extend(objects),
        }
        Ok(Seen {
            listed,
            revision: seen,
        })
    })
    .await?;
    Ok((all.unwrap_or_else(|| Objects::empty(kind)), revision))
}

/// Every page of one kind in JSON, following `continue` tokens; `each` gets the texts of a
/// page's objects, and how many objects the list is expected to hold from this page on (this
/// page's plus the server's `remainingItemCount`, at most [`ROOM_AT_MOST`]: a hint for room,
/// never a count anything is judged by), while the next page is fetched. The list's
/// `resourceVersion` is what a watch resumes from.
pub async fn list_pages(
    client: Client,
    kind: Kind,
    page_size: u32,
    mut each: impl FnMut(&[&str], usize) -> Result<(), ListError>,
) -> Result<Option<String>, KubeError> {
    let resource = || kind.coordinates().resource_name();
    each_page(client, kind, page_size, JSON, |body, next| {
        let Body::Json(text) = body else {
            return Err(ListError::NotAList {
                resource: resource(),
                reason: "the server answered in protobuf where JSON was asked for".into(),
            });
        };
        let page = Page::split_asking_next(kind, &text, next)?;
        let items = page.items();
        each(&items, room(items.len(), page.remaining))?;
        Ok(Seen {
            listed: items.len(),
            revision: page.revision,
        })
    })
    .await
}

const JSON: &str = "application/json";

/// A page's body, in the encoding the server chose.
enum Body {
    Json(String),
    Protobuf(bytes::Bytes),
}

/// What one page held: how many objects, and the list's revision.
struct Seen {
    listed: usize,
    revision: Option<String>,
}

/// Every page of one kind, asked for in `accept`: `each` reads a page and says the next
/// page's token (through `next`) as soon as it knows it, so that the next page is on its way
/// while this one is decoded. A page that fails after the first leaves a partial list, so the
/// whole kind is unread. The revision is the first page's: every page is of that revision.
async fn each_page(
    client: Client,
    kind: Kind,
    page_size: u32,
    accept: &'static str,
    mut each: impl FnMut(Body, &mut dyn FnMut(Option<String>)) -> Result<Seen, ListError>,
) -> Result<Option<String>, KubeError> {
    let c = kind.coordinates();
    let resource = ApiResource {
        group: c.group.to_string(),
        version: c.version.to_string(),
        api_version: c.api_version(),
        kind: c.kind.to_string(),
        plural: c.plural.to_string(),
    };
    let path = DynamicObject::url_path(&resource, None);
    let fetch = move |token: Option<String>| {
        let client = client.clone();
        let path = path.clone();
        tokio::spawn(async move {
            let mut params = ListParams::default();
            if page_size > 0 {
                params = params.limit(page_size);
            }
            if let Some(token) = &token {
                params = params.continue_token(token);
            }
            let mut request = kube::core::Request::new(path)
                .list(&params)
                .map_err(|err| ListError::Request {
                    resource: kind.coordinates().resource_name(),
                    reason: err.to_string(),
                })?;
            request
                .headers_mut()
                .insert(http::header::ACCEPT, http::HeaderValue::from_static(accept));
            fetch_body(&client, request)
                .await
                .map_err(|err| describe(kind, &err))
        })
    };
    let mut listed = 0usize;
    let mut revision = None;
    let mut pending = Some(fetch(None));
    while let Some(fetching) = pending.take() {
        let body = match fetching.await {
            Ok(Ok(body)) => body,
            Ok(Err(why)) if listed > 0 => {
                return Err(KubeError::LaterPage {
                    listed,
                    source: Box::new(why.into()),
                });
            }
            Ok(Err(why)) => return Err(why.into()),
            Err(err) => {
                return Err(ListError::Request {
                    resource: c.resource_name(),
                    reason: err.to_string(),
                }
                .into());
            }
        };
        let seen = each(body, &mut |token| {
            pending = token.map(|token| fetch(Some(token)));
        })?;
        if revision.is_none() {
            revision = seen.revision;
        }
        listed += seen.listed;
    }
    Ok(revision)
}

/// Send a list request and read its body whole, in the encoding the `Content-Type` names;
/// an error answer is read as its `Status` in either encoding, as kube's client reads one in
/// JSON.
async fn fetch_body(client: &Client, request: http::Request<Vec<u8>>) -> Result<Body, kube::Error> {
    let response = client.send(request.map(kube::client::Body::from)).await?;
    let code = response.status();
    let is_protobuf = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(protobuf::MEDIA_TYPE));
    let bytes = response.into_body().collect_bytes().await?;
    if code.is_client_error() || code.is_server_error() {
        let status = if is_protobuf {
            protobuf::wire::status(&bytes, code.as_u16())
        } else {
            serde_json::from_slice::<kube::core::Status>(&bytes).ok()
        };
        let status = status.unwrap_or_else(|| {
            kube::core::Status::failure(
                String::from_utf8_lossy(&bytes).trim(),
                "Failed to parse error data",
            )
            .with_code(code.as_u16())
        });
        return Err(kube::Error::Api(status.boxed()));
    }
    if is_protobuf {
        return Ok(Body::Protobuf(bytes));
    }
    String::from_utf8(bytes.to_vec())
        .map(Body::Json)
        .map_err(kube::Error::FromUtf8)
}

/// One page of a list: its objects' texts and the token of the next page.
struct Page<'t> {
    items: Vec<&'t str>,
    /// Set only when the fast scan refused the text and it was rewritten.
    canonical: Option<Box<(String, Vec<std::ops::Range<usize>>)>>,
    next: Option<String>,
    /// The server's `remainingItemCount` (0 when it gives none).
    remaining: usize,
    /// The list's `resourceVersion`.
    revision: Option<String>,
}

/// For the page fuzz target: splitting a page never panics, and when both the one-pass scan
/// and the full parse read it, they find the same objects, next token and remaining count.
#[doc(hidden)]
pub fn assert_page_paths_agree(text: &str) {
    let Ok(fast) = Page::split(text) else {
        return;
    };
    if fast.canonical.is_some() {
        return;
    }
    let Ok(full) = Page::canonical(text) else {
        return;
    };
    let parsed = |items: Vec<&str>| -> Vec<Value> {
        items
            .into_iter()
            .map(|item| serde_json::from_str(item).expect("an item the page parse accepted"))
            .collect()
    };
    assert_eq!(
        parsed(fast.items()),
        parsed(full.items()),
        "items of {text:?}"
    );
    assert_eq!(fast.next, full.next, "next token of {text:?}");
    assert_eq!(
        fast.remaining, full.remaining,
        "remaining count of {text:?}"
    );
    assert_eq!(fast.revision, full.revision, "revision of {text:?}");
}

/// `remainingItemCount` as a count of objects, when it is one.
fn count_hint(remaining: Option<&Value>) -> usize {
    remaining
        .and_then(Value::as_u64)
        .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX))
}

/// The most objects a server's `remainingItemCount` makes room for ahead (262,144: a
/// cluster's pods fit; a larger list grows once more): a count that is wrong, or hostile,
/// costs at most this much unused room, reserved and never touched.
pub const ROOM_AT_MOST: usize = 1 << 18;

/// Room for a list whose page holds `items` objects with `remaining` to follow.
fn room(items: usize, remaining: usize) -> usize {
    items.saturating_add(remaining.min(ROOM_AT_MOST))
}

impl<'t> Page<'t> {
    /// [`Page::split`] for a list of `kind`, asking for the next page (its `continue`
    /// token) before the caller decodes this one; what is not a list is `NotAList`.
    fn split_asking_next(
        kind: Kind,
        text: &'t str,
        next: &mut dyn FnMut(Option<String>),
    ) -> Result<Page<'t>, ListError> {
        let page = Page::split(text).map_err(|reason| ListError::NotAList {
            resource: kind.coordinates().resource_name(),
            reason: reason.to_string(),
        })?;
        next(page.next.clone());
        Ok(page)
    }

    fn split(text: &'t str) -> Result<Page<'t>, serde_json::Error> {
        #[derive(serde::Deserialize, Default)]
        struct ListMeta {
            #[serde(default, rename = "continue")]
            next: Option<String>,
            /// A hint only: a value that is not a count is no hint, never an error.
            #[serde(default, rename = "remainingItemCount")]
            remaining: Option<Value>,
            #[serde(default, rename = "resourceVersion")]
            revision: Option<String>,
        }
        // One pass splits the page and its items (an `items` that is not a list holds none).
        let Ok(page) = json_spans::document(text) else {
            return Page::canonical(text);
        };
        let items = page
            .items
            .map(|items| items.iter().map(|item| item.text).collect())
            .unwrap_or_default();
        let meta = match page.metadata {
            Some(m) => serde_json::from_str::<ListMeta>(m)?,
            None => ListMeta::default(),
        };
        Ok(Page {
            items,
            canonical: None,
            next: meta.next.filter(|n| !n.is_empty()),
            remaining: count_hint(meta.remaining.as_ref()),
            revision: meta.revision.filter(|r| !r.is_empty()),
        })
    }

    /// A page the fast scan refused: parsed in full, then its items written out again.
    fn canonical(text: &str) -> Result<Page<'t>, serde_json::Error> {
        let value: Value = serde_json::from_str(text)?;
        let next = value["metadata"]["continue"]
            .as_str()
            .filter(|n| !n.is_empty())
            .map(str::to_string);
        let remaining = count_hint(value["metadata"].get("remainingItemCount"));
        let revision = value["metadata"]["resourceVersion"]
            .as_str()
            .filter(|r| !r.is_empty())
            .map(str::to_string);
        let mut joined = String::new();
        let mut ranges = Vec::new();
        for item in value["items"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let start = joined.len();
            joined.push_str(&item.to_string());
            ranges.push(start..joined.len());
        }
        Ok(Page {
            items: Vec::new(),
            canonical: Some(Box::new((joined, ranges))),
            next,
            remaining,
            revision,
        })
    }

    fn items(&self) -> Vec<&str> {
        match &self.canonical {
            None => self.items.clone(),
            Some(c) => c.1.iter().map(|r| &c.0[r.clone()]).collect(),
        }
    }
}

fn describe(kind: Kind, err: &kube::Error) -> ListError {
    let resource = kind.coordinates().resource_name();
    match err {
        kube::Error::Api(status) if status.code == 404 => ListError::NotServed {
            resource,
            hint: kind.absent_hint(),
        },
        kube::Error::Api(status) if status.code == 401 => ListError::Unauthorized { resource },
        kube::Error::Api(status) if status.code == 403 => ListError::Forbidden {
            resource,
            message: status.message.clone(),
            hint: kind.absent_hint(),
        },
        kube::Error::Api(status) => ListError::Http {
            resource,
            code: status.code,
            message: status.message.clone(),
        },
        other => ListError::Unreachable {
            resource,
            causes: chain(other),
        },
    }
}

/// An error and its causes on one line.
pub fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn the_whole_api_is_down_only_when_every_list_failed_the_same_whole_api_way() {
        let unreachable = || -> Result<(), KubeError> {
            Err(KubeError::List(ListError::Unreachable {
                resource: "nodes".into(),
                causes: "connection refused".into(),
            }))
        };
        let not_served = || -> Result<(), KubeError> {
            Err(KubeError::List(ListError::NotServed {
                resource: "ciliuml2announcementpolicies".into(),
                hint: "Cilium",
            }))
        };
        let all = [unreachable(), unreachable()];
        let (short, reason) = whole_api_down(all.iter()).unwrap();
        assert_eq!(short, "it does not answer");
        assert!(reason.contains("connection refused"), "{reason}");
        // One kind listed, or one failing its own way: each kind keeps its own reason.
        assert!(whole_api_down([unreachable(), Ok(())].iter()).is_none());
        assert!(whole_api_down([unreachable(), not_served()].iter()).is_none());
        assert!(whole_api_down([not_served(), not_served()].iter()).is_none());
    }

    #[tokio::test]
    async fn a_kubeconfig_that_is_not_there_is_named_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let mut env = crate::checks::testing::env();
        env.file = dir.path().join("staging.yaml");
        env.kube.kubeconfig = Some(PathBuf::from("missing-kubeconfig"));
        let err = client(&env).await.err().expect("no kubeconfig");
        assert!(matches!(err, KubeError::Kubeconfig { .. }), "{err:?}");
        let want = dir.path().join("missing-kubeconfig");
        assert!(
            err.to_string()
                .starts_with(&format!("cannot read kubeconfig {}: ", want.display())),
            "{err}"
        );
    }

    /// A page of a pod list, its metadata written as `meta`.
    fn page_text(meta: &str) -> String {
        format!(
            r#"{{"kind":"PodList","apiVersion":"v1","metadata":{meta},"items":[{{"metadata":{{"name":"a"}}}},{{"metadata":{{"name":"b"}}}}]}}"#
        )
    }

    #[test]
    fn a_page_reads_its_items_its_next_token_and_how_many_objects_remain() {
        let text = page_text(r#"{"continue":"abc","remainingItemCount":98}"#);
        let page = Page::split(&text).unwrap();
        assert_eq!(page.items().len(), 2);
        assert_eq!(page.next.as_deref(), Some("abc"));
        assert_eq!(page.remaining, 98);
        // A page the fast scan refuses (a surrogate pair, left to the full parse) reads the
        // same.
        let text =
            page_text(r#"{"selfLink":"\ud83d\ude00","continue":"abc","remainingItemCount":98}"#);
        assert!(json_spans::document(&text).is_err());
        let page = Page::split(&text).unwrap();
        assert!(page.canonical.is_some());
        assert_eq!(page.items().len(), 2);
        assert_eq!(page.next.as_deref(), Some("abc"));
        assert_eq!(page.remaining, 98);
    }

    #[test]
    fn the_room_made_ahead_is_the_page_and_what_remains_up_to_a_bound() {
        assert_eq!(room(2000, 98_000), 100_000);
        assert_eq!(room(7, 0), 7);
        assert_eq!(room(2000, usize::MAX), 2000 + ROOM_AT_MOST);
        assert_eq!(room(usize::MAX, usize::MAX), usize::MAX);
    }

    #[test]
    fn a_remaining_count_that_is_not_a_count_is_no_hint_and_no_error() {
        for meta in [
            r#"{"remainingItemCount":-5}"#,
            r#"{"remainingItemCount":"many"}"#,
            r#"{"remainingItemCount":1.5}"#,
            r#"{"remainingItemCount":null}"#,
            r#"{}"#,
        ] {
            let text = page_text(meta);
            let page = Page::split(&text).unwrap_or_else(|e| panic!("{meta}: {e}"));
            assert_eq!(page.remaining, 0, "{meta}");
            assert_eq!(page.items().len(), 2, "{meta}");
            assert_eq!(page.next, None, "{meta}");
        }
    }

    #[test]
    fn a_later_page_that_fails_says_how_many_objects_came_before() {
        let err = KubeError::LaterPage {
            listed: 500,
            source: Box::new(
                ListError::Forbidden {
                    resource: "pods/v1".into(),
                    message: "pods is forbidden".into(),
                    hint: "grant list on pods",
                }
                .into(),
            ),
        };
        assert_eq!(
            err.to_string(),
            "listing pods/v1: forbidden: pods is forbidden (grant list on pods) (a later page, after 500 objects)"
        );
    }
}
