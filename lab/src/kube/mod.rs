//! The Kubernetes API server of one environment: HTTPS with bearer tokens, discovery, get,
//! list (selectors, paging) and watch, answered from the world's object store. The same
//! handler serves every control-plane node's address and the environment's API VIP.

mod consistency;
mod discovery;
mod eviction;
pub mod status;
mod table;
mod write;

use crate::net::{Body, ConnInfo, Handler, channel_body};
use crate::reqlog::{Protocol, RequestLog};
use crate::resources::{self, ResourceDef};
use crate::selector::{FieldSelector, Selector, labels_of};
use crate::world::Shared;
use crate::world::store::Event;
use base64::Engine;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use serde_json::{Value, json};
use status::{
    bad_request, bytes_response, json_response, not_found, not_found_path, status, unauthorized,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The bearer tokens the API accepts. Never logged.
#[derive(Clone)]
pub struct Tokens {
    pub admin: String,
    pub read_only: String,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tokens([secret])")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum User {
    Admin,
    ReadOnly,
    Anonymous,
}

impl User {
    fn name(self) -> &'static str {
        match self {
            User::Admin => "gates-lab-admin",
            User::ReadOnly => "gates-lab-readonly",
            User::Anonymous => "system:anonymous",
        }
    }
}

pub struct KubeApi {
    pub shared: Arc<Shared>,
    pub env: usize,
    pub tokens: Tokens,
    pub log: RequestLog,
}

impl KubeApi {
    pub fn handler(self: Arc<Self>) -> Handler {
        Arc::new(move |req, info| {
            let api = self.clone();
            Box::pin(async move {
                let method = req.method().to_string();
                let path = req
                    .uri()
                    .path_and_query()
                    .map(|p| p.to_string())
                    .unwrap_or_default();
                let resp = api.handle(req, info).await;
                api.log.record(
                    Protocol::Kube,
                    info.client,
                    info.server,
                    &method,
                    &path,
                    resp.status().as_u16(),
                );
                resp
            })
        })
    }

    fn authenticate(&self, req: &Request<Incoming>) -> Result<User, ()> {
        let Some(h) = req.headers().get(hyper::header::AUTHORIZATION) else {
            return Ok(User::Anonymous);
        };
        let h = h.to_str().map_err(|_| ())?;
        let token = h.strip_prefix("Bearer ").ok_or(())?.trim();
        if constant_eq(token, &self.tokens.admin) {
            Ok(User::Admin)
        } else if constant_eq(token, &self.tokens.read_only) {
            Ok(User::ReadOnly)
        } else {
            Err(())
        }
    }

    /// One request to the Kubernetes API: the public health and version endpoints, then,
    /// authenticated, discovery, the Eviction subresource, and the verbs on a resource.
    async fn handle(&self, req: Request<Incoming>, info: ConnInfo) -> Response<Body> {
        let Ok(user) = self.authenticate(&req) else {
            return unauthorized();
        };
        let path = req.uri().path().trim_end_matches('/').to_string();
        let query: HashMap<String, String> = req
            .uri()
            .query()
            .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
            .unwrap_or_default();
        if let Some(response) = self.public_info(&path, &query).await {
            return response;
        }
        if user == User::Anonymous {
            return unauthorized();
        }
        let metrics = self.shared.read(|w| discovery::Served {
            metrics: w.envs[self.env].spec.metrics,
            longhorn: w.envs[self.env].spec.longhorn.is_some(),
        });
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        if let Some(response) = serve_discovery(&req, &info, &segs, metrics) {
            return response;
        }
        if let ["api", "v1", "namespaces", ns, "pods", name, "eviction"] = segs.as_slice() {
            let (ns, name) = (ns.to_string(), name.to_string());
            return self.evict(req, user, &ns, &name).await;
        }
        let Some(Target { def, ns, name }) = resource_target(&segs, metrics) else {
            return not_found_path();
        };
        let verb = verb_of(&req, name, &query);
        if let Some(refusal) = refuse_verb(user, def, ns, name, verb) {
            return refusal;
        }
        if !self.wait_for_quorum(|t| t.etcd_request_timeout).await {
            return status(500, "InternalError", "etcdserver: request timed out", None);
        }
        let wants_table = req
            .headers()
            .get(hyper::header::ACCEPT)
            .and_then(|a| a.to_str().ok())
            .is_some_and(|a| a.contains("as=Table"));
        match verb {
            "get" => self.get(def, ns, name.unwrap_or_default(), wants_table),
            "list" => {
                let read = match consistency::read_of(&query) {
                    Ok(read) => read,
                    Err(refusal) => return refusal.response(),
                };
                if let Some(needed) = read.needs()
                    && !self.wait_for_revision(needed).await
                {
                    let current = self.shared.read(|w| w.envs[self.env].store.rv());
                    return consistency::too_large(needed, current);
                }
                self.list(def, ns, &query, wants_table, read)
            }
            "create" | "update" => {
                use http_body_util::BodyExt;
                match req.into_body().collect().await {
                    Ok(body) => write::write_lease(self, ns, name, &body.to_bytes()),
                    Err(err) => status::bad_request(&format!("cannot read the body: {err}")),
                }
            }
            _ => self.watch(def, ns, &query, wants_table),
        }
    }

