//! Typed Proxmox answers. Perl-side typing is loose (booleans as 0/1, numbers as
//! strings, keys omitted), so fields are read leniently.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// A cluster member from `GET /nodes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PveNode {
    /// Node name (`pve1`).
    pub node: String,
    /// `online`, `offline` or `unknown`.
    #[serde(default)]
    pub status: String,
    /// SHA-256 of the node certificate, `AB:CD:...`.
    #[serde(default)]
    pub ssl_fingerprint: Option<String>,
}

impl PveNode {
    pub fn is_online(&self) -> bool {
        self.status == "online"
    }
}

/// A QEMU VM from `GET /cluster/resources?type=vm` (LXC rows are dropped).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterVm {
    pub vmid: u32,
    /// Absent when the VM's node has not reported for a while (`status: unknown`).
    pub name: Option<String>,
    /// The Proxmox node that owns the VM's config, i.e. its physical host.
    pub node: String,
    /// `running`, `stopped`, `paused`, ..., `unknown` (node silent).
    pub status: String,
    pub tags: Vec<String>,
    /// HA service state (`started`, `stopped`, `fence`, ...) when HA manages the VM.
    pub hastate: Option<String>,
    pub template: bool,
    pub lock: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct RawResource {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default, deserialize_with = "lenient_u32")]
    vmid: Option<u32>,
    #[serde(default, deserialize_with = "lenient_string")]
    name: Option<String>,
    #[serde(default)]
    node: String,
    #[serde(default)]
    status: String,
    #[serde(default, deserialize_with = "lenient_string")]
    tags: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    hastate: Option<String>,
    #[serde(default, deserialize_with = "lenient_bool")]
    template: bool,
    #[serde(default, deserialize_with = "lenient_string")]
    lock: Option<String>,
}

impl RawResource {
    pub(crate) fn into_qemu(self) -> Option<ClusterVm> {
        if self.kind != "qemu" {
            return None;
        }
        Some(ClusterVm {
            vmid: self.vmid?,
            name: self.name,
            node: self.node,
            status: self.status,
            tags: parse_tags(self.tags.as_deref().unwrap_or_default()),
            hastate: self.hastate,
            template: self.template,
            lock: self.lock,
        })
    }
}

/// Splits a Proxmox tag list (`;`, also `,` or spaces), lowercased, empties dropped.
pub fn parse_tags(raw: &str) -> Vec<String> {
    raw.split([';', ',', ' '])
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

/// What gates reads from `GET /nodes/{node}/qemu/{vmid}/config`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct VmConfig {
    pub name: Option<String>,
    /// The `smbios1` uuid as configured (case preserved); `None` if absent or malformed.
    pub smbios_uuid: Option<String>,
    pub tags: Vec<String>,
    /// The attached disks, in key order (CD-ROM drives and `unusedN` left out).
    pub disks: Vec<VmDisk>,
}

impl VmConfig {
    pub fn from_value(value: &Value) -> VmConfig {
        let text = |k: &str| value.get(k).and_then(value_to_string);
        let mut disks: Vec<VmDisk> = value
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(key, _)| is_drive_key(key))
            .filter_map(|(key, v)| VmDisk::parse(key, &value_to_string(v)?))
            .collect();
        disks.sort_by(|a, b| a.key.cmp(&b.key));
        VmConfig {
            name: text("name"),
            smbios_uuid: text("smbios1").as_deref().and_then(parse_smbios_uuid),
            tags: parse_tags(text("tags").as_deref().unwrap_or_default()),
            disks,
        }
    }
}

/// One attached disk of a VM config, and where it lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmDisk {
    /// `scsi0`, `virtio1`, `efidisk0`, ...
    pub key: String,
    /// The storage id of a `STORAGE:VOLUME` volume; `None` for a host path (`/dev/...`),
    /// which lives on the VM's host alone.
    pub storage: Option<String>,
    /// The volume as written (`local-lvm:vm-101-disk-0`, `/dev/sdb`).
    pub volume: String,
}

