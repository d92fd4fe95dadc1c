//! Kustomize's name references (`api/filters/nameref`, run by `FixBackReferences` once every
//! name of a build is final): a field that names another object of the build by a name that
//! object had before `namespace`, `namePrefix`, `nameSuffix` or a generator's hash suffix
//! changed it is rewritten to the object's final name, and a `{name, namespace}` map (a
//! RoleBinding subject, a webhook's service) also to its final namespace. The fields are
//! Kustomize's default `nameReference` field specs (`builtinpluginconsts/namereference.go`),
//! the choice among several candidates is its `selectReferral`, and what an object was called
//! before travels with it in Kustomize's own build annotations, removed when the build ends.

use super::is_cluster_scoped;
use crate::repo::site::{RepoError, Site};
use crate::repo::yaml::{Node, Value};

const PREVIOUS_NAMES: &str = "internal.config.kubernetes.io/previousNames";
const PREVIOUS_NAMESPACES: &str = "internal.config.kubernetes.io/previousNamespaces";
const PREVIOUS_KINDS: &str = "internal.config.kubernetes.io/previousKinds";
const PREFIXES: &str = "internal.config.kubernetes.io/prefixes";
const SUFFIXES: &str = "internal.config.kubernetes.io/suffixes";
const BUILD_ANNOTATIONS: [&str; 5] = [
    PREVIOUS_NAMES,
    PREVIOUS_NAMESPACES,
    PREVIOUS_KINDS,
    PREFIXES,
    SUFFIXES,
];

/// Kustomize's stand-in namespace of cluster-scoped objects (`resid.TotallyNotANamespace`).
const NO_NAMESPACE: &str = "~X";

/// Remember the object's current kind, name and namespace as one of its previous ids
/// (`Resource.StorePreviousId`), before a transformer renames or moves it.
pub fn store_previous_id(object: &mut Node) {
    let kind = object.get_str(&["kind"]).unwrap_or_default().to_string();
    let name = object
        .get_str(&["metadata", "name"])
        .unwrap_or_default()
        .to_string();
    let namespace = effective_namespace(&kind, object.get_str(&["metadata", "namespace"]));
    append_csv(object, PREVIOUS_NAMES, &name);
    append_csv(object, PREVIOUS_NAMESPACES, &namespace);
    append_csv(object, PREVIOUS_KINDS, &kind);
}

/// Record a name prefix (or suffix) the object was given, for telling apart candidates of the
/// same former name (`Resource.AddNamePrefix`).
pub fn record_affix(object: &mut Node, prefix: bool, affix: &str) {
    if !affix.is_empty() {
        append_csv(object, if prefix { PREFIXES } else { SUFFIXES }, affix);
    }
}

/// Rewrite every reference to a renamed object, then drop the build annotations.
pub fn fix(objects: &mut [Node]) -> Result<(), RepoError> {
    let ids: Vec<Ids> = objects.iter().map(Ids::of).collect();
    let mut errors = Vec::new();
    for (index, object) in objects.iter_mut().enumerate() {
        let referrer = &ids[index];
        let candidates: Vec<&Ids> = ids.iter().filter(|c| referrer.may_refer_to(c)).collect();
        for reference in references() {
            if !referrer.org_selected_by(&reference.referrer) {
                continue;
            }
            let pick = Pick {
                referrer,
                target: &reference.target,
                candidates: &candidates,
                role_ref: reference.path.ends_with("roleRef/name"),
            };
            walk(object, &split_path(&reference.path), &pick, &mut errors);
        }
    }
    for object in objects.iter_mut() {
        strip(object);
    }
    match errors.len() {
        0 => Ok(()),
        _ => Err(errors.remove(0)),
    }
}

/// A group, version and kind, each empty meaning any, as Kustomize's `resid.Gvk` selects.
#[derive(Debug, Clone, Copy)]
struct Gvk {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
}

impl Gvk {
    fn selects(&self, group: &str, version: &str, kind: &str) -> bool {
        (self.group.is_empty() || self.group == group)
            && (self.version.is_empty() || self.version == version)
            && (self.kind.is_empty() || self.kind == kind)
    }
}

/// One field that may name an object of `target`'s kind, in objects `referrer` selects.
struct Reference {
    target: Gvk,
    referrer: Gvk,
    path: String,
}

