//! Kustomize `commonLabels` and `labels`: the labels are added to every object's metadata and,
//! where asked, to pod templates and selectors, so a PDB or a Service still selects the pods
//! the same Kustomization labelled. Each added label carries the line of the Kustomization
//! entry that set it, since that line is the one that set it last.

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

    /// Add the labels to the objects.
    pub fn apply(&self, objects: &mut [Node]) {
        for object in objects {
            let kind = object.get_str(&["kind"]).unwrap_or_default().to_string();
            let mut paths: Vec<(&[&str], bool)> = vec![(&["metadata", "labels"], true)];
            let workload = matches!(
                kind.as_str(),
                "Deployment" | "ReplicaSet" | "DaemonSet" | "StatefulSet"
            );
            if self.templates && (workload || kind == "Job") {
                paths.push((&["spec", "template", "metadata", "labels"], true));
            }
            if self.templates && kind == "CronJob" {
                paths.push((&["spec", "jobTemplate", "metadata", "labels"], true));
                paths.push((
                    &[
                        "spec",
                        "jobTemplate",
                        "spec",
                        "template",
                        "metadata",
                        "labels",
                    ],
                    true,
                ));
            }
            if self.selectors {
                match kind.as_str() {
                    _ if workload => paths.push((&["spec", "selector", "matchLabels"], true)),
                    "Job" | "PodDisruptionBudget" => {
                        paths.push((&["spec", "selector", "matchLabels"], false))
                    }
                    "Service" | "ReplicationController" => {
                        paths.push((&["spec", "selector"], false))
                    }
                    _ => {}
                }
            }
            for (path, create) in paths {
                if !create && object.get(path).is_none_or(|p| p.as_map().is_none()) {
                    continue;
                }
                for (key, value) in &self.pairs {
                    let mut full: Vec<&str> = path.to_vec();
                    full.push(key);
                    set_path(object, &full, value.clone());
                }
            }
        }
    }
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
