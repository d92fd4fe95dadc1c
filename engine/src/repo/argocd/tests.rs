use super::*;

use crate::repo::flux::{Manifests, render_from};
use crate::repo::testing::repo;

const URL: &str = "https://git.example.org/me/fleet.git";

fn render(files: &[(&str, &str)]) -> Manifests {
    let dir = repo(files);
    render_from(dir.path(), "argo", &[URL.to_string()]).unwrap()
}

fn app(name: &str, source: &str) -> String {
    format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {name}\n  namespace: argocd\nspec:\n  project: default\n  destination:\n    server: https://kubernetes.default.svc\n    namespace: {name}\n  {source}\n"
    )
}

fn names(m: &Manifests, kind: &str) -> Vec<String> {
    m.of_kind(kind)
        .map(|o| {
            format!(
                "{}/{}",
                o.get_str(&["metadata", "namespace"]).unwrap_or("-"),
                o.get_str(&["metadata", "name"]).unwrap_or("?")
            )
        })
        .collect()
}

const DEPLOYMENT: &str =
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n";

#[test]
fn an_application_of_this_repository_renders_its_path_into_the_destination_namespace() {
    let m = render(&[
        (
            "argo/web.yaml",
            &app(
                "web",
                &format!(
                    "source:\n    repoURL: {URL}\n    path: apps/web\n    targetRevision: main"
                ),
            ),
        ),
        ("apps/web/deploy.yaml", DEPLOYMENT),
        // Only the top level of a plain directory, unless directory.recurse.
        (
            "apps/web/deeper/other.yaml",
            &DEPLOYMENT.replace("web", "deeper"),
        ),
    ]);
    assert_eq!(names(&m, "Deployment"), vec!["web/web".to_string()]);
}

#[test]
fn directory_recurse_reads_subdirectories_and_a_namespace_already_set_is_kept() {
    let m = render(&[
        (
            "argo/web.yaml",
            &app(
                "web",
                &format!(
                    "source:\n    repoURL: {URL}\n    path: apps/web\n    directory:\n      recurse: true"
                ),
            ),
        ),
        ("apps/web/deploy.yaml", DEPLOYMENT),
        (
            "apps/web/deeper/other.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: deeper\n  namespace: elsewhere\n",
        ),
    ]);
    let mut got = names(&m, "Deployment");
    got.sort();
    assert_eq!(
        got,
        vec!["elsewhere/deeper".to_string(), "web/web".to_string()]
    );
}

#[test]
fn a_chart_source_is_a_release_with_its_values_in_argo_cds_order_and_their_lines() {
    let m = render(&[
        (
            "argo/cilium.yaml",
            &app(
                "cilium",
                &format!(
                    "sources:\n    - repoURL: https://helm.cilium.io\n      chart: cilium\n      targetRevision: 1.18.0\n      helm:\n        releaseName: cni\n        valueFiles:\n          - $values/values/cilium.yaml\n        values: |\n          operator:\n            replicas: 3\n        valuesObject:\n          operator:\n            podDisruptionBudget:\n              enabled: true\n    - repoURL: {URL}\n      ref: values"
                ),
            ),
        ),
        (
            "values/cilium.yaml",
            "operator:\n  replicas: 1\n  podDisruptionBudget:\n    enabled: false\n",
        ),
    ]);
    assert_eq!(m.helm_releases.len(), 1, "{:?}", m.helm_releases);
    let hr = &m.helm_releases[0];
    assert_eq!(hr.chart.as_deref(), Some("cilium"));
    assert_eq!((hr.namespace.as_str(), hr.name.as_str()), ("cilium", "cni"));
    let values = hr.values.as_ref().unwrap();
    let replicas = values.get(&["operator", "replicas"]).unwrap();
    assert_eq!(replicas.as_i64(), Some(3), "values over valueFiles");
    assert_eq!(replicas.site.file, "argo/cilium.yaml");
    let pdb = values
        .get(&["operator", "podDisruptionBudget", "enabled"])
        .unwrap();
    assert_eq!(pdb.as_bool(), Some(true), "valuesObject over the rest");
}

#[test]
fn a_value_file_in_the_charts_own_repository_makes_the_values_unknown() {
    let m = render(&[(
        "argo/traefik.yaml",
        &app(
            "traefik",
            "source:\n    repoURL: https://traefik.github.io/charts\n    chart: traefik\n    helm:\n      valueFiles: [values-prod.yaml]",
        ),
    )]);
    let err = m.helm_releases[0].values.as_ref().unwrap_err();
    assert!(
        err.to_string()
            .contains("value file `values-prod.yaml` is outside the repository"),
        "{err}"
    );
}