    /// Health and version, public (system:public-info-viewer); `None` for any other path.
    async fn public_info(
        &self,
        path: &str,
        query: &HashMap<String, String>,
    ) -> Option<Response<Body>> {
        match path {
            "/healthz" | "/livez" | "/readyz" => {
                if path == "/readyz" {
                    // Its etcd check waits for etcd's answer before it fails.
                    self.wait_for_quorum(|t| t.etcd_healthcheck_timeout).await;
                }
                Some(self.health(path, query.contains_key("verbose")))
            }
            "/version" => Some(json_response(200, &self.version())),
            _ => None,
        }
    }

    /// Whether etcd has quorum. Without it a request blocks for the scenario's timeout (in
    /// simulated time) as the real API server does while etcd does not answer, and then tells
    /// whether quorum came back meanwhile.
    async fn wait_for_quorum(
        &self,
        timeout: impl Fn(&crate::scenario::Timings) -> std::time::Duration,
    ) -> bool {
        let (quorum, block) = self.shared.read(|w| {
            (
                w.envs[self.env].quorum,
                w.clock.real_of(timeout(&w.timings)),
            )
        });
        if quorum {
            return true;
        }
        let deadline = tokio::time::Instant::now() + block;
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20).min(block)).await;
            if self.shared.read(|w| w.envs[self.env].quorum) {
                return true;
            }
        }
        false
    }

    fn health(&self, path: &str, verbose: bool) -> Response<Body> {
        let quorum = self.shared.read(|w| w.envs[self.env].quorum);
        let checks = [
            "ping",
            "log",
            "etcd",
            "informer-sync",
            "poststarthook/start-apiserver-admission-initializer",
        ];
        if quorum && !verbose {
            return bytes_response(200, "text/plain; charset=utf-8", b"ok".to_vec());
        }
        let mut text = String::new();
        for c in checks {
            let ok = quorum || c != "etcd";
            text.push_str(&if ok {
                format!("[+]{c} ok\n")
            } else {
                format!("[-]{c} failed: reason withheld\n")
            });
        }
        let what = path.trim_start_matches('/');
        if quorum {
            text.push_str(&format!("{what} check passed\n"));
            bytes_response(200, "text/plain; charset=utf-8", text.into_bytes())
        } else {
            text.push_str(&format!("{what} check failed\n"));
            bytes_response(500, "text/plain; charset=utf-8", text.into_bytes())
        }
    }

    fn version(&self) -> Value {
        let v = self
            .shared
            .read(|w| w.envs[self.env].spec.kubernetes_version.clone());
        let trimmed = v.trim_start_matches('v');
        let mut parts = trimmed.split('.');
        let major = parts.next().unwrap_or("1");
        let minor = parts.next().unwrap_or("0");
        json!({
            "major": major,
            "minor": minor,
            "emulationMajor": major,
            "emulationMinor": minor,
            "gitVersion": v,
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2025-09-09T19:44:50Z",
            "goVersion": "go1.24.6",
            "compiler": "gc",
            "platform": "linux/amd64",
        })
    }

    fn get(
        &self,
        def: &'static ResourceDef,
        ns: Option<&str>,
        name: &str,
        table: bool,
    ) -> Response<Body> {
        let obj = self.shared.read(|w| {
            w.envs[self.env]
                .store
                .get(def.res, ns.unwrap_or(""), name)
                .map(|o| (o, w.envs[self.env].store.rv()))
        });
        match obj {
            Some((o, rv)) if table => json_response(
                200,
                &table::table(def, &[o], rv, None, self.shared.clock.wall_now()),
            ),
            Some((o, _)) => bytes_response(
                200,
                "application/json",
                serde_json::to_vec(&*o).unwrap_or_default(),
            ),
            None => not_found(def.plural, def.group, name),
        }
    }

    /// Whether the store reached `rv`, waiting as the watch cache does (3 s, simulated).
    async fn wait_for_revision(&self, rv: u64) -> bool {
        let (reached, block) = self.shared.read(|w| {
            (
                w.envs[self.env].store.rv() >= rv,
                w.clock.real_of(Duration::from_secs(3)),
            )
        });
        if reached {
            return true;
        }
        let deadline = tokio::time::Instant::now() + block;
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20).min(block)).await;
            if self.shared.read(|w| w.envs[self.env].store.rv() >= rv) {
                return true;
            }
        }
        false
    }

    fn list(
        &self,
        def: &'static ResourceDef,
        ns: Option<&str>,
        query: &HashMap<String, String>,
        table: bool,
        read: consistency::Read,
    ) -> Response<Body> {
        let (labels, fields) = match selectors(def, query) {
            Ok(parsed) => parsed,
            Err(response) => return response,
        };
        let limit: usize = match query.get("limit").map(|l| l.parse::<i64>()) {
            None => 0,
            Some(Ok(n)) if n > 0 => n as usize,
            Some(Ok(_)) => 0,
            Some(Err(_)) => return bad_request("limit must be an integer"),
        };
        let after = match query.get("continue").filter(|c| !c.is_empty()) {
            Some(c) => match decode_continue(c) {
                Some(k) => Some(k),
                None => {
                    return status(
                        400,
                        "BadRequest",
                        "continue key is not valid: illegal base64 data",
                        None,
                    );
                }
            },
            None => None,
        };
        let unfiltered = labels.is_empty() && fields.is_none();
        let wanted = |obj: &Value| {
            (labels.is_empty() || labels.matches(&labels_of(obj)))
                && fields.as_ref().is_none_or(|f| f.matches(obj))
        };
        let listed = self.shared.read(|w| {
            let store = &w.envs[self.env].store;
            match read {
                consistency::Read::Exact(at) => store.list_at(def.res, at).map(|all| {
                    let after = after.as_ref().map(|(k, _)| k);
                    let rest = all
                        .iter()
                        .filter(|(k, _)| ns.is_none_or(|n| k.0 == n))
                        .filter(|(k, _)| after.is_none_or(|a| k > a))
                        .map(|(k, o)| (k, o));
                    page(at, rest, limit, unfiltered, &wanted, None)
                }),
                _ => {
                    let rest = store.range(def.res, ns, after.as_ref().map(|(k, _)| k));
                    // Unfiltered over every namespace, what is left is the count minus
                    // what earlier pages and this one returned; no walk to the end.
                    let total = (ns.is_none() && unfiltered).then(|| {
                        store
                            .count(def.res)
                            .saturating_sub(after.as_ref().map_or(0, |(_, n)| *n))
                    });
                    Ok(page(store.rv(), rest, limit, unfiltered, &wanted, total))
                }
            }
        });
        let Ok((rv, items, last, remaining)) = listed else {
            return consistency::expired();
        };
        let returned = after.as_ref().map_or(0, |(_, n)| *n) + items.len();
        let next = last.map(|key| encode_continue(rv, &key, returned));
        let objs = items;
        if table {
            return json_response(
                200,
                &table::table(def, &objs, rv, next, self.shared.clock.wall_now()),
            );
        }
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if let Some(c) = &next {
            meta["continue"] = json!(c);
            if unfiltered {
                meta["remainingItemCount"] = json!(remaining);
            }
        }
        let mut out = Vec::with_capacity(256 + objs.len() * 1024);
        out.extend_from_slice(
            format!(
                "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{},\"items\":[",
                def.list_kind(),
                def.api_version(),
                meta
            )
            .as_bytes(),
        );
        for (i, o) in objs.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_item(&mut out, o, def.typed);
        }
        out.extend_from_slice(b"]}");
        bytes_response(200, "application/json", out)
    }

    /// A watch: the initial state (or the replay from a resourceVersion), then each event
    /// as it happens, with bookmarks if asked, until its timeout, the client leaving, or the
    /// lab ending watches (with 410 Expired when etcd compacted past it).
    fn watch(
        &self,
        def: &'static ResourceDef,
        ns: Option<&str>,
        query: &HashMap<String, String>,
        wants_table: bool,
    ) -> Response<Body> {
        let (labels, fields) = match selectors(def, query) {
            Ok(parsed) => parsed,
            Err(response) => return response,
        };
        let params = WatchParams::of(query);
        let since = params.since;
        // Replay (or the initial state) and subscription are taken under one lock.
        let setup = self.shared.read(|w| {
            let store = &w.envs[self.env].store;
            let start = since.unwrap_or_else(|| store.rv());
            let initial: Vec<Arc<Value>> = if since.is_none() {
                store.list(def.res).into_iter().map(|(_, o)| o).collect()
            } else {
                Vec::new()
            };
            store
                .subscribe(start)
                .map(|(replay, rx)| (initial, replay, rx, store.rv()))
        });
        let (tx, rx_body) = tokio::sync::mpsc::channel::<Bytes>(256);
        let resp = Response::builder()
            .status(200)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(channel_body(rx_body));
        let resp = match resp {
            Ok(r) => r,
            Err(_) => return status(500, "InternalError", "response", None),
        };
        let ends = self.shared.subscribe_watch_ends();
        match setup {
            Err(_) => {
                let ev = expired(since.unwrap_or(0));
                tokio::spawn(async move {
                    let _ = tx.send(line(&ev)).await;
                });
            }
            Ok((initial, replay, rx, last_rv)) => {
                let watcher = Watcher {
                    def,
                    ns: ns.map(String::from),
                    labels,
                    fields,
                    wants_table,
                    clock: self.shared.clock.clone(),
                    tx,
                };
                tokio::spawn(async move {
                    let Some(last_rv) = watcher
                        .send_start(initial, replay, last_rv, params.initial_events)
                        .await
                    else {
                        return;
                    };
                    watcher.follow(rx, last_rv, params, ends).await;
                });
            }
        }
        resp
    }
}

