//! Request dispatch and the endpoint handlers.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method};
use serde_json::{Map, Value, json};

use super::ProxmoxApi;
use super::auth::{Auth, authenticate, percent_decode};
use super::backend::{ActionError, HaState, HostCommand, HostInfo, VmAction, VmInfo, VmStatus};
use super::params::{self, Kind, Param, Values, opt, req, root};
use super::response::{self, Resp};
use super::tasks::Upid;

/// The parts of a request the handlers need.
pub struct Incoming<'a> {
    /// Host whose address received the request.
    pub host: &'a str,
    pub method: &'a Method,
    pub path: &'a str,
    pub query: &'a str,
    pub headers: &'a HeaderMap,
    pub body: &'a Bytes,
}

const API_PREFIX: &str = "/api2/json";

/// Authenticates, parses parameters and routes one request.
pub async fn dispatch(api: &Arc<ProxmoxApi>, inc: Incoming<'_>) -> Resp {
    let Some(rel) = inc.path.strip_prefix(API_PREFIX) else {
        return response::not_implemented(inc.method.as_str(), inc.path);
    };
    let rel = if rel.is_empty() { "/" } else { rel };
    let token = match token_of(api, inc.headers).await {
        Ok(token) => token,
        Err(resp) => return resp,
    };
    let values = match values_of(&inc) {
        Ok(values) => values,
        Err(resp) => return *resp,
    };
    let segments: Vec<String> = rel
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let seg: Vec<&str> = segments.iter().map(String::as_str).collect();
    let ctx = Ctx {
        api,
        host: inc.host,
        token: &token,
        values: &values,
    };
    let get = *inc.method == Method::GET;
    let post = *inc.method == Method::POST;
    // Permissions are checked before parameters and before proxying (403 even for a dead host).
    let may_power = !api.options.audit_tokens.iter().any(|t| t.id == token);
    if post
        && !may_power
        && let Some(denied) = power_denied(&seg, inc.host)
    {
        return denied;
    }
    match seg.as_slice() {
        ["version"] if get => ctx.checked(&[], |c| c.version()),
        ["nodes"] if get => ctx.checked(&[], |c| c.nodes()),
        ["cluster", "status"] if get => ctx.checked(&[], |c| c.cluster_status()),
        ["storage"] if get => ctx.checked(&[opt("type", Kind::String)], |c| c.storages()),
        ["cluster", "resources"] if get => ctx.checked(RESOURCES_SCHEMA, |c| c.resources()),
        ["cluster", "ha", "resources"] if get => ctx
            .checked(&[opt("type", Kind::Enum(&["ct", "vm"]))], |c| {
                c.ha_resources()
            }),
        ["nodes", node, "wakeonlan"] if post => ctx.checked(&[], |c| c.wakeonlan(node)),
        ["access", "permissions"] if get => ctx.checked(
            &[opt("path", Kind::String), opt("userid", Kind::String)],
            |c| c.permissions(may_power),
        ),
        ["nodes", node, rest @ ..] => {
            let node = match ctx.proxy_target(node).await {
                Ok(n) => n,
                Err(resp) => return resp,
            };
            node_route(&ctx, &node, rest, inc.method, rel, may_power)
        }
        _ => response::not_implemented(inc.method.as_str(), rel),
    }
}

/// The API token a request carries, among the full and the audit tokens; a 401 (after
/// Proxmox's delay for failed logins) without one that verifies.
async fn token_of(api: &Arc<ProxmoxApi>, headers: &HeaderMap) -> Result<String, Resp> {
    let all_tokens: Vec<_> = api
        .options
        .tokens
        .iter()
        .chain(&api.options.audit_tokens)
        .cloned()
        .collect();
    match authenticate(headers, &all_tokens) {
        Auth::Token(id) => Ok(id),
        Auth::Missing => {
            tokio::time::sleep(api.options.unauthorized_delay).await;
            Err(response::empty(401, "No ticket"))
        }
        Auth::Invalid => {
            tokio::time::sleep(api.options.unauthorized_delay).await;
            Err(response::empty(401, "Authentication failed!"))
        }
    }
}

/// The request's parameters: the query string, then the body as a form or JSON (refused
/// on GET and DELETE, as pveproxy does).
fn values_of(inc: &Incoming<'_>) -> Result<Values, Box<Resp>> {
    let mut values = Values::new();
    params::parse_form(inc.query.as_bytes(), &mut values);
    if !inc.body.is_empty() {
        if matches!(*inc.method, Method::GET | Method::DELETE) {
            return Err(Box::new(response::error(
                501,
                &format!("Unexpected content for method '{}'", inc.method),
            )));
        }
        let is_json = inc
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if is_json {
            if let Err(msg) = params::parse_json(inc.body, &mut values) {
                return Err(Box::new(response::error(400, &msg)));
            }
        } else {
            params::parse_form(inc.body, &mut values);
        }
    }
    Ok(values)
}