/// What gates knows of each object of the build while references are fixed.
struct Ids {
    group: String,
    version: String,
    kind: String,
    name: String,
    namespace: String,
    /// (kind, name, effective namespace), oldest first.
    previous: Vec<(String, String, String)>,
    prefixes: Vec<String>,
    suffixes: Vec<String>,
    /// The namespaces of a RoleBinding's ServiceAccount subjects.
    subject_namespaces: Vec<String>,
    /// A binding's `roleRef` group and kind: its `roleRef.name` only names objects of those.
    role_ref: Option<(String, String)>,
}

impl Ids {
    fn of(object: &Node) -> Ids {
        let api = object.get_str(&["apiVersion"]).unwrap_or_default();
        let (group, version) = match api.rsplit_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), api.to_string()),
        };
        let kind = object.get_str(&["kind"]).unwrap_or_default().to_string();
        let names = csv(object, PREVIOUS_NAMES);
        let namespaces = csv(object, PREVIOUS_NAMESPACES);
        let kinds = csv(object, PREVIOUS_KINDS);
        let previous = names
            .into_iter()
            .zip(namespaces)
            .zip(kinds)
            .map(|((name, ns), kind)| (kind, name, ns))
            .collect();
        let subject_namespaces = match kind.as_str() {
            "RoleBinding" => object
                .get(&["subjects"])
                .and_then(Node::as_seq)
                .unwrap_or_default()
                .iter()
                .filter(|s| s.get_str(&["kind"]) == Some("ServiceAccount"))
                .filter_map(|s| s.get_str(&["namespace"]).map(str::to_string))
                .collect(),
            _ => Vec::new(),
        };
        let role_ref = object.get(&["roleRef"]).and_then(|r| {
            Some((
                r.get_str(&["apiGroup"])?.to_string(),
                r.get_str(&["kind"])?.to_string(),
            ))
        });
        Ids {
            role_ref,
            namespace: effective_namespace(&kind, object.get_str(&["metadata", "namespace"])),
            name: object
                .get_str(&["metadata", "name"])
                .unwrap_or_default()
                .to_string(),
            group,
            version,
            kind,
            previous,
            prefixes: csv(object, PREFIXES),
            suffixes: csv(object, SUFFIXES),
            subject_namespaces,
        }
    }

    fn cluster_scoped(&self) -> bool {
        self.namespace == NO_NAMESPACE
    }

    /// The kind the object was first built as (`OrgId`).
    fn org_kind(&self) -> &str {
        self.previous.first().map_or(&self.kind, |(k, _, _)| k)
    }

    fn org_namespace(&self) -> &str {
        self.previous
            .first()
            .map_or(&self.namespace, |(_, _, ns)| ns)
    }

    fn org_selected_by(&self, gvk: &Gvk) -> bool {
        gvk.selects(&self.group, &self.version, self.org_kind())
    }

    /// `SubsetThatCouldBeReferencedByResource`.
    fn may_refer_to(&self, other: &Ids) -> bool {
        self.cluster_scoped()
            || other.cluster_scoped()
            || self.namespace == other.namespace
            || self.subject_namespaces.contains(&other.namespace)
    }

    fn previously_named(&self, name: &str) -> bool {
        self.previous.iter().any(|(_, n, _)| n == name)
    }

    fn previously_selected_by(&self, gvk: &Gvk) -> bool {
        self.previous
            .iter()
            .any(|(kind, _, _)| gvk.selects(&self.group, &self.version, kind))
    }
}

/// What a referring field needs to choose its object.
struct Pick<'a> {
    referrer: &'a Ids,
    target: &'a Gvk,
    candidates: &'a [&'a Ids],
    role_ref: bool,
}

