//! Kustomize `commonLabels`, `labels` and `commonAnnotations`: the labels are added to every
//! object's metadata and, where asked, to pod templates and selectors, so a PDB or a Service
//! still selects the pods the same Kustomization labelled; the annotations to metadata and pod
//! templates. Where they go is Kustomize's own field specs
//! (`api/internal/konfig/builtinpluginconsts`: `commonlabels.go`, `metadatalabels.go`,
//! `commonannotations.go`). Each added label carries the line of the Kustomization entry that
//! set it, since that line is the one that set it last.

use super::set_path;
use crate::repo::site::RepoError;
use crate::repo::yaml::{Node, Value};

/// One set of labels and where it goes.
pub struct Labels {
    pub pairs: Vec<(String, Node)>,
    pub selectors: bool,
    pub templates: bool,
}

impl Labels {
    /// `commonLabels: {k: v}`: metadata, selectors and templates.
    pub fn common(value: &Node) -> Result<Labels, RepoError> {
        Ok(Labels {
            pairs: pairs(value, "commonLabels")?,
            selectors: true,
            templates: true,
        })
    }

    /// Flux `spec.commonMetadata.labels`: object metadata only, never selectors or pod
    /// templates (the kustomize-controller labels the objects it applies, not their pods).
    pub fn metadata_only(value: &Node, what: &str) -> Result<Labels, RepoError> {
        Ok(Labels {
            pairs: pairs(value, what)?,
            selectors: false,
            templates: false,
        })
    }

    /// One entry of `labels:` (`pairs`, `includeSelectors`, `includeTemplates`).
    pub fn entry(item: &Node) -> Result<Labels, RepoError> {
        let mut out = Labels {
            pairs: Vec::new(),
            selectors: false,
            templates: false,
        };
        let Some(entries) = item.as_map() else {
            return Err(RepoError::new(
                item.site.clone(),
                "a `labels` entry must be a mapping with `pairs`",
            ));
        };
        for (key, value) in entries {
            match key.as_str() {
                "pairs" => out.pairs = pairs(value, "labels.pairs")?,
                "includeSelectors" | "includeTemplates" => {
                    let Some(flag) = value.as_bool() else {
                        return Err(RepoError::new(
                            value.site.clone(),
                            format!("labels.{key} must be true or false"),
                        ));
                    };
                    if key == "includeSelectors" {
                        out.selectors = flag;
                    } else {
                        out.templates = flag;
                    }
                }
                other => {
                    return Err(RepoError::new(
                        value.site.clone(),
                        format!(
                            "labels.{other} is not evaluated by gates (pairs, includeSelectors and includeTemplates are); the trials would read the fields it labels, so it is refused rather than guessed"
                        ),
                    ));
                }
            }
        }
        // Kustomize labels templates whenever it labels selectors, or the pods would fall
        // out of their own selector.
        out.templates |= out.selectors;
        Ok(out)
    }

    /// Add the labels to the objects: metadata only; with `includeTemplates` also the
    /// template field specs; with selectors (`commonLabels`, `includeSelectors`) also the
    /// selector field specs.
    pub fn apply(&self, objects: &mut [Node]) {
        let metadata = [FieldSpec::any("metadata/labels")];
        let specs: Vec<&FieldSpec> = if self.selectors {
            SELECTOR_LABELS.iter().chain(&TEMPLATE_LABELS).collect()
        } else if self.templates {
            TEMPLATE_LABELS.iter().collect()
        } else {
            metadata.iter().collect()
        };
        set_pairs(objects, &specs, &self.pairs);
    }
}

/// `commonAnnotations`: object metadata and pod templates.
pub fn annotate(value: &Node, objects: &mut [Node]) -> Result<(), RepoError> {
    let pairs = pairs(value, "commonAnnotations")?;
    let specs: Vec<&FieldSpec> = ANNOTATIONS.iter().collect();
    set_pairs(objects, &specs, &pairs);
    Ok(())
}

