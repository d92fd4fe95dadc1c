//! Provenance: which cluster a piece of evidence is about, and when it was taken.
//!
//! A pass is only worth promoting on if it is about *this* cluster *now*. Every snapshot,
//! check report, chaos report and chaos journal therefore records the environment, the time
//! of collection, the cluster's identity and a digest of its control-plane topology. A
//! snapshot of another cluster is refused, and a chaos report counts for gate 4 only when
//! identity and topology match the cluster being checked.
//!
//! The identity has three parts, each recorded when it could be read:
//! - the `kube-system` namespace UID (created once per cluster, never reused);
//! - the SHA-256 of the API server's CA certificate (what clients verify against);
//! - with Talos, the etcd member IDs the control planes report. The Talos machine API does
//!   not relay etcd's cluster ID, so the sorted member set stands in for it: it changes only
//!   when a member is replaced, which is itself a change of topology.
//!
//! The topology digest is the SHA-256 over the control-plane nodes, each with its host (the
//! environment's host label) and its VM's SMBIOS UUID (`systemUUID`): every source that has
//! the node list, kubectl output included, computes the same digest.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

use crate::config::Environment;
use crate::state::State;

/// Where and when one piece of evidence was taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    pub environment: String,
    pub collected_at: DateTime<Utc>,
    pub cluster: ClusterIdentity,
    pub topology: Topology,
}

/// The parts of a cluster's identity that could be read (`None`: not known).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterIdentity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_system_uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_ca_sha256: Option<String>,
    /// Sorted etcd member IDs (hex), from the Talos API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_members: Option<Vec<String>>,
}

/// The control-plane nodes with their hosts and VM UUIDs, and their digest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// Lowercase hex SHA-256 of the lines `node host uuid`, sorted by node.
    pub digest: String,
    pub control_planes: Vec<TopologyNode>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopologyNode {
    pub node: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_uuid: Option<String>,
}

/// Whether two pieces of evidence are about the same cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sameness {
    Same,
    /// Each line names a part and both values.
    Different(Vec<String>),
    /// No part is known on both sides, so nothing can be proved.
    Unknown(String),
}

impl Provenance {
    /// The provenance of a collected state. `collected_at` is when the state was read (for
    /// a snapshot: when the snapshot was taken, not when it is read).
    pub fn of(env: &Environment, state: &State, collected_at: DateTime<Utc>) -> Provenance {
        let mut cluster = state.cluster_identity.clone();
        if let Some(talos) = state.talos.present() {
            let mut ids: Vec<String> = talos
                .endpoints
                .iter()
                .filter_map(|e| e.view.as_ref().ok())
                .flat_map(|v| v.members.iter().map(|m| m.id.clone()))
                .collect();
            ids.sort();
            ids.dedup();
            if !ids.is_empty() {
                cluster.etcd_members = Some(ids);
            }
        }
        let topology = state
            .nodes
            .present()
            .map(|nodes| Topology::of(nodes, &env.nodes.host_label))
            .unwrap_or_default();
        Provenance {
            environment: env.name.clone(),
            collected_at,
            cluster,
            topology,
        }
    }