impl Pick<'_> {
    /// `selectReferral`: the one candidate the name may mean, none, or an error when several
    /// different objects fit.
    fn select<'a>(
        &self,
        name: &str,
        candidates: &[&'a Ids],
        identical: fn(&[&Ids]) -> bool,
        site: &Site,
    ) -> Result<Option<&'a Ids>, RepoError> {
        let role = self
            .role_ref
            .then_some(self.referrer.role_ref.as_ref())
            .flatten();
        let mut fit: Vec<&Ids> = candidates
            .iter()
            .copied()
            .filter(|c| c.previously_named(name))
            .filter(|c| c.previously_selected_by(self.target))
            .filter(|c| {
                role.is_none_or(|(group, kind)| {
                    c.previous.iter().any(|(k, _, _)| {
                        (group.is_empty() || *group == c.group) && (kind.is_empty() || kind == k)
                    })
                })
            })
            .filter(|c| {
                self.referrer.cluster_scoped()
                    || c.cluster_scoped()
                    || c.kind == "ServiceAccount"
                    || c.namespace == self.referrer.namespace
            })
            .collect();
        if fit.len() == 1 {
            return Ok(fit.pop());
        }
        fit.retain(|c| affixes_match(c, self.referrer, true));
        if fit.len() > 1 {
            fit.retain(|c| affixes_match(c, self.referrer, false));
        }
        match fit.len() {
            0 => Ok(None),
            1 => Ok(fit.pop()),
            _ if identical(&fit) => Ok(Some(fit[0])),
            _ => Err(RepoError::new(
                site.clone(),
                format!(
                    "`{name}` may name any of {}; Kustomize refuses the build (found multiple possible referrals)",
                    fit.iter()
                        .map(|c| format!("{} {}/{}", c.kind, c.namespace, c.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }
}

/// `PrefixesSuffixesEquals`: the outermost prefixes (and suffixes) agree; with `allow_empty`,
/// an object without any agrees with everything.
fn affixes_match(a: &Ids, b: &Ids, allow_empty: bool) -> bool {
    let agree = |x: &[String], y: &[String]| {
        (allow_empty && (x.is_empty() || y.is_empty())) || same_ending(x, y)
    };
    agree(&a.prefixes, &b.prefixes) && agree(&a.suffixes, &b.suffixes)
}

/// `SameEndingSubSlice`: the shorter list is the end of the longer; an empty list only
/// matches an empty one.
fn same_ending(a: &[String], b: &[String]) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if short.is_empty() {
        return long.is_empty();
    }
    long.ends_with(short)
}

fn all_names_same(found: &[&Ids]) -> bool {
    found.iter().all(|c| c.name == found[0].name)
}

fn all_names_and_namespaces_same(found: &[&Ids]) -> bool {
    found
        .iter()
        .all(|c| c.name == found[0].name && c.namespace == found[0].namespace)
}

/// Follow a field spec's path (a list met on the way applies to each item) and fix what it
/// reaches.
fn walk(node: &mut Node, path: &[String], pick: &Pick<'_>, errors: &mut Vec<RepoError>) {
    let Some((key, rest)) = path.split_first() else {
        set(node, pick, errors);
        return;
    };
    match &mut node.value {
        Value::Seq(items) => {
            for item in items {
                walk(item, path, pick, errors);
            }
        }
        Value::Map(_) => {
            if let Some(next) = node.entry_mut(key) {
                walk(next, rest, pick, errors);
            }
        }
        _ => {}
    }
}

fn set(node: &mut Node, pick: &Pick<'_>, errors: &mut Vec<RepoError>) {
    match &mut node.value {
        Value::Null => {}
        Value::Scalar(..) => set_scalar(node, pick, errors),
        Value::Map(_) => set_mapping(node, pick, errors),
        Value::Seq(items) => {
            for item in items {
                match item.value {
                    Value::Scalar(..) => set_scalar(item, pick, errors),
                    Value::Map(_) => set_mapping(item, pick, errors),
                    _ => {}
                }
            }
        }
    }
}

fn set_scalar(node: &mut Node, pick: &Pick<'_>, errors: &mut Vec<RepoError>) {
    let Some(name) = node.as_str().map(str::to_string) else {
        return;
    };
    match pick.select(&name, pick.candidates, all_names_same, &node.site) {
        Ok(Some(referral)) if referral.name != name => {
            *node = Node::str(&referral.name, node.site.clone());
        }
        Ok(_) => {}
        Err(error) => errors.push(error),
    }
}

/// A `{name, namespace}` map: candidates in the namespace it names (as first built, else as
/// now), then its name and namespace set to the object chosen.
fn set_mapping(node: &mut Node, pick: &Pick<'_>, errors: &mut Vec<RepoError>) {
    let Some(name) = node.get_str(&["name"]).map(str::to_string) else {
        return;
    };
    let candidates: Vec<&Ids> = match node.get_str(&["namespace"]) {
        None => pick.candidates.to_vec(),
        Some(ns) => {
            let by_origin: Vec<&Ids> = pick
                .candidates
                .iter()
                .copied()
                .filter(|c| !c.cluster_scoped() && c.org_namespace() == ns)
                .collect();
            if by_origin.is_empty() {
                pick.candidates
                    .iter()
                    .copied()
                    .filter(|c| !c.cluster_scoped() && c.namespace == ns)
                    .collect()
            } else {
                by_origin
            }
        }
    };
    let site = node.site.clone();
    let referral = match pick.select(&name, &candidates, all_names_and_namespaces_same, &site) {
        Ok(Some(referral)) => referral,
        Ok(None) => return,
        Err(error) => {
            errors.push(error);
            return;
        }
    };
    let namespace = (!referral.cluster_scoped()).then_some(referral.namespace.as_str());
    if referral.name == name && namespace.is_none() {
        return;
    }
    set_entry(node, "name", &referral.name);
    if let Some(ns) = namespace {
        set_entry(node, "namespace", ns);
    }
}

/// Set a map's string entry, keeping the line of the value it replaces.
fn set_entry(node: &mut Node, key: &str, value: &str) {
    let site = node.site.clone();
    if let Some(old) = node.entry_mut(key) {
        let site = old.site.clone();
        *old = Node::str(value, site);
    } else if let Value::Map(entries) = &mut node.value {
        entries.push((key.to_string(), Node::str(value, site)));
    }
}

/// A field spec path: `/`-separated, `\/` for a slash inside a key.
fn split_path(path: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'/') => {
                chars.next();
                parts.last_mut().expect("one part").push('/');
            }
            '/' => parts.push(String::new()),
            c => parts.last_mut().expect("one part").push(c),
        }
    }
    parts
}