/// The 403 an audit token gets for a POST that needs a power or network privilege.
fn power_denied(seg: &[&str], host: &str) -> Option<Resp> {
    let denied = match seg {
        ["nodes", _, "qemu", vmid, "status", _] => Some(format!("/vms/{vmid}, VM.PowerMgmt")),
        ["nodes", _, "qemu", vmid, "config"] => Some(format!("/vms/{vmid}, VM.Config.Network")),
        ["nodes", node, "status" | "wakeonlan"] => {
            let node = if *node == "localhost" { host } else { node };
            Some(format!("/nodes/{node}, Sys.PowerMgmt"))
        }
        _ => None,
    };
    denied.map(|what| response::error(403, &format!("Permission check failed ({what})")))
}

/// The routes under `/nodes/{node}` once the node is known to answer: its VMs (list,
/// status, config, power actions), its tasks, its own config, status and power.
fn node_route(
    ctx: &Ctx<'_>,
    node: &str,
    rest: &[&str],
    method: &Method,
    rel: &str,
    may_power: bool,
) -> Resp {
    let get = *method == Method::GET;
    let post = *method == Method::POST;
    match (rest, get, post) {
        (["qemu"], true, _) => ctx.checked(&[opt("full", Kind::Boolean)], |c| c.qemu_list(node)),
        (["qemu", vmid, "status", "current"], true, _) => match parse_vmid(vmid) {
            Ok(id) => ctx.checked(&[], |c| c.vm_status(node, id)),
            Err(r) => *r,
        },
        (["qemu", vmid, "config"], true, _) => match parse_vmid(vmid) {
            Ok(id) => ctx.checked(CONFIG_SCHEMA, |c| c.vm_config(node, id)),
            Err(r) => *r,
        },
        (["qemu", vmid, "config"], false, false) if *method == Method::PUT => {
            if !may_power {
                return response::error(
                    403,
                    &format!("Permission check failed (/vms/{vmid}, VM.Config.Network)"),
                );
            }
            match parse_vmid(vmid) {
                Ok(id) => ctx.checked(SET_CONFIG_SCHEMA, |c| c.set_vm_config(node, id)),
                Err(r) => *r,
            }
        }
        (["qemu", vmid, "status", action], _, true) => {
            let (action, schema) = match *action {
                "start" => (VmAction::Start, START_SCHEMA),
                "stop" => (VmAction::Stop, STOP_SCHEMA),
                "shutdown" => (VmAction::Shutdown, SHUTDOWN_SCHEMA),
                _ => return response::not_implemented(method.as_str(), rel),
            };
            match parse_vmid(vmid) {
                Ok(id) => ctx.checked(schema, |c| c.vm_action(node, id, action)),
                Err(r) => *r,
            }
        }
        (["tasks", upid, "status"], true, _) => ctx.checked(&[], |c| c.task_status(node, upid)),
        (["tasks", upid, "log"], true, _) => ctx.checked(LOG_SCHEMA, |c| c.task_log(node, upid)),
        (["config"], true, _) => ctx.checked(&[], |c| c.node_config(node)),
        (["status"], true, _) => ctx.checked(&[], |c| c.node_status(node)),
        (["tasks"], true, _) => ctx.checked(TASKS_SCHEMA, |c| c.node_tasks(node)),
        (["status"], _, true) => ctx.checked(
            &[req("command", Kind::Enum(&["reboot", "shutdown"]))],
            |c| c.host_power(node),
        ),
        _ => response::not_implemented(method.as_str(), rel),
    }
}

/// The lab's `net0`: one virtio device on vmbr0 with the firewall on, its MAC from the vmid.
fn net0(vmid: u32, link_down: bool) -> String {
    let b = vmid.to_be_bytes();
    let mut text = format!(
        "virtio=BC:24:11:{:02X}:{:02X}:{:02X},bridge=vmbr0,firewall=1",
        b[1], b[2], b[3]
    );
    if link_down {
        text.push_str(",link_down=1");
    }
    text
}

/// A `netN` string without its `link_down` part, and that part's boolean (read with the
/// lab's own reading of Proxmox booleans), if present and valid.
fn split_link_down(value: &str) -> (String, Option<bool>) {
    let mut down = None;
    let rest: Vec<&str> = value
        .split(',')
        .filter(|part| match part.strip_prefix("link_down=") {
            Some(v) => {
                down = match v {
                    "1" | "true" | "yes" | "on" => Some(true),
                    "0" | "false" | "no" | "off" => Some(false),
                    _ => None,
                };
                false
            }
            None => true,
        })
        .collect();
    (rest.join(","), down)
}

/// A Proxmox boolean parameter that is set.
fn truthy(v: &str) -> bool {
    matches!(v, "1" | "true" | "yes" | "on")
}

