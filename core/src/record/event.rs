//! One event on a chaos run's timeline: what the harness did (VMs stopped and started) and
//! what the cluster did (nodes NotReady and Ready again, lease holders changing, pods
//! replaced). The kinds are the chaos step's words, kept as text: the lab and the watcher
//! add kinds, and a reader sorts the ones it does not know into "other".

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::seconds::millis;
use crate::hostloss::lineage::Lineage;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Since the start of the run.
    #[serde(with = "millis")]
    pub at: Duration,
    /// `vm-stop-requested`, `node-not-ready`, `lease-holder-changed`, `pod-replaced`, ...
    pub kind: String,
    #[serde(default)]
    pub subject: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// For `pod-created` and `pod-removed`: the pod's owner, template hash and ordinal, which
    /// match it to the pod it replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage: Option<Lineage>,
}

/// The event kinds that say who took over from whom.
pub const HANDOVER_KINDS: [&str; 3] = [
    "api-vip-holder-changed",
    "lease-holder-changed",
    "etcd-leader-changed",
];
