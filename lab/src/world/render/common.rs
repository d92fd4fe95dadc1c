//! What every renderer shares: resource quantities, owner references, object metadata,
//! simulated times as Kubernetes shows them, and the pod network's addresses.

use super::super::*;
use crate::ids;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;

/// A Kubernetes resource quantity from its text.
pub(super) fn q(s: String) -> Quantity {
    Quantity(s)
}

/// An object as the JSON the store holds (null if it cannot be serialized).
pub(super) fn to_value<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

/// A controller owner reference, as the apps controllers set on what they create.
pub(super) fn owner(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

impl World {
    /// A simulated instant as the wall-clock `Time` (whole seconds) Kubernetes objects carry.
    pub(in crate::world) fn time(&self, d: Duration) -> Time {
        let w = self.clock.wall_of(d);
        Time(Timestamp::from_second(w.timestamp()).unwrap_or(Timestamp::UNIX_EPOCH))
    }

    /// A simulated instant as a `MicroTime`, as Lease objects carry their renew times.
    pub(super) fn micro(&self, d: Duration) -> MicroTime {
        let w = self.clock.wall_of(d);
        MicroTime(
            Timestamp::from_microsecond(w.timestamp_micros()).unwrap_or(Timestamp::UNIX_EPOCH),
        )
    }

    /// A simulated instant as RFC 3339 text, for the JSON-rendered (CRD and metrics) kinds.
    pub(super) fn rfc3339(&self, d: Duration) -> String {
        self.clock
            .wall_of(d)
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }

    /// The metadata every rendered object starts from: a uid stable per environment, kind,
    /// namespace and name, its labels, and its creation time.
    pub(super) fn meta(
        &self,
        env: usize,
        kind: &str,
        ns: Option<&str>,
        name: &str,
        labels: BTreeMap<String, String>,
        created: Duration,
    ) -> ObjectMeta {
        let e = &self.envs[env];
        ObjectMeta {
            name: Some(name.into()),
            namespace: ns.map(String::from),
            uid: Some(ids::uuid(&[&e.spec.name, kind, ns.unwrap_or(""), name])),
            labels: if labels.is_empty() {
                None
            } else {
                Some(labels)
            },
            creation_timestamp: Some(self.time(created)),
            generation: None,
            ..Default::default()
        }
    }
}

/// Node `n`'s pod range, as the node IPAM hands out /24s of the cluster CIDR.
pub(crate) fn pod_cidr(n: usize) -> String {
    format!("10.244.{}.0/24", n % 256)
}

/// A scheduled pod's address: inside its node's podCIDR (.2 to .254), fixed by its serial.
pub(crate) fn pod_ip(p: &Pod) -> Option<String> {
    p.node
        .map(|n| format!("10.244.{}.{}", n % 256, 2 + p.ip_serial % 253))
}
