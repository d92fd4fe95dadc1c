//! Talos machine-config patches of an environment, from its patch directory. Which nodes a
//! patch applies to comes from its file name: `common*.yaml`, `all*.yaml`, `cluster*.yaml` and
//! `machineconfig*.yaml` (the base a home-ops layout renders for every node and patches per
//! role and node) every node,
//! `controlplane*.yaml` the control planes, `worker*.yaml` the workers, and `NODE.yaml`
//! (directly or under `nodes/`) the node of that name. A file that names its node's hostname
//! (a `HostnameConfig` document, or `machine.network.hostname`) is that node's, and declares
//! the node: its role is its `machine.type`, else the directory it is in (`controlplane/`,
//! `worker/`). A directory holding talhelper's `talconfig.yaml` is read through it (see
//! [`talhelper`]). Jinja templates (`.yaml.j2`) are read when their only Jinja is interpolations, whose
//! values are unknown, or, with `repo.template_env`, rendered once per role their name or
//! directory leaves open (see [`jinja`]).
//! Other files are noted as unread.
//!
//! Read from each patch: `cluster.allowSchedulingOnControlPlanes`, `machine.nodeLabels`,
//! `machine.nodeTaints` and `machine.network.interfaces[].vip.ip` (a `Layer2VIPConfig`
//! document's `name`). A `KubeNodeConfig`
//! document (Talos 1.14, `pkg/machinery/config/types/k8s/node.go`) gives its `labels` and
//! `taints` as `machine.nodeLabels` and `machine.nodeTaints`.

pub mod jinja;
pub mod talhelper;

use std::path::Path;

use super::kustomize::{entries, join, read};
use super::site::RepoError;
use super::yaml::{self, Node};
use crate::config::TemplateEnv;
use jinja::TemplateError;

// The patches, the nodes they declare and what they say of a node are pure: they live in core.
pub use gates_core::declared::talos::{
    Applies, NODE_FILE, Patch, Patches, TALHELPER_NODE, TalosNode, machine_type_role, normalize,
    scheduling,
};

/// Read every patch file under `dir`; `nodes` are the declared node names, `template_env` the
/// variables Jinja templates are rendered with per role.
pub fn load(
    repo: &Path,
    dir: &str,
    nodes: &[String],
    template_env: Option<&TemplateEnv>,
) -> Result<Patches, RepoError> {
    let mut out = Patches::default();
    if let Some(file) = talhelper::config_file(repo, dir) {
        talhelper::load(repo, &file, &mut out)?;
        return Ok(out);
    }
    let walk_in = Walk {
        repo,
        nodes,
        template_env,
    };
    walk_in.dir(dir, None, &mut out)?;
    Ok(out)
}

/// What every directory of a walk shares.
struct Walk<'a> {
    repo: &'a Path,
    nodes: &'a [String],
    template_env: Option<&'a TemplateEnv>,
}

/// One reading of a patch file: its text ready for YAML, the interpolations set aside, and the
/// role it was rendered for (`None`: the file has no control flow, or its role was known).
struct Reading {
    text: String,
    exprs: Vec<String>,
    rendered_for: Option<bool>,
}

/// The role a directory's name gives the files in it.
fn dir_role(name: &str) -> Option<bool> {
    match name {
        "controlplane" | "control-plane" | "controlplanes" => Some(true),
        "worker" | "workers" => Some(false),
        _ => None,
    }
}

