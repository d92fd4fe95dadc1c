//! What the Proxmox VE API server needs to know about the simulated cluster. The lab's world
//! model implements [`ProxmoxBackend`]; tests use a small in-memory one.

use std::net::IpAddr;

/// The Proxmox server's view of the world. Calls are short and synchronous: implementations
/// read or update their model under a lock and return.
pub trait ProxmoxBackend: Send + Sync + 'static {
    /// Cluster name shown in `GET /cluster/status`.
    fn cluster_name(&self) -> String;

    /// Every cluster host in node-id order (pve1 first), powered on or not.
    fn hosts(&self) -> Vec<HostInfo>;

    /// Whether host `name` is online; `None` if no such host exists. Every proxied call asks
    /// this (reading every guest's config asks it once per guest), so a model answers it
    /// without the load figures [`ProxmoxBackend::hosts`] sums over the guests.
    fn host_online(&self, name: &str) -> Option<bool> {
        self.hosts()
            .into_iter()
            .find(|h| h.name == name)
            .map(|h| h.online)
    }

    /// Every QEMU guest of the cluster, on any host, with the state `/cluster/resources` shows
    /// (which is stale or `Unknown` for guests of a dead host, as the model decides).
    fn vms(&self) -> Vec<VmInfo>;

    /// Guest `vmid` as [`ProxmoxBackend::vms`] shows it; `None` if no such guest exists.
    /// Requests about one guest (its config, its status, a power action) ask this instead of
    /// listing every guest: at 5,000 guests, building the whole list per request made reading
    /// every guest's config quadratic.
    fn vm(&self, vmid: u32) -> Option<VmInfo> {
        self.vms().into_iter().find(|vm| vm.vmid == vmid)
    }

    /// The configuration of guest `vmid` wherever it lives; `None` if no such guest exists.
    fn vm_config(&self, vmid: u32) -> Option<VmConfig>;

    /// `GET /storage`: Proxmox's default storages unless the backend has others.
    fn storages(&self) -> Vec<StorageInfo> {
        vec![
            StorageInfo {
                storage: "local".into(),
                kind: "dir".into(),
                shared: false,
            },
            StorageInfo {
                storage: "local-lvm".into(),
                kind: "lvmthin".into(),
                shared: false,
            },
        ]
    }

    /// Carries out a power action on a guest that is not HA-managed. Called when the action's
    /// task finishes; the guest's state must reflect it afterwards. `Stop`/`Shutdown` of a
    /// stopped guest is not an error; `Start` of a running guest is [`ActionError::AlreadyRunning`].
    fn vm_power(&self, vmid: u32, action: VmAction) -> Result<(), ActionError>;

    /// Records an HA request for an HA-managed guest: the requested state becomes `state`, and
    /// the model starts or stops the guest a little later, as the HA manager would.
    fn ha_request(&self, vmid: u32, state: HaState) -> Result<(), ActionError>;

    /// Orderly shutdown or reboot of `host` (`POST /nodes/{host}/status`); the host goes
    /// offline a few seconds later, stopping its guests.
    fn host_power(&self, host: &str, command: HostCommand) -> Result<(), ActionError>;

    /// Wake-on-LAN for `target`, sent by host `from`; returns the MAC address used. Errors
    /// when no MAC is configured for `target`.
    fn wake_on_lan(&self, from: &str, target: &str) -> Result<String, ActionError>;

    /// The `wakeonlan` property of `host`'s node config (`GET /nodes/{host}/config`), if set.
    /// Pull (`down`) or put back the link of a VM's network devices, as a config update of
    /// `link_down` applies it live. Backends without a network refuse it.
    fn set_link(&self, vmid: u32, down: bool) -> Result<(), ActionError> {
        let _ = (vmid, down);
        Err(ActionError::Failed(
            "this backend models no network links".into(),
        ))
    }

    fn wakeonlan_property(&self, host: &str) -> Option<String>;
}

