//! Powering a whole Proxmox host off and back on: orderly shutdown through the API, then
//! wake-on-LAN sent by another cluster member. Proxmox has no API for a hard host power-off
//! (that needs a BMC), and a host that is off can only be woken by a host that is on, so a
//! caller needs the API of a second host (`research/proxmox.md` §3.11, §3.12).

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use tokio::time::Instant;

use super::client::ProxmoxClient;
use super::error::ProxmoxError;

/// One `type: node` row of `GET /cluster/status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterMember {
    pub name: String,
    /// The cluster (corosync) address, not necessarily where its API is reachable from here.
    pub ip: Option<String>,
    pub online: bool,
    /// The node that answered this request.
    pub local: bool,
}

#[derive(Deserialize)]
struct RawStatus {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    ip: Option<String>,
    #[serde(default)]
    online: Value,
    #[serde(default)]
    local: Value,
}

/// Perl booleans arrive as `0`/`1`, sometimes as strings.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_i64().is_some_and(|n| n != 0),
        Value::String(s) => s == "1",
        _ => false,
    }
}

/// The MAC of a node config's `wakeonlan` property: `[mac=]<MAC>[,bind-interface=..][,broadcast-address=..]`.
pub fn wakeonlan_mac(property: &str) -> Option<String> {
    property
        .split(',')
        .map(str::trim)
        .find_map(|part| match part.split_once('=') {
            Some(("mac", mac)) => Some(mac),
            Some(_) => None,
            None => Some(part),
        })
        .filter(|mac| {
            let groups: Vec<&str> = mac.split(':').collect();
            groups.len() == 6
                && groups
                    .iter()
                    .all(|g| g.len() == 2 && g.chars().all(|c| c.is_ascii_hexdigit()))
        })
        .map(str::to_string)
}

impl ProxmoxClient {
    /// `GET /cluster/status`, node rows only. Served locally, so it answers while others are down.
    pub async fn cluster_members(&self) -> Result<Vec<ClusterMember>, ProxmoxError> {
        let rows: Vec<RawStatus> = self.get(&["cluster", "status"], &[]).await?;
        Ok(rows
            .into_iter()
            .filter(|r| r.kind == "node")
            .map(|r| ClusterMember {
                name: r.name,
                ip: r.ip,
                online: truthy(&r.online),
                local: truthy(&r.local),
            })
            .collect())
    }

    /// The host whose API this client talks to.
    pub async fn local_host(&self) -> Result<String, ProxmoxError> {
        self.cluster_members()
            .await?
            .into_iter()
            .find(|m| m.local)
            .map(|m| m.name)
            .ok_or_else(|| ProxmoxError::Decode {
                path: "/cluster/status".into(),
                detail: "no node is marked local".into(),
            })
    }

    /// The wake-on-LAN MAC configured for `node` (`GET /nodes/{node}/config`, proxied to it,
    /// so only readable while it is up); `None` when none is set.
    pub async fn wakeonlan_mac(&self, node: &str) -> Result<Option<String>, ProxmoxError> {
        let config: Value = self.get(&["nodes", node, "config"], &[]).await?;
        Ok(config
            .get("wakeonlan")
            .and_then(Value::as_str)
            .and_then(wakeonlan_mac))
    }

    /// `POST /nodes/{node}/status command=shutdown`: an orderly host shutdown. Returns at
    /// once (no task); follow it with [`ProxmoxClient::wait_host`].
    pub async fn shutdown_host(&self, node: &str) -> Result<(), ProxmoxError> {
        let _: Value = self
            .post(&["nodes", node, "status"], &[("command", "shutdown")])
            .await?;
        Ok(())
    }

    /// `POST /nodes/{node}/wakeonlan`: the host this client talks to sends the magic packet
    /// for `node`. Returns the MAC it used.
    pub async fn wake_host(&self, node: &str) -> Result<String, ProxmoxError> {
        self.post(&["nodes", node, "wakeonlan"], &[]).await
    }

    /// Polls `/cluster/status` until `node` is online (or offline), within `deadline`.
    pub async fn wait_host(
        &self,
        node: &str,
        online: bool,
        deadline: Duration,
        poll: Duration,
    ) -> Result<Duration, ProxmoxError> {
        let start = Instant::now();
        let wanted = if online { "online" } else { "offline" };
        loop {
            let last = match self.cluster_members().await {
                Ok(members) => match members.iter().find(|m| m.name == node) {
                    Some(m) if m.online == online => return Ok(start.elapsed()),
                    Some(m) => if m.online { "online" } else { "offline" }.to_string(),
                    None => "not a cluster member".to_string(),
                },
                Err(err) => err.to_string(),
            };
            if start.elapsed() + poll > deadline {
                return Err(ProxmoxError::HostStateTimeout {
                    host: node.to_string(),
                    wanted: wanted.into(),
                    last,
                    after: deadline,
                });
            }
            tokio::time::sleep(poll).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mac_is_read_with_or_without_its_key() {
        assert_eq!(
            wakeonlan_mac("mac=AA:BB:CC:00:11:22,bind-interface=vmbr0").as_deref(),
            Some("AA:BB:CC:00:11:22")
        );
        assert_eq!(
            wakeonlan_mac("aa:bb:cc:00:11:22").as_deref(),
            Some("aa:bb:cc:00:11:22")
        );
        assert_eq!(
            wakeonlan_mac("broadcast-address=10.0.0.255,mac=AA:BB:CC:00:11:22").as_deref(),
            Some("AA:BB:CC:00:11:22")
        );
    }

    #[test]
    fn a_property_without_a_valid_mac_has_none() {
        assert_eq!(wakeonlan_mac(""), None);
        assert_eq!(wakeonlan_mac("bind-interface=vmbr0"), None);
        assert_eq!(wakeonlan_mac("mac=AA:BB:CC"), None);
        assert_eq!(wakeonlan_mac("mac=GG:BB:CC:00:11:22"), None);
    }

    #[test]
    fn perl_booleans_are_read_leniently() {
        assert!(truthy(&serde_json::json!(1)));
        assert!(truthy(&serde_json::json!("1")));
        assert!(!truthy(&serde_json::json!(0)));
        assert!(!truthy(&Value::Null));
    }
}
