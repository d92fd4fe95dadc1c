//! Gate 3 on the repository: for each ingress Service the environment names
//! (`ingress.services`), the declared CiliumL2AnnouncementPolicies that select it and announce
//! its address together select every declared node.
//!
//! Cilium's semantics, as the live check has them: a policy announces LoadBalancer addresses
//! only with `loadBalancerIPs: true` and external IPs only with `externalIPs: true` (both
//! default false); a nil `serviceSelector` selects every Service, and the selector also sees
//! `io.kubernetes.service.namespace` and `io.kubernetes.service.name`; a policy for another
//! Service neither helps nor has to cover every node.
//!
//! The repository knows only part of a node's labels: kubelet's (`kubernetes.io/hostname`,
//! `kubernetes.io/os`, `beta.kubernetes.io/os`; the architecture is the VM's and not
//! declared), Talos's control-plane role label, and what the Talos patches set or delete. A
//! requirement on any other key is unknown: the trial is then an error naming it, never a
//! fail. A Service Traefik's chart renders carries the chart's labels plus `commonLabels` and
//! `service.labels`; its `helm.sh/chart` value and its name depend on the release and are
//! unknown.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::config::ServiceRef;
use crate::declared::environments::DeclaredNode;
use crate::declared::label_query::SelectorError;
use crate::declared::manifests::Manifests;
use crate::declared::talos::Patches;
use crate::declared::yaml::Node;
use crate::selector::{Judged, Selector, WhenNil};
use crate::verdict::Finding;

use super::traefik;
use super::{RepoContext, at, declared_nodes, manifests_except, reads, talos_patches};

use crate::declared::talos::scheduling::Model;

const L2_CLASS: &str = "io.cilium/l2-announcer";
const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
const CONTROL_PLANE_LABEL: &str = "node-role.kubernetes.io/control-plane";

/// Labels of which only some keys are known.
#[derive(Debug, Clone)]
pub struct PartialLabels {
    /// The labels known present, with their values.
    pub labels: BTreeMap<String, String>,
    open: Open,
}

#[derive(Debug, Clone)]
enum Open {
    /// Every key not in `labels` is known absent, except these.
    AllBut(BTreeSet<String>),
    /// Only these keys (and those in `labels`) are known; any other may be present.
    Only(BTreeSet<String>),
}

impl PartialLabels {
    pub fn known(&self, key: &str) -> bool {
        match &self.open {
            Open::AllBut(unknown) => !unknown.contains(key),
            Open::Only(known) => self.labels.contains_key(key) || known.contains(key),
        }
    }

    fn judge(&self, selector: &Selector) -> Judged {
        selector.judge(&self.labels, &|k| self.known(k))
    }
}

/// The labels a declared node will carry, as far as the repository can know them.
pub fn node_labels(node: &DeclaredNode<'_>, patches: Option<&Patches>) -> PartialLabels {
    let control_plane = node.control_plane == Some(true);
    let mut labels = BTreeMap::new();
    // kubelet's own labels; Talos is Linux.
    if node.name_unknown().is_none() {
        labels.insert(
            "kubernetes.io/hostname".to_string(),
            node.name().to_string(),
        );
    }
    labels.insert("kubernetes.io/os".to_string(), "linux".to_string());
    labels.insert("beta.kubernetes.io/os".to_string(), "linux".to_string());
    let mut known: BTreeSet<String> = [CONTROL_PLANE_LABEL.to_string()].into();
    let model = patches.map_or(Model::Legacy, |p| p.model(node.name(), control_plane));
    match (control_plane, model) {
        // The v1alpha1 shim labels every control plane, whatever else is configured.
        (true, Model::Legacy) => {
            labels.insert(CONTROL_PLANE_LABEL.to_string(), String::new());
        }
        // `gen config` writes both labels into a control plane's KubeNodeConfig.
        (true, Model::Multidoc { generated: true }) => {
            labels.insert(CONTROL_PLANE_LABEL.to_string(), String::new());
            labels.insert(EXCLUDE_LABEL.to_string(), String::new());
            known.insert(EXCLUDE_LABEL.to_string());
        }
        // A complete configuration: only the labels it writes.
        (true, Model::Multidoc { generated: false }) => {
            known.insert(EXCLUDE_LABEL.to_string());
        }
        // Talos adds the exclusion label to control planes only.
        (false, _) => {
            known.insert(EXCLUDE_LABEL.to_string());
        }
    }
    if let Some(patches) = patches {
        known.extend(patches.managed_label_keys());
        for (key, value) in patches.label_edits(node.name(), control_plane) {
            match value.as_ref().map(|v| v.as_str()) {
                Some(Some(v)) => {
                    labels.insert(key.clone(), v.to_string());
                }
                // Deleted, or a value gates cannot read as text.
                Some(None) => {
                    labels.remove(&key);
                    known.remove(&key);
                    continue;
                }
                None => {
                    labels.remove(&key);
                }
            }
            known.insert(key);
        }
    }
    PartialLabels {
        labels,
        open: Open::Only(known),
    }
}

