//! The lab address plan (see notes/lab-plan.md): every server of a lab instance lives on
//! 127.S.x.y, so several labs can run side by side by picking distinct subnet bytes S.

use std::net::{Ipv4Addr, SocketAddr};

/// Port of the Kubernetes API on control-plane nodes and on the API VIP.
pub const KUBE_PORT: u16 = 6443;
/// Port of Talos apid on every node.
pub const APID_PORT: u16 = 50000;
/// Port of the Proxmox VE API on every host.
pub const PROXMOX_PORT: u16 = 8006;
/// Plain HTTP port of the ingress LoadBalancer address.
pub const INGRESS_HTTP_PORT: u16 = 8080;
/// HTTPS port of the ingress LoadBalancer address.
pub const INGRESS_HTTPS_PORT: u16 = 8443;
/// Port of the lab control endpoint.
pub const CONTROL_PORT: u16 = 7000;

/// The subnet byte S of one lab instance and the addresses derived from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub subnet: u8,
}

impl Plan {
    pub fn new(subnet: u8) -> Self {
        Plan { subnet }
    }

    /// Proxmox host `i` (0-based index; the address uses i+1).
    pub fn host_ip(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(127, self.subnet, 0, index_byte(i))
    }

    /// Talos/Kubernetes node `j` (0-based, numbered across all environments).
    pub fn node_ip(&self, j: usize) -> Ipv4Addr {
        Ipv4Addr::new(127, self.subnet, 1, index_byte(j))
    }

    /// Kubernetes API VIP of environment `k` (0-based).
    pub fn vip_ip(&self, k: usize) -> Ipv4Addr {
        Ipv4Addr::new(127, self.subnet, 2, index_byte(k))
    }

    /// Ingress LoadBalancer address of environment `k` (0-based).
    pub fn ingress_ip(&self, k: usize) -> Ipv4Addr {
        Ipv4Addr::new(127, self.subnet, 3, index_byte(k))
    }

    pub fn control_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::new(127, self.subnet, 255, 1), CONTROL_PORT))
    }
}

/// Index i maps to the last address byte i+1; beyond 254 the plan has no room, so the
/// scenario loader refuses more than 254 entries of a kind that needs an address.
fn index_byte(i: usize) -> u8 {
    u8::try_from(i + 1).unwrap_or(u8::MAX)
}

/// Addresses above this index are not served (the generated scale scenario has thousands of
/// nodes, which exist only as Kubernetes objects).
pub const MAX_ADDRESSED: usize = 254;