/// What a watch request asks for beyond its selectors.
#[derive(Debug, Clone, Copy)]
struct WatchParams {
    /// The resourceVersion to resume after (`None`: start from the current state).
    since: Option<u64>,
    /// `timeoutSeconds`, 30 minutes unless given.
    timeout: Duration,
    /// `allowWatchBookmarks`: a bookmark every minute.
    bookmarks: bool,
    /// Streaming lists (sendInitialEvents): the initial ADDED events end with a bookmark.
    initial_events: bool,
}

impl WatchParams {
    fn of(query: &HashMap<String, String>) -> WatchParams {
        let since: Option<u64> = query
            .get("resourceVersion")
            .filter(|_| !is_true(query.get("sendInitialEvents")))
            .filter(|v| !v.is_empty() && *v != "0")
            .and_then(|v| v.parse().ok());
        let timeout = query
            .get("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .map(Duration::from_secs)
            .unwrap_or(Duration::from_secs(1800));
        WatchParams {
            since,
            timeout,
            bookmarks: is_true(query.get("allowWatchBookmarks")),
            initial_events: is_true(query.get("sendInitialEvents")),
        }
    }
}

/// One watch's stream: which objects it shows, how it writes an event, and where to.
struct Watcher {
    def: &'static ResourceDef,
    ns: Option<String>,
    labels: Selector,
    fields: Option<FieldSelector>,
    /// `kubectl get -w` asks for Tables: each event then carries a one-row Table.
    wants_table: bool,
    clock: crate::clock::SimClock,
    tx: tokio::sync::mpsc::Sender<Bytes>,
}

impl Watcher {
    /// Whether an object of kind `res` is one this watch shows (kind, namespace, selectors).
    fn matches(&self, res: crate::resources::Res, obj: &Value) -> bool {
        res == self.def.res
            && self.ns.as_ref().is_none_or(|n| {
                obj.pointer("/metadata/namespace").and_then(|x| x.as_str()) == Some(n.as_str())
            })
            && (self.labels.is_empty() || self.labels.matches(&labels_of(obj)))
            && self.fields.as_ref().is_none_or(|f| f.matches(obj))
    }

