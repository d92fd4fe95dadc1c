//! A VM's network device (`netN` in its config): a Proxmox property string such as
//! `virtio=BC:24:11:00:00:65,bridge=vmbr0,firewall=1`. The partition fault writes one key of it,
//! `link_down` ("like pulling the plug", qemu-server `PVE/QemuServer/Network.pm`), and a config
//! update replaces the whole string: so the string is parsed into its parts in their order and
//! rendered back with every other part untouched. Anything this parser does not understand is
//! refused, since writing back a string it misread would change the VM's network.

use std::fmt;

/// The key qemu-server's `$net_fmt` uses for the "pull the plug" switch.
pub const LINK_DOWN: &str = "link_down";

/// One `netN` property string, its parts in the order they were written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetDevice {
    parts: Vec<Part>,
}

/// One comma-separated part: `key=value`, or a bare value (the model, `$net_fmt`'s
/// `default_key`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Part {
    key: String,
    value: Option<String>,
}

/// Why a `netN` string is not one this parser can write back faithfully.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetDeviceError {
    #[error("the network device is empty")]
    Empty,
    #[error("part {index} is empty (two commas in a row or a trailing comma)")]
    EmptyPart { index: usize },
    #[error("part {index} ({part:?}) is not key=value")]
    Malformed { index: usize, part: String },
    #[error("key {key:?} appears twice")]
    Duplicate { key: String },
    #[error("link_down is {value:?}, not a Proxmox boolean (0/1, true/false, yes/no, on/off)")]
    NotBoolean { value: String },
    #[error("quoted values are not supported: {text:?}")]
    Quoted { text: String },
}

impl NetDevice {
    /// Parse a `netN` value. Refuses what could not be rendered back unchanged.
    pub fn parse(text: &str) -> Result<NetDevice, NetDeviceError> {
        if text.is_empty() {
            return Err(NetDeviceError::Empty);
        }
        if text.contains('"') {
            return Err(NetDeviceError::Quoted {
                text: text.to_string(),
            });
        }
        let mut parts: Vec<Part> = Vec::new();
        for (index, raw) in text.split(',').enumerate() {
            let part = parse_part(index, raw)?;
            if parts.iter().any(|p| p.key == part.key) {
                return Err(NetDeviceError::Duplicate { key: part.key });
            }
            parts.push(part);
        }
        let device = NetDevice { parts };
        device.link_down()?;
        Ok(device)
    }

    /// Whether the link is pulled; an absent key is Proxmox's default, up.
    pub fn link_down(&self) -> Result<bool, NetDeviceError> {
        match self.value(LINK_DOWN) {
            None => Ok(false),
            Some(value) => proxmox_bool(value).ok_or_else(|| NetDeviceError::NotBoolean {
                value: value.to_string(),
            }),
        }
    }

    /// The same device with `link_down` set: in place when the key is there, appended when not.
    pub fn with_link_down(&self, down: bool) -> NetDevice {
        let value = Some(if down { "1" } else { "0" }.to_string());
        let mut parts = self.parts.clone();
        match parts.iter_mut().find(|p| p.key == LINK_DOWN) {
            Some(part) => part.value = value,
            None => parts.push(Part {
                key: LINK_DOWN.to_string(),
                value,
            }),
        }
        NetDevice { parts }
    }

    /// The value of one key, if set.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.parts
            .iter()
            .find(|p| p.key == key)
            .and_then(|p| p.value.as_deref())
    }
}

/// The property string, parts in their order: what a config update writes back.
impl fmt::Display for NetDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, part) in self.parts.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match &part.value {
                Some(value) => write!(f, "{}={value}", part.key)?,
                None => f.write_str(&part.key)?,
            }
        }
        Ok(())
    }
}

fn parse_part(index: usize, raw: &str) -> Result<Part, NetDeviceError> {
    if raw.is_empty() {
        return Err(NetDeviceError::EmptyPart { index });
    }
    let malformed = || NetDeviceError::Malformed {
        index,
        part: raw.to_string(),
    };
    let (key, value) = match raw.split_once('=') {
        Some((key, value)) => (key, Some(value.to_string())),
        // A bare value is the model (`$net_fmt`'s default key), which only leads.
        None if index == 0 => (raw, None),
        None => return Err(malformed()),
    };
    let key_ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !key_ok || value.as_deref().is_some_and(|v| v.contains('=')) {
        return Err(malformed());
    }
    Ok(Part {
        key: key.to_string(),
        value,
    })
}