/// `ResId.EffectiveNamespace`: `~X` for cluster-scoped kinds, `default` for none.
fn effective_namespace(kind: &str, namespace: Option<&str>) -> String {
    if is_cluster_scoped(kind) {
        return NO_NAMESPACE.to_string();
    }
    match namespace {
        None | Some("") => "default".to_string(),
        Some(ns) => ns.to_string(),
    }
}

fn csv(object: &Node, key: &str) -> Vec<String> {
    match object
        .get(&["metadata", "annotations", key])
        .and_then(Node::as_str)
    {
        Some(text) => text.split(',').map(str::to_string).collect(),
        None => Vec::new(),
    }
}

fn append_csv(object: &mut Node, key: &str, value: &str) {
    let mut values = csv(object, key);
    values.push(value.to_string());
    let site = object.site.clone();
    super::set_path(
        object,
        &["metadata", "annotations", key],
        Node::str(values.join(","), site),
    );
}

/// Remove the build annotations (and `annotations`, when nothing else is left in it).
fn strip(object: &mut Node) {
    let Some(meta) = object.entry_mut("metadata") else {
        return;
    };
    let Some(Value::Map(annotations)) = meta.entry_mut("annotations").map(|a| &mut a.value) else {
        return;
    };
    let before = annotations.len();
    annotations.retain(|(k, _)| !BUILD_ANNOTATIONS.contains(&k.as_str()));
    if annotations.len() != before
        && annotations.is_empty()
        && let Value::Map(entries) = &mut meta.value
    {
        entries.retain(|(k, _)| k != "annotations");
    }
}

const fn gvk(group: &'static str, version: &'static str, kind: &'static str) -> Gvk {
    Gvk {
        group,
        version,
        kind,
    }
}

/// Where the kinds with a pod template keep its spec, for the ConfigMap and Secret field
/// specs, which list the same fields for each (a Pod's only when its version is v1).
const POD_SPECS: [(Gvk, &str); 8] = [
    (gvk("", "v1", "Pod"), "spec"),
    (gvk("", "", "PodTemplate"), "template/spec"),
    (gvk("", "", "Deployment"), "spec/template/spec"),
    (gvk("", "", "ReplicaSet"), "spec/template/spec"),
    (gvk("", "", "DaemonSet"), "spec/template/spec"),
    (gvk("", "", "StatefulSet"), "spec/template/spec"),
    (gvk("", "", "Job"), "spec/template/spec"),
    (
        gvk("", "", "CronJob"),
        "spec/jobTemplate/spec/template/spec",
    ),
];