/// A declared policy, compiled.
struct Policy<'a> {
    name: &'a str,
    doc: &'a Node,
    services: Selector,
    nodes: Selector,
    load_balancer_ips: bool,
    external_ips: bool,
}

impl Policy<'_> {
    /// Where the node selector is written (the policy itself when it has none).
    fn node_site(&self) -> &crate::declared::site::Site {
        self.doc
            .get(&["spec", "nodeSelector"])
            .map(|n| &n.site)
            .unwrap_or(&self.doc.site)
    }

    fn shown(&self) -> String {
        let flag = |key: &str| {
            self.doc
                .get(&["spec", key])
                .map(|v| v.site.clone())
                .unwrap_or_else(|| self.doc.site.clone())
        };
        at(
            &flag("loadBalancerIPs"),
            &format!("{} spec.loadBalancerIPs", self.name),
            self.load_balancer_ips,
        )
    }
}

fn compile(policy: &Node) -> Result<Policy<'_>, SelectorError> {
    let name = policy.get_str(&["metadata", "name"]).unwrap_or("?");
    let selector = |key: &str| -> Result<Selector, SelectorError> {
        match policy.get(&["spec", key]) {
            None => Ok(Selector::everything()),
            Some(node) if node.is_null() => Ok(Selector::everything()),
            Some(node) => serde_json::from_value::<LabelSelector>(node.to_json())
                .map_err(|e| e.to_string())
                .and_then(|s| {
                    Selector::compile(Some(&s), WhenNil::MatchesAll).map_err(|e| e.to_string())
                })
                .map_err(|err| {
                    SelectorError(format!(
                        "{}: spec.{key} of {name} is not a label selector: {err}",
                        node.site
                    ))
                }),
        }
    };
    let flag = |key: &str| {
        policy
            .get(&["spec", key])
            .and_then(Node::as_bool)
            .unwrap_or(false)
    };
    Ok(Policy {
        name,
        doc: policy,
        services: selector("serviceSelector")?,
        nodes: selector("nodeSelector")?,
        load_balancer_ips: flag("loadBalancerIPs"),
        external_ips: flag("externalIPs"),
    })
}

/// An ingress Service as the repository declares it.
struct DeclaredService {
    id: String,
    site: crate::declared::site::Site,
    /// Labels with Cilium's two pseudo-labels.
    labels: PartialLabels,
    class: Option<String>,
    kind: String,
    external_ips: bool,
}

fn with_pseudo(
    mut labels: BTreeMap<String, String>,
    namespace: Option<&str>,
    name: Option<&str>,
) -> BTreeMap<String, String> {
    labels.extend(namespace.map(|ns| ("io.kubernetes.service.namespace".to_string(), ns.into())));
    labels.extend(name.map(|n| ("io.kubernetes.service.name".to_string(), n.into())));
    labels
}

fn matches_ref(wanted: &ServiceRef, namespace: Option<&str>, labels: &PartialLabels) -> bool {
    wanted
        .namespace
        .as_deref()
        .is_none_or(|ns| namespace == Some(ns))
        && labels.judge(&Selector::from_labels(&wanted.selector)) == Judged::Selected
}

/// A Service's labels (with the pseudo-labels Cilium adds), when one of `wanted` names it.
fn wanted_labels(svc: &Node, wanted: &[ServiceRef]) -> Option<PartialLabels> {
    let namespace = svc.get_str(&["metadata", "namespace"]);
    let name = svc.get_str(&["metadata", "name"]);
    let own = svc
        .get(&["metadata", "labels"])
        .and_then(Node::string_map)
        .unwrap_or_default();
    let labels = PartialLabels {
        labels: with_pseudo(own, namespace, name),
        open: Open::AllBut(BTreeSet::new()),
    };
    wanted
        .iter()
        .any(|w| matches_ref(w, namespace, &labels))
        .then_some(labels)
}

