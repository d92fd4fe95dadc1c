//! The lab address plan (see notes/lab-plan.md): every server of a lab instance lives on
//! 127.S.x.y, so several labs can run side by side by picking distinct subnet bytes S.

use std::net::{Ipv4Addr, SocketAddr};

/// The subnet byte a lab asks for when none is given: 127.77.x.y.
pub const DEFAULT_SUBNET: u8 = 77;

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

/// Whether a lab may serve on another subnet than the one asked for when that one is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SubnetChoice {
    /// The first free subnet from the one asked for upwards (wrapping, 1..=254): a user's own
    /// `gates lab` or a second test run beside this one moves the newcomer, not both.
    #[default]
    FirstFree,
    /// Exactly the one asked for (`--subnet` given): taken is an error.
    Exactly,
}

/// A subnet held for one user: the lab's control address bound on it, so any other lab (or
/// test control plane) that claims the same subnet sees it taken. Released on drop.
#[derive(Debug)]
pub struct Claim {
    pub subnet: u8,
    pub listener: std::net::TcpListener,
}

/// Claim `from` or, with [`SubnetChoice::FirstFree`], the first free subnet after it. The
/// control address is the arbiter: binding it is atomic, so two labs starting at once never
/// both get one subnet. Errors other than "in use" end the search (they would repeat).
pub fn claim(from: u8, choice: SubnetChoice) -> Result<Claim, (SocketAddr, std::io::Error)> {
    let tries = match choice {
        SubnetChoice::Exactly => 1,
        SubnetChoice::FirstFree => 254,
    };
    let mut subnet = from.clamp(1, 254);
    let mut last = None;
    for _ in 0..tries {
        let addr = Plan::new(subnet).control_addr();
        match std::net::TcpListener::bind(addr) {
            Ok(listener) => return Ok(Claim { subnet, listener }),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => last = Some((addr, e)),
            Err(e) => return Err((addr, e)),
        }
        subnet = if subnet >= 254 { 1 } else { subnet + 1 };
    }
    Err(last.unwrap_or_else(|| {
        let addr = Plan::new(from).control_addr();
        (addr, std::io::Error::from(std::io::ErrorKind::AddrInUse))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_subnet_moves_a_lab_that_may_move_and_refuses_one_that_may_not() {
        let first = claim(231, SubnetChoice::FirstFree).expect("a free subnet");
        let second = claim(first.subnet, SubnetChoice::FirstFree).expect("another free subnet");
        assert_ne!(second.subnet, first.subnet, "the newcomer moves");
        let refused = claim(first.subnet, SubnetChoice::Exactly).unwrap_err();
        assert_eq!(refused.1.kind(), std::io::ErrorKind::AddrInUse);
        assert_eq!(refused.0, Plan::new(first.subnet).control_addr());
        let subnet = first.subnet;
        drop(first);
        let again = claim(subnet, SubnetChoice::Exactly).expect("released on drop");
        assert_eq!(again.subnet, subnet);
    }
}
