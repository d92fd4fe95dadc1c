//! A pod on a lost host that uses a ReadWriteOnce Longhorn volume. Its node stops reporting,
//! the pod is evicted and stays `Terminating` (kubelet never confirms), and the volume stays
//! attached to the dead node: a StatefulSet waits for the old pod to go before it makes one
//! of the same name, and a Deployment's replacement cannot attach the volume. Longhorn
//! force-deletes such a pod, releasing the attachment, only when its
//! `node-down-pod-deletion-policy` says so for the pod's owner; the default, `do-nothing`,
//! leaves it for someone to delete by hand (longhorn-manager
//! `controller/kubernetes_pod_controller.go`, `handlePodDeletionIfNodeDown`; choices and
//! default in `types/setting.go`). A `rwx` volume is served by a share manager instead and
//! is not held by the pod's node.
//!
//! Which pods use a volume comes from Longhorn's own record on the volume,
//! `status.kubernetesStatus.workloadsStatus`.

use super::cluster::{Cluster, name};
use super::outcome::{HostLoss, Outcome};
use crate::state::{LonghornKubernetesStatus, LonghornVolume, LonghornWorkloadStatus, Pod, State};
use std::sync::Arc;

pub const SETTING: &str = "node-down-pod-deletion-policy";
/// Longhorn's default when the setting is not there (`types/setting.go`).
const DEFAULT: &str = "do-nothing";

/// The values the setting takes (`types/setting.go`, `SettingDefinitionNodeDownPodDeletionPolicy`
/// choices); any other is not guessed at.
const POLICIES: [&str; 4] = [
    "do-nothing",
    "delete-statefulset-pod",
    "delete-deployment-pod",
    "delete-both-statefulset-and-deployment-pod",
];

/// What gates cannot tell about Longhorn's hold on a lost node's pods, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachUnknown {
    #[error(
        "Longhorn volume {volume} has accessMode `{mode}`, which gates does not know (rwo, rwop, rwx): whether a pod on a lost node holds it back is unknown"
    )]
    AccessMode { volume: String, mode: String },
    #[error(
        "Longhorn's {SETTING} is `{0}`, which gates does not know ({known}): whether Longhorn releases the volumes of pods on a lost node is not known",
        known = POLICIES.join(", ")
    )]
    Policy(String),
    #[error("whether Longhorn releases the volumes of pods on a lost node is not known: {0}")]
    SettingsUnread(String),
    /// The volumes or the pods could not be read (the finding's summary says why).
    #[error("{0}")]
    Unread(String),
}

/// A volume's `spec.accessMode` (`k8s/pkg/apis/longhorn/v1beta2/volume.go`): whether one node
/// at a time mounts it (`rwo`, `rwop`; empty is what the webhook turns into `rwo`), or a share
/// manager serves it to many (`rwx`); `Err` for a value gates does not know.
fn single_node(volume: &LonghornVolume) -> Result<bool, AttachUnknown> {
    match volume.spec.access_mode.as_str() {
        "" | "rwo" | "rwop" => Ok(true),
        "rwx" => Ok(false),
        other => Err(AttachUnknown::AccessMode {
            volume: name(&volume.metadata).to_string(),
            mode: other.to_string(),
        }),
    }
}

/// Whether Longhorn force-deletes a pod owned by `owner` (`ReplicaSet` or `StatefulSet`)
/// on a node that is down, under `policy`.
fn released(policy: &str, owner: &str) -> bool {
    match owner {
        "StatefulSet" => matches!(
            policy,
            "delete-statefulset-pod" | "delete-both-statefulset-and-deployment-pod"
        ),
        "ReplicaSet" => matches!(
            policy,
            "delete-deployment-pod" | "delete-both-statefulset-and-deployment-pod"
        ),
        _ => false,
    }
}

/// A pod of a lost node that uses a ReadWriteOnce Longhorn volume, and whether Longhorn's
/// policy force-deletes it once it is evicted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// `namespace/pod`.
    pub pod: String,
    /// `namespace/pod (Deployment) uses ReadWriteOnce Longhorn volume NAME`.
    pub line: String,
    /// Owned by a StatefulSet (else by a Deployment's ReplicaSet).
    pub stateful: bool,
    /// Longhorn's policy names the pod's owner, so it force-deletes the pod.
    pub released: bool,
    /// The `node-down-pod-deletion-policy` Longhorn runs with.
    pub policy: String,
}

