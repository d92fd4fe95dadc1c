//! Node addresses from Talos's COSI resources: the spec of `AddressStatuses.net.talos.dev`
//! is read from its YAML rendering, so gates needs none of Talos's per-type protobuf specs.

use std::net::IpAddr;

use serde::Deserialize;

use super::types::NodeAddress;

/// COSI namespace of the network resources.
pub const NETWORK_NAMESPACE: &str = "network";
/// COSI type of the addresses a node has (what `talosctl get addresses` shows).
pub const ADDRESS_STATUS_TYPE: &str = "AddressStatuses.net.talos.dev";

/// The fields of the AddressStatus spec we read; Talos writes more (family, scope, flags...).
#[derive(Deserialize)]
struct AddressSpec {
    address: String,
    #[serde(rename = "linkName")]
    link_name: String,
}

/// Why an AddressStatus spec cannot be read (the caller names the resource).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressSpecError {
    #[error("spec is not valid YAML: {0}")]
    NotYaml(String),
    #[error("address {0:?} has no /prefix")]
    NoPrefix(String),
    #[error("address {0:?} is not an IP address with a prefix")]
    NotAnAddress(String),
    #[error("address {0:?} has an invalid prefix length")]
    BadPrefix(String),
}

/// Parses the YAML spec of the AddressStatus resource `id`. The error says what is wrong
/// with it, without the resource id (the caller names the resource).
pub fn parse_address_spec(id: &str, yaml: &str) -> Result<NodeAddress, AddressSpecError> {
    let spec: AddressSpec =
        crate::yaml::from_str(yaml).map_err(|e| AddressSpecError::NotYaml(e.to_string()))?;
    let (address, prefix_len) = parse_cidr(&spec.address)?;
    Ok(NodeAddress {
        id: id.to_string(),
        link: spec.link_name,
        address,
        prefix_len,
    })
}

/// `10.5.0.10/32` or `fd00::1/64` into the address and the prefix length.
fn parse_cidr(text: &str) -> Result<(IpAddr, u8), AddressSpecError> {
    let (ip, prefix) = text
        .split_once('/')
        .ok_or_else(|| AddressSpecError::NoPrefix(text.to_string()))?;
    let ip: IpAddr = ip
        .parse()
        .map_err(|_| AddressSpecError::NotAnAddress(text.to_string()))?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let prefix_len = prefix
        .parse::<u8>()
        .ok()
        .filter(|p| *p <= max)
        .ok_or_else(|| AddressSpecError::BadPrefix(text.to_string()))?;
    Ok((ip, prefix_len))
}

/// Whether `ip` is one of the addresses (the VIP check: the holder has it as an extra address).
pub fn holds_address(addrs: &[NodeAddress], ip: IpAddr) -> bool {
    addrs.iter().any(|a| a.address == ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    const VIP: &str = "addressIndex: 0\naddress: 10.5.0.10/32\nlocal: 10.5.0.10\n\
        broadcast: \"\"\nanycast: \"\"\nmulticast: \"\"\nlinkIndex: 2\nlinkName: eth0\n\
        family: inet4\nscope: global\nflags: permanent\npriority: 1024\n";

    #[test]
    fn talos_yaml_of_a_vip_parses() {
        let a = parse_address_spec("eth0/10.5.0.10/32", VIP).expect("parses");
        assert_eq!(a.id, "eth0/10.5.0.10/32");
        assert_eq!(a.link, "eth0");
        assert_eq!(a.address, "10.5.0.10".parse::<IpAddr>().unwrap());
        assert_eq!(a.prefix_len, 32);
    }

    #[test]
    fn ipv6_addresses_parse() {
        let a = parse_address_spec("eth0/fd00::2/64", "address: fd00::2/64\nlinkName: eth0\n")
            .expect("parses");
        assert_eq!(a.address, "fd00::2".parse::<IpAddr>().unwrap());
        assert_eq!(a.prefix_len, 64);
    }

    #[test]
    fn bad_specs_are_errors_not_panics() {
        for (yaml, needle) in [
            ("address: [unclosed", "YAML"),
            ("linkName: eth0\n", "YAML"),
            ("address: 10.5.0.10/32\n", "YAML"),
            ("address: 10.5.0.10\nlinkName: eth0\n", "no /prefix"),
            ("address: eth0/24\nlinkName: eth0\n", "not an IP"),
            ("address: 10.5.0.10/33\nlinkName: eth0\n", "prefix length"),
            ("address: fd00::1/129\nlinkName: eth0\n", "prefix length"),
            ("address: 10.5.0.10/x\nlinkName: eth0\n", "prefix length"),
            ("", "YAML"),
        ] {
            let err = parse_address_spec("x", yaml).expect_err(yaml);
            assert!(err.to_string().contains(needle), "{yaml:?}: {err}");
        }
    }

    #[test]
    fn holds_address_compares_addresses_not_prefixes() {
        let own = parse_address_spec("eth0/10.5.0.2/24", "address: 10.5.0.2/24\nlinkName: eth0")
            .expect("own");
        let vip = parse_address_spec("eth0/10.5.0.10/32", VIP).expect("vip");
        let vip_ip: IpAddr = "10.5.0.10".parse().unwrap();
        assert!(!holds_address(std::slice::from_ref(&own), vip_ip));
        assert!(holds_address(&[own, vip], vip_ip));
        assert!(!holds_address(&[], vip_ip));
    }
}
