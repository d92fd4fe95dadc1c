//! Proxmox task ids: `UPID:node:pid:pstart:starttime:type:id:user:`. A task is polled
//! on the node named inside its UPID, not on the node one expects the VM on.

use std::fmt;

use super::error::ProxmoxError;

/// A parsed UPID; `Display` gives back the original text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upid {
    raw: String,
    /// Node that runs the task.
    pub node: String,
    pub pid: u32,
    pub pstart: u64,
    /// Unix time the task started.
    pub starttime: u64,
    /// Task type: `qmstart`, `qmstop`, `hastart`, `hastop`, ...
    pub kind: String,
    /// Object id (the VM id for VM tasks); may be empty.
    pub id: String,
    /// `user@realm` or `user@realm!tokenid`.
    pub user: String,
}

impl Upid {
    pub fn parse(text: &str) -> Result<Upid, ProxmoxError> {
        let bad = |reason: &str| ProxmoxError::InvalidUpid {
            upid: text.to_string(),
            reason: reason.to_string(),
        };
        let rest = text
            .strip_prefix("UPID:")
            .ok_or_else(|| bad("does not start with UPID:"))?;
        let rest = rest
            .strip_suffix(':')
            .ok_or_else(|| bad("no trailing ':'"))?;
        let parts: Vec<&str> = rest.split(':').collect();
        let [node, pid, pstart, starttime, kind, id, user] = parts.as_slice() else {
            return Err(bad("expected 8 ':'-separated fields after UPID"));
        };
        let node_ok = !node.is_empty()
            && node.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !node.starts_with('-')
            && !node.ends_with('-');
        if !node_ok {
            return Err(bad("invalid node name"));
        }
        let hex = |field: &str, min: usize, max: usize, what: &str| {
            if field.len() < min
                || field.len() > max
                || !field.chars().all(|c| c.is_ascii_hexdigit())
            {
                return Err(bad(&format!("invalid {what}")));
            }
            u64::from_str_radix(field, 16).map_err(|_| bad(&format!("invalid {what}")))
        };
        let pid = hex(pid, 8, 8, "pid")?;
        let pstart = hex(pstart, 8, 9, "pstart")?;
        let starttime = hex(starttime, 8, 8, "starttime")?;
        let field_ok = |f: &str| !f.chars().any(|c| c.is_whitespace() || c == '/');
        if kind.is_empty() || !field_ok(kind) {
            return Err(bad("invalid task type"));
        }
        if !field_ok(id) {
            return Err(bad("invalid id"));
        }
        if user.is_empty() || !field_ok(user) {
            return Err(bad("invalid user"));
        }
        Ok(Upid {
            raw: text.to_string(),
            node: node.to_string(),
            pid: u32::try_from(pid).map_err(|_| bad("invalid pid"))?,
            pstart,
            starttime,
            kind: kind.to_string(),
            id: id.to_string(),
            user: user.to_string(),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.raw
    }
}

impl fmt::Display for Upid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl serde::Serialize for Upid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.raw)
    }
}

impl<'de> serde::Deserialize<'de> for Upid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Upid::parse(&raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_real_upid() {
        let u = Upid::parse("UPID:x:000039C6:1FE23176:619510B1:qmconfig:113:terraform-prov@pve:")
            .expect("upid");
        assert_eq!(u.node, "x");
        assert_eq!(u.pid, 14790);
        assert_eq!(u.pstart, 534917494);
        assert_eq!(u.starttime, 1637159089);
        assert_eq!(u.kind, "qmconfig");
        assert_eq!(u.id, "113");
        assert_eq!(u.user, "terraform-prov@pve");
        assert_eq!(
            u.to_string(),
            "UPID:x:000039C6:1FE23176:619510B1:qmconfig:113:terraform-prov@pve:"
        );
    }

    #[test]
    fn accepts_token_users_empty_ids_and_nine_digit_pstart() {
        let u = Upid::parse("UPID:pve2:0000ABCD:1FE231761:619510B1:startall::gates@pve!lab:")
            .expect("upid");
        assert_eq!(u.node, "pve2");
        assert_eq!(u.id, "");
        assert_eq!(u.user, "gates@pve!lab");
        assert_eq!(u.pstart, 0x1FE231761);
    }

    #[test]
    fn serializes_as_its_text() {
        let text = "UPID:pve1:000039C6:1FE23176:619510B1:qmstop:101:gates@pve!lab:";
        let u = Upid::parse(text).expect("upid");
        let json = serde_json::to_string(&u).expect("json");
        assert_eq!(json, format!("\"{text}\""));
        assert_eq!(serde_json::from_str::<Upid>(&json).expect("back"), u);
        assert!(serde_json::from_str::<Upid>("\"UPID:bad\"").is_err());
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "UPID:pve1:000039C6:1FE23176:619510B1:qmstop:100:root@pam",
            "TASK:pve1:000039C6:1FE23176:619510B1:qmstop:100:root@pam:",
            "UPID:pve1:39C6:1FE23176:619510B1:qmstop:100:root@pam:",
            "UPID:-pve:000039C6:1FE23176:619510B1:qmstop:100:root@pam:",
            "UPID:pve1:000039C6:1FE23176:619510B1:qmstop:100::",
            "UPID:pve1:000039C6:1FE23176:619510B1:qmstop:100:root@pam:extra:",
        ] {
            assert!(Upid::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