/// One Kustomize field spec: the objects it applies to (each part optional) and a path of
/// map keys, a sequence on the way applying the rest of the path to each item; `create`
/// makes the maps on the way, otherwise a missing one leaves the object alone.
pub struct FieldSpec {
    group: Option<&'static str>,
    version: Option<&'static str>,
    kind: Option<&'static str>,
    path: &'static str,
    create: bool,
}

impl FieldSpec {
    const fn any(path: &'static str) -> FieldSpec {
        FieldSpec {
            group: None,
            version: None,
            kind: None,
            path,
            create: true,
        }
    }

    const fn of(
        group: Option<&'static str>,
        version: Option<&'static str>,
        kind: &'static str,
        path: &'static str,
        create: bool,
    ) -> FieldSpec {
        FieldSpec {
            group,
            version,
            kind: Some(kind),
            path,
            create,
        }
    }

    fn selects(&self, object: &Node) -> bool {
        let api = object.get_str(&["apiVersion"]).unwrap_or_default();
        let (group, version) = api.rsplit_once('/').unwrap_or(("", api));
        self.kind
            .is_none_or(|k| object.get_str(&["kind"]) == Some(k))
            && self.group.is_none_or(|g| g == group)
            && self.version.is_none_or(|v| v == version)
    }
}

const APPS: Option<&str> = Some("apps");
const BATCH: Option<&str> = Some("batch");
const V1: Option<&str> = Some("v1");

/// `metadataLabelsFieldSpecs` (`templateLabels`): metadata, pod templates, volume claim
/// templates.
const TEMPLATE_LABELS: [FieldSpec; 10] = [
    FieldSpec::any("metadata/labels"),
    FieldSpec::of(
        None,
        V1,
        "ReplicationController",
        "spec/template/metadata/labels",
        true,
    ),
    FieldSpec::of(
        None,
        None,
        "Deployment",
        "spec/template/metadata/labels",
        true,
    ),
    FieldSpec::of(
        None,
        None,
        "ReplicaSet",
        "spec/template/metadata/labels",
        true,
    ),
    FieldSpec::of(
        None,
        None,
        "DaemonSet",
        "spec/template/metadata/labels",
        true,
    ),
    FieldSpec::of(
        APPS,
        None,
        "StatefulSet",
        "spec/template/metadata/labels",
        true,
    ),
    FieldSpec::of(
        APPS,
        None,
        "StatefulSet",
        "spec/volumeClaimTemplates[]/metadata/labels",
        true,
    ),
    FieldSpec::of(BATCH, None, "Job", "spec/template/metadata/labels", true),
    FieldSpec::of(
        BATCH,
        None,
        "CronJob",
        "spec/jobTemplate/metadata/labels",
        true,
    ),
    FieldSpec::of(
        BATCH,
        None,
        "CronJob",
        "spec/jobTemplate/spec/template/metadata/labels",
        true,
    ),
];

const AFFINITY: [&str; 5] = [
    "spec/template/spec/affinity/podAffinity/preferredDuringSchedulingIgnoredDuringExecution/podAffinityTerm/labelSelector/matchLabels",
    "spec/template/spec/affinity/podAffinity/requiredDuringSchedulingIgnoredDuringExecution/labelSelector/matchLabels",
    "spec/template/spec/affinity/podAntiAffinity/preferredDuringSchedulingIgnoredDuringExecution/podAffinityTerm/labelSelector/matchLabels",
    "spec/template/spec/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution/labelSelector/matchLabels",
    "spec/template/spec/topologySpreadConstraints/labelSelector/matchLabels",
];