/// Power loss: a held pod needs someone to force-delete it, a released one lets its
/// replacement start after the eviction and the detach.
pub fn predict(cluster: &Cluster<'_>, lost: &[usize], loss: &mut HostLoss) {
    let holds = holds(cluster, lost, loss);
    let (released, stuck): (Vec<&Hold>, Vec<&Hold>) = holds.iter().partition(|h| h.released);
    if let Some(first) = stuck.first() {
        loss.reason(
            Outcome::Lost,
            format!(
                "{}: with Longhorn's {SETTING} `{}` the pod stays Terminating on the dead node and the volume stays attached there, so its replacement cannot start until someone force-deletes it; set {SETTING} to delete-both-statefulset-and-deployment-pod",
                lines(&stuck),
                first.policy
            ),
        );
    }
    if !released.is_empty() {
        loss.reason(
            Outcome::Degraded,
            format!(
                "{}: Longhorn force-deletes the pod once it is evicted and releases the volume, so the replacement starts after the eviction and the detach",
                lines(&released)
            ),
        );
    }
}

/// The holds' lines, joined.
pub fn lines(holds: &[&Hold]) -> String {
    holds
        .iter()
        .map(|h| h.line.as_str())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The pods of the `lost` nodes that a ReadWriteOnce Longhorn volume ties to them, with what
/// Longhorn's policy does about each; what cannot be told goes into `loss` as unknown, and
/// then no hold is returned.
pub fn holds(cluster: &Cluster<'_>, lost: &[usize], loss: &mut HostLoss) -> Vec<Hold> {
    let state = cluster.state;
    let Ok(volumes) = state.longhorn_volumes.get("Longhorn volumes (longhorn.io)") else {
        // longhorn::predict names why the volumes are not known.
        return Vec::new();
    };
    // A volume served to many nodes by a share manager holds no pod back.
    let single: Vec<_> = volumes
        .iter()
        .filter(|v| v.status.kubernetes_status.is_some())
        .filter(|v| single_node(v) != Ok(false))
        .collect();
    if single.is_empty() {
        return Vec::new();
    }
    let pods = match state.pods.get("pods") {
        Ok(p) => p,
        Err(e) => {
            if e.verdict == crate::verdict::Verdict::Error {
                loss.reason(Outcome::Unknown, e.summary);
            }
            return Vec::new();
        }
    };
    let mut holds = Vec::new();
    let mut policy: Option<Result<String, AttachUnknown>> = None;
    for volume in single {
        let Some(k8s) = &volume.status.kubernetes_status else {
            continue;
        };
        for (user, pod) in users(k8s, pods) {
            let Some(owner) = lost_owner(cluster, lost, pod) else {
                continue;
            };
            if let Err(why) = single_node(volume) {
                loss.reason(Outcome::Unknown, why.to_string());
                return Vec::new();
            }
            let policy = match policy.get_or_insert_with(|| read_policy(cluster.state)) {
                Ok(p) => p.clone(),
                Err(why) => {
                    loss.reason(Outcome::Unknown, why.to_string());
                    return Vec::new();
                }
            };
            let stateful = owner == "StatefulSet";
            holds.push(Hold {
                pod: format!("{}/{}", k8s.namespace, user.pod_name),
                line: format!(
                    "{}/{} ({}) uses ReadWriteOnce Longhorn volume {}",
                    k8s.namespace,
                    user.pod_name,
                    if stateful {
                        "StatefulSet"
                    } else {
                        "Deployment"
                    },
                    name(&volume.metadata)
                ),
                stateful,
                released: released(&policy, owner),
                policy,
            });
        }
    }
    holds
}

/// The kind of the controller (`ReplicaSet` or `StatefulSet`) of a pod bound to a lost node;
/// `None` for a pod elsewhere or of another owner.
fn lost_owner<'p>(cluster: &Cluster<'_>, lost: &[usize], pod: &'p Pod) -> Option<&'p str> {
    let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref())?;
    if !cluster
        .node_index
        .get(node)
        .is_some_and(|i| lost.contains(i))
    {
        return None;
    }
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.kind.as_str())
        .filter(|kind| matches!(*kind, "ReplicaSet" | "StatefulSet"))
}