/// A cluster host.
#[derive(Debug, Clone, PartialEq)]
pub struct HostInfo {
    /// Node name (`pve1`).
    pub name: String,
    /// Address of its API (`127.S.0.i`), shown in `/cluster/status`.
    pub ip: IpAddr,
    /// Whether it is powered on and a cluster member.
    pub online: bool,
    pub maxcpu: u32,
    /// Bytes.
    pub maxmem: u64,
    /// Bytes in use.
    pub mem: u64,
    /// CPU load as a fraction 0..1.
    pub cpu: f64,
    /// Bytes.
    pub maxdisk: u64,
    pub disk: u64,
    /// Seconds since boot.
    pub uptime: u64,
}

/// Run state of a guest as Proxmox reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmStatus {
    Running,
    Stopped,
    /// No fresh status sample (its host has been dead for a while): only identity fields show.
    Unknown,
}

impl VmStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            VmStatus::Running => "running",
            VmStatus::Stopped => "stopped",
            VmStatus::Unknown => "unknown",
        }
    }
}

/// HA requested state of a resource (`/cluster/ha/resources` `state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HaState {
    Started,
    Stopped,
    Disabled,
    Ignored,
}

impl HaState {
    pub fn as_str(self) -> &'static str {
        match self {
            HaState::Started => "started",
            HaState::Stopped => "stopped",
            HaState::Disabled => "disabled",
            HaState::Ignored => "ignored",
        }
    }
}

/// HA management of one guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaInfo {
    /// Requested state from the resource configuration.
    pub requested: HaState,
    /// The CRM's service state (`started`, `stopped`, `request_stop`, `fence`, `recovery`, …),
    /// shown as `hastate` in `/cluster/resources`.
    pub crm_state: String,
}

/// A QEMU guest as listed by `/cluster/resources` and `/nodes/{node}/qemu`.
#[derive(Debug, Clone, PartialEq)]
pub struct VmInfo {
    pub vmid: u32,
    pub name: String,
    /// Host that owns the guest's configuration.
    pub node: String,
    pub status: VmStatus,
    /// Proxmox tags (lower-case words); joined with `;` on the wire.
    pub tags: Vec<String>,
    /// `Some` when the guest is an HA resource.
    pub ha: Option<HaInfo>,
    /// Seconds since the guest started (0 when stopped).
    pub uptime: u64,
    pub maxcpu: u32,
    pub cpu: f64,
    /// Bytes.
    pub maxmem: u64,
    pub mem: u64,
    /// Bytes.
    pub maxdisk: u64,
}

impl VmInfo {
    /// Whether the HA stack manages this guest (listed and not `ignored`).
    pub fn ha_managed(&self) -> bool {
        self.ha
            .as_ref()
            .is_some_and(|h| h.requested != HaState::Ignored)
    }
}

/// The parts of a guest configuration the lab models (`/nodes/{node}/qemu/{vmid}/config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmConfig {
    pub name: String,
    /// SMBIOS type-1 UUID (`smbios1: uuid=…`); what the guest's kubelet reports as systemUUID.
    pub smbios_uuid: Option<String>,
    pub tags: Vec<String>,
    pub cores: u32,
    pub sockets: u32,
    /// MiB.
    pub memory_mib: u64,
    pub onboot: bool,
    /// The storage of its disk (`scsi0`).
    pub disk_storage: String,
    /// `net0`'s `link_down`.
    pub link_down: bool,
}

/// A storage of `GET /storage`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageInfo {
    pub storage: String,
    /// `dir`, `lvmthin`, `nfs`, `rbd`, ...
    pub kind: String,
    pub shared: bool,
}

/// Guest power actions of `POST /nodes/{node}/qemu/{vmid}/status/{action}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmAction {
    Start,
    /// Hard stop ("pulling the plug").
    Stop,
    /// ACPI shutdown.
    Shutdown,
}

impl VmAction {
    /// Worker type in the UPID for a guest that is not HA-managed.
    pub fn task_type(self) -> &'static str {
        match self {
            VmAction::Start => "qmstart",
            VmAction::Stop => "qmstop",
            VmAction::Shutdown => "qmshutdown",
        }
    }
}

/// Host power commands of `POST /nodes/{node}/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostCommand {
    Shutdown,
    Reboot,
}

/// Why an action failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActionError {
    /// Start of a running guest; the task fails with `VM <id> already running`.
    #[error("already running")]
    AlreadyRunning,
    /// Anything else, with the text Proxmox would report.
    #[error("{0}")]
    Failed(String),
}