/// `commonLabelFieldSpecs` without the metadata ones: the selectors, created for workloads
/// and Services, changed where they exist for affinity and spread terms, Jobs, PDBs and
/// NetworkPolicies.
const SELECTOR_LABELS: [FieldSpec; 22] = [
    FieldSpec::of(None, V1, "Service", "spec/selector", true),
    FieldSpec::of(None, V1, "ReplicationController", "spec/selector", true),
    FieldSpec::of(None, None, "Deployment", "spec/selector/matchLabels", true),
    FieldSpec::of(APPS, None, "Deployment", AFFINITY[0], false),
    FieldSpec::of(APPS, None, "Deployment", AFFINITY[1], false),
    FieldSpec::of(APPS, None, "Deployment", AFFINITY[2], false),
    FieldSpec::of(APPS, None, "Deployment", AFFINITY[3], false),
    FieldSpec::of(APPS, None, "Deployment", AFFINITY[4], false),
    FieldSpec::of(None, None, "ReplicaSet", "spec/selector/matchLabels", true),
    FieldSpec::of(None, None, "DaemonSet", "spec/selector/matchLabels", true),
    FieldSpec::of(APPS, None, "StatefulSet", "spec/selector/matchLabels", true),
    FieldSpec::of(APPS, None, "StatefulSet", AFFINITY[0], false),
    FieldSpec::of(APPS, None, "StatefulSet", AFFINITY[1], false),
    FieldSpec::of(APPS, None, "StatefulSet", AFFINITY[2], false),
    FieldSpec::of(APPS, None, "StatefulSet", AFFINITY[3], false),
    FieldSpec::of(APPS, None, "StatefulSet", AFFINITY[4], false),
    FieldSpec::of(BATCH, None, "Job", "spec/selector/matchLabels", false),
    FieldSpec::of(
        BATCH,
        None,
        "CronJob",
        "spec/jobTemplate/spec/selector/matchLabels",
        false,
    ),
    FieldSpec::of(
        Some("policy"),
        None,
        "PodDisruptionBudget",
        "spec/selector/matchLabels",
        false,
    ),
    FieldSpec::of(
        Some("networking.k8s.io"),
        None,
        "NetworkPolicy",
        "spec/podSelector/matchLabels",
        false,
    ),
    FieldSpec::of(
        Some("networking.k8s.io"),
        None,
        "NetworkPolicy",
        "spec/ingress/from/podSelector/matchLabels",
        false,
    ),
    FieldSpec::of(
        Some("networking.k8s.io"),
        None,
        "NetworkPolicy",
        "spec/egress/to/podSelector/matchLabels",
        false,
    ),
];

/// `commonAnnotationFieldSpecs`.
const ANNOTATIONS: [FieldSpec; 9] = [
    FieldSpec::any("metadata/annotations"),
    FieldSpec::of(
        None,
        V1,
        "ReplicationController",
        "spec/template/metadata/annotations",
        true,
    ),
    FieldSpec::of(
        None,
        None,
        "Deployment",
        "spec/template/metadata/annotations",
        true,
    ),
    FieldSpec::of(
        None,
        None,
        "ReplicaSet",
        "spec/template/metadata/annotations",
        true,
    ),
    FieldSpec::of(
        None,
        None,
        "DaemonSet",
        "spec/template/metadata/annotations",
        true,
    ),
    FieldSpec::of(
        None,
        None,
        "StatefulSet",
        "spec/template/metadata/annotations",
        true,
    ),
    FieldSpec::of(
        BATCH,
        None,
        "Job",
        "spec/template/metadata/annotations",
        true,
    ),
    FieldSpec::of(
        BATCH,
        None,
        "CronJob",
        "spec/jobTemplate/metadata/annotations",
        true,
    ),
    FieldSpec::of(
        BATCH,
        None,
        "CronJob",
        "spec/jobTemplate/spec/template/metadata/annotations",
        true,
    ),
];

/// Set every pair in the map each field spec that selects an object leads to.
fn set_pairs(objects: &mut [Node], specs: &[&FieldSpec], pairs: &[(String, Node)]) {
    for object in objects {
        let selected: Vec<&FieldSpec> = specs
            .iter()
            .copied()
            .filter(|s| s.selects(object))
            .collect();
        for spec in selected {
            let path: Vec<&str> = spec.path.split('/').collect();
            at_path(object, &path, spec.create, &mut |map| {
                for (key, value) in pairs {
                    set_path(map, &[key], value.clone());
                }
            });
        }
    }
}