impl Walk<'_> {
    /// The readings of a file: one as written, or for a template with control flow one per
    /// role it may be rendered for (`role`: what its name or directory says). `Err`: why it is
    /// not read.
    fn readings(
        &self,
        text: String,
        template: bool,
        role: Option<bool>,
    ) -> Result<Vec<Reading>, TemplateError> {
        if !template {
            return Ok(vec![Reading {
                text,
                exprs: Vec::new(),
                rendered_for: None,
            }]);
        }
        let flow = text.contains("{%") || text.contains("{#");
        let (Some(vars), true) = (self.template_env, flow) else {
            let (text, exprs) = jinja::placeholders(&text, None)?;
            return Ok(vec![Reading {
                text,
                exprs,
                rendered_for: None,
            }]);
        };
        let roles: &[bool] = match role {
            Some(true) => &[true],
            Some(false) => &[false],
            None => &[true, false],
        };
        roles
            .iter()
            .map(|&control_plane| {
                let known = vars.of(control_plane);
                let rendered = jinja::render(&text, known)?;
                let (text, exprs) = jinja::placeholders(&rendered, Some(known))?;
                Ok(Reading {
                    text,
                    exprs,
                    rendered_for: role.is_none().then_some(control_plane),
                })
            })
            .collect()
    }

    fn dir(&self, dir: &str, role: Option<bool>, out: &mut Patches) -> Result<(), RepoError> {
        for (path, name) in entries(self.repo, dir, "the Talos patch directory")? {
            let rel = join(dir, &name);
            if path.is_dir() {
                self.dir(&rel, dir_role(&name).or(role), out)?;
                continue;
            }
            self.file(&rel, &name, role, out)?;
        }
        Ok(())
    }

    fn file(
        &self,
        rel: &str,
        name: &str,
        role: Option<bool>,
        out: &mut Patches,
    ) -> Result<(), RepoError> {
        let Some(named) = Named::of(name) else {
            return Ok(());
        };
        let text = read(self.repo, rel)?;
        let render_role = named.role.or(if named.base { None } else { role });
        let mut readings = match self.readings(text, named.template, render_role) {
            Ok(readings) => readings,
            Err(why) => {
                out.skipped.push(format!("{rel}: {why}"));
                return Ok(());
            }
        };
        // A file whose role nothing names but whose two renderings agree is one patch.
        if readings.len() == 2 && readings[0].text == readings[1].text && !named.base {
            readings.truncate(1);
            readings[0].rendered_for = None;
        }
        for reading in readings {
            let Some(docs) = documents(rel, &reading, out)? else {
                return Ok(());
            };
            let applies = match self.applies(rel, &named, role, &reading, &docs, out) {
                Flow::Apply(applies) => applies,
                Flow::Next => continue,
                Flow::Stop => return Ok(()),
            };
            for doc in docs {
                out.patches.push(Patch {
                    file: rel.to_string(),
                    applies: applies.clone(),
                    doc,
                });
            }
        }
        Ok(())
    }

    /// Which machines one reading of a file applies to: the node its hostname names, the
    /// role its name or directory names, the node its name names; what it cannot be
    /// applied to is said in `out`.
    fn applies(
        &self,
        rel: &str,
        named: &Named<'_>,
        role: Option<bool>,
        reading: &Reading,
        docs: &[Node],
        out: &mut Patches,
    ) -> Flow {
        let hostname = docs
            .iter()
            .find_map(|d| d.get(&["machine", "network", "hostname"]))
            .filter(|h| h.as_str().is_some_and(|s| !s.is_empty()))
            .cloned();
        let (base, stem) = (named.base, named.stem);
        Flow::Apply(match (&hostname, reading.rendered_for) {
            (Some(host), _) if !named.by_role() => {
                let declared_role = docs
                    .iter()
                    .find_map(|d| d.get_str(&["machine", "type"]))
                    .and_then(machine_type_role)
                    .or(role);
                match (reading.rendered_for, declared_role) {
                    (Some(_), None) => {
                        out.skipped.push(format!(
                            "{rel}: its control flow renders differently per role and \
                             nothing says which role node {} has (machine.type, or a \
                             controlplane/ or worker/ directory)",
                            host.as_str().unwrap_or_default()
                        ));
                        return Flow::Stop;
                    }
                    // The rendering for the role this node does not have.
                    (Some(rendered), Some(declared)) if rendered != declared => return Flow::Next,
                    _ => {}
                }
                out.nodes.push(TalosNode {
                    name: host.clone(),
                    control_plane: declared_role,
                    declared_by: NODE_FILE,
                });
                Applies::Node(host.as_str().unwrap_or_default().to_string())
            }
            (_, Some(true)) if base => Applies::ControlPlanes,
            (_, Some(false)) if base => Applies::Workers,
            _ if base => Applies::All,
            _ if named.role == Some(true) => Applies::ControlPlanes,
            _ if named.role == Some(false) => Applies::Workers,
            _ if reading.rendered_for.is_none() && self.nodes.iter().any(|n| n == stem) => {
                Applies::Node(stem.to_string())
            }
            _ if reading.rendered_for.is_some() => {
                out.skipped.push(format!(
                    "{rel}: its control flow renders differently per role and nothing says \
                     which role its node has (put it under controlplane/ or worker/)"
                ));
                return Flow::Stop;
            }
            _ => {
                out.notes.push(format!(
                    "{rel}: not read: the name says neither a role nor a declared node"
                ));
                out.unmatched.push(rel.to_string());
                return Flow::Stop;
            }
        })
    }
}