#[test]
fn a_source_in_another_repository_is_noted_and_a_missing_path_sets_the_application_aside() {
    let m = render(&[
        (
            "argo/other.yaml",
            &app(
                "other",
                "source:\n    repoURL: https://git.example.org/someone/else.git\n    path: apps",
            ),
        ),
        (
            "argo/broken.yaml",
            &app(
                "broken",
                &format!("source:\n    repoURL: {URL}\n    path: apps/nowhere"),
            ),
        ),
    ]);
    assert!(
        m.notes
            .iter()
            .any(|n| n.contains("source `https://git.example.org/someone/else.git` skipped")),
        "{:?}",
        m.notes
    );
    assert_eq!(m.unread.len(), 1, "{:?}", m.unread);
    assert!(
        m.unread[0]
            .error
            .to_string()
            .contains("path `apps/nowhere` does not exist")
    );
}

#[test]
fn an_application_set_with_git_directories_creates_one_application_per_directory() {
    let set = format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata:\n  name: apps\n  namespace: argocd\nspec:\n  generators:\n    - git:\n        repoURL: {URL}\n        revision: main\n        directories:\n          - path: apps/*\n          - path: apps/skip\n            exclude: true\n  template:\n    metadata:\n      name: 'app-{{{{ path.basename }}}}'\n    spec:\n      project: default\n      source:\n        repoURL: {URL}\n        path: '{{{{path}}}}'\n      destination:\n        namespace: '{{{{path.basename}}}}'\n"
    );
    let m = render(&[
        ("argo/set.yaml", &set),
        ("apps/a/deploy.yaml", &DEPLOYMENT.replace("web", "a")),
        ("apps/b/deploy.yaml", &DEPLOYMENT.replace("web", "b")),
        ("apps/skip/deploy.yaml", &DEPLOYMENT.replace("web", "skip")),
    ]);
    let mut got = names(&m, "Deployment");
    got.sort();
    assert_eq!(got, vec!["a/a".to_string(), "b/b".to_string()]);
    let mut apps = names(&m, "Application");
    apps.sort();
    assert_eq!(apps, vec!["-/app-a".to_string(), "-/app-b".to_string()]);
}

#[test]
fn a_go_template_set_with_list_elements_substitutes_fields_and_refuses_functions() {
    let set = |name: &str| {
        format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata:\n  name: apps\nspec:\n  goTemplate: true\n  generators:\n    - list:\n        elements:\n          - app: a\n            where: {{dir: apps/a}}\n  template:\n    metadata:\n      name: '{name}'\n    spec:\n      source:\n        repoURL: {URL}\n        path: '{{{{ .where.dir }}}}'\n      destination:\n        namespace: '{{{{ .app }}}}'\n"
        )
    };
    let m = render(&[
        ("argo/set.yaml", &set("{{ .app }}")),
        ("apps/a/deploy.yaml", DEPLOYMENT),
    ]);
    assert_eq!(names(&m, "Deployment"), vec!["a/web".to_string()]);
    let m = render(&[
        ("argo/set.yaml", &set("{{ .app | upper }}")),
        ("apps/a/deploy.yaml", DEPLOYMENT),
    ]);
    assert_eq!(m.unread.len(), 1);
    let err = m.unread[0].error.to_string();
    assert!(err.starts_with("argo/set.yaml:"), "{err}");
    assert!(err.contains("is not evaluated by gates"), "{err}");
}

#[test]
fn go_path_match_globs_within_one_segment() {
    assert!(glob("*", "apps"));
    assert!(glob("a?p[s-t]", "apps"));
    assert!(!glob("a[^p]ps", "apps"));
    assert!(glob_path("apps/*", "apps/web"));
    assert!(!glob_path("apps/*", "apps/web/deeper"));
}

#[test]
fn values_that_do_not_parse_make_only_that_release_unknown() {
    let m = render(&[(
        "argo/metrics.yaml",
        &app(
            "metrics",
            "source:\n    repoURL: https://charts.example.org\n    chart: metrics\n    helm:\n      values: |\n        agent:\n          a: 1\n        agent:\n          b: 2",
        ),
    )]);
    assert!(m.unread.is_empty(), "{:?}", m.unread);
    let err = m.helm_releases[0].values.as_ref().unwrap_err();
    assert!(err.to_string().contains("duplicate key `agent`"), "{err}");
}

#[test]
fn kustomize_name_prefix_and_suffix_of_an_application_replace_the_directorys_own() {
    let m = render(&[
        (
            "argo/web.yaml",
            &app(
                "web",
                &format!(
                    "source:\n    repoURL: {URL}\n    path: apps/web\n    targetRevision: main\n    kustomize:\n      namePrefix: prod-\n      nameSuffix: -b"
                ),
            ),
        ),
        (
            "apps/web/kustomization.yaml",
            "namePrefix: own-\nresources: [deploy.yaml]\n",
        ),
        ("apps/web/deploy.yaml", DEPLOYMENT),
    ]);
    assert_eq!(names(&m, "Deployment"), vec!["web/prod-web-b".to_string()]);
}
