//! Talos machine-config patches of an environment, from its patch directory. Which nodes a
//! patch applies to comes from its file name: `common*.yaml` and `all*.yaml` every node,
//! `controlplane*.yaml` the control planes, `worker*.yaml` the workers, and `NODE.yaml`
//! (directly or under `nodes/`) the node of that name. Other files are noted as unread.
//!
//! Read from each patch: `cluster.allowSchedulingOnControlPlanes`, `machine.nodeLabels`,
//! `machine.nodeTaints` and `machine.network.interfaces[].vip.ip`.

use std::path::Path;

use super::kustomize::{join, read};
use super::site::RepoError;
use super::yaml::{self, Node};

/// Who a patch applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applies {
    All,
    ControlPlanes,
    Workers,
    Node(String),
}

#[derive(Debug, Clone)]
pub struct Patch {
    pub file: String,
    pub applies: Applies,
    pub doc: Node,
}

#[derive(Debug, Clone, Default)]
pub struct Patches {
    pub patches: Vec<Patch>,
    pub notes: Vec<String>,
    /// Patches that could decide what a trial reads but were not read (a Terraform
    /// `config_patches` entry gates cannot evaluate), with the file, line and reason: the
    /// trials that read Talos patches carry them as warnings.
    pub skipped: Vec<String>,
}

impl Patches {
    /// The patches that apply to a node, in the order Talos would apply them.
    pub fn for_node<'a>(
        &'a self,
        name: &'a str,
        control_plane: bool,
    ) -> impl Iterator<Item = &'a Patch> + 'a {
        self.patches.iter().filter(move |p| match &p.applies {
            Applies::All => true,
            Applies::ControlPlanes => control_plane,
            Applies::Workers => !control_plane,
            Applies::Node(node) => node == name,
        })
    }

    /// The last value at `path` among a node's patches.
    pub fn value<'a>(
        &'a self,
        name: &'a str,
        control_plane: bool,
        path: &[&str],
    ) -> Option<&'a Node> {
        self.for_node(name, control_plane)
            .filter_map(|p| p.doc.get(path))
            .last()
    }

    /// A node's labels, each with the line that set it last.
    pub fn labels(&self, name: &str, control_plane: bool) -> Vec<(String, Node)> {
        self.label_edits(name, control_plane)
            .into_iter()
            .filter_map(|(key, value)| value.map(|v| (key, v)))
            .collect()
    }

    /// Every label key a node's patches decide, with the value set last, or `None` where the
    /// last patch deletes it (`key: {$patch: delete}`, Talos's strategic-merge delete, the way
    /// Talos's documentation removes a default label such as
    /// `node.kubernetes.io/exclude-from-external-load-balancers`).
    pub fn label_edits(&self, name: &str, control_plane: bool) -> Vec<(String, Option<Node>)> {
        let mut labels: Vec<(String, Option<Node>)> = Vec::new();
        for patch in self.for_node(name, control_plane) {
            for (key, value) in patch
                .doc
                .get(&["machine", "nodeLabels"])
                .and_then(Node::as_map)
                .unwrap_or_default()
            {
                labels.retain(|(k, _)| k != key);
                let deleted = value.get_str(&["$patch"]) == Some("delete");
                labels.push((key.clone(), (!deleted).then(|| value.clone())));
            }
        }
        labels
    }

    /// Every label key any patch sets or deletes on any node: the keys the repository manages.
    pub fn managed_label_keys(&self) -> std::collections::BTreeSet<String> {
        self.patches
            .iter()
            .flat_map(|p| {
                p.doc
                    .get(&["machine", "nodeLabels"])
                    .and_then(Node::as_map)
                    .unwrap_or_default()
                    .iter()
                    .map(|(k, _)| k.clone())
            })
            .collect()
    }

    /// Every VIP a node's patches configure.
    pub fn vips(&self, name: &str, control_plane: bool) -> Vec<Node> {
        self.for_node(name, control_plane)
            .flat_map(|p| {
                p.doc
                    .get(&["machine", "network", "interfaces"])
                    .and_then(Node::as_seq)
                    .unwrap_or_default()
            })
            .filter_map(|i| i.get(&["vip", "ip"]).cloned())
            .collect()
    }
}