/// What a patch file's name says: whether it is a Jinja template, its stem, whether it is a
/// base for every machine (`common`, `all`, ...), and the role it names.
struct Named<'n> {
    template: bool,
    stem: &'n str,
    base: bool,
    role: Option<bool>,
}

impl<'n> Named<'n> {
    /// `None` for a file that is not YAML.
    fn of(name: &'n str) -> Option<Self> {
        let template = name.ends_with(".yaml.j2") || name.ends_with(".yml.j2");
        let stem = name
            .strip_suffix(".yaml")
            .or_else(|| name.strip_suffix(".yml"))
            .or_else(|| name.strip_suffix(".yaml.j2"))
            .or_else(|| name.strip_suffix(".yml.j2"))?;
        let base = ["common", "all", "cluster", "machineconfig"]
            .iter()
            .any(|b| stem.starts_with(b));
        let role = if stem.starts_with("controlplane") || stem.starts_with("control-plane") {
            Some(true)
        } else if stem.starts_with("worker") {
            Some(false)
        } else {
            None
        };
        Some(Named {
            template,
            stem,
            base,
            role,
        })
    }

    fn by_role(&self) -> bool {
        self.base || self.role.is_some()
    }
}

/// What becomes of one reading of a patch file.
enum Flow {
    Apply(Applies),
    /// The rendering for a role its node does not have: the next reading.
    Next,
    /// The file is not read further (said in the patches' notes).
    Stop,
}