/// Kustomize's field spec filter: walk `path` from `node`, over each item of a sequence met
/// on the way, creating the maps when `create` (and the path names no sequence), and call
/// `set` on the map it ends at. A null on the way becomes a map when created, else ends the
/// walk, as a scalar does.
fn at_path(node: &mut Node, path: &[&str], create: bool, set: &mut dyn FnMut(&mut Node)) {
    if let Value::Seq(items) = &mut node.value {
        for item in items {
            at_path(item, path, create, set);
        }
        return;
    }
    let Some((first, rest)) = path.split_first() else {
        if matches!(node.value, Value::Map(_)) {
            set(node);
        }
        return;
    };
    let (key, sequence) = match first.strip_suffix("[]") {
        Some(key) => (key, true),
        None => (*first, false),
    };
    let create_here = create && !sequence;
    let site = node.site.clone();
    let Value::Map(entries) = &mut node.value else {
        return;
    };
    let index = match entries.iter().position(|(k, _)| k == key) {
        Some(i) => i,
        None if create_here => {
            entries.push((key.to_string(), Node::new(Value::Null, site)));
            entries.len() - 1
        }
        None => return,
    };
    let child = &mut entries[index].1;
    if child.is_null() && create_here {
        child.value = Value::Map(Vec::new());
    }
    at_path(child, rest, create, set);
}