/// Read every patch file under `dir`; `nodes` are the declared node names.
pub fn load(repo: &Path, dir: &str, nodes: &[String]) -> Result<Patches, RepoError> {
    let mut out = Patches::default();
    walk(repo, dir, nodes, &mut out)?;
    Ok(out)
}

fn walk(repo: &Path, dir: &str, nodes: &[String], out: &mut Patches) -> Result<(), RepoError> {
    let mut entries: Vec<_> = std::fs::read_dir(repo.join(dir))
        .map_err(|err| {
            RepoError::file(dir, format!("cannot read the Talos patch directory: {err}"))
        })?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let rel = join(dir, &name);
        if path.is_dir() {
            walk(repo, &rel, nodes, out)?;
            continue;
        }
        let Some(stem) = name
            .strip_suffix(".yaml")
            .or_else(|| name.strip_suffix(".yml"))
        else {
            continue;
        };
        let applies = if stem.starts_with("common") || stem.starts_with("all") {
            Applies::All
        } else if stem.starts_with("controlplane") || stem.starts_with("control-plane") {
            Applies::ControlPlanes
        } else if stem.starts_with("worker") {
            Applies::Workers
        } else if nodes.iter().any(|n| n == stem) {
            Applies::Node(stem.to_string())
        } else {
            out.notes.push(format!(
                "{rel}: not read: the name says neither a role nor a declared node"
            ));
            continue;
        };
        let text = read(repo, &rel)?;
        for doc in yaml::parse(&rel, &text)? {
            if doc.as_map().is_none() {
                return Err(RepoError::new(
                    doc.site.clone(),
                    "a machine-config patch must be a YAML mapping",
                ));
            }
            out.patches.push(Patch {
                file: rel.clone(),
                applies: applies.clone(),
                doc,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::repo::testing::repo;

    #[test]
    fn patches_apply_by_role_and_node_and_the_last_one_wins() {
        let dir = repo(&[
            (
                "talos/common.yaml",
                "machine:\n  nodeLabels:\n    a: common\n",
            ),
            (
                "talos/controlplane.yaml",
                "cluster:\n  allowSchedulingOnControlPlanes: true\nmachine:\n  network:\n    interfaces:\n      - interface: eth0\n        vip:\n          ip: 10.0.50.10\n",
            ),
            (
                "talos/nodes/cp-01.yaml",
                "machine:\n  nodeLabels:\n    a: node\n    topology.kubernetes.io/zone: pve1\n",
            ),
            ("talos/README.md", "not a patch"),
            ("talos/extra.yaml", "machine: {}\n"),
        ]);
        let p = load(
            dir.path(),
            "talos",
            &["cp-01".to_string(), "w-01".to_string()],
        )
        .unwrap();
        let labels = p.labels("cp-01", true);
        let a = labels.iter().find(|(k, _)| k == "a").unwrap();
        assert_eq!(
            (a.1.as_str(), a.1.site.to_string().as_str()),
            (Some("node"), "talos/nodes/cp-01.yaml:3")
        );
        assert_eq!(p.vips("cp-01", true).len(), 1);
        assert!(p.vips("w-01", false).is_empty());
        assert_eq!(
            p.value(
                "cp-01",
                true,
                &["cluster", "allowSchedulingOnControlPlanes"]
            )
            .unwrap()
            .as_bool(),
            Some(true)
        );
        assert_eq!(p.notes.len(), 1, "{:?}", p.notes);
    }

    #[test]
    fn a_malformed_patch_is_an_error_naming_the_file_and_line() {
        let dir = repo(&[("talos/common.yaml", "machine:\n  nodeLabels: [a\n")]);
        let err = load(dir.path(), "talos", &[]).unwrap_err();
        assert!(err.to_string().starts_with("talos/common.yaml:"), "{err}");
        let dir = repo(&[("talos/common.yaml", "- a\n")]);
        assert!(
            load(dir.path(), "talos", &[])
                .unwrap_err()
                .message
                .contains("mapping")
        );
    }
}