const TASKS_SCHEMA: &[Param] = &[
    opt("start", Kind::Integer),
    opt("limit", Kind::Integer),
    opt("errors", Kind::Boolean),
    opt("since", Kind::Integer),
    opt("until", Kind::Integer),
    opt("statusfilter", Kind::String),
    opt("source", Kind::Enum(&["archive", "active", "all"])),
    opt("typefilter", Kind::String),
    opt("userfilter", Kind::String),
    opt("vmid", Kind::Integer),
];
const RESOURCES_SCHEMA: &[Param] = &[opt("type", Kind::Enum(&["vm", "storage", "node", "sdn"]))];
/// What the lab lets a config update change: `net0` (its `link_down` alone) under a digest.
const SET_CONFIG_SCHEMA: &[Param] = &[opt("net0", Kind::String), opt("digest", Kind::String)];
const CONFIG_SCHEMA: &[Param] = &[opt("current", Kind::Boolean), opt("snapshot", Kind::String)];
const START_SCHEMA: &[Param] = &[
    opt("timeout", Kind::Integer),
    opt("machine", Kind::String),
    root("skiplock", Kind::Boolean),
    root("stateuri", Kind::String),
    root("migratedfrom", Kind::String),
];
const STOP_SCHEMA: &[Param] = &[
    opt("timeout", Kind::Integer),
    opt("overrule-shutdown", Kind::Boolean),
    root("skiplock", Kind::Boolean),
    root("keepActive", Kind::Boolean),
    root("migratedfrom", Kind::String),
];
const SHUTDOWN_SCHEMA: &[Param] = &[
    opt("timeout", Kind::Integer),
    opt("forceStop", Kind::Boolean),
    root("skiplock", Kind::Boolean),
    root("keepActive", Kind::Boolean),
];
const LOG_SCHEMA: &[Param] = &[
    opt("start", Kind::Integer),
    opt("limit", Kind::Integer),
    opt("download", Kind::Boolean),
];

/// Validates a `{vmid}` path parameter; the error is the 400 response to send.
fn parse_vmid(text: &str) -> Result<u32, Box<Resp>> {
    let msg = match text.parse::<u64>() {
        Ok(n) if (100..=999_999_999).contains(&n) => return Ok(n as u32),
        Ok(n) if n < 100 => "value must have a minimum value of 100".to_string(),
        Ok(_) => "value must have a maximum value of 999999999".to_string(),
        Err(_) => format!("type check ('integer') failed - got '{text}'"),
    };
    let mut e = std::collections::BTreeMap::new();
    e.insert("vmid".to_string(), msg);
    Err(Box::new(response::param_errors(e)))
}

fn bool_int(b: bool) -> Value {
    json!(if b { 1 } else { 0 })
}

/// Per-request context.
struct Ctx<'a> {
    api: &'a Arc<ProxmoxApi>,
    host: &'a str,
    token: &'a str,
    values: &'a Values,
}