/// One reading's documents, each a mapping, normalized; the values its interpolations wrote
/// set aside as unknown. `None` when the file is not read further (said in `out`).
fn documents(
    rel: &str,
    reading: &Reading,
    out: &mut Patches,
) -> Result<Option<Vec<Node>>, RepoError> {
    let mut docs = yaml::parse(rel, &reading.text)?;
    if !reading.exprs.is_empty() {
        let set_aside: Result<Vec<_>, TemplateError> = docs
            .iter_mut()
            .map(|doc| jinja::set_aside(doc, &reading.exprs))
            .collect();
        match set_aside {
            Ok(found) => {
                // Each rendering of a file finds the same interpolations outside its
                // branches: one of each is enough.
                for unknown in found.into_iter().flatten() {
                    let shown = unknown.to_string();
                    if !out.unknown.iter().any(|u| u.to_string() == shown) {
                        out.unknown.push(unknown);
                    }
                }
            }
            Err(why) => {
                out.skipped.push(why.0);
                return Ok(None);
            }
        }
    }
    docs.into_iter()
        .map(|doc| {
            if doc.as_map().is_none() {
                return Err(RepoError::new(
                    doc.site.clone(),
                    "a machine-config patch must be a YAML mapping",
                ));
            }
            Ok(normalize(doc))
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::repo::testing::repo;

    /// The declared nodes' names and roles.
    fn roles(p: &Patches) -> Vec<(&str, Option<bool>)> {
        p.nodes
            .iter()
            .map(|n| (n.name.as_str().unwrap(), n.control_plane))
            .collect()
    }

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
            None,
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
    fn a_node_file_names_its_node_and_a_kube_node_config_gives_its_labels_and_taints() {
        let dir = repo(&[
            (
                "talos/controlplane/cp-a.yaml",
                "apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: cp-a\n---\napiVersion: v1alpha1\nkind: KubeNodeConfig\nlabels:\n  zone: one\ntaints:\n  dedicated: NoSchedule\n",
            ),
            (
                "talos/box.yaml",
                "machine:\n  type: worker\n  network:\n    hostname: box\n",
            ),
        ]);
        let p = load(dir.path(), "talos", &[], None).unwrap();
        let nodes = roles(&p);
        assert_eq!(nodes, vec![("box", Some(false)), ("cp-a", Some(true))]);
        let labels = p.labels("cp-a", true);
        assert_eq!(labels.len(), 1);
        assert_eq!(
            labels[0].1.site.to_string(),
            "talos/controlplane/cp-a.yaml:8"
        );
        assert!(
            p.value("cp-a", true, &["machine", "nodeTaints", "dedicated"])
                .is_some()
        );
        assert!(p.labels("box", false).is_empty());
    }

    #[test]
    fn a_jinja_template_is_read_with_its_interpolated_values_set_aside_and_control_flow_unread() {
        let dir = repo(&[
            (
                "talos/common.yaml.j2",
                "machine:\n  nodeLabels:\n    a: b\n",
            ),
            (
                "talos/controlplane.yaml.j2",
                "cluster:\n  allowSchedulingOnControlPlanes: {{ ENV.SCHEDULE }}\n  clusterName: main\n",
            ),
            (
                "talos/worker.yaml.j2",
                "{% if x %}\nmachine: {}\n{% endif %}\n",
            ),
        ]);
        let p = load(dir.path(), "talos", &["n".to_string()], None).unwrap();
        assert_eq!(p.labels("n", false).len(), 1);
        assert_eq!(
            p.unknown
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            [
                "talos/controlplane.yaml.j2:2: v1alpha1 cluster.allowSchedulingOnControlPlanes is written by the Jinja interpolation `{{ ENV.SCHEDULE }}`, which gates does not evaluate"
            ]
        );
        assert!(
            p.value("n", true, &["cluster", "allowSchedulingOnControlPlanes"])
                .is_none()
        );
        assert_eq!(
            p.value("n", true, &["cluster", "clusterName"])
                .and_then(|v| v.as_str().map(str::to_string))
                .as_deref(),
            Some("main")
        );
        assert_eq!(p.skipped.len(), 1, "{:?}", p.skipped);
        assert!(
            p.skipped[0].starts_with("talos/worker.yaml.j2: a Jinja template with control flow"),
            "{:?}",
            p.skipped
        );
    }

    #[test]
    fn a_layer2_vip_document_configures_the_vip_on_its_link() {
        let dir = repo(&[(
            "talos/controlplane.yaml",
            "apiVersion: v1alpha1\nkind: Layer2VIPConfig\nname: 10.0.0.5\nlink: bond0\n",
        )]);
        let p = load(dir.path(), "talos", &["cp".to_string()], None).unwrap();
        let vips = p.vips("cp", true);
        assert_eq!(
            vips.iter()
                .map(|v| (
                    v.as_str().unwrap_or_default().to_string(),
                    v.site.to_string()
                ))
                .collect::<Vec<_>>(),
            [(
                "10.0.0.5".to_string(),
                "talos/controlplane.yaml:3".to_string()
            )]
        );
        assert!(p.vips("w", false).is_empty());
    }

    #[test]
    fn talhelper_reads_nodes_role_patches_and_sets_aside_json_patches_of_read_fields() {
        let dir = repo(&[
            (
                "talos/talconfig.yaml",
                "allowSchedulingOnControlPlanes: false\nnodes:\n  - hostname: a\n    controlPlane: true\n    nodeTaints:\n      x: NoSchedule\n  - hostname: b\n    patches:\n      - \"@./p/b.yaml\"\nworker:\n  patches:\n    - |-\n      - op: add\n        path: /machine/nodeLabels/extra\n        value: yes\n    - |-\n      - op: add\n        path: /machine/sysctls\n        value: {}\n",
            ),
            ("talos/p/b.yaml", "machine:\n  nodeLabels:\n    disk: ssd\n"),
            ("talos/p/unused.yaml", "machine: {}\n"),
        ]);
        let p = load(dir.path(), "talos", &[], None).unwrap();
        let nodes = roles(&p);
        assert_eq!(nodes, vec![("a", Some(true)), ("b", Some(false))]);
        let labels = p.labels("b", false);
        assert_eq!(labels[0].1.site.to_string(), "talos/p/b.yaml:3");
        assert!(
            p.value("a", true, &["machine", "nodeTaints", "x"])
                .is_some()
        );
        assert_eq!(
            p.value("a", true, &["cluster", "allowSchedulingOnControlPlanes"])
                .and_then(Node::as_bool),
            Some(false)
        );
        assert_eq!(p.skipped.len(), 1, "{:?}", p.skipped);
        assert!(
            p.skipped[0].contains("/machine/nodeLabels/extra"),
            "{:?}",
            p.skipped
        );
        assert_eq!(p.notes.len(), 1, "{:?}", p.notes);
    }

    #[test]
    fn a_malformed_patch_is_an_error_naming_the_file_and_line() {
        let dir = repo(&[("talos/common.yaml", "machine:\n  nodeLabels: [a\n")]);
        let err = load(dir.path(), "talos", &[], None).unwrap_err();
        assert!(err.to_string().starts_with("talos/common.yaml:"), "{err}");
        let dir = repo(&[("talos/common.yaml", "- a\n")]);
        assert!(
            load(dir.path(), "talos", &[], None)
                .unwrap_err()
                .message
                .contains("mapping")
        );
    }
}