    /// One event as a line of the stream, its object as a one-row Table when asked.
    fn event_line(&self, etype: &str, obj: &Value) -> Bytes {
        if self.wants_table {
            let rv = obj
                .pointer("/metadata/resourceVersion")
                .and_then(|v| v.as_str())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let t = table::table(
                self.def,
                &[Arc::new(obj.clone())],
                rv,
                None,
                self.clock.wall_now(),
            );
            line(&json!({"type": etype, "object": t}))
        } else {
            event_line(etype, obj)
        }
    }

    /// The initial ADDED events (and their closing bookmark for a streaming list), then the
    /// replayed history; the revision reached, or `None` once the client left.
    async fn send_start(
        &self,
        initial: Vec<Arc<Value>>,
        replay: Vec<Arc<Event>>,
        mut last_rv: u64,
        initial_events: bool,
    ) -> Option<u64> {
        let def = self.def;
        for o in initial {
            if self.matches(def.res, &o)
                && self.tx.send(self.event_line("ADDED", &o)).await.is_err()
            {
                return None;
            }
        }
        if initial_events {
            let bm = json!({"type": "BOOKMARK", "object": {"kind": def.kind, "apiVersion": def.api_version(), "metadata": {
                "resourceVersion": last_rv.to_string(),
                "annotations": {"k8s.io/initial-events-end": "true"},
            }}});
            if self.tx.send(line(&bm)).await.is_err() {
                return None;
            }
        }
        for e in replay {
            if self.matches(e.res, &e.obj)
                && self
                    .tx
                    .send(self.event_line(e.etype.as_str(), &e.obj))
                    .await
                    .is_err()
            {
                return None;
            }
            last_rv = last_rv.max(e.rv);
        }
        Some(last_rv)
    }

