//! Whole-host mode, before anything is touched: the host must come back by wake-on-LAN, and
//! only a host that is on can send that packet, so the run needs another host's API and the
//! target's MAC (`research/proxmox.md` §3.11, §3.12). Refused otherwise.

use gates_infra::proxmox::ProxmoxClient;

use super::Refusal;
use crate::chaos::journal::HostPower;
use crate::collect;
use crate::config::{Environment, ProxmoxAccess};

/// The client that carries out the run (on another host than `host`) and how to wake `host`.
pub async fn prepare(
    env: &Environment,
    access: &ProxmoxAccess,
    host: &str,
) -> Result<(ProxmoxClient, HostPower), Refusal> {
    let mut tried = Vec::new();
    let mut chosen = None;
    for url in std::iter::once(&access.url).chain(&access.fallback_urls) {
        let client = match collect::proxmox::client_at(env, access, url) {
            Ok(client) => client,
            Err(err) => {
                tried.push(format!("{url}: {err}"));
                continue;
            }
        };
        match client.local_host().await {
            Ok(local) if local == host => tried.push(format!("{url} is served by {host} itself")),
            Ok(local) => {
                chosen = Some((client, url.clone(), local));
                break;
            }
            Err(err) => tried.push(format!("{url}: {err}")),
        }
    }
    let Some((client, url, local)) = chosen else {
        return Err(Refusal(format!(
            "--whole-host needs the Proxmox API of a host other than {host}, to wake it again \
             ({}); add another host's address to `proxmox.fallback_urls` in {}",
            tried.join("; "),
            env.file.display()
        )));
    };
    let mac = client
        .wakeonlan_mac(host)
        .await
        .map_err(|err| {
            Refusal(format!(
                "--whole-host: cannot read {host}'s node config: {err}"
            ))
        })?
        .ok_or_else(|| {
            Refusal(format!(
                "--whole-host refused: {host} has no wake-on-LAN MAC in its node config, so it \
                 could not be brought back after the shutdown; set one with \
                 `pvenode config set -wakeonlan <MAC>` on {host}"
            ))
        })?;
    Ok((
        client,
        HostPower {
            wake_via_url: url,
            wake_via_host: local,
            mac,
        },
    ))
}