const CONFIG_MAP_FIELDS: [&str; 6] = [
    "volumes/configMap/name",
    "containers/env/valueFrom/configMapKeyRef/name",
    "initContainers/env/valueFrom/configMapKeyRef/name",
    "containers/envFrom/configMapRef/name",
    "initContainers/envFrom/configMapRef/name",
    "volumes/projected/sources/configMap/name",
];

const SECRET_FIELDS: [&str; 7] = [
    "volumes/secret/secretName",
    "containers/env/valueFrom/secretKeyRef/name",
    "initContainers/env/valueFrom/secretKeyRef/name",
    "containers/envFrom/secretRef/name",
    "initContainers/envFrom/secretRef/name",
    "imagePullSecrets/name",
    "volumes/projected/sources/secret/name",
];

/// The kinds whose pod template's `serviceAccountName`, `priorityClassName` and
/// `persistentVolumeClaim` volumes are references (not PodTemplate nor ReplicaSet).
const TEMPLATED: [(&str, &str); 7] = [
    ("Pod", "spec"),
    ("StatefulSet", "spec/template/spec"),
    ("Deployment", "spec/template/spec"),
    ("ReplicationController", "spec/template/spec"),
    ("CronJob", "spec/jobTemplate/spec/template/spec"),
    ("Job", "spec/template/spec"),
    ("DaemonSet", "spec/template/spec"),
];

const RBAC: &str = "rbac.authorization.k8s.io";
const ADMISSION: &str = "admissionregistration.k8s.io";

