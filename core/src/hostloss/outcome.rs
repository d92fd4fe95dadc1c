//! What the model concludes: per host an outcome with its reasons and the details behind
//! them, and over all hosts the worst one and the exit code of `gates predict`.

use serde::{Deserialize, Serialize};

use crate::exit::ExitCode;

use super::cluster::Cluster;
use super::findings::{
    ControllerLoss, EtcdLoss, L2Loss, NodeCapacity, PdbLoss, PodMove, VolumeLoss,
};

/// A host loss's outcome, from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Nothing that is served is interrupted.
    Survives,
    /// Survivable, with named, expected interruptions (VIP failover, ingress blink, degraded
    /// volumes, a controller without a ready replica until it is recreated).
    Degraded,
    /// Something the prediction needs could not be read.
    Unknown,
    /// Not survivable without manual work.
    Lost,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Survives => "survives",
            Outcome::Degraded => "degraded",
            Outcome::Unknown => "unknown",
            Outcome::Lost => "lost",
        }
    }
}

/// The fault a prediction is for: the host's VMs lose power, or they keep running cut off
/// the network (every network device's link pulled, as `gates chaos --fault partition` does).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Fault {
    #[default]
    Power,
    Partition,
}

impl Fault {
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::Power => "power",
            Fault::Partition => "partition",
        }
    }
}

/// One reason for a host's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reason {
    pub severity: Outcome,
    pub text: String,
}

/// The prediction for the loss of one host.
#[derive(Debug, Clone, Serialize)]
pub struct HostLoss {
    pub host: String,
    pub outcome: Outcome,
    /// Worst first.
    pub reasons: Vec<Reason>,
    /// The environment's nodes on the host.
    pub nodes: Vec<String>,
    /// Their VMs, when Proxmox placed them (`VM 101 talos-cp-01`).
    pub vms: Vec<String>,
    pub etcd: Option<EtcdLoss>,
    pub l2: Vec<L2Loss>,
    pub controllers: Vec<ControllerLoss>,
    pub pdbs: Vec<PdbLoss>,
    pub pods: Vec<PodMove>,
    pub capacity: Vec<NodeCapacity>,
    pub volumes: Vec<VolumeLoss>,
}

impl HostLoss {
    pub fn new(host: &str, cluster: &Cluster<'_>, lost: &[usize]) -> HostLoss {
        HostLoss {
            host: host.to_string(),
            outcome: Outcome::Survives,
            reasons: Vec::new(),
            nodes: lost
                .iter()
                .map(|&n| cluster.nodes[n].name.to_string())
                .collect(),
            vms: lost
                .iter()
                .filter_map(|&n| cluster.nodes[n].vm.clone())
                .collect(),
            etcd: None,
            l2: Vec::new(),
            controllers: Vec::new(),
            pdbs: Vec::new(),
            pods: Vec::new(),
            capacity: Vec::new(),
            volumes: Vec::new(),
        }
    }

    pub fn reason(&mut self, severity: Outcome, text: impl Into<String>) {
        self.reasons.push(Reason {
            severity,
            text: text.into(),
        });
    }

    /// Orders the reasons worst first (stable) and sets the outcome.
    pub fn settle(&mut self) {
        self.reasons.sort_by_key(|r| std::cmp::Reverse(r.severity));
        self.outcome = self
            .reasons
            .first()
            .map_or(Outcome::Survives, |r| r.severity);
    }

    /// The first reason, for one-line summaries.
    pub fn first_reason(&self) -> Option<&str> {
        self.reasons.first().map(|r| r.text.as_str())
    }

    /// Whether the loss is survivable (survives or degraded).
    pub fn survivable(&self) -> bool {
        matches!(self.outcome, Outcome::Survives | Outcome::Degraded)
    }
}

/// The prediction for every host.
#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    /// The fault predicted for each host.
    pub fault: Fault,
    pub hosts: Vec<HostLoss>,
    /// The host whose loss is worst (the most severe outcome, then the most reasons).
    pub worst: Option<String>,
    /// Why nothing could be predicted (the nodes or pods could not be read, or the host asked
    /// for runs none of the environment's nodes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cannot_tell: Vec<String>,
    /// Why no host's loss is survivable when no node could be placed on a host at all.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_survivable: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Prediction {
    pub fn new(hosts: Vec<HostLoss>, notes: Vec<String>, unknown_host: Option<String>) -> Self {
        let worst = hosts
            .iter()
            .max_by(|a, b| {
                (a.outcome, a.reasons.len())
                    .cmp(&(b.outcome, b.reasons.len()))
                    // Equal: the first host in name order.
                    .then_with(|| b.host.cmp(&a.host))
            })
            .map(|h| h.host.clone());
        Prediction {
            fault: Fault::Power,
            hosts,
            worst,
            cannot_tell: unknown_host.into_iter().collect(),
            not_survivable: Vec::new(),
            notes,
        }
    }

    pub fn cannot_tell(why: String) -> Self {
        Prediction {
            fault: Fault::Power,
            hosts: Vec::new(),
            worst: None,
            cannot_tell: vec![why],
            not_survivable: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub fn host(&self, name: &str) -> Option<&HostLoss> {
        self.hosts.iter().find(|h| h.host == name)
    }

    /// 1 when some host's loss is not survivable (known for sure, whatever else could not be
    /// read), else 2 when some outcome is unknown or nothing could be predicted, else 0.
    pub fn exit_code(&self) -> ExitCode {
        if !self.not_survivable.is_empty() || self.hosts.iter().any(|h| h.outcome == Outcome::Lost)
        {
            ExitCode::Failed
        } else if !self.cannot_tell.is_empty()
            || self.hosts.is_empty()
            || self.hosts.iter().any(|h| h.outcome == Outcome::Unknown)
        {
            ExitCode::CannotTell
        } else {
            ExitCode::Passed
        }
    }
}