/// A Service left unread whose namespace, name and labels are known (no `${...}`) and
/// that no `ingress.services` entry names: whatever else it holds, no ingress trial reads it.
pub fn not_an_ingress_service(object: &Node, wanted: &[ServiceRef]) -> bool {
    use crate::declared::unread::holds_variable;
    let known = |path: &[&str]| object.get(path).is_none_or(|n| !holds_variable(n));
    object.get_str(&["kind"]) == Some("Service")
        && known(&["metadata", "namespace"])
        && known(&["metadata", "name"])
        && known(&["metadata", "labels"])
        && wanted_labels(object, wanted).is_none()
}

/// The Services of the manifests and of Traefik's releases that one of `wanted` names.
fn ingress_services(m: &Manifests, wanted: &[ServiceRef]) -> Vec<DeclaredService> {
    let mut out = Vec::new();
    for svc in m.of_kind("Service") {
        let namespace = svc.get_str(&["metadata", "namespace"]);
        let name = svc.get_str(&["metadata", "name"]);
        let Some(labels) = wanted_labels(svc, wanted) else {
            continue;
        };
        out.push(DeclaredService {
            id: format!("{}/{}", namespace.unwrap_or("default"), name.unwrap_or("?")),
            site: svc.site.clone(),
            labels,
            class: svc
                .get_str(&["spec", "loadBalancerClass"])
                .map(str::to_string),
            kind: svc
                .get_str(&["spec", "type"])
                .unwrap_or("ClusterIP")
                .to_string(),
            external_ips: svc
                .get(&["spec", "externalIPs"])
                .and_then(Node::as_seq)
                .is_some_and(|s| !s.is_empty()),
        });
    }
    for hr in traefik(&m.helm_releases) {
        let Ok(values) = &hr.values else { continue };
        if values.get(&["service", "enabled"]).and_then(Node::as_bool) == Some(false) {
            continue;
        }
        let text = |path: &[&str]| values.get_str(path).filter(|s| !s.is_empty());
        let namespace = text(&["namespaceOverride"]).unwrap_or(&hr.namespace);
        let mut labels = BTreeMap::new();
        labels.insert(
            "app.kubernetes.io/name".to_string(),
            text(&["nameOverride"]).unwrap_or("traefik").to_string(),
        );
        labels.insert("app.kubernetes.io/managed-by".to_string(), "Helm".into());
        let mut unknown: BTreeSet<String> = ["helm.sh/chart", "io.kubernetes.service.name"]
            .map(String::from)
            .into();
        match text(&["instanceLabelOverride"]) {
            Some(instance) => {
                labels.insert("app.kubernetes.io/instance".to_string(), instance.into());
            }
            None => {
                unknown.insert("app.kubernetes.io/instance".to_string());
            }
        }
        for path in [&["commonLabels"][..], &["service", "labels"]] {
            labels.extend(
                values
                    .get(path)
                    .and_then(Node::string_map)
                    .unwrap_or_default(),
            );
        }
        let labels = PartialLabels {
            labels: with_pseudo(labels, Some(namespace), None),
            open: Open::AllBut(unknown),
        };
        if !wanted
            .iter()
            .any(|w| matches_ref(w, Some(namespace), &labels))
        {
            continue;
        }
        let either =
            |new: &[&str], old: &[&str]| text(new).or_else(|| text(old)).map(str::to_string);
        out.push(DeclaredService {
            id: format!(
                "{namespace}/{} (rendered by HelmRelease {})",
                hr.name, hr.name
            ),
            site: hr.site.clone(),
            labels,
            class: either(
                &["service", "spec", "loadBalancerClass"],
                &["service", "loadBalancerClass"],
            ),
            kind: either(&["service", "spec", "type"], &["service", "type"])
                .unwrap_or_else(|| "LoadBalancer".to_string()),
            external_ips: [
                &["service", "spec", "externalIPs"][..],
                &["service", "externalIPs"],
            ]
            .iter()
            .any(|p| {
                values
                    .get(p)
                    .and_then(Node::as_seq)
                    .is_some_and(|s| !s.is_empty())
            }),
        });
    }
    out
}

/// How the announcing policies cover the nodes for one address kind.
struct Coverage {
    left_out: Vec<String>,
    unknown: Vec<String>,
}

