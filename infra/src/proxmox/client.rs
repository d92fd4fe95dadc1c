//! The Proxmox VE HTTP client: token auth, TLS trust, short-lived keep-alive, error
//! mapping, and the typed calls gates makes.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::{Method, StatusCode, Url, header::AUTHORIZATION};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::{ProxmoxError, from_cause, from_status};
use super::model::{
    ClusterVm, HaResource, PveNode, PveVersion, RawHaResource, RawResource, RawVmStatus, Storage,
    TaskStatus, VmConfig, VmStatus,
};
use super::net::VmNetDevices;
use super::secret::ApiToken;
use super::tls::{TlsTrust, client_config};
use super::upid::Upid;
use crate::retry::RetryPolicy;
use crate::transport::{chain_text, transport_cause};

/// pveproxy closes idle keep-alive connections after 5 s; drop ours well before.
const POOL_IDLE: Duration = Duration::from_secs(3);

/// Where and how to reach the Proxmox VE API.
#[derive(Debug, Clone)]
pub struct ProxmoxSettings {
    /// `https://host:8006` (the `/api2/json` prefix is added).
    pub url: String,
    pub token: ApiToken,
    pub trust: TlsTrust,
    pub connect_timeout: Duration,
    /// Per request. Proxied calls to a dead node take up to pveproxy's 30 s, so keep it above.
    pub request_timeout: Duration,
    /// Retries of GETs on dropped connections and timeouts (never POSTs).
    pub retry: RetryPolicy,
}

impl ProxmoxSettings {
    /// Defaults: 5 s connect, 45 s per request, the default read retry.
    pub fn new(url: impl Into<String>, token: ApiToken, trust: TlsTrust) -> Self {
        Self {
            url: url.into(),
            token,
            trust,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(45),
            retry: RetryPolicy::default(),
        }
    }
}

/// A Proxmox VE API client. Cheap to clone (shares the connection pool).
#[derive(Debug, Clone)]
pub struct ProxmoxClient {
    http: reqwest::Client,
    base: Url,
    token: ApiToken,
    request_timeout: Duration,
    retry: RetryPolicy,
}

impl ProxmoxClient {
    pub fn new(settings: ProxmoxSettings) -> Result<Self, ProxmoxError> {
        let mut base = Url::parse(&settings.url).map_err(|e| ProxmoxError::InvalidSettings {
            reason: format!("url {:?}: {e}", settings.url),
        })?;
        // Accept `https://host:8006/api2/json` too; the prefix is added per request.
        let trimmed = base
            .path()
            .trim_end_matches('/')
            .trim_end_matches("/api2/json")
            .to_string();
        base.set_path(&trimmed);
        if base.scheme() != "https" {
            return Err(ProxmoxError::InvalidSettings {
                reason: format!(
                    "url {:?}: the Proxmox API is served over https only",
                    settings.url
                ),
            });
        }
        if base.cannot_be_a_base() || base.host().is_none() {
            return Err(ProxmoxError::InvalidSettings {
                reason: format!("url {:?} has no host", settings.url),
            });
        }
        // Fail early on a header-unsafe secret rather than on the first request.
        settings.token.header_value()?;
        let http = reqwest::Client::builder()
            .use_preconfigured_tls(client_config(&settings.trust)?)
            .http1_only()
            .pool_idle_timeout(POOL_IDLE)
            .connect_timeout(settings.connect_timeout)
            .timeout(settings.request_timeout)
            .build()
            .map_err(|e| ProxmoxError::InvalidSettings {
                reason: format!("HTTP client setup: {e}"),
            })?;
        Ok(Self {
            http,
            base,
            token: settings.token,
            request_timeout: settings.request_timeout,
            retry: settings.retry,
        })
    }

