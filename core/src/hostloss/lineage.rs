//! Which pod replaces which. A ReplicaSet recreates a lost pod under a new random name, a
//! StatefulSet under the same name; what the two share is the controller that owns them. So a
//! chaos run holds a predicted move to the pod that the same controller created, not to a pod
//! whose name merely starts the same (`web-7d9f8-abcde` and `web-admin-7d9f8-fghij` are
//! different workloads; `coredns-5d78c9869d-xk2lp` replaces `coredns-5d78c9869d-abcde`).

use crate::state::Pod;
use serde::{Deserialize, Serialize};

/// What a pod shares with its replacement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lineage {
    pub namespace: String,
    /// `ReplicaSet` or `StatefulSet`: the controllers that recreate a lost pod.
    pub kind: String,
    /// The controlling owner's name.
    pub owner: String,
    /// The owner's uid, when the pod's reference names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_uid: Option<String>,
    /// A ReplicaSet's pods carry the template's hash in `pod-template-hash`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_hash: Option<String>,
    /// A StatefulSet's pod keeps its name (its ordinal) in the replacement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordinal: Option<String>,
}

impl Lineage {
    /// The lineage of a pod its controller would recreate: `None` for DaemonSet, static,
    /// bare and otherwise-owned pods.
    pub fn of(pod: &Pod) -> Option<Lineage> {
        let refs = pod.metadata.owner_references.as_deref().unwrap_or(&[]);
        let owner = refs
            .iter()
            .find(|o| o.controller == Some(true))
            .or_else(|| refs.first())?;
        let name = pod.metadata.name.clone().unwrap_or_default();
        let (template_hash, ordinal) = match owner.kind.as_str() {
            "ReplicaSet" => (
                pod.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("pod-template-hash"))
                    .cloned(),
                None,
            ),
            "StatefulSet" => (None, Some(name)),
            _ => return None,
        };
        Some(Lineage {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            kind: owner.kind.clone(),
            owner: owner.name.clone(),
            owner_uid: Some(owner.uid.clone()).filter(|u| !u.is_empty()),
            template_hash,
            ordinal,
        })
    }

    /// Whether a pod of lineage `other` can be the replacement of a pod of this one: the same
    /// controller (and the same uid and template hash where both say), and for a StatefulSet
    /// the same ordinal.
    pub fn replaced_by(&self, other: &Lineage) -> bool {
        let agree = |a: &Option<String>, b: &Option<String>| match (a, b) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        self.namespace == other.namespace
            && self.kind == other.kind
            && self.owner == other.owner
            && agree(&self.owner_uid, &other.owner_uid)
            && agree(&self.template_hash, &other.template_hash)
            && self.ordinal == other.ordinal
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::pod;
    use crate::hostloss::testing::PodExt;

    fn rs_pod(name: &str, rs: &str, hash: &str) -> Pod {
        pod("kube-system", name)
            .labels(&[("pod-template-hash", hash)])
            .build()
            .owned("ReplicaSet", rs)
    }

    #[test]
    fn a_replicaset_pod_is_replaced_by_a_new_name_of_the_same_replicaset() {
        let lost = Lineage::of(&rs_pod(
            "coredns-5d78c9869d-abcde",
            "coredns-5d78c9869d",
            "5d78c9869d",
        ))
        .expect("a ReplicaSet's pod has a lineage");
        let new = Lineage::of(&rs_pod(
            "coredns-5d78c9869d-xk2lp",
            "coredns-5d78c9869d",
            "5d78c9869d",
        ))
        .expect("a ReplicaSet's pod has a lineage");
        assert!(lost.replaced_by(&new));
    }

    #[test]
    fn a_pod_of_another_replicaset_with_a_similar_name_is_no_replacement() {
        let lost = Lineage::of(&rs_pod("web-7d9f8-abcde", "web-7d9f8", "7d9f8")).unwrap();
        let other =
            Lineage::of(&rs_pod("web-7d9f8-admin-fghij", "web-7d9f8-admin", "7d9f8")).unwrap();
        assert!(!lost.replaced_by(&other));
        let rolled = Lineage::of(&rs_pod("web-7d9f8-zzzzz", "web-7d9f8", "1a2b3")).unwrap();
        assert!(!lost.replaced_by(&rolled), "a different template hash");
    }

    #[test]
    fn a_statefulset_pod_is_replaced_by_its_own_ordinal_only() {
        let db = |name: &str| {
            Lineage::of(&pod("apps", name).build().owned("StatefulSet", "db")).unwrap()
        };
        assert!(db("db-0").replaced_by(&db("db-0")));
        assert!(!db("db-0").replaced_by(&db("db-1")));
    }

    #[test]
    fn daemonset_and_bare_pods_have_no_lineage() {
        assert_eq!(
            Lineage::of(&pod("a", "x").build().owned("DaemonSet", "cilium")),
            None
        );
        assert_eq!(Lineage::of(&pod("a", "x").build()), None);
    }
}
