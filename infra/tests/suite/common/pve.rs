//! A small Proxmox VE API stand-in over real TLS on loopback: token auth with empty-body
//! 401s, `{"data":...}` envelopes, 500 for missing VMs, 595 for a node that is down,
//! UPID tasks that run for a few polls, and HA VMs whose stop is only a request.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::{self, pki_types::PrivateKeyDer, pki_types::pem::PemObject as _};

use super::pki::Leaf;

pub const TOKEN_ID: &str = "gates@pve!lab";
pub const SECRET: &str = "5e1f0c2a-8d3b-4c6e-9f70-1a2b3c4d5e6f";

#[derive(Clone)]
pub struct Vm {
    pub vmid: u32,
    pub name: String,
    pub node: String,
    pub status: String,
    pub tags: String,
    pub smbios1: Option<String>,
    /// HA requested state when HA-managed.
    pub ha: Option<String>,
    pub kind: &'static str,
}

impl Vm {
    pub fn qemu(vmid: u32, name: &str, node: &str, uuid: &str, tags: &str) -> Vm {
        Vm {
            vmid,
            name: name.into(),
            node: node.into(),
            status: "running".into(),
            tags: tags.into(),
            smbios1: Some(format!("uuid={uuid}")),
            ha: None,
            kind: "qemu",
        }
    }
}

struct Task {
    node: String,
    vmid: u32,
    /// Status polls left before the task is stopped.
    polls_left: u32,
    exitstatus: String,
    /// VM status to apply when the task ends (non-HA) or later (HA).
    apply: Option<String>,
}

#[derive(Default)]
pub struct State {
    pub nodes: Vec<(String, String)>,
    pub vms: BTreeMap<u32, Vm>,
    pub down: Vec<String>,
    /// Polls a task runs before it stops.
    pub task_polls: u32,
    /// Make the next task fail with this exit status.
    pub fail_next_task: Option<String>,
    /// Tasks never finish.
    pub tasks_hang: bool,
    /// HA: status/current polls before an HA-requested state becomes real.
    pub ha_delay_polls: u32,
    pending_ha: BTreeMap<u32, (u32, String)>,
    tasks: BTreeMap<String, Task>,
    next_pid: u32,
    /// Answer errors like PVE before libpve-http-server-perl 5.2: text only in the
    /// reason phrase, body `{"data":null}`.
    pub legacy_errors: bool,
    /// Paths (after /api2/json) answered 403, as for a token without the privilege.
    pub forbidden: Vec<String>,
    /// "METHOD path" of every authenticated request.
    pub log: Vec<String>,
    /// Authorization headers that were refused.
    pub refused_auth: Vec<String>,
}

pub struct Pve {
    pub addr: SocketAddr,
    pub state: Arc<Mutex<State>>,
}

impl Pve {
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    pub fn log(&self) -> Vec<String> {
        self.state.lock().expect("lock").log.clone()
    }

    pub fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.state.lock().expect("lock"))
    }
}