/// The other field specs, as (target, referrer, path).
#[rustfmt::skip]
const OTHERS: &[(Gvk, Gvk, &str)] = &[
    (gvk("", "", "Deployment"), gvk("", "", "HorizontalPodAutoscaler"), "spec/scaleTargetRef/name"),
    (gvk("", "", "ReplicationController"), gvk("", "", "HorizontalPodAutoscaler"), "spec/scaleTargetRef/name"),
    (gvk("", "", "ReplicaSet"), gvk("", "", "HorizontalPodAutoscaler"), "spec/scaleTargetRef/name"),
    (gvk("", "", "StatefulSet"), gvk("", "", "HorizontalPodAutoscaler"), "spec/scaleTargetRef/name"),
    (gvk("", "v1", "ConfigMap"), gvk("", "", "Node"), "spec/configSource/configMap"),
    (gvk("", "v1", "ConfigMap"), gvk("", "", "Role"), "rules/resourceNames"),
    (gvk("", "v1", "ConfigMap"), gvk("", "", "ClusterRole"), "rules/resourceNames"),
    (gvk("", "v1", "ConfigMap"), gvk("", "", "Ingress"), "metadata/annotations/nginx.ingress.kubernetes.io\\/fastcgi-params-configmap"),
    (gvk("", "v1", "Secret"), gvk("", "", "Ingress"), "spec/tls/secretName"),
    (gvk("", "v1", "Secret"), gvk("", "", "Ingress"), "metadata/annotations/ingress.kubernetes.io\\/auth-secret"),
    (gvk("", "v1", "Secret"), gvk("", "", "Ingress"), "metadata/annotations/nginx.ingress.kubernetes.io\\/auth-secret"),
    (gvk("", "v1", "Secret"), gvk("", "", "Ingress"), "metadata/annotations/nginx.ingress.kubernetes.io\\/auth-tls-secret"),
    (gvk("", "v1", "Secret"), gvk("", "", "ServiceAccount"), "imagePullSecrets/name"),
    (gvk("", "v1", "Secret"), gvk("", "", "StorageClass"), "parameters/secretName"),
    (gvk("", "v1", "Secret"), gvk("", "", "StorageClass"), "parameters/adminSecretName"),
    (gvk("", "v1", "Secret"), gvk("", "", "StorageClass"), "parameters/userSecretName"),
    (gvk("", "v1", "Secret"), gvk("", "", "StorageClass"), "parameters/secretRef"),
    (gvk("", "v1", "Secret"), gvk("", "", "Role"), "rules/resourceNames"),
    (gvk("", "v1", "Secret"), gvk("", "", "ClusterRole"), "rules/resourceNames"),
    (gvk("", "v1", "Secret"), gvk("serving.knative.dev", "v1", "Service"), "spec/template/spec/containers/env/valueFrom/secretKeyRef/name"),
    (gvk("", "v1", "Secret"), gvk("", "", "PersistentVolume"), "spec/azureFile/secretName"),
    (gvk("", "v1", "Service"), gvk("apps", "", "StatefulSet"), "spec/serviceName"),
    (gvk("", "v1", "Service"), gvk("", "", "Ingress"), "spec/rules/http/paths/backend/serviceName"),
    (gvk("", "v1", "Service"), gvk("", "", "Ingress"), "spec/backend/serviceName"),
    (gvk("", "v1", "Service"), gvk("", "", "Ingress"), "spec/rules/http/paths/backend/service/name"),
    (gvk("", "v1", "Service"), gvk("", "", "Ingress"), "spec/defaultBackend/service/name"),
    (gvk("", "v1", "Service"), gvk("apiregistration.k8s.io", "", "APIService"), "spec/service/name"),
    (gvk("", "v1", "Service"), gvk(ADMISSION, "", "ValidatingWebhookConfiguration"), "webhooks/clientConfig/service"),
    (gvk("", "v1", "Service"), gvk(ADMISSION, "", "MutatingWebhookConfiguration"), "webhooks/clientConfig/service"),
    (gvk(RBAC, "", "Role"), gvk(RBAC, "", "RoleBinding"), "roleRef/name"),
    (gvk(RBAC, "", "ClusterRole"), gvk(RBAC, "", "RoleBinding"), "roleRef/name"),
    (gvk(RBAC, "", "ClusterRole"), gvk(RBAC, "", "ClusterRoleBinding"), "roleRef/name"),
    (gvk("", "v1", "ServiceAccount"), gvk(RBAC, "", "RoleBinding"), "subjects"),
    (gvk("", "v1", "ServiceAccount"), gvk(RBAC, "", "ClusterRoleBinding"), "subjects"),
    (gvk("", "v1", "PersistentVolume"), gvk("", "", "PersistentVolumeClaim"), "spec/volumeName"),
    (gvk("", "v1", "PersistentVolume"), gvk("", "", "ClusterRole"), "rules/resourceNames"),
    (gvk("storage.k8s.io", "v1", "StorageClass"), gvk("", "", "PersistentVolume"), "spec/storageClassName"),
    (gvk("storage.k8s.io", "v1", "StorageClass"), gvk("", "", "PersistentVolumeClaim"), "spec/storageClassName"),
    (gvk("storage.k8s.io", "v1", "StorageClass"), gvk("", "", "StatefulSet"), "spec/volumeClaimTemplates/spec/storageClassName"),
    // Kustomize writes this group with its version, so it never selects an IngressClass.
    (gvk("networking.k8s.io/v1", "v1", "IngressClass"), gvk("", "", "Ingress"), "spec/ingressClassName"),
    (gvk(ADMISSION, "", "ValidatingAdmissionPolicy"), gvk(ADMISSION, "", "ValidatingAdmissionPolicyBinding"), "spec/policyName"),
];

/// Kustomize's default `nameReference` field specs, built once.
fn references() -> &'static [Reference] {
    static TABLE: std::sync::OnceLock<Vec<Reference>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = Vec::new();
        for (target, fields) in [
            (gvk("", "v1", "ConfigMap"), &CONFIG_MAP_FIELDS[..]),
            (gvk("", "v1", "Secret"), &SECRET_FIELDS[..]),
        ] {
            for (referrer, spec) in POD_SPECS {
                for field in fields {
                    table.push(Reference {
                        target,
                        referrer,
                        path: format!("{spec}/{field}"),
                    });
                }
            }
        }
        for (target, field) in [
            (gvk("", "v1", "ServiceAccount"), "serviceAccountName"),
            (
                gvk("", "v1", "PersistentVolumeClaim"),
                "volumes/persistentVolumeClaim/claimName",
            ),
            (
                gvk("scheduling.k8s.io", "v1", "PriorityClass"),
                "priorityClassName",
            ),
        ] {
            for (kind, spec) in TEMPLATED {
                table.push(Reference {
                    target,
                    referrer: gvk("", "", kind),
                    path: format!("{spec}/{field}"),
                });
            }
        }
        for &(target, referrer, path) in OTHERS {
            table.push(Reference {
                target,
                referrer,
                path: path.to_string(),
            });
        }
        table
    })
}