    /// Live events after `last_rv`, and bookmarks if asked, until the timeout, the client
    /// leaving, falling behind, or the lab ending watches (Expired when it says so).
    async fn follow(
        self,
        mut rx: tokio::sync::broadcast::Receiver<Arc<Event>>,
        mut last_rv: u64,
        params: WatchParams,
        mut ends: tokio::sync::watch::Receiver<crate::world::WatchEnd>,
    ) {
        let (def, tx) = (self.def, &self.tx);
        let deadline = tokio::time::sleep(params.timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        tick.tick().await;
        ends.borrow_and_update();
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = tx.closed() => return,
                _ = ends.changed() => {
                    let expire = matches!(*ends.borrow(), crate::world::WatchEnd::Expire(_));
                    if expire {
                        let _ = tx.send(line(&expired(last_rv))).await;
                    }
                    return;
                }
                _ = tick.tick(), if params.bookmarks => {
                    let bm = json!({"type": "BOOKMARK", "object": {"kind": def.kind, "apiVersion": def.api_version(), "metadata": {"resourceVersion": last_rv.to_string()}}});
                    if tx.send(line(&bm)).await.is_err() { return; }
                }
                ev = rx.recv() => {
                    let ev: Arc<Event> = match ev {
                        Ok(e) => e,
                        // Fell behind: end the watch; the client lists again.
                        Err(_) => return,
                    };
                    if ev.rv <= last_rv { continue; }
                    last_rv = ev.rv;
                    if self.matches(ev.res, &ev.obj) && tx.send(self.event_line(ev.etype.as_str(), &ev.obj)).await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

fn opt_json(v: Option<Value>) -> Response<Body> {
    match v {
        Some(v) => json_response(200, &v),
        None => not_found_path(),
    }
}

/// API discovery: aggregated when the client asks for it, else the legacy documents; `None`
/// for a path that is not a discovery document.
fn serve_discovery(
    req: &Request<Incoming>,
    info: &ConnInfo,
    segs: &[&str],
    metrics: discovery::Served,
) -> Option<Response<Body>> {
    let accept = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .unwrap_or("");
    if discovery::wants_aggregated(accept) && matches!(segs, ["api"] | ["apis"]) {
        let doc = discovery::aggregated(segs == ["api"], metrics);
        return Some(bytes_response(
            200,
            discovery::AGGREGATED_CONTENT_TYPE,
            serde_json::to_vec(&doc).unwrap_or_default(),
        ));
    }
    match segs {
        ["api"] => Some(json_response(
            200,
            &discovery::api_versions(&info.server.to_string()),
        )),
        ["apis"] => Some(json_response(200, &discovery::api_group_list(metrics))),
        ["api", "v1"] => Some(opt_json(discovery::resource_list("", "v1", metrics))),
        ["apis", g] => Some(opt_json(discovery::api_group(g, metrics))),
        ["apis", g, v] => Some(opt_json(discovery::resource_list(g, v, metrics))),
        _ => None,
    }
}

/// The resource a path names, with its namespace and object name.
struct Target<'a> {
    def: &'static ResourceDef,
    ns: Option<&'a str>,
    name: Option<&'a str>,
}

/// What a path names; `None` (a 404) for a path that names no resource the environment
/// serves (or a namespace on a cluster-scoped one).
fn resource_target<'a>(segs: &[&'a str], metrics: discovery::Served) -> Option<Target<'a>> {
    let (group, version, rest): (&str, &str, &[&str]) = match segs {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    // rest: [plural] [plural name] [namespaces ns plural] [namespaces ns plural name]
    let (ns, plural, name) = match rest {
        [p] => (None, *p, None),
        ["namespaces", n] if group.is_empty() => (None, "namespaces", Some(*n)),
        ["namespaces", ns, p] => (Some(*ns), *p, None),
        ["namespaces", ns, p, n] => (Some(*ns), *p, Some(*n)),
        [p, n] => (None, *p, Some(*n)),
        _ => return None,
    };
    let def = resources::lookup(group, version, plural)?;
    if !metrics.group(def.group) {
        return None;
    }
    if ns.is_some() && !def.namespaced {
        return None;
    }
    Some(Target { def, ns, name })
}

/// The verb a request means, as the API server's request info names it.
fn verb_of(
    req: &Request<Incoming>,
    name: Option<&str>,
    query: &HashMap<String, String>,
) -> &'static str {
    if req.method() == Method::GET {
        if name.is_some() {
            "get"
        } else if is_true(query.get("watch")) {
            "watch"
        } else {
            "list"
        }
    } else {
        match *req.method() {
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => "unknown",
        }
    }
}

/// Why a verb is refused before it reaches the store: the read-only user may not write
/// (403, in RBAC's words), the lab writes only Leases (405), and the metrics API cannot be
/// watched (405).
fn refuse_verb(
    user: User,
    def: &ResourceDef,
    ns: Option<&str>,
    name: Option<&str>,
    verb: &str,
) -> Option<Response<Body>> {
    if !matches!(verb, "get" | "list" | "watch") {
        if user == User::ReadOnly {
            let scope = match ns {
                Some(n) => format!(" in the namespace \"{n}\""),
                None => String::new(),
            };
            let gr = if def.group.is_empty() {
                "\"\"".to_string()
            } else {
                format!("\"{}\"", def.group)
            };
            let msg = format!(
                "{}{} is forbidden: User \"{}\" cannot {verb} resource \"{}\" in API group {gr}{scope}",
                def.group_resource(),
                name.map(|n| format!(" \"{n}\"")).unwrap_or_default(),
                user.name(),
                def.plural,
            );
            let details =
                json!({"name": name.unwrap_or(""), "group": def.group, "kind": def.plural});
            return Some(status(403, "Forbidden", &msg, Some(details)));
        }
        // Leases are the one kind a client may write (the chaos step's run lease).
        if !(def.res == resources::Res::Leases && matches!(verb, "create" | "update")) {
            return Some(status(
                405,
                "MethodNotAllowed",
                &format!("the lab does not support {verb} on {}", def.plural),
                None,
            ));
        }
    }
    if verb == "watch" && def.read_only_api {
        return Some(status(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
            None,
        ));
    }
    None
}

fn is_true(v: Option<&String>) -> bool {
    v.is_some_and(|v| v == "1" || v == "true")
}

fn line(v: &Value) -> Bytes {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    b.push(b'\n');
    Bytes::from(b)
}

fn event_line(etype: &str, obj: &Value) -> Bytes {
    let mut b = Vec::with_capacity(1024);
    b.extend_from_slice(b"{\"type\":\"");
    b.extend_from_slice(etype.as_bytes());
    b.extend_from_slice(b"\",\"object\":");
    let _ = serde_json::to_writer(&mut b, obj);
    b.extend_from_slice(b"}\n");
    Bytes::from(b)
}

/// Write a list item; typed (built-in) kinds omit apiVersion and kind in lists.
fn write_item(out: &mut Vec<u8>, obj: &Value, typed: bool) {
    match obj.as_object() {
        Some(m) if typed => {
            out.push(b'{');
            let mut first = true;
            for (k, v) in m {
                if k == "apiVersion" || k == "kind" {
                    continue;
                }
                if !first {
                    out.push(b',');
                }
                first = false;
                let _ = serde_json::to_writer(&mut *out, k);
                out.push(b':');
                let _ = serde_json::to_writer(&mut *out, v);
            }
            out.push(b'}');
        }
        _ => {
            let _ = serde_json::to_writer(&mut *out, obj);
        }
    }
}

/// A page as [`page`] returns it: the revision, the objects, the key of the last one when more
/// follow, and how many remain.
type Page = (u64, Vec<Arc<Value>>, Option<(String, String)>, usize);

/// One page of a list: up to `limit` objects of `rest` that are `wanted` (all when `limit` is
/// 0), the key of the last when more follow, and how many remain when the list is unfiltered
/// (`total`: the objects from the page's start to the end, when known without a walk).
fn page<'a>(
    rv: u64,
    rest: impl Iterator<Item = (&'a (String, String), &'a Arc<Value>)>,
    limit: usize,
    unfiltered: bool,
    wanted: &dyn Fn(&Value) -> bool,
    total: Option<usize>,
) -> Page {
    let mut items = Vec::new();
    let mut last = None;
    let mut rest = rest.filter(|(_, o)| wanted(o));
    for (key, obj) in rest.by_ref() {
        items.push(obj.clone());
        last = Some(key);
        if limit > 0 && items.len() == limit {
            break;
        }
    }
    // Whether anything follows decides the token; how much is counted only when unfiltered
    // (kube-apiserver leaves it out otherwise), from `total` when known.
    let following = rest.next().is_some();
    let more = match (following, total) {
        (false, _) => 0,
        (true, Some(total)) if unfiltered => total.saturating_sub(items.len()).max(1),
        (true, None) if unfiltered => 1 + rest.count(),
        (true, _) => 1,
    };
    let next = following.then(|| last.cloned()).flatten();
    (rv, items, next, more)
}