impl VmDisk {
    /// A drive property string (`[file=]VOLUME[,opt=...]`); `None` for a CD-ROM drive, an
    /// empty drive (`none`) or a cloud-init drive's media.
    pub fn parse(key: &str, property: &str) -> Option<VmDisk> {
        let mut volume = None;
        let mut cdrom = false;
        for (i, part) in property.split(',').enumerate() {
            match part.split_once('=') {
                Some(("file" | "volume", v)) => volume = Some(v.trim().to_string()),
                Some(("media", "cdrom")) => cdrom = true,
                Some(_) => {}
                None if i == 0 => volume = Some(part.trim().to_string()),
                None => {}
            }
        }
        let volume = volume.filter(|v| !v.is_empty() && v != "none" && v != "cdrom")?;
        if cdrom {
            return None;
        }
        let storage = if volume.starts_with('/') {
            None
        } else {
            Some(
                volume
                    .split_once(':')
                    .map_or(volume.as_str(), |(s, _)| s)
                    .to_string(),
            )
        };
        Some(VmDisk {
            key: key.to_string(),
            storage,
            volume,
        })
    }
}

/// The drive keys of qemu-server's config schema (`PVE/QemuServer/Drive.pm`): `ide0`–`ide3`,
/// `sata0`–`sata5`, `scsi0`–`scsi30`, `virtio0`–`virtio15`, `efidisk0`, `tpmstate0`
/// (`unusedN` volumes are not attached).
fn is_drive_key(key: &str) -> bool {
    if key == "efidisk0" || key == "tpmstate0" {
        return true;
    }
    let split = key.find(|c: char| c.is_ascii_digit()).unwrap_or(key.len());
    let (bus, index) = key.split_at(split);
    let Ok(index) = index.parse::<u32>() else {
        return false;
    };
    match bus {
        "ide" => index < 4,
        "sata" => index < 6,
        "scsi" => index < 31,
        "virtio" => index < 16,
        _ => false,
    }
}

/// A storage of `GET /storage` (the entries the token may audit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Storage {
    pub storage: String,
    /// `dir`, `lvmthin`, `zfspool`, `nfs`, `rbd`, ...
    pub kind: String,
    /// One storage with the same contents on every node (or those `nodes` lists): set by
    /// the administrator, and always for the types Proxmox counts as shared (`iscsi`, `nfs`,
    /// `cifs`, `rbd`, `cephfs`, `iscsidirect`, `zfs` over iSCSI, `drbd`, `pbs`).
    pub shared: bool,
    /// The nodes it is restricted to; empty for all.
    pub nodes: Vec<String>,
}

impl Storage {
    pub fn from_value(value: &Value) -> Option<Storage> {
        let text = |k: &str| value.get(k).and_then(value_to_string);
        Some(Storage {
            storage: text("storage")?,
            kind: text("type").unwrap_or_default(),
            shared: text("shared").is_some_and(|s| s == "1" || s == "true"),
            nodes: text("nodes")
                .map(|n| {
                    n.split([',', ';', ' '])
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
        })
    }
}

/// Extracts `uuid=...` from an `smbios1` property string (`k=v` pairs, any order) and
/// checks its 8-4-4-4-12 hex shape.
pub fn parse_smbios_uuid(smbios1: &str) -> Option<String> {
    let uuid = smbios1
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| k.trim() == "uuid")
        .map(|(_, v)| v.trim().to_string())?;
    let groups: Vec<&str> = uuid.split('-').collect();
    let shape = [8, 4, 4, 4, 12];
    let ok = groups.len() == 5
        && groups
            .iter()
            .zip(shape)
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()));
    ok.then_some(uuid)
}

/// HA requested state of a resource (`/cluster/ha/resources`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HaRequestedState {
    /// `started` (also `enabled`, and the default when absent).
    Started,
    Stopped,
    Disabled,
    Ignored,
    Other(String),
}

impl HaRequestedState {
    pub(crate) fn parse(raw: Option<&str>) -> Self {
        match raw.unwrap_or("started") {
            "started" | "enabled" => Self::Started,
            "stopped" => Self::Stopped,
            "disabled" => Self::Disabled,
            "ignored" => Self::Ignored,
            other => Self::Other(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Started => "started",
            Self::Stopped => "stopped",
            Self::Disabled => "disabled",
            Self::Ignored => "ignored",
            Self::Other(s) => s,
        }
    }
}

/// One HA resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HaResource {
    /// `vm:100`.
    pub sid: String,
    /// The VM id when `sid` is a `vm:` resource.
    pub vmid: Option<u32>,
    pub state: HaRequestedState,
}