impl Ctx<'_> {
    /// Validates parameters against `schema`, then runs the handler.
    fn checked(&self, schema: &[Param], handler: impl FnOnce(&Self) -> Resp) -> Resp {
        let errors = params::validate(self.values, schema);
        if errors.is_empty() {
            handler(self)
        } else {
            response::param_errors(errors)
        }
    }

    fn hosts(&self) -> Vec<HostInfo> {
        self.api.backend.hosts()
    }

    /// Resolves `{node}` of a proxied call: `localhost` is the receiving host; an unknown name
    /// fails the DNS fallback; a host that is down makes the proxy fail with 595.
    async fn proxy_target(&self, node: &str) -> Result<String, Resp> {
        let name = if node == "localhost" { self.host } else { node };
        let valid = !name.is_empty()
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !name.starts_with('-')
            && !name.ends_with('-');
        if !valid {
            let mut e = std::collections::BTreeMap::new();
            e.insert(
                "node".to_string(),
                "invalid format - value does not look like a valid node name".to_string(),
            );
            return Err(response::param_errors(e));
        }
        let Some(online) = self.api.backend.host_online(name) else {
            return Err(response::error(
                500,
                &format!(
                    "hostname lookup '{name}' failed - failed to get address info for: {name}: Name or service not known"
                ),
            ));
        };
        if name != self.host && !online {
            tokio::time::sleep(self.api.options.unreachable_delay).await;
            return Err(response::empty(595, "No route to host"));
        }
        Ok(name.to_string())
    }

    fn version(&self) -> Resp {
        let version = &self.api.options.version;
        let release: Vec<&str> = version.split('.').take(2).collect();
        response::data(json!({
            "version": version,
            "release": release.join("."),
            "repoid": "1a2b3c4d5e6f7a8b",
        }))
    }

    fn node_entry(&self, h: &HostInfo, resources_style: bool) -> Value {
        let mut m = Map::new();
        m.insert("id".into(), json!(format!("node/{}", h.name)));
        m.insert("node".into(), json!(h.name));
        m.insert("type".into(), json!("node"));
        m.insert(
            "status".into(),
            json!(if h.online { "online" } else { "offline" }),
        );
        m.insert("level".into(), json!(""));
        if !resources_style && let Some(fp) = self.api.fingerprint(&h.name) {
            m.insert("ssl_fingerprint".into(), json!(fp));
        }
        // An offline host's last statistics linger (pmxcfs keeps the last status it got), but
        // it reports no CPU load or uptime.
        m.insert("maxcpu".into(), json!(h.maxcpu));
        m.insert("mem".into(), json!(h.mem));
        m.insert("maxmem".into(), json!(h.maxmem));
        m.insert("disk".into(), json!(h.disk));
        m.insert("maxdisk".into(), json!(h.maxdisk));
        if h.online {
            m.insert("cpu".into(), json!(h.cpu));
            m.insert("uptime".into(), json!(h.uptime));
        }
        Value::Object(m)
    }

    fn nodes(&self) -> Resp {
        let list: Vec<Value> = self
            .hosts()
            .iter()
            .map(|h| self.node_entry(h, false))
            .collect();
        response::data(Value::Array(list))
    }

    fn cluster_status(&self) -> Resp {
        let hosts = self.hosts();
        let online = hosts.iter().filter(|h| h.online).count();
        let quorate = online * 2 > hosts.len();
        let mut list = vec![json!({
            "type": "cluster",
            "id": "cluster",
            "name": self.api.backend.cluster_name(),
            "nodes": hosts.len(),
            "version": hosts.len() + 2,
            "quorate": bool_int(quorate),
        })];
        for (i, h) in hosts.iter().enumerate() {
            list.push(json!({
                "type": "node",
                "id": format!("node/{}", h.name),
                "name": h.name,
                "nodeid": i + 1,
                "ip": h.ip.to_string(),
                "local": bool_int(h.name == self.host),
                "online": bool_int(h.online),
                "level": "",
            }));
        }
        response::data(Value::Array(list))
    }

    fn quorate(&self) -> bool {
        let hosts = self.hosts();
        hosts.iter().filter(|h| h.online).count() * 2 > hosts.len()
    }

    fn vm_resource(vm: &VmInfo) -> Value {
        let mut m = Map::new();
        m.insert("id".into(), json!(format!("qemu/{}", vm.vmid)));
        m.insert("vmid".into(), json!(vm.vmid));
        m.insert("node".into(), json!(vm.node));
        m.insert("type".into(), json!("qemu"));
        m.insert("status".into(), json!(vm.status.as_str()));
        if vm.status != VmStatus::Unknown {
            m.insert("name".into(), json!(vm.name));
            m.insert("uptime".into(), json!(vm.uptime));
            m.insert("template".into(), json!(0));
            m.insert("maxcpu".into(), json!(vm.maxcpu));
            m.insert("cpu".into(), json!(vm.cpu));
            m.insert("maxmem".into(), json!(vm.maxmem));
            m.insert("mem".into(), json!(vm.mem));
            m.insert("maxdisk".into(), json!(vm.maxdisk));
            for key in ["disk", "netin", "netout", "diskread", "diskwrite"] {
                m.insert(key.into(), json!(0));
            }
        }
        if !vm.tags.is_empty() {
            m.insert("tags".into(), json!(vm.tags.join(";")));
        }
        if let Some(ha) = &vm.ha
            && vm.ha_managed()
        {
            m.insert("hastate".into(), json!(ha.crm_state));
        }
        Value::Object(m)
    }

    fn resources(&self) -> Resp {
        let kind = self.values.get("type").map(String::as_str);
        let mut list = Vec::new();
        if matches!(kind, None | Some("node")) {
            list.extend(self.hosts().iter().map(|h| self.node_entry(h, true)));
        }
        if matches!(kind, None | Some("vm")) {
            list.extend(self.api.backend.vms().iter().map(Self::vm_resource));
        }
        response::data(Value::Array(list))
    }

    fn ha_resources(&self) -> Resp {
        if self.values.get("type").is_some_and(|t| t == "ct") {
            return response::data(json!([]));
        }
        let list: Vec<Value> = self
            .api
            .backend
            .vms()
            .iter()
            .filter_map(|vm| {
                let ha = vm.ha.as_ref()?;
                Some(json!({
                    "sid": format!("vm:{}", vm.vmid),
                    "type": "vm",
                    "state": ha.requested.as_str(),
                    "max_restart": 1,
                    "max_relocate": 1,
                    "failback": 1,
                    "digest": sha1_hex(format!("vm:{}:{}", vm.vmid, ha.requested.as_str()).as_bytes()),
                }))
            })
            .collect();
        response::data(Value::Array(list))
    }

    /// vmstatus fields shared by `/qemu` and `status/current`; status is running or stopped.
    fn vmstatus(vm: &VmInfo) -> Map<String, Value> {
        let running = vm.status == VmStatus::Running;
        let mut m = Map::new();
        m.insert("vmid".into(), json!(vm.vmid));
        m.insert(
            "status".into(),
            json!(if running { "running" } else { "stopped" }),
        );
        m.insert("name".into(), json!(vm.name));
        m.insert("cpus".into(), json!(vm.maxcpu));
        m.insert("maxmem".into(), json!(vm.maxmem));
        m.insert("maxdisk".into(), json!(vm.maxdisk));
        m.insert("uptime".into(), json!(if running { vm.uptime } else { 0 }));
        m.insert("cpu".into(), json!(if running { vm.cpu } else { 0.0 }));
        m.insert("mem".into(), json!(if running { vm.mem } else { 0 }));
        for key in ["disk", "netin", "netout", "diskread", "diskwrite"] {
            m.insert(key.into(), json!(0));
        }
        if !vm.tags.is_empty() {
            m.insert("tags".into(), json!(vm.tags.join(";")));
        }
        if running {
            m.insert("pid".into(), json!(10_000 + vm.vmid % 50_000));
        }
        m
    }

    fn vm_on(&self, node: &str, vmid: u32) -> Option<VmInfo> {
        self.api.backend.vm(vmid).filter(|vm| vm.node == node)
    }

    fn qemu_list(&self, node: &str) -> Resp {
        let full = self.values.get("full").is_some_and(|v| truthy(v));
        let list: Vec<Value> = self
            .api
            .backend
            .vms()
            .iter()
            .filter(|vm| vm.node == node)
            .map(|vm| {
                let mut m = Self::vmstatus(vm);
                // `full=1` asks QEMU of each running VM (QMP), as vmstatus does.
                if full && vm.status == VmStatus::Running {
                    m.insert("qmpstatus".into(), json!("running"));
                    m.insert("running-machine".into(), json!("pc-i440fx-9.2+pve1"));
                    m.insert("running-qemu".into(), json!("9.2.0"));
                }
                Value::Object(m)
            })
            .collect();
        response::data(Value::Array(list))
    }

    fn missing_config(node: &str, vmid: u32) -> String {
        format!("Configuration file 'nodes/{node}/qemu-server/{vmid}.conf' does not exist")
    }

    fn vm_status(&self, node: &str, vmid: u32) -> Resp {
        let Some(vm) = self.vm_on(node, vmid) else {
            return response::error(500, &Self::missing_config(node, vmid));
        };
        let mut m = Self::vmstatus(&vm);
        let running = vm.status == VmStatus::Running;
        m.insert(
            "qmpstatus".into(),
            json!(if running { "running" } else { "stopped" }),
        );
        let ha = match &vm.ha {
            Some(ha) if vm.ha_managed() => json!({"managed": 1, "state": ha.requested.as_str()}),
            _ => json!({"managed": 0}),
        };
        m.insert("ha".into(), ha);
        if running {
            m.insert("running-machine".into(), json!("pc-i440fx-9.2+pve1"));
            m.insert("running-qemu".into(), json!("9.2.0"));
        }
        response::data(Value::Object(m))
    }

    /// `GET /storage` as `PVE::API2::Storage::Config::index` answers it: each storage's
    /// configuration with its id, `shared: 1` where Proxmox counts it shared, the config
    /// digest; `type` filters.
    fn storages(&self) -> Resp {
        let wanted = self.values.get("type");
        let list: Vec<Value> = self
            .api
            .backend
            .storages()
            .into_iter()
            .filter(|s| wanted.is_none_or(|t| *t == s.kind))
            .map(|s| {
                let mut m = Map::new();
                m.insert("storage".into(), json!(s.storage));
                m.insert("type".into(), json!(s.kind));
                let content = match s.kind.as_str() {
                    "dir" => "backup,iso,vztmpl",
                    _ => "images,rootdir",
                };
                m.insert("content".into(), json!(content));
                if s.shared {
                    m.insert("shared".into(), json!(1));
                }
                m.insert(
                    "digest".into(),
                    json!("0a4c2f1e9d8b7a6c5e4f3a2b1c0d9e8f7a6b5c4d"),
                );
                Value::Object(m)
            })
            .collect();
        response::data(Value::Array(list))
    }

    fn vm_config(&self, node: &str, vmid: u32) -> Resp {
        match self.config_map(node, vmid) {
            Some(m) => response::data(Value::Object(m)),
            None => response::error(500, &Self::missing_config(node, vmid)),
        }
    }

    /// The VM's config as served, with its digest; `None` when it is not on `node`.
    fn config_map(&self, node: &str, vmid: u32) -> Option<Map<String, Value>> {
        let (Some(_), Some(cfg)) = (self.vm_on(node, vmid), self.api.backend.vm_config(vmid))
        else {
            return None;
        };
        let mut m = Map::new();
        m.insert("name".into(), json!(cfg.name));
        m.insert("cores".into(), json!(cfg.cores));
        m.insert("sockets".into(), json!(cfg.sockets));
        // `memory` is a property string in current Proxmox, hence a JSON string.
        m.insert("memory".into(), json!(cfg.memory_mib.to_string()));
        m.insert("ostype".into(), json!("l26"));
        m.insert("scsihw".into(), json!("virtio-scsi-single"));
        m.insert("boot".into(), json!("order=scsi0;net0"));
        m.insert(
            "scsi0".into(),
            json!(format!(
                "{}:vm-{vmid}-disk-0,iothread=1,size=64G",
                cfg.disk_storage
            )),
        );
        m.insert("net0".into(), json!(net0(vmid, cfg.link_down)));
        if cfg.onboot {
            m.insert("onboot".into(), json!(1));
        }
        if let Some(uuid) = &cfg.smbios_uuid {
            m.insert("smbios1".into(), json!(format!("uuid={uuid}")));
        }
        if !cfg.tags.is_empty() {
            m.insert("tags".into(), json!(cfg.tags.join(";")));
        }
        let digest = sha1_hex(Value::Object(m.clone()).to_string().as_bytes());
        m.insert("digest".into(), json!(digest));
        Some(m)
    }

    /// `PUT /nodes/{node}/qemu/{vmid}/config` (the synchronous update): the digest must be the
    /// config's, and `net0` must be the device as rendered with only `link_down` changed,
    /// which is applied live as qemu-server's `set_link` does. Returns `null`.
    fn set_vm_config(&self, node: &str, vmid: u32) -> Resp {
        let (Some(_), Some(cfg)) = (self.vm_on(node, vmid), self.api.backend.vm_config(vmid))
        else {
            return response::error(500, &Self::missing_config(node, vmid));
        };
        let current = self.config_map(node, vmid).unwrap_or_default();
        if let Some(digest) = self.values.get("digest")
            && current.get("digest").and_then(Value::as_str) != Some(digest.as_str())
        {
            return response::error(
                500,
                "detected modified configuration - file changed by other user? Try again.",
            );
        }
        let Some(value) = self.values.get("net0") else {
            return response::data(Value::Null);
        };
        let (rest, down) = split_link_down(value);
        if rest != net0(vmid, false) || down.is_none() {
            return response::error(
                400,
                &format!("the lab changes only link_down of net0, written back whole: {value:?}"),
            );
        }
        let down = down.unwrap_or(cfg.link_down);
        match self.api.backend.set_link(vmid, down) {
            Ok(()) => response::data(Value::Null),
            Err(e) => response::error(500, &e.to_string()),
        }
    }

    fn host_pstart(&self, node: &str) -> u64 {
        // Process start in clock ticks (100 Hz) since the host booted.
        self.hosts()
            .iter()
            .find(|h| h.name == node)
            .map(|h| h.uptime.saturating_mul(100).max(1000))
            .unwrap_or(1000)
    }

    fn vm_action(&self, node: &str, vmid: u32, action: VmAction) -> Resp {
        let ha_vm = self.api.backend.vm(vmid).filter(|vm| vm.ha_managed());
        if action == VmAction::Start && !self.quorate() {
            return response::error(500, "cluster not ready - no quorum?");
        }
        let worker_type = match (&ha_vm, action) {
            (Some(_), VmAction::Start) => "hastart",
            (Some(_), _) => "hastop",
            (None, a) => a.task_type(),
        };
        let first_line = ha_vm.as_ref().map(|_| {
            let verb = if action == VmAction::Start {
                "start"
            } else {
                "stop"
            };
            format!("Requesting HA {verb} for VM {vmid}")
        });
        let upid = self.api.tasks.start(
            node,
            self.host_pstart(node),
            worker_type,
            &vmid.to_string(),
            self.token,
            first_line,
        );
        let api = self.api.clone();
        let node = node.to_string();
        let task_upid = upid.clone();
        let is_ha = ha_vm.is_some();
        let duration = match action {
            VmAction::Stop => api.options.stop_duration,
            VmAction::Start | VmAction::Shutdown => api.options.task_duration,
        };
        tokio::spawn(async move {
            tokio::time::sleep(duration).await;
            let result = run_vm_action(&api, &node, vmid, action, is_ha);
            api.tasks.finish(&task_upid, result);
        });
        response::data(json!(upid.encode()))
    }

    /// The task named by `upid_text` if it ran on `node`; else the `upid` parameter error.
    fn find_task(&self, node: &str, upid_text: &str) -> Result<super::tasks::Task, &'static str> {
        let upid = Upid::parse(upid_text).ok_or("unable to parse worker upid")?;
        // Task logs are local to the node that ran the task.
        if upid.node != node {
            return Err("no such task");
        }
        self.api.tasks.get(&upid).ok_or("no such task")
    }

    fn upid_error(msg: &str) -> Resp {
        let mut e = std::collections::BTreeMap::new();
        e.insert("upid".to_string(), msg.to_string());
        response::param_errors(e)
    }

    fn task_status(&self, node: &str, upid_text: &str) -> Resp {
        let task = match self.find_task(node, upid_text) {
            Ok(t) => t,
            Err(msg) => return Self::upid_error(msg),
        };
        let u = &task.upid;
        let mut m = Map::new();
        m.insert("upid".into(), json!(u.encode()));
        m.insert("node".into(), json!(u.node));
        m.insert("pid".into(), json!(u.pid));
        m.insert("pstart".into(), json!(u.pstart));
        m.insert("starttime".into(), json!(u.starttime));
        m.insert("type".into(), json!(u.worker_type));
        m.insert("id".into(), json!(u.id));
        match u.user.split_once('!') {
            Some((user, tokenid)) => {
                m.insert("user".into(), json!(user));
                m.insert("tokenid".into(), json!(tokenid));
            }
            None => {
                m.insert("user".into(), json!(u.user));
            }
        }
        match &task.exitstatus {
            None => {
                m.insert("status".into(), json!("running"));
            }
            Some(exit) => {
                m.insert("status".into(), json!("stopped"));
                m.insert("exitstatus".into(), json!(exit));
            }
        }
        response::data(Value::Object(m))
    }

    fn task_log(&self, node: &str, upid_text: &str) -> Resp {
        let task = match self.find_task(node, upid_text) {
            Ok(t) => t,
            Err(msg) => return Self::upid_error(msg),
        };
        let int = |k: &str, d: usize| {
            self.values
                .get(k)
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(d)
        };
        let start = int("start", 0);
        let limit = int("limit", 50);
        let lines: Vec<Value> = task
            .log
            .iter()
            .enumerate()
            .skip(start)
            .take(limit)
            .map(|(i, t)| json!({"n": i + 1, "t": t}))
            .collect();
        response::data_with(Value::Array(lines), Some(task.log.len()))
    }

    /// `GET /nodes/{node}/status`: the host's own view (load, memory, CPU, versions).
    fn node_status(&self, node: &str) -> Resp {
        let Some(h) = self.hosts().into_iter().find(|h| h.name == node) else {
            return response::error(500, &format!("no such node '{node}'"));
        };
        let free = h.maxmem.saturating_sub(h.mem);
        let load = |f: f64| format!("{:.2}", h.cpu * f64::from(h.maxcpu) * f);
        let version = &self.api.options.version;
        response::data(json!({
            "uptime": h.uptime,
            "cpu": h.cpu,
            "wait": 0.0,
            "idle": 0,
            "loadavg": [load(1.0), load(0.9), load(0.8)],
            "memory": {"total": h.maxmem, "used": h.mem, "free": free, "available": free},
            "swap": {"total": 0, "used": 0, "free": 0},
            "rootfs": {"total": h.maxdisk, "used": h.disk, "free": h.maxdisk.saturating_sub(h.disk), "avail": h.maxdisk.saturating_sub(h.disk)},
            "ksm": {"shared": 0},
            "cpuinfo": {
                "model": "QEMU Virtual CPU version 2.5+",
                "cpus": h.maxcpu,
                "sockets": 1,
                "cores": h.maxcpu,
                "mhz": "2999.998",
                "hvm": "1",
                "user_hz": 100,
                "flags": "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov",
            },
            "kversion": "Linux 6.14.8-2-pve #1 SMP PREEMPT_DYNAMIC PMX 6.14.8-2 (2025-07-22T10:04Z) x86_64",
            "current-kernel": {"sysname": "Linux", "release": "6.14.8-2-pve", "version": "#1 SMP PREEMPT_DYNAMIC PMX 6.14.8-2 (2025-07-22T10:04Z)", "machine": "x86_64"},
            "pveversion": format!("pve-manager/{version}/1a2b3c4d5e6f7a8b"),
            "boot-info": {"mode": "efi", "secureboot": 0},
        }))
    }

    /// `GET /nodes/{node}/tasks`: by default finished tasks only (`source=archive`), newest
    /// first, `start`/`limit` paging, `total` beside the data.
    fn node_tasks(&self, node: &str) -> Resp {
        let source = self
            .values
            .get("source")
            .map(String::as_str)
            .unwrap_or("archive");
        let int = |k: &str, d: usize| {
            self.values
                .get(k)
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(d)
        };
        let errors_only = self.values.get("errors").is_some_and(|v| truthy(v));
        let vmid = self.values.get("vmid").cloned();
        let typefilter = self.values.get("typefilter").cloned();
        let userfilter = self.values.get("userfilter").cloned();
        let tasks: Vec<_> = self
            .api
            .tasks
            .on_node(node)
            .into_iter()
            .filter(|t| match source {
                "active" => t.exitstatus.is_none(),
                "all" => true,
                _ => t.exitstatus.is_some(),
            })
            .filter(|t| !errors_only || t.exitstatus.as_deref().is_some_and(|e| e != "OK"))
            .filter(|t| vmid.as_ref().is_none_or(|v| &t.upid.id == v))
            .filter(|t| typefilter.as_ref().is_none_or(|f| &t.upid.worker_type == f))
            .filter(|t| {
                userfilter
                    .as_ref()
                    .is_none_or(|f| t.upid.user.contains(f.as_str()))
            })
            .collect();
        let total = tasks.len();
        let list: Vec<Value> = tasks
            .iter()
            .skip(int("start", 0))
            .take(int("limit", 50))
            .map(|t| {
                let u = &t.upid;
                let mut m = Map::new();
                m.insert("upid".into(), json!(u.encode()));
                m.insert("node".into(), json!(u.node));
                m.insert("pid".into(), json!(u.pid));
                m.insert("pstart".into(), json!(u.pstart));
                m.insert("starttime".into(), json!(u.starttime));
                m.insert("type".into(), json!(u.worker_type));
                m.insert("id".into(), json!(u.id));
                m.insert("user".into(), json!(u.user));
                if let Some(exit) = &t.exitstatus {
                    m.insert("status".into(), json!(exit));
                }
                if let Some(end) = t.endtime {
                    m.insert("endtime".into(), json!(end));
                }
                Value::Object(m)
            })
            .collect();
        response::data_with(Value::Array(list), Some(total))
    }

    /// `GET /access/permissions`: the calling token's privileges by ACL path (all on `/`,
    /// propagated), or those on `path` when asked.
    fn permissions(&self, may_power: bool) -> Resp {
        let mut privs = Map::new();
        let mut names = vec!["Sys.Audit", "VM.Audit", "Datastore.Audit"];
        if may_power {
            names.extend(["Sys.PowerMgmt", "VM.PowerMgmt"]);
        }
        names.sort_unstable();
        for p in names {
            privs.insert(p.into(), json!(1));
        }
        let path = self
            .values
            .get("path")
            .cloned()
            .unwrap_or_else(|| "/".into());
        let mut out = Map::new();
        out.insert(path, Value::Object(privs));
        response::data(Value::Object(out))
    }

    fn host_power(&self, node: &str) -> Resp {
        let command = match self.values.get("command").map(String::as_str) {
            Some("reboot") => HostCommand::Reboot,
            _ => HostCommand::Shutdown,
        };
        match self.api.backend.host_power(node, command) {
            Ok(()) => response::data(Value::Null),
            Err(e) => response::error(500, &e.to_string()),
        }
    }

    /// The node's config: only `wakeonlan` is modelled (absent when no MAC is set).
    fn node_config(&self, node: &str) -> Resp {
        let mut config = Map::new();
        if let Some(property) = self.api.backend.wakeonlan_property(node) {
            config.insert("wakeonlan".into(), json!(property));
        }
        response::data(Value::Object(config))
    }

    /// Not proxied: the receiving host sends the magic packet for `{node}`.
    fn wakeonlan(&self, node: &str) -> Resp {
        let target = if node == "localhost" { self.host } else { node };
        if target == self.host {
            return response::error(
                500,
                &format!("'{target}' is local node, cannot wake my self!"),
            );
        }
        if !self.hosts().iter().any(|h| h.name == target) {
            return response::error(500, &format!("no such cluster node '{target}'"));
        }
        match self.api.backend.wake_on_lan(self.host, target) {
            Ok(mac) => response::data(json!(mac)),
            Err(e) => response::error(500, &e.to_string()),
        }
    }
}

/// The work of a finished power task: checks where the guest lives, then asks the backend.
fn run_vm_action(
    api: &ProxmoxApi,
    node: &str,
    vmid: u32,
    action: VmAction,
    is_ha: bool,
) -> Result<(), String> {
    if is_ha {
        let state = if action == VmAction::Start {
            HaState::Started
        } else {
            HaState::Stopped
        };
        return api
            .backend
            .ha_request(vmid, state)
            .map_err(|e| e.to_string());
    }
    let on_node = api.backend.vm(vmid).is_some_and(|vm| vm.node == node);
    if !on_node {
        return Err(match action {
            VmAction::Start => Ctx::missing_config(node, vmid),
            _ => format!("unable to find configuration file for VM {vmid} on node '{node}'"),
        });
    }
    match api.backend.vm_power(vmid, action) {
        Ok(()) => Ok(()),
        Err(ActionError::AlreadyRunning) => Err(format!("VM {vmid} already running")),
        Err(ActionError::Failed(text)) => Err(text),
    }
}

fn sha1_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