/// The pods Longhorn records as using a volume, each with its record, that the state holds.
fn users<'a>(
    k8s: &'a LonghornKubernetesStatus,
    pods: &'a [Arc<Pod>],
) -> impl Iterator<Item = (&'a LonghornWorkloadStatus, &'a Pod)> + 'a {
    k8s.workloads_status
        .iter()
        .flatten()
        .filter_map(move |user| {
            pods.iter()
                .find(|p| {
                    name(&p.metadata) == user.pod_name
                        && p.metadata.namespace.as_deref() == Some(k8s.namespace.as_str())
                })
                .map(|pod| (user, &**pod))
        })
}

/// The policy Longhorn runs with: the setting's value, Longhorn's default when the
/// settings were read and it is not among them, `Err` when the settings could not be read.
fn read_policy(state: &State) -> Result<String, AttachUnknown> {
    match state
        .longhorn_settings
        .get("Longhorn settings (longhorn.io)")
    {
        Ok(settings) => {
            let value = settings
                .iter()
                .find(|s| name(&s.metadata) == SETTING)
                .map(|s| s.value.clone())
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| DEFAULT.to_string());
            if POLICIES.contains(&value.as_str()) {
                Ok(value)
            } else {
                Err(AttachUnknown::Policy(value))
            }
        }
        Err(e) => Err(AttachUnknown::SettingsUnread(e.summary)),
    }
}

/// What a chaos run saw at the end of its outage: each pod on a node of the lost host that is
/// Terminating and still holds a ReadWriteOnce Longhorn volume attached there, said in words
/// with the setting that would have released it. Nobody but a person force-deleting the pod
/// frees such a volume while the host stays down, so each is manual work the host's loss
/// asked for. `Err` names what could not be read.
pub fn held_on(state: &State, lost_nodes: &[String]) -> Result<Held, AttachUnknown> {
    let volumes = match state.longhorn_volumes.present() {
        Some(v) => v,
        // Longhorn not installed: no Longhorn volume holds a pod.
        None if matches!(
            state.longhorn_volumes,
            crate::state::Collected::NotApplicable(_)
        ) =>
        {
            return Ok(Held::default());
        }
        None => {
            return Err(AttachUnknown::Unread(
                state
                    .longhorn_volumes
                    .get("Longhorn volumes (longhorn.io)")
                    .err()
                    .map(|f| f.summary)
                    .unwrap_or_default(),
            ));
        }
    };
    let pods = state
        .pods
        .get("pods")
        .map_err(|f| AttachUnknown::Unread(f.summary))?;
    let mut held = Vec::new();
    for volume in volumes.iter() {
        let Some(k8s) = &volume.status.kubernetes_status else {
            continue;
        };
        let attached = volume.status.current_node_id.as_str();
        if !lost_nodes.iter().any(|n| n == attached) || !single_node(volume)? {
            continue;
        }
        for (user, pod) in users(k8s, pods) {
            let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
            if pod.metadata.deletion_timestamp.is_none() || node != Some(attached) {
                continue;
            }
            held.push(format!(
                "{}/{} stayed Terminating on {attached} holding ReadWriteOnce Longhorn volume {}, attached there",
                k8s.namespace,
                user.pod_name,
                name(&volume.metadata)
            ));
        }
    }
    if held.is_empty() {
        return Ok(Held::default());
    }
    let fix = match read_policy(state) {
        Ok(policy) => format!(
            "Longhorn's {SETTING} is `{policy}`, so only a person force-deleting the pod releases the volume while the host is down; set {SETTING} to delete-both-statefulset-and-deployment-pod"
        ),
        Err(why) => format!(
            "only a force delete releases the volume while the host is down ({why}); Longhorn's {SETTING} set to delete-both-statefulset-and-deployment-pod does it"
        ),
    };
    Ok(Held { pods: held, fix })
}

/// Pods a lost host left holding their volumes, and what would have released them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    /// One line per pod: the pod, its node and the volume.
    pub pods: Vec<String>,
    /// The setting and its value, and the fix; empty when no pod is held.
    pub fix: String,
}