fn coverage(policies: &[(&Policy<'_>, bool)], nodes: &[(String, PartialLabels)]) -> Coverage {
    let mut left_out = Vec::new();
    let mut unknown = Vec::new();
    for (name, labels) in nodes {
        let mut reasons = Vec::new();
        let mut open = Vec::new();
        let mut selected = false;
        for (policy, certain) in policies {
            match labels.judge(&policy.nodes) {
                Judged::Selected if *certain => selected = true,
                Judged::Selected => open.push(format!(
                    "policy {} would select it, if it selects the Service",
                    policy.name
                )),
                Judged::Unknown(why) => open.push(format!(
                    "policy {} ({}: spec.nodeSelector) requires {}, which the repository does not say of the node",
                    policy.name,
                    policy.node_site(),
                    why.join(", ")
                )),
                Judged::Excluded(why) => reasons.push(format!(
                    "policy {} ({}: spec.nodeSelector) requires {}",
                    policy.name,
                    policy.node_site(),
                    why.join(", ")
                )),
            }
        }
        if selected {
            continue;
        }
        if open.is_empty() {
            left_out.push(if reasons.is_empty() {
                name.clone()
            } else {
                format!("{name} ({})", reasons.join("; "))
            });
        } else {
            unknown.push(format!("{name}: {}", open.join("; ")));
        }
    }
    Coverage { left_out, unknown }
}

/// Whether the trial fails whatever the nodes' labels are: no policy is declared at all, and
/// no part left unread may hold one. A Talos value set aside then cannot change the verdict.
pub fn fails_without_nodes(ctx: &RepoContext<'_>) -> bool {
    let wanted = &ctx.settings.ingress.services;
    manifests_except(ctx.env, reads::L2, &|o| not_an_ingress_service(o, wanted))
        .is_ok_and(|m| m.of_kind("CiliumL2AnnouncementPolicy").next().is_none())
}

pub fn l2_announcement(ctx: &RepoContext<'_>) -> Finding {
    let wanted = &ctx.settings.ingress.services;
    let m = match manifests_except(ctx.env, reads::L2, &|o| not_an_ingress_service(o, wanted)) {
        Ok(m) => m,
        Err(finding) => return finding,
    };
    let declared = match declared_nodes(ctx.env) {
        Ok(nodes) => nodes,
        Err(finding) => return finding,
    };
    let patches = match talos_patches(ctx.env) {
        Ok(p) => p,
        Err(finding) => return finding,
    };
    if ctx.settings.ingress.services.is_empty() {
        return Finding::skip(
            "the environment names no ingress Services (ingress.services is empty)",
        );
    }
    let mut policies = Vec::new();
    for doc in m.of_kind("CiliumL2AnnouncementPolicy") {
        match compile(doc) {
            Ok(p) => policies.push(p),
            Err(err) => return Finding::error(err.0),
        }
    }
    if policies.is_empty() {
        return Finding::fail(format!(
            "no CiliumL2AnnouncementPolicy is declared for {}",
            ctx.env.name
        ));
    }
    let nodes: Vec<(String, PartialLabels)> = declared
        .iter()
        .map(|n| (n.name().to_string(), node_labels(n, patches)))
        .collect();
    let services = ingress_services(m, &ctx.settings.ingress.services);
    if services.is_empty() {
        return without_service(&policies, &nodes);
    }

    let mut said = Said::default();
    for svc in &services {
        said.service(svc, &policies, &nodes);
    }
    let Said {
        problems,
        unknown,
        evidence,
    } = said;
    if !problems.is_empty() {
        Finding::fail("the declared L2 announcements do not announce every ingress Service from every declared node")
            .with_evidence(problems.into_iter().chain(unknown).chain(evidence))
    } else if !unknown.is_empty() {
        Finding::error("whether the ingress Services are announced from every declared node depends on labels the repository does not declare (set them in the Talos patches' machine.nodeLabels, or select on labels kubelet or Talos set)")
            .with_evidence(unknown.into_iter().chain(evidence))
    } else {
        Finding::pass(format!(
            "every ingress Service is announced from all {} declared nodes",
            nodes.len()
        ))
        .with_evidence(evidence)
    }
}

/// What the trial says of the ingress Services: what fails, what is unknown, what passes.
#[derive(Default)]
struct Said {
    problems: Vec<String>,
    unknown: Vec<String>,
    evidence: Vec<String>,
}

impl Said {
    /// One ingress Service: a LoadBalancer of Cilium's class, selected by a policy, whose
    /// announced addresses are announced from every declared node.
    fn service(
        &mut self,
        svc: &DeclaredService,
        policies: &[Policy<'_>],
        nodes: &[(String, PartialLabels)],
    ) {
        let id = &svc.id;
        if svc.kind != "LoadBalancer" {
            self.problems.push(format!(
                "{}: Service {id} is {}, not LoadBalancer",
                svc.site, svc.kind
            ));
            return;
        }
        if let Some(class) = svc.class.as_deref().filter(|c| *c != L2_CLASS) {
            self.problems.push(format!(
                "{}: Service {id} has loadBalancerClass {class}: Cilium's L2 announcer only announces Services without a class or with {L2_CLASS}",
                svc.site
            ));
            return;
        }
        let mut selecting = Vec::new();
        for policy in policies {
            match svc.labels.judge(&policy.services) {
                Judged::Selected => selecting.push((policy, true)),
                Judged::Unknown(_) => selecting.push((policy, false)),
                Judged::Excluded(_) => {}
            }
        }
        if selecting.is_empty() {
            self.problems.push(format!(
                "no CiliumL2AnnouncementPolicy selects Service {id} ({}); policies: {}",
                svc.site,
                policies
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            return;
        }
        let mut kinds = vec![("loadBalancerIPs", true)];
        if svc.external_ips {
            kinds.push(("externalIPs", false));
        }
        for (flag, lb) in kinds {
            self.addresses(svc, flag, lb, &selecting, nodes);
        }
    }

    /// One kind of the Service's addresses (`loadBalancerIPs` or `externalIPs`): the
    /// selecting policies that announce it, and the declared nodes they cover.
    fn addresses(
        &mut self,
        svc: &DeclaredService,
        flag: &str,
        lb: bool,
        selecting: &[(&Policy<'_>, bool)],
        nodes: &[(String, PartialLabels)],
    ) {
        let id = &svc.id;
        let announcing: Vec<(&Policy<'_>, bool)> = selecting
            .iter()
            .filter(|(p, _)| {
                if lb {
                    p.load_balancer_ips
                } else {
                    p.external_ips
                }
            })
            .map(|(p, c)| (*p, *c))
            .collect();
        if announcing.is_empty() {
            self.problems.push(format!(
                "the policies that select Service {id} do not announce its {flag} (spec.{flag} defaults to false): {}",
                selecting.iter().map(|(p, _)| p.shown()).collect::<Vec<_>>().join(", ")
            ));
            return;
        }
        let names: Vec<&str> = announcing.iter().map(|(p, _)| p.name).collect();
        let cov = coverage(&announcing, nodes);
        if !cov.left_out.is_empty() {
            self.problems.push(format!(
                "the L2 policies announcing the {flag} of Service {id} ({}) leave out {}",
                names.join(", "),
                cov.left_out.join(", ")
            ));
        }
        if !cov.unknown.is_empty() {
            self.unknown.push(format!(
                "whether Service {id} is announced from {} is unknown",
                cov.unknown.join(" | ")
            ));
        }
        if cov.left_out.is_empty() && cov.unknown.is_empty() {
            self.evidence.push(format!(
                "Service {id} ({}): its {flag} announced from all {} declared nodes by {}",
                svc.site,
                nodes.len(),
                announcing
                    .iter()
                    .map(|(p, _)| p.shown())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
}

/// No ingress Service is in the repository: a policy that selects every Service covers it
/// whatever it is; anything less cannot be judged.
fn without_service(policies: &[Policy<'_>], nodes: &[(String, PartialLabels)]) -> Finding {
    if policies.iter().all(|p| !p.load_balancer_ips) {
        return Finding::fail(
            "no CiliumL2AnnouncementPolicy announces LoadBalancer addresses (spec.loadBalancerIPs defaults to false)",
        )
        .with_evidence(policies.iter().map(Policy::shown));
    }
    let every_service: Vec<(&Policy<'_>, bool)> = policies
        .iter()
        .filter(|p| p.load_balancer_ips && p.services.is_everything())
        .map(|p| (p, true))
        .collect();
    let cov = coverage(&every_service, nodes);
    if !every_service.is_empty() && cov.left_out.is_empty() && cov.unknown.is_empty() {
        return Finding::pass(format!(
            "the ingress Service is not in the repository, but a policy announcing every Service covers all {} declared nodes",
            nodes.len()
        ))
        .with_evidence(every_service.iter().map(|(p, _)| p.shown()));
    }
    Finding::skip(
        "no Service matching ingress.services is declared in the repository (it may come from a chart gates does not render), and no policy that announces every Service covers every declared node: which policies announce it cannot be judged from the repository",
    )
}