impl HaResource {
    /// HA acts on the resource (listed and not `ignored`).
    pub fn is_managed(&self) -> bool {
        self.state != HaRequestedState::Ignored
    }
}

#[derive(Deserialize)]
pub(crate) struct RawHaResource {
    #[serde(default)]
    sid: String,
    #[serde(default, deserialize_with = "lenient_string")]
    state: Option<String>,
}

impl From<RawHaResource> for HaResource {
    fn from(raw: RawHaResource) -> Self {
        let vmid = raw.sid.strip_prefix("vm:").and_then(|id| id.parse().ok());
        HaResource {
            state: HaRequestedState::parse(raw.state.as_deref()),
            sid: raw.sid,
            vmid,
        }
    }
}

/// `GET /nodes/{node}/qemu/{vmid}/status/current`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmStatus {
    /// `running` or `stopped` (QEMU process present or not).
    pub status: String,
    /// QMP run state (`running`, `paused`, `prelaunch`, ...), when reported.
    pub qmpstatus: Option<String>,
    pub name: Option<String>,
    /// HA manages the VM.
    pub ha_managed: bool,
    /// HA service state when managed.
    pub ha_state: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct RawVmStatus {
    #[serde(default)]
    status: String,
    #[serde(default, deserialize_with = "lenient_string")]
    qmpstatus: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    name: Option<String>,
    #[serde(default)]
    ha: Option<RawHa>,
}

#[derive(Deserialize)]
struct RawHa {
    #[serde(default, deserialize_with = "lenient_bool")]
    managed: bool,
    #[serde(default, deserialize_with = "lenient_string")]
    state: Option<String>,
}

impl From<RawVmStatus> for VmStatus {
    fn from(raw: RawVmStatus) -> Self {
        let (ha_managed, ha_state) = match raw.ha {
            Some(ha) => (ha.managed, ha.state),
            None => (false, None),
        };
        VmStatus {
            status: raw.status,
            qmpstatus: raw.qmpstatus,
            name: raw.name,
            ha_managed,
            ha_state: if ha_managed { ha_state } else { None },
        }
    }
}

/// `GET /nodes/{node}/tasks/{upid}/status`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TaskStatus {
    /// `running` or `stopped`.
    pub status: String,
    /// Only once stopped: `OK`, `WARNINGS: n`, or the error text.
    #[serde(default, deserialize_with = "lenient_string")]
    pub exitstatus: Option<String>,
}

impl TaskStatus {
    pub fn is_running(&self) -> bool {
        self.status != "stopped"
    }

    /// `OK` and `WARNINGS: n` are success.
    pub fn succeeded(&self) -> bool {
        self.exitstatus
            .as_deref()
            .is_some_and(|e| e == "OK" || e.starts_with("WARNINGS:"))
    }
}

/// `GET /version`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PveVersion {
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub release: String,
}

fn value_to_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if *b { "1" } else { "0" }.to_string()),
        _ => None,
    }
}

fn lenient_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<Value>::deserialize(d)?
        .as_ref()
        .and_then(value_to_string))
}

fn lenient_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    Ok(match Option::<Value>::deserialize(d)? {
        Some(Value::Number(n)) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    })
}

