//! talhelper's `talconfig.yaml` (budimanjojo/talhelper, `docs/docs/reference/configuration.md`):
//! its `nodes` declare the cluster's nodes (`hostname`, `controlPlane`, `nodeLabels`,
//! `nodeTaints`, `patches`), `controlPlane.patches` and `worker.patches` apply by role,
//! top-level `patches` to every node, and `allowSchedulingOnControlPlanes` is the cluster
//! setting of the same name. A patch is a strategic-merge document written inline or a file
//! `@./path` next to the configuration; an RFC 6902 list is read only for the paths it
//! touches: one that reaches a field gates reads (`/machine/nodeLabels`, `/machine/nodeTaints`,
//! `/machine/network`, `/cluster/allowSchedulingOnControlPlanes`, `/cluster/coreDNS`) is set
//! aside as unread, so the trials that read it say so.
//!
//! Values talhelper substitutes from its environment files (`${VAR}`) are left as written;
//! a label whose value holds one is unknown to the trials that compare it.

use std::path::Path;

use super::{Applies, Patch, Patches, TalosNode, normalize};
use crate::repo::kustomize::{join, read, resolve};
use crate::repo::site::RepoError;
use crate::repo::yaml::{self, Node, Value};

const NAMES: [&str; 2] = ["talconfig.yaml", "talconfig.yml"];

/// The talhelper configuration of a Talos directory, if it has one.
pub fn config_file(repo: &Path, dir: &str) -> Option<String> {
    NAMES
        .iter()
        .map(|n| join(dir, n))
        .find(|f| repo.join(f).is_file())
}

/// JSON-pointer prefixes of the fields the trials read.
const READ: [&str; 6] = [
    "/machine/nodeLabels",
    "/machine/nodeTaints",
    "/machine/network",
    "/machine/type",
    "/cluster/allowSchedulingOnControlPlanes",
    "/cluster/coreDNS",
];

pub fn load(repo: &Path, file: &str, out: &mut Patches) -> Result<(), RepoError> {
    let dir = file.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
    let mut docs = yaml::parse(file, &read(repo, file)?)?;
    if docs.len() != 1 || docs[0].as_map().is_none() {
        return Err(RepoError::file(
            file,
            "talconfig.yaml must be one YAML mapping",
        ));
    }
    let config = docs.remove(0);
    if let Some(allow) = config.get(&["allowSchedulingOnControlPlanes"]) {
        push(
            out,
            file,
            Applies::All,
            wrap(
                &["cluster", "allowSchedulingOnControlPlanes"],
                allow.clone(),
            ),
        );
    }
    for item in config
        .get(&["patches"])
        .and_then(Node::as_seq)
        .unwrap_or_default()
    {
        patch(repo, dir, file, item, Applies::All, out)?;
    }
    for (key, applies) in [
        ("controlPlane", Applies::ControlPlanes),
        ("worker", Applies::Workers),
    ] {
        for item in config
            .get(&[key, "patches"])
            .and_then(Node::as_seq)
            .unwrap_or_default()
        {
            patch(repo, dir, file, item, applies.clone(), out)?;
        }
    }
    for node in config
        .get(&["nodes"])
        .and_then(Node::as_seq)
        .unwrap_or_default()
    {
        let Some(hostname) = node.get(&["hostname"]).filter(|h| h.as_str().is_some()) else {
            return Err(RepoError::new(
                node.site.clone(),
                "a talhelper node needs a `hostname`",
            ));
        };
        let name = hostname.as_str().unwrap_or_default().to_string();
        let control_plane = match node.get(&["controlPlane"]) {
            None => Some(false),
            Some(v) => v.as_bool(),
        };
        out.nodes.push(TalosNode {
            name: hostname.clone(),
            control_plane,
            declared_by: super::TALHELPER_NODE,
        });
        let applies = Applies::Node(name);
        push(
            out,
            file,
            applies.clone(),
            wrap(&["machine", "network", "hostname"], hostname.clone()),
        );
        for (key, field) in [("nodeLabels", "nodeLabels"), ("nodeTaints", "nodeTaints")] {
            if let Some(value) = node.get(&[key]) {
                push(
                    out,
                    file,
                    applies.clone(),
                    wrap(&["machine", field], value.clone()),
                );
            }
        }
        for item in node
            .get(&["patches"])
            .and_then(Node::as_seq)
            .unwrap_or_default()
        {
            patch(repo, dir, file, item, applies.clone(), out)?;
        }
    }
    Ok(())
}

fn push(out: &mut Patches, file: &str, applies: Applies, doc: Node) {
    out.patches.push(Patch {
        file: file.to_string(),
        applies,
        doc,
    });
}

fn wrap(path: &[&str], value: Node) -> Node {
    let mut node = value;
    for key in path.iter().rev() {
        let site = node.site.clone();
        node = Node::new(Value::Map(vec![(key.to_string(), node)]), site);
    }
    node
}

/// One entry of a `patches` list: inline YAML or `@./file`.
fn patch(
    repo: &Path,
    dir: &str,
    file: &str,
    item: &Node,
    applies: Applies,
    out: &mut Patches,
) -> Result<(), RepoError> {
    let Some(text) = item.as_str() else {
        return Err(RepoError::new(
            item.site.clone(),
            "a talhelper patch is a string: inline YAML or @./file",
        ));
    };
    let (source, docs) = match text.strip_prefix('@') {
        Some(path) => {
            let rel = resolve(dir, path, &item.site)?;
            if !repo.join(&rel).is_file() {
                return Err(RepoError::new(
                    item.site.clone(),
                    format!("patch file `{path}` does not exist ({rel})"),
                ));
            }
            let docs = yaml::parse(&rel, &read(repo, &rel)?)?;
            (rel, docs)
        }
        None => (
            file.to_string(),
            yaml::parse_shifted(file, text, item.site.line)?,
        ),
    };
    for doc in docs {
        match &doc.value {
            Value::Map(_) => push(out, &source, applies.clone(), normalize(doc)),
            Value::Seq(ops) => {
                let reaches = ops.iter().find(|op| {
                    op.get_str(&["path"]).is_none_or(|p| {
                        p == "/"
                            || p == "/machine"
                            || p == "/cluster"
                            || READ.iter().any(|r| p.starts_with(r))
                    })
                });
                match reaches {
                    Some(op) => out.skipped.push(format!(
                        "{}: an RFC 6902 patch of `{}`, which gates does not apply",
                        op.site,
                        op.get_str(&["path"]).unwrap_or("?")
                    )),
                    None => out.notes.push(format!(
                        "{}: an RFC 6902 patch of fields no trial reads, not applied",
                        doc.site
                    )),
                }
            }
            _ => {
                return Err(RepoError::new(
                    doc.site.clone(),
                    "a machine-config patch must be a YAML mapping or an RFC 6902 list",
                ));
            }
        }
    }
    Ok(())
}