pub fn pairs(value: &Node, what: &str) -> Result<Vec<(String, Node)>, RepoError> {
    let entries = value.as_map().ok_or_else(|| {
        RepoError::new(
            value.site.clone(),
            format!("`{what}` must be a map of labels"),
        )
    })?;
    entries
        .iter()
        .map(|(k, v)| match &v.value {
            Value::Scalar(text, _) => Ok((k.clone(), Node::str(text, v.site.clone()))),
            Value::Null | Value::Seq(_) | Value::Map(_) => Err(RepoError::new(
                v.site.clone(),
                format!("{what}.{k} must be a string"),
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::repo::kustomize::render;
    use crate::repo::yaml::Node;

    use crate::repo::testing::repo;

    const WORKLOADS: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: whoami
  labels:
    tier: edge
spec:
  replicas: 1
  selector:
    matchLabels:
      app: whoami
  template:
    metadata:
      labels:
        app: whoami
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: batch
spec:
  replicas: 1
  selector:
    matchLabels:
      app: batch
  template:
    metadata:
      labels:
        app: batch
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: whoami
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
      app: whoami
---
apiVersion: v1
kind: Service
metadata:
  name: whoami
spec:
  selector:
    app: whoami
";

    fn find<'a>(objects: &'a [Node], kind: &str, name: &str) -> &'a Node {
        objects
            .iter()
            .find(|o| {
                o.get_str(&["kind"]) == Some(kind) && o.get_str(&["metadata", "name"]) == Some(name)
            })
            .unwrap()
    }

    #[test]
    fn common_labels_reach_metadata_templates_and_selectors_with_the_kustomization_line() {
        let dir = repo(&[
            (
                "app/kustomization.yaml",
                "resources: [workloads.yaml]\ncommonLabels:\n  team: edge\n",
            ),
            ("app/workloads.yaml", WORKLOADS),
        ]);
        let out = render(dir.path(), "app").unwrap();
        let deployment = find(&out.objects, "Deployment", "whoami");
        for path in [
            &["metadata", "labels", "team"][..],
            &["spec", "template", "metadata", "labels", "team"],
            &["spec", "selector", "matchLabels", "team"],
        ] {
            let v = deployment.get(path).unwrap();
            assert_eq!(
                (v.as_str(), v.site.to_string().as_str()),
                (Some("edge"), "app/kustomization.yaml:3"),
                "{path:?}"
            );
        }
        let pdb = find(&out.objects, "PodDisruptionBudget", "whoami");
        assert_eq!(
            pdb.get_str(&["spec", "selector", "matchLabels", "team"]),
            Some("edge")
        );
        let service = find(&out.objects, "Service", "whoami");
        assert_eq!(service.get_str(&["spec", "selector", "team"]), Some("edge"));
    }

    #[test]
    fn labels_without_include_selectors_leave_selectors_and_templates_alone() {
        let dir = repo(&[
            (
                "app/kustomization.yaml",
                "resources: [workloads.yaml]\nlabels:\n  - pairs:\n      team: edge\n  - pairs:\n      owner: platform\n    includeSelectors: true\n",
            ),
            ("app/workloads.yaml", WORKLOADS),
        ]);
        let out = render(dir.path(), "app").unwrap();
        let deployment = find(&out.objects, "Deployment", "whoami");
        assert_eq!(
            deployment.get_str(&["metadata", "labels", "team"]),
            Some("edge")
        );
        assert_eq!(
            deployment.get(&["spec", "selector", "matchLabels", "team"]),
            None
        );
        assert_eq!(
            deployment.get(&["spec", "template", "metadata", "labels", "team"]),
            None
        );
        assert_eq!(
            deployment.get_str(&["spec", "template", "metadata", "labels", "owner"]),
            Some("platform")
        );
        assert_eq!(
            deployment.get_str(&["spec", "selector", "matchLabels", "owner"]),
            Some("platform")
        );
    }

    #[test]
    fn a_patch_with_a_label_selector_target_changes_only_the_objects_it_selects() {
        let dir = repo(&[
            (
                "app/kustomization.yaml",
                "resources: [workloads.yaml]\npatches:\n  - target:\n      kind: Deployment\n      labelSelector: \"tier in (edge, web),!canary\"\n    patch: |\n      - op: replace\n        path: /spec/replicas\n        value: 2\n",
            ),
            ("app/workloads.yaml", WORKLOADS),
        ]);
        let out = render(dir.path(), "app").unwrap();
        let whoami = find(&out.objects, "Deployment", "whoami")
            .get(&["spec", "replicas"])
            .unwrap();
        assert_eq!(
            (whoami.as_i64(), whoami.site.to_string().as_str()),
            (Some(2), "app/kustomization.yaml:9")
        );
        let batch = find(&out.objects, "Deployment", "batch");
        assert_eq!(batch.get(&["spec", "replicas"]).unwrap().as_i64(), Some(1));
    }

    #[test]
    fn a_malformed_label_selector_is_an_error_naming_the_line_and_one_that_selects_nothing_is_noted()
     {
        let patch = |selector: &str| {
            format!(
                "resources: [workloads.yaml]\npatches:\n  - target:\n      kind: Deployment\n      labelSelector: \"{selector}\"\n    patch: |\n      - op: replace\n        path: /spec/replicas\n        value: 2\n"
            )
        };
        let dir = repo(&[
            ("app/kustomization.yaml", &patch("tier in (edge")),
            ("app/workloads.yaml", WORKLOADS),
        ]);
        let err = render(dir.path(), "app").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("app/kustomization.yaml:5: patch target labelSelector:"),
            "{err}"
        );
        let dir = repo(&[
            ("app/kustomization.yaml", &patch("tier=storage")),
            ("app/workloads.yaml", WORKLOADS),
        ]);
        let out = render(dir.path(), "app").expect("Kustomize applies it to nothing");
        assert!(
            out.notes
                .iter()
                .any(|n| n.contains("which none of the resources is")),
            "{:?}",
            out.notes
        );
        let dir = repo(&[
            (
                "app/kustomization.yaml",
                "resources: [workloads.yaml]\nlabels:\n  - pairs: {team: edge}\n    fields:\n      - path: spec/x\n",
            ),
            ("app/workloads.yaml", WORKLOADS),
        ]);
        let err = render(dir.path(), "app").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("app/kustomization.yaml:4: labels.fields is not evaluated"),
            "{err}"
        );
    }
}