fn lenient_bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(match Option::<Value>::deserialize(d)? {
        Some(Value::Bool(b)) => b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|n| n != 0.0),
        Some(Value::String(s)) => matches!(s.trim(), "1" | "true" | "on" | "yes"),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vm_configs_disks_are_its_drives_with_their_storage_but_not_cd_roms_or_unused_volumes() {
        let config = serde_json::json!({
            "scsi0": "ceph-vm:vm-101-disk-0,iothread=1,size=64G",
            "virtio1": "file=local-lvm:vm-101-disk-1,size=8G",
            "sata2": "/dev/disk/by-id/ata-SSD,size=100G",
            "ide2": "local:iso/talos.iso,media=cdrom",
            "ide0": "none,media=cdrom",
            "efidisk0": "local-lvm:vm-101-disk-2,efitype=4m,size=4M",
            "unused0": "ceph-vm:vm-101-disk-9",
            "scsi31": "local-lvm:vm-101-disk-3",
            "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
        });
        let disks = VmConfig::from_value(&config).disks;
        let found: Vec<(&str, Option<&str>)> = disks
            .iter()
            .map(|d| (d.key.as_str(), d.storage.as_deref()))
            .collect();
        assert_eq!(
            found,
            vec![
                ("efidisk0", Some("local-lvm")),
                ("sata2", None),
                ("scsi0", Some("ceph-vm")),
                ("virtio1", Some("local-lvm")),
            ]
        );
    }

    #[test]
    fn a_storage_is_shared_when_proxmox_says_so_in_any_spelling() {
        let one = |v: serde_json::Value| Storage::from_value(&v).unwrap();
        assert!(one(serde_json::json!({"storage": "ceph-vm", "type": "rbd", "shared": 1})).shared);
        assert!(one(serde_json::json!({"storage": "nas", "type": "nfs", "shared": "1"})).shared);
        let local = one(
            serde_json::json!({"storage": "local-lvm", "type": "lvmthin", "nodes": "pve1,pve2"}),
        );
        assert!(!local.shared);
        assert_eq!(local.nodes, vec!["pve1", "pve2"]);
        assert!(Storage::from_value(&serde_json::json!({"type": "dir"})).is_none());
    }

    #[test]
    fn smbios_uuid_is_found_in_any_position_and_checked() {
        assert_eq!(
            parse_smbios_uuid("uuid=6c3fa683-bef9-4425-b413-eaa45a9d6191").as_deref(),
            Some("6c3fa683-bef9-4425-b413-eaa45a9d6191")
        );
        assert_eq!(
            parse_smbios_uuid(
                "manufacturer=UUVNVQ==,uuid=6C3FA683-BEF9-4425-B413-EAA45A9D6191,base64=1"
            )
            .as_deref(),
            Some("6C3FA683-BEF9-4425-B413-EAA45A9D6191")
        );
        assert_eq!(parse_smbios_uuid("serial=abc"), None);
        assert_eq!(parse_smbios_uuid("uuid=not-a-uuid"), None);
    }

    #[test]
    fn tags_split_on_semicolons_and_friends() {
        assert_eq!(parse_tags("k8s;Staging"), vec!["k8s", "staging"]);
        assert_eq!(parse_tags("a, b c;;"), vec!["a", "b", "c"]);
        assert!(parse_tags("").is_empty());
    }

    #[test]
    fn resources_read_perl_typing() {
        let raw: RawResource = serde_json::from_value(serde_json::json!({
            "type": "qemu", "vmid": "101", "node": "pve1", "status": "running",
            "template": 0, "tags": "staging;cp", "hastate": "started"
        }))
        .expect("json");
        let vm = raw.into_qemu().expect("qemu");
        assert_eq!(vm.vmid, 101);
        assert!(!vm.template);
        assert_eq!(vm.tags, vec!["staging", "cp"]);
        let lxc: RawResource = serde_json::from_value(serde_json::json!({
            "type": "lxc", "vmid": 200, "node": "pve1", "status": "running"
        }))
        .expect("json");
        assert!(lxc.into_qemu().is_none());
    }

    #[test]
    fn ha_state_defaults_to_started() {
        assert_eq!(HaRequestedState::parse(None), HaRequestedState::Started);
        assert_eq!(
            HaRequestedState::parse(Some("enabled")),
            HaRequestedState::Started
        );
        let r: HaResource = RawHaResource {
            sid: "vm:100".into(),
            state: Some("ignored".into()),
        }
        .into();
        assert_eq!(r.vmid, Some(100));
        assert!(!r.is_managed());
    }

    #[test]
    fn task_success_is_ok_or_warnings() {
        let t = |e: &str| TaskStatus {
            status: "stopped".into(),
            exitstatus: Some(e.into()),
        };
        assert!(t("OK").succeeded());
        assert!(t("WARNINGS: 2").succeeded());
        assert!(!t("VM 100 already running").succeeded());
        assert!(
            !TaskStatus {
                status: "running".into(),
                exitstatus: None
            }
            .succeeded()
        );
    }
}