    /// Name and value of every part, for report properties (JUnit, HTML): a part that could
    /// not be read says `unknown`, so a reader sees it was looked for.
    pub fn properties(&self) -> Vec<(&'static str, String)> {
        let known = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".to_string());
        let topology = if self.topology.digest.is_empty() {
            "unknown".to_string()
        } else {
            self.topology.digest.clone()
        };
        vec![
            ("provenance.environment", self.environment.clone()),
            ("provenance.collected_at", self.collected_at.to_rfc3339()),
            (
                "provenance.kube_system_uid",
                known(&self.cluster.kube_system_uid),
            ),
            (
                "provenance.api_ca_sha256",
                known(&self.cluster.api_ca_sha256),
            ),
            (
                "provenance.etcd_members",
                known(&self.cluster.etcd_members.as_ref().map(|m| m.join(","))),
            ),
            ("provenance.topology_digest", topology),
            (
                "provenance.control_planes",
                self.topology
                    .control_planes
                    .iter()
                    .map(|n| {
                        format!(
                            "{} host {} vm {}",
                            n.node,
                            n.host.as_deref().unwrap_or("unknown"),
                            n.vm_uuid.as_deref().unwrap_or("unknown")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
        ]
    }

    /// One line for terminals and notes: environment, time and the identity parts.
    pub fn describe(&self) -> String {
        let mut parts = vec![format!(
            "environment {} at {}",
            self.environment,
            self.collected_at.format("%Y-%m-%d %H:%M:%S UTC")
        )];
        parts.extend(self.cluster.describe());
        if !self.topology.digest.is_empty() {
            parts.push(format!("topology {}", short(&self.topology.digest)));
        }
        parts.join(", ")
    }
}

impl ClusterIdentity {
    fn describe(&self) -> Vec<String> {
        let mut parts = Vec::new();
        if let Some(uid) = &self.kube_system_uid {
            parts.push(format!("kube-system {uid}"));
        }
        if let Some(ca) = &self.api_ca_sha256 {
            parts.push(format!("API CA sha256 {}", short(ca)));
        }
        if let Some(members) = &self.etcd_members {
            parts.push(format!("etcd members {}", members.join(",")));
        }
        parts
    }

    /// Compare every part known on both sides.
    pub fn compare(&self, other: &ClusterIdentity) -> Sameness {
        let mut compared = 0;
        let mut different = Vec::new();
        let mut part = |name: &str, a: Option<String>, b: Option<String>| {
            if let (Some(a), Some(b)) = (a, b) {
                compared += 1;
                if a != b {
                    different.push(format!("{name} {a} vs {b}"));
                }
            }
        };
        part(
            "kube-system namespace UID",
            self.kube_system_uid.clone(),
            other.kube_system_uid.clone(),
        );
        part(
            "API server CA sha256",
            self.api_ca_sha256.clone(),
            other.api_ca_sha256.clone(),
        );
        part(
            "etcd members",
            self.etcd_members.as_ref().map(|m| m.join(",")),
            other.etcd_members.as_ref().map(|m| m.join(",")),
        );
        match (compared, different.is_empty()) {
            (0, _) => Sameness::Unknown(
                "no part of the cluster identity is known on both sides".to_string(),
            ),
            (_, true) => Sameness::Same,
            (_, false) => Sameness::Different(different),
        }
    }
}

impl Topology {
    /// The control-plane nodes (by the control-plane role label), sorted by name.
    pub fn of(nodes: &[Arc<Node>], host_label: &str) -> Topology {
        let mut control_planes: Vec<TopologyNode> = nodes
            .iter()
            .filter(|n| crate::meta::is_control_plane(n))
            .map(|n| TopologyNode {
                node: n.metadata.name.clone().unwrap_or_default(),
                host: n
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(host_label))
                    .cloned(),
                vm_uuid: n
                    .status
                    .as_ref()
                    .and_then(|s| s.node_info.as_ref())
                    .map(|i| i.system_uuid.to_lowercase())
                    .filter(|u| !u.is_empty()),
            })
            .collect();
        control_planes.sort_by(|a, b| a.node.cmp(&b.node));
        let text: String = control_planes
            .iter()
            .map(|n| {
                format!(
                    "{} {} {}\n",
                    n.node,
                    n.host.as_deref().unwrap_or("-"),
                    n.vm_uuid.as_deref().unwrap_or("-")
                )
            })
            .collect();
        Topology {
            digest: if control_planes.is_empty() {
                String::new()
            } else {
                sha256_hex(text.as_bytes())
            },
            control_planes,
        }
    }
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The SHA-256 of the first certificate in a PEM bundle (its DER bytes), as `sha256sum`
/// of `openssl x509 -outform der` prints it. `None` when the PEM holds no certificate.
pub fn ca_sha256(pem: &[u8]) -> Option<String> {
    use base64::Engine;
    let text = std::str::from_utf8(pem).ok()?;
    let start = text.find("-----BEGIN CERTIFICATE-----")? + "-----BEGIN CERTIFICATE-----".len();
    let end = start + text[start..].find("-----END CERTIFICATE-----")?;
    let body: String = text[start..end].split_whitespace().collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .ok()?;
    Some(sha256_hex(&der))
}

/// The first 12 hex digits, enough to tell clusters apart in a message.
pub fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::{env, node, state};

    fn identity(uid: Option<&str>, ca: Option<&str>) -> ClusterIdentity {
        ClusterIdentity {
            kube_system_uid: uid.map(str::to_string),
            api_ca_sha256: ca.map(str::to_string),
            etcd_members: None,
        }
    }

    #[test]
    fn identities_that_share_a_part_are_compared_on_it() {
        let a = identity(Some("uid-a"), Some("ca-1"));
        assert_eq!(a.compare(&identity(Some("uid-a"), None)), Sameness::Same);
        match a.compare(&identity(Some("uid-b"), Some("ca-1"))) {
            Sameness::Different(lines) => {
                assert_eq!(lines, ["kube-system namespace UID uid-a vs uid-b"])
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            a.compare(&identity(None, None)),
            Sameness::Unknown(_)
        ));
    }

    #[test]
    fn the_topology_digest_changes_when_a_control_plane_moves_host_or_vm() {
        let nodes = |host3: &str| {
            [
                node("cp-2").host("pve2").control_plane().build(),
                node("cp-1").host("pve1").control_plane().build(),
                node("cp-3").host(host3).control_plane().build(),
                node("worker-1").host("pve1").build(),
            ]
            .map(Arc::new)
            .to_vec()
        };
        let label = crate::checks::testing::HOST_LABEL;
        let a = Topology::of(&nodes("pve3"), label);
        assert_eq!(a.control_planes.len(), 3, "workers are not part of it");
        assert_eq!(a.control_planes[0].node, "cp-1");
        assert_eq!(a.digest.len(), 64);
        assert_eq!(a, Topology::of(&nodes("pve3"), label), "deterministic");
        assert_ne!(a.digest, Topology::of(&nodes("pve1"), label).digest);
    }

    #[test]
    fn a_state_gives_its_provenance_with_etcd_members_from_talos() {
        let s = state()
            .nodes([node("cp-1").host("pve1").control_plane().build()])
            .build();
        let p = Provenance::of(&env(), &s, s.collected_at);
        assert_eq!(p.environment, "staging");
        assert_eq!(p.topology.control_planes.len(), 1);
        assert_eq!(p.cluster.etcd_members, None);
    }

    #[test]
    fn the_ca_digest_is_taken_over_the_certificates_der_bytes() {
        let pem = b"-----BEGIN CERTIFICATE-----\nAAEC\n-----END CERTIFICATE-----\n";
        assert_eq!(ca_sha256(pem).unwrap(), sha256_hex(&[0, 1, 2]));
        assert_eq!(ca_sha256(b"no certificate"), None);
    }
}
