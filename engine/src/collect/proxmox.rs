//! The Proxmox collector: hosts, the VMs of every configured environment's scope (so a
//! host's other tenants are known), and which VM carries which Kubernetes node, matched by
//! SMBIOS uuid against `status.nodeInfo.systemUUID`. Only this environment's VMs have their
//! config read, a bounded number at a time; one that cannot be read is an error, never a
//! missing VM.

use std::path::PathBuf;
use std::time::Duration;

use gates_infra::proxmox::{
    self, ApiToken, KubeNodeIdentity, MappingOptions, MatchedBy, ProxmoxClient, ProxmoxSettings,
    TlsTrust, TokenSecret,
};
use k8s_openapi::api::core::v1::Node;

use super::kube::resolve;
use crate::config::{Config, Environment, ProxmoxAccess};
use crate::state::{Placement, ProxmoxHost, ProxmoxState, ProxmoxStorage, ProxmoxVm, VmDisk};

/// Why no Proxmox client could be built from the environment file's `proxmox` section.
#[derive(Debug, thiserror::Error)]
pub enum ProxmoxAccessError {
    #[error("{}: proxmox needs token_secret_env or token_secret_file", env_file.display())]
    NoTokenSecret { env_file: PathBuf },
    #[error(
        "{}: proxmox needs ca_file, fingerprint, or an explicit insecure_tls: true",
        env_file.display()
    )]
    NoTlsTrust { env_file: PathBuf },
    /// The token, the CA or the fingerprint is unusable, or the client cannot be built
    /// (the infra error names which and why).
    #[error("{source}")]
    Settings {
        env_file: PathBuf,
        #[source]
        source: proxmox::ProxmoxError,
    },
}