/// Serves on 127.0.0.1:0 with the given server certificate.
pub async fn serve(cert: &Leaf, state: State) -> Pve {
    let certs = vec![rustls::pki_types::CertificateDer::from(
        cert.cert_der.clone(),
    )];
    let key = PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes()).expect("key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .expect("server config");
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let state = Arc::new(Mutex::new(state));
    let shared = state.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let state = shared.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(move |req| {
                    let state = state.clone();
                    async move { Ok::<_, std::convert::Infallible>(handle(&state, req)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Pve { addr, state }
}

fn reply(status: u16, reason: Option<&'static str>, body: Option<Value>) -> Response<Full<Bytes>> {
    let bytes = body.map(|b| b.to_string()).unwrap_or_default();
    let mut resp = Response::new(Full::new(Bytes::from(bytes)));
    *resp.status_mut() = StatusCode::from_u16(status).expect("status");
    if let Some(reason) = reason {
        resp.extensions_mut()
            .insert(hyper::ext::ReasonPhrase::from_static(reason.as_bytes()));
    }
    resp.headers_mut().insert(
        "content-type",
        "application/json;charset=UTF-8".parse().expect("header"),
    );
    resp
}

fn data(v: Value) -> Response<Full<Bytes>> {
    reply(200, None, Some(json!({ "data": v })))
}

fn fail(status: u16, message: &str) -> Response<Full<Bytes>> {
    reply(
        status,
        None,
        Some(json!({ "data": null, "message": format!("{message}\n") })),
    )
}

fn handle(state: &Mutex<State>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let legacy = state.lock().expect("lock").legacy_errors;
    let resp = route(state, req);
    if !legacy || resp.status().as_u16() < 400 {
        return resp;
    }
    // Move the JSON message into the reason phrase, as older servers did.
    let status = resp.status();
    let body: Option<Value> = {
        let bytes = resp.into_body();
        let collected = futures_lite_block(bytes);
        serde_json::from_slice(&collected).ok()
    };
    let message = body
        .as_ref()
        .and_then(|b| b.get("message"))
        .and_then(Value::as_str)
        .map(|m| m.trim().to_string());
    let mut out = reply(status.as_u16(), None, Some(json!({ "data": null })));
    if let Some(m) = message
        && let Ok(reason) = hyper::ext::ReasonPhrase::try_from(m)
    {
        out.extensions_mut().insert(reason);
    }
    out
}

/// The test bodies are `Full`, so their single frame is ready at once.
fn futures_lite_block(body: Full<Bytes>) -> Vec<u8> {
    use http_body_util::BodyExt as _;
    let mut fut = std::pin::pin!(body.collect());
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    match fut.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(Ok(collected)) => collected.to_bytes().to_vec(),
        _ => Vec::new(),
    }
}

fn route(state: &Mutex<State>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let mut s = state.lock().expect("lock");
    let auth = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    if auth.is_empty() {
        return reply(401, Some("No ticket"), None);
    }
    if auth != format!("PVEAPIToken={TOKEN_ID}={SECRET}") {
        s.refused_auth.push(auth);
        return reply(401, Some("Authentication failed!"), None);
    }
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    s.log.push(format!("{method} {path}"));
    let Some(rest) = path.strip_prefix("/api2/json/") else {
        return fail(501, &format!("Method '{method} {path}' not implemented"));
    };
    if s.forbidden.iter().any(|f| f == rest) {
        return fail(
            403,
            &format!("Permission check failed (/{rest}, Sys.Audit)"),
        );
    }
    let decoded: Vec<String> = rest.split('/').map(percent_decode).collect();
    let parts: Vec<&str> = decoded.iter().map(String::as_str).collect();
    match (method.as_str(), parts.as_slice()) {
        ("GET", ["version"]) => data(json!({"version": "9.2.11", "release": "9.2", "repoid": "0123456789abcdef"})),
        ("GET", ["nodes"]) => data(Value::Array(
            s.nodes
                .iter()
                .map(|(n, fp)| {
                    let status = if s.down.contains(n) { "offline" } else { "online" };
                    json!({"node": n, "id": format!("node/{n}"), "type": "node", "status": status, "ssl_fingerprint": fp, "level": ""})
                })
                .collect(),
        )),
        ("GET", ["cluster", "resources"]) => {
            if query != "type=vm" {
                return fail(400, "test server expects type=vm");
            }
            data(Value::Array(
                s.vms
                    .values()
                    .map(|vm| {
                        let mut row = json!({
                            "id": format!("{}/{}", vm.kind, vm.vmid), "vmid": vm.vmid, "name": vm.name,
                            "node": vm.node, "type": vm.kind, "status": vm.status, "template": 0,
                            "tags": vm.tags,
                        });
                        if vm.ha.is_some() {
                            row["hastate"] = json!(vm.ha.clone());
                        }
                        row
                    })
                    .collect(),
            ))
        }
        ("GET", ["cluster", "ha", "resources"]) => data(Value::Array(
            s.vms
                .values()
                .filter_map(|vm| vm.ha.as_ref().map(|st| json!({"sid": format!("vm:{}", vm.vmid), "type": "vm", "state": st, "max_restart": 1})))
                .collect(),
        )),
        (_, ["nodes", node, ..]) if s.down.iter().any(|d| d == node) => {
            reply(595, Some("No route to host"), None)
        }
        ("GET", ["nodes", node, "qemu", id, "config"]) => match find_vm(&s, node, id) {
            Some(vm) => {
                let mut cfg = json!({"name": vm.name, "memory": "2048", "cores": 2, "tags": vm.tags, "digest": "abc"});
                if let Some(smbios) = &vm.smbios1 {
                    cfg["smbios1"] = json!(smbios);
                }
                data(cfg)
            }
            None => missing(node, id),
        },
        ("GET", ["nodes", node, "qemu", id, "status", "current"]) => {
            let Some(vm) = find_vm(&s, node, id).cloned() else { return missing(node, id) };
            // HA applies requested states a few polls later.
            if let Some((left, target)) = s.pending_ha.get(&vm.vmid).cloned() {
                if left == 0 {
                    s.pending_ha.remove(&vm.vmid);
                    if let Some(v) = s.vms.get_mut(&vm.vmid) {
                        v.status = target;
                    }
                } else {
                    s.pending_ha.insert(vm.vmid, (left - 1, target));
                }
            }
            let vm = s.vms.get(&vm.vmid).cloned().expect("vm");
            let ha = match &vm.ha {
                Some(state) => json!({"managed": 1, "state": state}),
                None => json!({"managed": 0}),
            };
            data(json!({"vmid": vm.vmid, "name": vm.name, "status": vm.status, "qmpstatus": vm.status, "ha": ha}))
        }
        ("POST", ["nodes", node, "qemu", id, "status", action @ ("start" | "stop")]) => {
            let Some(vm) = find_vm(&s, node, id).cloned() else { return missing(node, id) };
            let ha = vm.ha.is_some();
            let kind = match (*action, ha) {
                ("start", false) => "qmstart",
                ("stop", false) => "qmstop",
                ("start", true) => "hastart",
                _ => "hastop",
            };
            s.next_pid += 1;
            let upid = format!(
                "UPID:{node}:{:08X}:{:08X}:{:08X}:{kind}:{}:{TOKEN_ID}:",
                0x3000 + s.next_pid, 0x1FE23176, 0x619510B1, vm.vmid
            );
            let target = if *action == "start" { "running" } else { "stopped" };
            let mut exitstatus = "OK".to_string();
            if !ha && *action == "start" && vm.status == "running" {
                exitstatus = format!("VM {} already running", vm.vmid);
            }
            if let Some(f) = s.fail_next_task.take() {
                exitstatus = f;
            }
            let apply = (exitstatus == "OK").then(|| target.to_string());
            if ha && let Some(v) = s.vms.get_mut(&vm.vmid) {
                v.ha = Some(if *action == "start" { "started" } else { "stopped" }.into());
            }
            let polls_left = if s.tasks_hang { u32::MAX } else { s.task_polls };
            s.tasks.insert(upid.clone(), Task { node: node.to_string(), vmid: vm.vmid, polls_left, exitstatus, apply });
            data(json!(upid))
        }
        ("GET", ["nodes", node, "tasks", upid, "status"]) => {
            let ha_delay = s.ha_delay_polls;
            let Some(task) = s.tasks.get_mut(*upid) else {
                return reply(400, None, Some(json!({"data": null, "errors": {"upid": "no such task"}, "message": "Parameter verification failed.\n"})));
            };
            if task.node != *node {
                return reply(400, None, Some(json!({"data": null, "errors": {"upid": "no such task"}, "message": "Parameter verification failed.\n"})));
            }
            if task.polls_left > 0 {
                task.polls_left -= 1;
                return data(json!({"upid": upid, "node": node, "status": "running", "type": "qmstop"}));
            }
            let exitstatus = task.exitstatus.clone();
            let (vmid, apply) = (task.vmid, task.apply.take());
            if let Some(target) = apply {
                let is_ha = s.vms.get(&vmid).is_some_and(|v| v.ha.is_some());
                if is_ha {
                    s.pending_ha.insert(vmid, (ha_delay, target));
                } else if let Some(v) = s.vms.get_mut(&vmid) {
                    v.status = target;
                }
            }
            data(json!({"upid": upid, "node": node, "status": "stopped", "exitstatus": exitstatus}))
        }
        _ => fail(501, &format!("Method '{method} /{rest}' not implemented")),
    }
}

fn find_vm<'a>(s: &'a State, node: &str, id: &str) -> Option<&'a Vm> {
    let vmid: u32 = id.parse().ok()?;
    s.vms.get(&vmid).filter(|vm| vm.node == node)
}

fn missing(node: &str, id: &str) -> Response<Full<Bytes>> {
    fail(
        500,
        &format!("Configuration file 'nodes/{node}/qemu-server/{id}.conf' does not exist"),
    )
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(b) if bytes[i] == b'%' => {
                out.push(b);
                i += 3;
            }
            _ => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
