//! A small in-memory [`TalosBackend`]: control-plane nodes are etcd members; the cluster has
//! quorum while more than half of them are up. Reference semantics for the world model and the
//! backend of the server's tests.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use super::backend::{
    EtcdAlarm, EtcdError, EtcdMember, EtcdMemberStatus, LabAddress, NodeRole, ServiceEvent,
    ServiceState, TalosBackend, TalosVersion,
};

#[derive(Debug, Clone)]
struct Node {
    name: String,
    ip: IpAddr,
    role: NodeRole,
    up: bool,
    member_id: u64,
}

/// In-memory Talos cluster.
#[derive(Debug)]
pub struct MemoryTalos {
    nodes: Mutex<Vec<Node>>,
    alarms: Mutex<Vec<EtcdAlarm>>,
    /// The API VIP and the node that holds it, if any.
    vip: Mutex<Option<(String, IpAddr)>>,
    power: Mutex<HashMap<String, watch::Sender<bool>>>,
    boot: SystemTime,
}

impl MemoryTalos {
    /// Nodes as (hostname, address, role), all up.
    pub fn new(nodes: &[(&str, IpAddr, NodeRole)]) -> Arc<Self> {
        let nodes: Vec<Node> = nodes
            .iter()
            .enumerate()
            .map(|(i, (name, ip, role))| Node {
                name: name.to_string(),
                ip: *ip,
                role: *role,
                up: true,
                // Distinct, realistic-looking 64-bit member ids.
                member_id: 0x8e9e_05c5_2164_694d_u64.wrapping_mul(i as u64 + 1),
            })
            .collect();
        let power = nodes
            .iter()
            .map(|n| (n.name.clone(), watch::channel(true).0))
            .collect();
        Arc::new(Self {
            nodes: Mutex::new(nodes),
            alarms: Mutex::new(Vec::new()),
            vip: Mutex::new(None),
            power: Mutex::new(power),
            boot: SystemTime::now() - Duration::from_secs(3600),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Node>> {
        self.nodes.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn node(&self, name: &str) -> Option<Node> {
        self.lock().iter().find(|n| n.name == name).cloned()
    }

    /// Power watch of a node (true = on), for [`super::serve`].
    pub fn power_watch(&self, node: &str) -> watch::Receiver<bool> {
        self.power
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(node.to_string())
            .or_insert_with(|| watch::channel(false).0)
            .subscribe()
    }

    /// Powers a node on or off.
    pub fn set_up(&self, node: &str, up: bool) {
        if let Some(n) = self.lock().iter_mut().find(|n| n.name == node) {
            n.up = up;
        }
        if let Some(tx) = self
            .power
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(node)
        {
            tx.send_replace(up);
        }
    }

    /// Replaces the active alarms.
    pub fn set_alarms(&self, alarms: Vec<EtcdAlarm>) {
        *self.alarms.lock().unwrap_or_else(|e| e.into_inner()) = alarms;
    }

    /// Makes `node` the holder of the API VIP `vip`, or nobody with `None`. The holder shows
    /// the VIP among its addresses while it is up and etcd has quorum.
    pub fn set_vip_holder(&self, node: Option<&str>, vip: IpAddr) {
        *self.vip.lock().unwrap_or_else(|e| e.into_inner()) = node.map(|n| (n.to_string(), vip));
    }

    /// Member id of a node's etcd member.
    pub fn member_id(&self, node: &str) -> Option<u64> {
        self.node(node).map(|n| n.member_id)
    }

    fn leader(&self) -> Option<u64> {
        let nodes = self.lock();
        let cps: Vec<&Node> = nodes
            .iter()
            .filter(|n| n.role == NodeRole::ControlPlane)
            .collect();
        let up = cps.iter().filter(|n| n.up).count();
        if up * 2 > cps.len() {
            cps.iter().find(|n| n.up).map(|n| n.member_id)
        } else {
            None
        }
    }
}

impl TalosBackend for MemoryTalos {
    fn resolve(&self, target: &str) -> Option<String> {
        self.lock()
            .iter()
            .find(|n| n.name == target || n.ip.to_string() == target)
            .map(|n| n.name.clone())
    }

    fn is_up(&self, node: &str) -> bool {
        self.node(node).is_some_and(|n| n.up)
    }

    fn role(&self, node: &str) -> NodeRole {
        self.node(node).map(|n| n.role).unwrap_or(NodeRole::Worker)
    }

    fn version(&self, _node: &str) -> TalosVersion {
        TalosVersion::default()
    }

    fn etcd_members(&self, _node: &str) -> Result<Vec<EtcdMember>, EtcdError> {
        self.leader().ok_or(EtcdError::NoQuorum)?;
        Ok(self
            .lock()
            .iter()
            .filter(|n| n.role == NodeRole::ControlPlane)
            .map(|n| EtcdMember {
                id: n.member_id,
                hostname: n.name.clone(),
                peer_urls: vec![format!("https://{}:2380", n.ip)],
                client_urls: vec![format!("https://{}:2379", n.ip)],
                is_learner: false,
            })
            .collect())
    }

    fn etcd_status(&self, node: &str) -> Result<EtcdMemberStatus, EtcdError> {
        let me = self
            .node(node)
            .ok_or_else(|| EtcdError::Failed(format!("unknown node {node}")))?;
        let leader = self.leader();
        Ok(EtcdMemberStatus {
            member_id: me.member_id,
            protocol_version: "3.6.0".into(),
            storage_version: "3.6.0".into(),
            db_size: 24 << 20,
            db_size_in_use: 12 << 20,
            leader: leader.unwrap_or(0),
            raft_index: 120_345,
            raft_term: 7,
            raft_applied_index: 120_345,
            errors: if leader.is_none() {
                vec!["etcdserver: no leader".into()]
            } else {
                Vec::new()
            },
            is_learner: false,
        })
    }

    fn etcd_alarms(&self, _node: &str) -> Result<Vec<EtcdAlarm>, EtcdError> {
        self.leader().ok_or(EtcdError::NoQuorum)?;
        Ok(self
            .alarms
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone())
    }

    fn services(&self, node: &str) -> Vec<ServiceState> {
        let role = self.role(node);
        let quorum = self.leader().is_some();
        let mut ids = vec!["apid", "containerd", "cri", "kubelet", "machined", "udevd"];
        if role == NodeRole::ControlPlane {
            ids.extend(["etcd", "trustd"]);
        }
        ids.sort_unstable();
        ids.into_iter()
            .map(|id| {
                let healthy = id != "etcd" || quorum;
                ServiceState {
                    id: id.to_string(),
                    state: "Running".into(),
                    healthy: Some(healthy),
                    last_message: if healthy { "" } else { "etcdserver: no leader" }.into(),
                    last_change: self.boot,
                    events: vec![
                        ServiceEvent {
                            msg: "Starting service".into(),
                            state: "Starting".into(),
                            at: self.boot,
                        },
                        ServiceEvent {
                            msg: "Health check successful".into(),
                            state: "Running".into(),
                            at: self.boot + Duration::from_secs(5),
                        },
                    ],
                }
            })
            .collect()
    }

    fn addresses(&self, node: &str) -> Vec<LabAddress> {
        let Some(me) = self.node(node) else {
            return Vec::new();
        };
        let at = |link: &str, address: IpAddr, prefix_len: u8| LabAddress {
            link: link.to_string(),
            address,
            prefix_len,
            since: self.boot,
        };
        let mut list = vec![
            at("lo", IpAddr::V4(Ipv4Addr::LOCALHOST), 8),
            at("eth0", me.ip, 24),
        ];
        let vip = self.vip.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some((holder, ip)) = vip
            && holder == node
            && me.up
            && self.leader().is_some()
        {
            list.push(at("eth0", ip, 32));
        }
        list
    }
}