/// Why Proxmox could not be read: no client, the inventory, or the deadline. Said as the
/// reason Proxmox is absent from the state.
#[derive(Debug, thiserror::Error)]
pub enum ProxmoxReadError {
    #[error(transparent)]
    Access(#[from] ProxmoxAccessError),
    #[error(transparent)]
    Inventory(#[from] proxmox::ProxmoxError),
    /// The phase did not finish within the environment's deadline (the deadline's sentence).
    #[error("{0}")]
    Late(String),
}

/// A client for the environment's Proxmox API. Warns on every run with `insecure_tls`.
pub fn client(
    env: &Environment,
    access: &ProxmoxAccess,
) -> Result<ProxmoxClient, ProxmoxAccessError> {
    client_at(env, access, &access.url)
}

/// A client for `url` (the main one or a fallback) with the environment's token and TLS trust.
pub fn client_at(
    env: &Environment,
    access: &ProxmoxAccess,
    url: &str,
) -> Result<ProxmoxClient, ProxmoxAccessError> {
    let unusable = |source| ProxmoxAccessError::Settings {
        env_file: env.file.clone(),
        source,
    };
    let secret = match (&access.token_secret_env, &access.token_secret_file) {
        (Some(var), _) => TokenSecret::from_env(var),
        (None, Some(file)) => TokenSecret::from_file(&resolve(&env.file, file)),
        (None, None) => {
            return Err(ProxmoxAccessError::NoTokenSecret {
                env_file: env.file.clone(),
            });
        }
    }
    .map_err(unusable)?;
    let token = ApiToken::new(&access.token_id, secret).map_err(unusable)?;
    let trust = match (&access.ca_file, &access.fingerprint, access.insecure_tls) {
        (Some(file), _, _) => TlsTrust::ca_file(&resolve(&env.file, file)),
        (None, Some(fingerprint), _) => TlsTrust::fingerprint(fingerprint),
        (None, None, true) => {
            tracing::warn!(
                "{}: proxmox.insecure_tls is set: the Proxmox API certificate is not verified",
                env.file.display()
            );
            Ok(TlsTrust::Insecure)
        }
        (None, None, false) => {
            return Err(ProxmoxAccessError::NoTlsTrust {
                env_file: env.file.clone(),
            });
        }
    }
    .map_err(unusable)?;
    let mut settings = ProxmoxSettings::new(url.to_string(), token, trust);
    let timeout: Duration = access.timeout.into();
    settings.request_timeout = timeout;
    settings.connect_timeout = timeout.min(Duration::from_secs(5));
    ProxmoxClient::new(settings).map_err(unusable)
}

fn scope(access: &ProxmoxAccess) -> proxmox::VmScope {
    proxmox::VmScope {
        tags: access.vms.tags.clone(),
        name_pattern: access.vms.name_pattern.clone(),
    }
}

/// What Proxmox answered, before its VMs are matched to the Kubernetes nodes. Reading it
/// does not need the nodes, so a live run reads it beside the Kubernetes lists.
#[derive(Debug, Clone)]
pub struct Read {
    inventory: proxmox::Inventory,
    /// This environment's VM scope.
    mine: proxmox::VmScope,
    /// Every environment on the same Proxmox cluster, with its scope.
    scopes: Vec<(String, proxmox::VmScope)>,
    match_by_name: bool,
}

/// The hosts, every VM, and the configs of this environment's VMs.
pub async fn read(
    config: &Config,
    env: &Environment,
    access: &ProxmoxAccess,
) -> Result<Read, ProxmoxReadError> {
    let client = client(env, access)?;
    // Every VM, so other environments' VMs on the same hosts are known too; the configs
    // (SMBIOS uuids) only of this environment's, the ones nodes are matched against.
    let everything = proxmox::VmScope {
        tags: Vec::new(),
        name_pattern: None,
    };
    let mine = scope(access);
    let inventory =
        proxmox::collect_inventory_reading(&client, &everything, &mine, access.concurrency).await?;
    let scopes = config
        .environments
        .values()
        .filter_map(|e| {
            e.proxmox
                .as_ref()
                .filter(|p| p.url == access.url)
                .map(|p| (e.name.clone(), scope(p)))
        })
        .collect();
    Ok(Read {
        inventory,
        mine,
        scopes,
        match_by_name: access.match_by_name,
    })
}

/// The Proxmox picture of the environment: what was read, with its VMs matched to `nodes`.
pub fn place(read: Read, nodes: Option<&[std::sync::Arc<Node>]>) -> ProxmoxState {
    let Read {
        inventory,
        mine,
        scopes,
        match_by_name,
    } = read;
    let vms = inventory
        .vms
        .iter()
        .map(|vm| held_vm(vm, &scopes))
        .collect();
    let in_scope: Vec<proxmox::InventoryVm> = inventory
        .vms
        .iter()
        .filter(|vm| mine.matches(&vm.vm))
        .cloned()
        .collect();
    let identities: Vec<KubeNodeIdentity> = nodes
        .unwrap_or_default()
        .iter()
        .map(|node| KubeNodeIdentity {
            name: node.metadata.name.clone().unwrap_or_default(),
            system_uuid: node
                .status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .map(|i| i.system_uuid.clone())
                .unwrap_or_default(),
        })
        .collect();
    let (placements, unmatched_nodes, mapping_error) =
        placements(&identities, &in_scope, match_by_name);
    let unread_vm_configs = in_scope
        .iter()
        .filter_map(|vm| {
            vm.config_error.as_ref().map(|err| {
                format!(
                    "VM {} {} on {}: {err}",
                    vm.vm.vmid,
                    vm.vm.name.as_deref().unwrap_or(""),
                    vm.host()
                )
            })
        })
        .collect();
    let (storages, storages_unread) = match &inventory.storages {
        Ok(list) => (
            list.iter()
                .map(|s| ProxmoxStorage {
                    storage: s.storage.clone(),
                    kind: s.kind.clone(),
                    shared: s.shared,
                    nodes: s.nodes.clone(),
                })
                .collect(),
            None,
        ),
        Err(err) => (Vec::new(), Some(err.to_string())),
    };
    ProxmoxState {
        unread_vm_configs,
        storages,
        storages_unread,
        hosts: inventory
            .nodes
            .iter()
            .map(|n| ProxmoxHost {
                name: n.node.clone(),
                online: n.is_online(),
            })
            .collect(),
        vms,
        placements,
        unmatched_nodes,
        mapping_error,
    }
}

/// One VM as the state holds it, with the environments whose scope takes it.
fn held_vm(vm: &proxmox::InventoryVm, scopes: &[(String, proxmox::VmScope)]) -> ProxmoxVm {
    ProxmoxVm {
        vmid: vm.vm.vmid,
        name: vm.vm.name.clone().unwrap_or_default(),
        host: vm.host().to_string(),
        status: vm.vm.status.clone(),
        uuid: vm.smbios_uuid.clone(),
        ha_managed: vm.is_ha_managed(),
        environments: scopes
            .iter()
            .filter(|(_, s)| s.matches(&vm.vm))
            .map(|(n, _)| n.clone())
            .collect(),
        disks: vm
            .disks
            .iter()
            .map(|d| VmDisk {
                key: d.key.clone(),
                storage: d.storage.clone(),
                volume: d.volume.clone(),
            })
            .collect(),
    }
}

/// The Kubernetes nodes matched to this environment's VMs (by SMBIOS UUID, or by name when
/// allowed), the nodes no VM matches, and why no mapping could be made.
fn placements(
    identities: &[KubeNodeIdentity],
    in_scope: &[proxmox::InventoryVm],
    match_by_name: bool,
) -> (Vec<Placement>, Vec<String>, Option<String>) {
    match proxmox::map_nodes_to_vms(
        identities,
        in_scope,
        MappingOptions {
            allow_name_fallback: match_by_name,
        },
    ) {
        Ok(mapping) => (
            mapping
                .placements
                .iter()
                .map(|p| Placement {
                    node: p.node.clone(),
                    vmid: p.vmid,
                    vm_name: p.vm_name.clone().unwrap_or_default(),
                    host: p.host.clone(),
                    uuid: p.uuid.clone(),
                    matched_by: match p.matched_by {
                        MatchedBy::SystemUuid => "uuid".to_string(),
                        MatchedBy::Name => "name".to_string(),
                    },
                })
                .collect(),
            mapping.unmatched.clone(),
            None,
        ),
        Err(err) => (Vec::new(), Vec::new(), Some(err.to_string())),
    }
}