    /// `https://host:8006/api2/json/<segments...>`, each segment percent-encoded.
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty()
                .extend(["api2", "json"])
                .extend(segments);
        }
        url
    }

    /// One request, mapping transport failures and HTTP error shapes. Returns `data`.
    async fn send(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
        form: &[(&str, &str)],
    ) -> Result<Value, ProxmoxError> {
        let mut url = self.url(segments);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        let path = format!("/{}", segments.join("/"));
        let shown = {
            let mut u = url.clone();
            u.set_query(None);
            u.to_string()
        };
        let mut request = self
            .http
            .request(method.clone(), url)
            .header(AUTHORIZATION, self.token.header_value()?);
        if method == Method::POST || method == Method::PUT {
            request = request.form(form);
        }
        let response = request
            .send()
            .await
            .map_err(|e| self.transport_error(&shown, &e))?;
        let status = response.status();
        let reason = response
            .extensions()
            .get::<hyper::ext::ReasonPhrase>()
            .and_then(|r| std::str::from_utf8(r.as_bytes()).ok().map(str::to_string))
            .or_else(|| status.canonical_reason().map(str::to_string))
            .unwrap_or_default();
        let body = response
            .bytes()
            .await
            .map_err(|e| self.transport_error(&shown, &e))?;
        if status.is_success() {
            let envelope: Value =
                serde_json::from_slice(&body).map_err(|e| ProxmoxError::Decode {
                    path: path.clone(),
                    detail: format!("not JSON: {e}"),
                })?;
            return match envelope {
                Value::Object(mut map) => Ok(map.remove("data").unwrap_or(Value::Null)),
                _ => Err(ProxmoxError::Decode {
                    path,
                    detail: "no {\"data\": ...} envelope".into(),
                }),
            };
        }
        Err(error_answer(&path, status, &reason, &body))
    }

    fn transport_error(&self, url: &str, e: &reqwest::Error) -> ProxmoxError {
        if let Some(cause) = transport_cause(e) {
            return from_cause(url, cause);
        }
        if e.is_timeout() {
            return ProxmoxError::Timeout {
                url: url.to_string(),
                after: self.request_timeout,
            };
        }
        ProxmoxError::Unreachable {
            url: url.to_string(),
            detail: chain_text(e),
        }
    }

    /// GET with the read retry; decodes `data` into `T`.
    pub async fn get<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        query: &[(&str, &str)],
    ) -> Result<T, ProxmoxError> {
        let data = self
            .retry
            .run(ProxmoxError::is_retryable, || {
                self.send(Method::GET, segments, query, &[])
            })
            .await?;
        decode(segments, data)
    }

    /// POST (form-encoded), never retried; decodes `data` into `T`.
    pub async fn post<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        form: &[(&str, &str)],
    ) -> Result<T, ProxmoxError> {
        let data = self.send(Method::POST, segments, &[], form).await?;
        decode(segments, data)
    }

    /// `GET /version`: the cheapest authenticated call, for a preflight.
    pub async fn version(&self) -> Result<PveVersion, ProxmoxError> {
        self.get(&["version"], &[]).await
    }

    /// `GET /nodes`: cluster members and whether they are online.
    pub async fn nodes(&self) -> Result<Vec<PveNode>, ProxmoxError> {
        self.get(&["nodes"], &[]).await
    }

    /// `GET /cluster/resources?type=vm`, QEMU VMs only. Served by the node we talk to,
    /// so it works while other nodes are down (their VMs may show `unknown`).
    pub async fn cluster_vms(&self) -> Result<Vec<ClusterVm>, ProxmoxError> {
        let raw: Vec<RawResource> = self
            .get(&["cluster", "resources"], &[("type", "vm")])
            .await?;
        Ok(raw.into_iter().filter_map(RawResource::into_qemu).collect())
    }

    /// Finds a VM's current node in `/cluster/resources` (HA may have moved it).
    pub async fn locate_vm(&self, vmid: u32) -> Result<ClusterVm, ProxmoxError> {
        self.cluster_vms()
            .await?
            .into_iter()
            .find(|vm| vm.vmid == vmid)
            .ok_or(ProxmoxError::VmNotFound { vmid })
    }

    /// `GET /nodes/{node}/qemu/{vmid}/config`: proxied to `node`, so 595/596 when it is down.
    pub async fn vm_config(&self, node: &str, vmid: u32) -> Result<VmConfig, ProxmoxError> {
        let id = vmid.to_string();
        let value: Value = self
            .get(&["nodes", node, "qemu", &id, "config"], &[])
            .await?;
        Ok(VmConfig::from_value(&value))
    }

    /// The network devices (`netN`) of a VM's running configuration (`current=1`: without
    /// it Proxmox shows pending changes as if applied, and a link change left pending because
    /// network hotplug is off would read as done), in key order, with the config's digest.
    pub async fn vm_net_devices(
        &self,
        node: &str,
        vmid: u32,
    ) -> Result<VmNetDevices, ProxmoxError> {
        let id = vmid.to_string();
        let value: Value = self
            .get(&["nodes", node, "qemu", &id, "config"], &[("current", "1")])
            .await?;
        Ok(VmNetDevices::from_value(&value))
    }

    /// `PUT /nodes/{node}/qemu/{vmid}/config` with one option (the synchronous update: on a
    /// running VM qemu-server applies a `netN` change live, `vmconfig_update_net`), guarded by
    /// the digest read before so a concurrent edit is refused, not overwritten. Never retried.
    pub async fn set_vm_option(
        &self,
        node: &str,
        vmid: u32,
        key: &str,
        value: &str,
        digest: Option<&str>,
    ) -> Result<(), ProxmoxError> {
        let id = vmid.to_string();
        let mut form = vec![(key, value)];
        if let Some(digest) = digest {
            form.push(("digest", digest));
        }
        self.send(
            Method::PUT,
            &["nodes", node, "qemu", &id, "config"],
            &[],
            &form,
        )
        .await
        .map(|_| ())
    }

    /// `GET /storage`: the storages the token may audit (others are left out silently).
    pub async fn storages(&self) -> Result<Vec<Storage>, ProxmoxError> {
        let raw: Vec<Value> = self.get(&["storage"], &[]).await?;
        Ok(raw.iter().filter_map(Storage::from_value).collect())
    }

    /// `GET /nodes/{node}/qemu/{vmid}/status/current`.
    pub async fn vm_status(&self, node: &str, vmid: u32) -> Result<VmStatus, ProxmoxError> {
        let id = vmid.to_string();
        let raw: RawVmStatus = self
            .get(&["nodes", node, "qemu", &id, "status", "current"], &[])
            .await?;
        Ok(raw.into())
    }

    /// `GET /cluster/ha/resources` (needs Sys.Audit on `/`).
    pub async fn ha_resources(&self) -> Result<Vec<HaResource>, ProxmoxError> {
        let raw: Vec<RawHaResource> = self.get(&["cluster", "ha", "resources"], &[]).await?;
        Ok(raw.into_iter().map(HaResource::from).collect())
    }

    /// `GET /nodes/{upid.node}/tasks/{upid}/status`.
    pub async fn task_status(&self, upid: &Upid) -> Result<TaskStatus, ProxmoxError> {
        self.get(
            &["nodes", &upid.node, "tasks", upid.as_str(), "status"],
            &[],
        )
        .await
    }

    /// `GET /nodes/{node}/tasks?source=active&vmid=V`: the tasks still running for a VM (a
    /// token sees its own). A stop whose sender died may still be under way: Proxmox runs it as
    /// a task, and the VM reports `running` until the task has killed it.
    pub async fn active_vm_tasks(&self, node: &str, vmid: u32) -> Result<Vec<Upid>, ProxmoxError> {
        let id = vmid.to_string();
        let raw: Vec<Value> = self
            .get(
                &["nodes", node, "tasks"],
                &[("source", "active"), ("vmid", &id)],
            )
            .await?;
        raw.iter()
            .filter_map(|t| t.get("upid").and_then(Value::as_str))
            .map(Upid::parse)
            .collect()
    }

    /// `POST /nodes/{node}/qemu/{vmid}/status/{action}` (`start`, `stop`, ...): returns the task.
    pub async fn vm_power_task(
        &self,
        node: &str,
        vmid: u32,
        action: &str,
    ) -> Result<Upid, ProxmoxError> {
        let id = vmid.to_string();
        let upid: String = self
            .post(&["nodes", node, "qemu", &id, "status", action], &[])
            .await?;
        Upid::parse(&upid)
    }
}

fn decode<T: DeserializeOwned>(segments: &[&str], data: Value) -> Result<T, ProxmoxError> {
    serde_json::from_value(data).map_err(|e| ProxmoxError::Decode {
        path: format!("/{}", segments.join("/")),
        detail: e.to_string(),
    })
}

/// Best message of an error answer: JSON `message` (PVE ≥ 8.3), else body text,
/// else the reason phrase; plus `errors` of a 400.
fn error_answer(path: &str, status: StatusCode, reason: &str, body: &[u8]) -> ProxmoxError {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let mut errors = BTreeMap::new();
    if let Some(Value::Object(map)) = json.as_ref().and_then(|j| j.get("errors")) {
        for (k, v) in map {
            errors.insert(
                k.clone(),
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string()),
            );
        }
    }
    let message = json
        .as_ref()
        .and_then(|j| j.get("message"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| {
            let text = String::from_utf8_lossy(body).trim().to_string();
            (json.is_none() && !text.is_empty()).then_some(text)
        })
        .unwrap_or_else(|| reason.to_string());
    from_status(path, status.as_u16(), reason, &message, errors)
}