/// A continue token: the revision, the last key returned and how many objects all pages so
/// far returned.
fn encode_continue(rv: u64, key: &(String, String), returned: usize) -> String {
    let start = format!("{}/{}", key.0, key.1);
    let doc = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start, "returned": returned});
    base64::engine::general_purpose::URL_SAFE.encode(doc.to_string())
}

fn decode_continue(c: &str) -> Option<((String, String), usize)> {
    let bytes = base64::engine::general_purpose::URL_SAFE
        .decode(c)
        .or_else(|_| base64::engine::general_purpose::STANDARD.decode(c))
        .ok()?;
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    let start = v.get("start")?.as_str()?;
    let (ns, name) = start.split_once('/')?;
    let returned = v.get("returned").and_then(Value::as_u64).unwrap_or(0) as usize;
    Some(((ns.to_string(), name.to_string()), returned))
}

/// Compare secrets without an early exit on the first differing byte.
fn constant_eq(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The `labelSelector` and `fieldSelector` of a list or watch, or the 400 the real server
/// answers for a bad one.
#[expect(
    clippy::result_large_err,
    reason = "the error is the response itself, built once per bad request"
)]
fn selectors(
    def: &ResourceDef,
    query: &HashMap<String, String>,
) -> Result<(Selector, Option<FieldSelector>), Response<Body>> {
    let labels = query
        .get("labelSelector")
        .map(|s| Selector::parse(s))
        .transpose()
        .map_err(|e| bad_request(&format!("unable to parse requirement: {e}")))?
        .unwrap_or_default();
    let fields = query
        .get("fieldSelector")
        .map(|s| FieldSelector::parse(s, def.field_selectors))
        .transpose()
        .map_err(|e| bad_request(&e))?;
    Ok((labels, fields))
}

/// The error event a watch from a compacted revision gets (410 Expired, in the stream, as the
/// API server's watch cache sends it).
fn expired(revision: u64) -> Value {
    json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": format!("too old resource version: {revision}"), "reason": "Expired", "code": 410}})
}
