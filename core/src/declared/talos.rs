//! Talos machine-config patches of an environment as the engine reads them (`repo::talos`):
//! each patch with the nodes it applies to, the nodes the configuration declares, and the
//! values a template writes that gates does not evaluate. What a node's patches say (its labels,
//! VIPs, whether it takes workloads) is read here, from the patches alone.

pub mod scheduling;

use super::site::Site;
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

/// What declares a node that has no VM in the repository, as `TalosNode::declared_by` says.
pub const NODE_FILE: &str = "Talos node file";
pub const TALHELPER_NODE: &str = "talhelper node";

/// A node the Talos configuration declares, where the repository declares no VM for it.
#[derive(Debug, Clone)]
pub struct TalosNode {
    /// The hostname, where it is written.
    pub name: Node,
    /// From `machine.type`, talhelper's `controlPlane`, or the directory; `None` when nothing
    /// says.
    pub control_plane: Option<bool>,
    /// What declares it, for evidence (`Talos node file`, `talhelper node`).
    pub declared_by: &'static str,
}

#[derive(Debug, Clone, Default)]
pub struct Patches {
    pub patches: Vec<Patch>,
    /// The nodes the configuration itself declares.
    pub nodes: Vec<TalosNode>,
    pub notes: Vec<String>,
    /// Patches that could decide what a trial reads but were not read (a Terraform
    /// `config_patches` entry gates cannot evaluate), with the file, line and reason: the
    /// trials that read Talos patches carry them as warnings.
    pub skipped: Vec<String>,
    /// Values of the patches read that a template writes and gates does not evaluate: a
    /// trial that reads where one sits is an error naming it (see [`Unknown`]).
    pub unknown: Vec<Unknown>,
    /// Files named after no role and no declared node: a node's own, perhaps, when a VM's
    /// name is not known.
    pub unmatched: Vec<String>,
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

/// The role a `machine.type` gives.
pub fn machine_type_role(value: &str) -> Option<bool> {
    match value {
        "controlplane" | "init" => Some(true),
        "worker" | "join" => Some(false),
        _ => None,
    }
}

/// A Talos 1.12+ document in the shape of the v1alpha1 fields gates reads: a `HostnameConfig`
/// as `machine.network.hostname`, a `KubeNodeConfig`'s `labels` and `taints` as
/// `machine.nodeLabels` and `machine.nodeTaints`. Other documents stay as written.
pub fn normalize(doc: Node) -> Node {
    let kind = doc.get_str(&["kind"]).map(str::to_string);
    let wrap = |path: &[&str], value: &Node| {
        let mut node = value.clone();
        for key in path.iter().rev() {
            let site = node.site.clone();
            node = Node::new(yaml::Value::Map(vec![(key.to_string(), node)]), site);
        }
        node
    };
    match kind.as_deref() {
        Some("HostnameConfig") => match doc.get(&["hostname"]) {
            Some(host) => wrap(&["machine", "network", "hostname"], host),
            None => doc,
        },
        // Talos 1.12 (`pkg/machinery/config/types/network/layer2_vip.go`): `name` is the
        // address announced, `link` the link it is announced on.
        Some("Layer2VIPConfig") => match doc.get(&["name"]) {
            Some(ip) => {
                let site = doc.site.clone();
                let mut interface = vec![(
                    "vip".to_string(),
                    Node::new(
                        yaml::Value::Map(vec![("ip".to_string(), ip.clone())]),
                        ip.site.clone(),
                    ),
                )];
                if let Some(link) = doc.get(&["link"]) {
                    interface.insert(0, ("interface".to_string(), link.clone()));
                }
                wrap(
                    &["machine", "network", "interfaces"],
                    &Node::new(
                        yaml::Value::Seq(vec![Node::new(
                            yaml::Value::Map(interface),
                            site.clone(),
                        )]),
                        site,
                    ),
                )
            }
            None => doc,
        },
        Some("KubeNodeConfig") => {
            let mut machine = Vec::new();
            if let Some(labels) = doc.get(&["labels"]) {
                machine.push(("nodeLabels".to_string(), labels.clone()));
            }
            if let Some(taints) = doc.get(&["taints"]) {
                machine.push(("nodeTaints".to_string(), taints.clone()));
            }
            let site = doc.site.clone();
            Node::new(
                yaml::Value::Map(vec![
                    (
                        "kind".to_string(),
                        Node::str(scheduling::KUBE_NODE_CONFIG, site.clone()),
                    ),
                    (
                        "machine".to_string(),
                        Node::new(yaml::Value::Map(machine), site.clone()),
                    ),
                ]),
                site,
            )
        }
        _ => doc,
    }
}

/// A value of a Talos patch that a template interpolation writes.
#[derive(Debug, Clone)]
pub struct Unknown {
    pub site: Site,
    /// The document's `kind`, or `v1alpha1` for the machine configuration itself.
    pub kind: String,
    /// The dotted path of the value in its document (`machine.install.image`).
    pub path: String,
    /// What writes it, as written (``the Jinja interpolation `{{ x }}` ``).
    pub exprs: Vec<String>,
}

impl std::fmt::Display for Unknown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} {} is written by {}, which gates does not evaluate",
            self.site,
            self.kind,
            self.path,
            self.exprs.join(", ")
        )
    }
}