/// The `netN` entries of a VM config as read (text, not yet parsed: a device that cannot be
/// parsed is the caller's refusal, naming the key) and the config's digest.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VmNetDevices {
    /// `(key, property string)` in key order; a value that is not a string is kept as its
    /// JSON text so the refusal can show it.
    pub devices: Vec<(String, String)>,
    pub digest: Option<String>,
}

impl VmNetDevices {
    pub fn from_value(value: &serde_json::Value) -> VmNetDevices {
        let Some(map) = value.as_object() else {
            return VmNetDevices::default();
        };
        let mut devices: Vec<(String, String)> = map
            .iter()
            .filter(|(key, _)| is_net_key(key))
            .map(|(key, v)| {
                let text = v
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string());
                (key.clone(), text)
            })
            .collect();
        devices.sort_by_key(|(key, _)| key[3..].parse::<u32>().unwrap_or(u32::MAX));
        VmNetDevices {
            devices,
            digest: map
                .get("digest")
                .and_then(|d| d.as_str())
                .map(str::to_string),
        }
    }
}

/// A boolean as `PVE::JSONSchema` accepts it.
fn proxmox_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// Whether a config key names a network device (`net0` … `net31`).
pub fn is_net_key(key: &str) -> bool {
    key.strip_prefix("net")
        .is_some_and(|n| !n.is_empty() && n.len() <= 2 && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pulling_the_plug_keeps_every_other_part_in_its_order() {
        let text = "virtio=BC:24:11:00:00:65,bridge=vmbr0,firewall=1,tag=20";
        let device = NetDevice::parse(text).unwrap();
        assert_eq!(device.link_down(), Ok(false));
        let down = device.with_link_down(true);
        assert_eq!(
            down.to_string(),
            "virtio=BC:24:11:00:00:65,bridge=vmbr0,firewall=1,tag=20,link_down=1"
        );
        assert_eq!(down.link_down(), Ok(true));
        assert_eq!(
            down.with_link_down(false).to_string(),
            "virtio=BC:24:11:00:00:65,bridge=vmbr0,firewall=1,tag=20,link_down=0"
        );
    }

    #[test]
    fn a_link_down_already_written_is_changed_where_it_stands() {
        let device = NetDevice::parse("e1000,link_down=off,bridge=vmbr1").unwrap();
        assert_eq!(device.link_down(), Ok(false));
        assert_eq!(
            device.with_link_down(true).to_string(),
            "e1000,link_down=1,bridge=vmbr1"
        );
    }

    #[test]
    fn what_could_not_be_written_back_faithfully_is_refused_with_the_reason() {
        let cases = [
            ("", "empty"),
            ("virtio=AA:BB,,bridge=vmbr0", "part 1 is empty"),
            ("virtio=AA:BB,bridge=vmbr0,", "part 2 is empty"),
            ("virtio=AA:BB,bridge=a=b", "not key=value"),
            ("virtio=AA:BB,=vmbr0", "not key=value"),
            ("virtio=AA:BB,bridge=vmbr0,bridge=vmbr1", "appears twice"),
            ("virtio=AA:BB,link_down=maybe", "not a Proxmox boolean"),
            ("virtio=AA:BB,trunks=\"1;2\"", "quoted"),
            ("vir tio=AA:BB", "not key=value"),
            ("virtio=AA:BB,link_down", "not key=value"),
        ];
        for (text, why) in cases {
            let err = NetDevice::parse(text).expect_err(text);
            assert!(err.to_string().contains(why), "{text:?}: {err}");
        }
    }

    #[test]
    fn only_net_and_a_number_name_a_network_device() {
        assert!(is_net_key("net0") && is_net_key("net31"));
        assert!(!is_net_key("net") && !is_net_key("netx") && !is_net_key("ipconfig0"));
        assert!(!is_net_key("net123"));
    }
}
