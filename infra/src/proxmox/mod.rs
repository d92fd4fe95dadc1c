//! Proxmox VE API (HTTPS on 8006, API token): inventory of the environment's VMs,
//! VM ↔ Kubernetes node mapping, and VM power actions for the chaos step.
mod client;
mod error;
mod host;
mod inventory;
mod mapping;
mod model;
mod net;
mod power;
mod secret;
mod tls;
mod upid;

pub use client::{ProxmoxClient, ProxmoxSettings};
pub use error::ProxmoxError;
pub use host::{ClusterMember, wakeonlan_mac};
pub use inventory::{
    CONFIG_CONCURRENCY, Inventory, InventoryVm, VmScope, collect_inventory,
    collect_inventory_reading, glob_match,
};
pub use mapping::{
    KubeNodeIdentity, MappingError, MappingOptions, MatchedBy, NodeMapping, NodePlacement,
    map_nodes_to_vms,
};
pub use model::{
    ClusterVm, HaRequestedState, HaResource, PveNode, PveVersion, Storage, TaskStatus, VmConfig,
    VmDisk, VmStatus, parse_smbios_uuid, parse_tags,
};
pub use net::{LINK_DOWN, NetDevice, NetDeviceError, VmNetDevices, is_net_key};
pub use power::{PowerAction, PowerOptions, PowerReport, TaskOutcome};
pub use secret::{ApiToken, TokenSecret};
pub use tls::{TlsTrust, certificate_fingerprint, format_fingerprint, parse_fingerprint};
pub use upid::Upid;
