//! The repository trials over the two fixture repositories and broken copies of them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::checks::testing::{node, state, traefik_service};
use crate::config::Config;
use crate::repo::prepare;
use crate::state::State;
use crate::verdict::{Finding, Verdict};

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

pub(super) fn config() -> Config {
    Config::load(&root().join("gates"), &[]).expect("the shipped configuration loads")
}

/// Every trial of `gates check staging --repo REPO`, by name.
pub(super) fn run(repo: &Path, live: &State) -> BTreeMap<String, Finding> {
    run_env(repo, live, "staging")
}

/// Every trial of `gates check ENV --repo REPO`, by name.
pub(super) fn run_env(repo: &Path, live: &State, env: &str) -> BTreeMap<String, Finding> {
    let config = config();
    let env = config.environment(env).unwrap();
    let run = prepare(&config, env, Some(repo))
        .unwrap()
        .expect("a repository");
    let all: Vec<_> = run.trials.iter().collect();
    run.evaluate(&all, &config, env, live)
        .into_iter()
        .map(|r| (r.name, r.finding))
        .collect()
}

/// Every trial of staging checked offline against fixture `name` with the `repo` section
/// `spec` (the shape of a repository whose layout staging's default does not fit).
pub(super) fn run_spec(name: &str, spec: crate::config::RepoSpec) -> BTreeMap<String, Finding> {
    run_spec_at(&fixture(name), spec)
}

/// [`run_spec`] over the repository at `repo` (a changed copy of a fixture).
pub(super) fn run_spec_at(repo: &Path, spec: crate::config::RepoSpec) -> BTreeMap<String, Finding> {
    run_spec_with(repo, spec, |_| {})
}

/// [`run_spec_at`] with staging changed by `edit` first (another host label, say).
pub(super) fn run_spec_with(
    repo: &Path,
    spec: crate::config::RepoSpec,
    edit: impl FnOnce(&mut crate::config::Environment),
) -> BTreeMap<String, Finding> {
    let config = config();
    let mut env = config.environment("staging").unwrap().clone();
    env.repo = Some(spec);
    edit(&mut env);
    let run = prepare(&config, &env, Some(repo))
        .unwrap()
        .expect("a repository");
    let all: Vec<_> = run.trials.iter().collect();
    run.evaluate(&all, &config, &env, &offline())
        .into_iter()
        .map(|r| (r.name, r.finding))
        .collect()
}

pub(super) fn fixture(name: &str) -> PathBuf {
    root().join("fixtures/repo").join(name)
}

pub(super) fn verdict(results: &BTreeMap<String, Finding>, name: &str) -> Verdict {
    results
        .get(name)
        .unwrap_or_else(|| panic!("no trial {name} in {:?}", results.keys()))
        .verdict
}

pub(super) fn details(results: &BTreeMap<String, Finding>, name: &str) -> String {
    results[name].details()
}

/// A copy of a fixture repository that a test may break.
pub(super) fn copy(name: &str) -> tempfile::TempDir {
    fn walk(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.path().is_dir() {
                walk(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    walk(&fixture(name), dir.path());
    dir
}

pub(super) fn offline() -> State {
    State::empty(
        crate::state::Source::Snapshot { files: vec![] },
        chrono::Utc::now(),
    )
}

#[test]
fn staging_today_reproduces_the_adr_implementation_status() {
    let r = run(&fixture("staging-today"), &offline());
    for failing in [
        "gate1::staging::repo::control-plane-nodes",
        "gate1::staging::repo::distinct-hosts",
        "gate1::staging::repo::schedulable-control-plane",
        "gate3::staging::repo::l2-announcement",
        "gate3::production::repo::external-traffic-policy",
        "gate5::production::repo::longhorn-disks",
    ] {
        assert_eq!(
            verdict(&r, failing),
            Verdict::Fail,
            "{failing}: {}",
            details(&r, failing)
        );
    }
    let etp = details(&r, "gate3::production::repo::external-traffic-policy");
    assert!(
        etp.contains("kubernetes/infrastructure/controllers/traefik/release.yaml:78:"),
        "{etp}"
    );
    assert!(etp.contains("in effect for production"), "{etp}");
    let staging_etp = &r["gate3::staging::repo::external-traffic-policy"];
    assert_eq!(staging_etp.verdict, Verdict::Pass);
    assert!(
        staging_etp
            .warnings
            .iter()
            .any(|w| w.contains("release.yaml:78") && w.contains("staging overrides it")),
        "{staging_etp:?}"
    );
    let l2 = details(&r, "gate3::staging::repo::l2-announcement");
    assert!(
        l2.contains("kubernetes/infrastructure/staging/network/ingress-address.yaml:19"),
        "{l2}"
    );
    assert!(l2.contains("leave out talos-test-cp-01"), "{l2}");
    let longhorn = details(&r, "gate5::production::repo::longhorn-disks");
    assert!(
        longhorn
            .contains("terraform/variables_talos.tf:56: var.longhorn_node_roles default: [worker]"),
        "{longhorn}"
    );
    assert!(longhorn.contains("terraform/modules/talos_vms/variables.tf:134: module.talos_vms.var.longhorn_roles default: [worker]"), "{longhorn}");
    let sched = details(&r, "gate1::staging::repo::schedulable-control-plane");
    assert!(sched.contains("Talos defaults to false"), "{sched}");
    // No cluster was read: drift trials say so instead of guessing.
    assert_eq!(
        verdict(&r, "gate3::staging::drift::external-traffic-policy"),
        Verdict::Error
    );
}

#[test]
fn every_repository_trial_passes_on_the_adr_007_repository() {
    let r = run(&fixture("adr-007"), &offline());
    for (name, finding) in r.iter().filter(|(n, _)| n.contains("::repo::")) {
        assert!(
            matches!(finding.verdict, Verdict::Pass | Verdict::Skip),
            "{name}: {}",
            finding.details()
        );
    }
    assert_eq!(
        verdict(&r, "gate2::staging::repo::replicated-controller::traefik"),
        Verdict::Pass
    );
    assert_eq!(verdict(&r, "gate1::staging::repo::vip"), Verdict::Pass);
}

#[test]
fn controllers_the_repository_does_not_deploy_are_skipped_with_the_reason() {
    let r = run(&fixture("adr-007"), &offline());
    let coredns = &r["gate2::staging::repo::replicated-controller::coredns"];
    assert_eq!(coredns.verdict, Verdict::Skip);
    assert!(coredns.summary.contains("k8s-app=kube-dns"), "{coredns:?}");
}

#[test]
fn malformed_terraform_is_an_error_naming_the_file_and_the_manifests_still_count() {
    let dir = copy("staging-today");
    let file = dir.path().join("terraform/variables_talos.tf");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace(
            "variable \"talos_endpoints\" {",
            "variable \"talos_endpoints\" {{",
        ),
    )
    .unwrap();
    let r = run(dir.path(), &offline());
    let cps = &r["gate1::staging::repo::control-plane-nodes"];
    assert_eq!(cps.verdict, Verdict::Error);
    assert!(
        cps.summary.contains("terraform/variables_talos.tf:"),
        "{cps:?}"
    );
    assert_eq!(
        verdict(&r, "gate3::production::repo::external-traffic-policy"),
        Verdict::Fail
    );
}

#[test]
fn values_from_outside_the_repository_make_the_traffic_policy_an_error() {
    let dir = copy("adr-007");
    let file = dir
        .path()
        .join("kubernetes/infrastructure/controllers/traefik/release.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace(
            "  values:\n",
            "  valuesFrom:\n    - kind: Secret\n      name: traefik-extra\n  values:\n",
        ),
    )
    .unwrap();
    let r = run(dir.path(), &offline());
    let etp = &r["gate3::production::repo::external-traffic-policy"];
    assert_eq!(etp.verdict, Verdict::Error, "{etp:?}");
    assert!(
        etp.summary
            .contains("Secret traefik/traefik-extra is not in the repository"),
        "{etp:?}"
    );
}

#[test]
fn an_unset_traffic_policy_is_skipped_because_the_chart_default_decides() {
    let dir = copy("adr-007");
    let file = dir
        .path()
        .join("kubernetes/infrastructure/controllers/traefik/release.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace(
            "        externalTrafficPolicy: Cluster\n",
            "        loadBalancerClass: io.cilium/l2-announcer\n",
        ),
    )
    .unwrap();
    let r = run(dir.path(), &offline());
    let etp = &r["gate3::staging::repo::external-traffic-policy"];
    assert_eq!(etp.verdict, Verdict::Skip, "{etp:?}");
    assert!(etp.summary.contains("chart's default"), "{etp:?}");
}

#[test]
fn a_kustomize_helm_chart_is_judged_as_a_release_of_its_chart_at_the_kustomizations_lines() {
    let dir = copy("adr-007");
    let file = dir
        .path()
        .join("kubernetes/infrastructure/staging/kustomization.yaml");
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("helmCharts:\n  - name: traefik\n    releaseName: edge\n    repo: https://charts.example.org\n    valuesInline:\n      service:\n        spec:\n          externalTrafficPolicy: Local\n");
    std::fs::write(&file, text).unwrap();
    let r = run(dir.path(), &offline());
    let etp = &r["gate3::staging::repo::external-traffic-policy"];
    assert_eq!(etp.verdict, Verdict::Fail, "{etp:?}");
    assert!(
        etp.details()
            .contains("kubernetes/infrastructure/staging/kustomization.yaml:13"),
        "{etp:?}"
    );
    // The L2 trial reaches its verdict: the chart is a release, not an unread part.
    assert_eq!(
        verdict(&r, "gate3::staging::repo::l2-announcement"),
        Verdict::Pass
    );
    // Production's manifests do not use it.
    assert_eq!(
        verdict(&r, "gate3::production::repo::external-traffic-policy"),
        verdict(
            &run(copy("adr-007").path(), &offline()),
            "gate3::production::repo::external-traffic-policy"
        ),
    );
}

#[test]
fn a_remote_base_is_an_error_naming_the_kustomization_for_the_trials_that_read_its_kinds() {
    let dir = copy("adr-007");
    let file = dir
        .path()
        .join("kubernetes/infrastructure/staging/kustomization.yaml");
    let text = std::fs::read_to_string(&file).unwrap().replacen(
        "resources:\n",
        "resources:\n  - https://github.com/example/fleet//base?ref=v1\n",
        1,
    );
    std::fs::write(&file, text).unwrap();
    let r = run(dir.path(), &offline());
    let l2 = &r["gate3::staging::repo::l2-announcement"];
    assert_eq!(l2.verdict, Verdict::Error, "{l2:?}");
    assert!(
        l2.summary
            .contains("kubernetes/infrastructure/staging/kustomization.yaml:"),
        "{l2:?}"
    );
    assert_eq!(
        verdict(&r, "gate3::production::repo::l2-announcement"),
        Verdict::Pass
    );
}

#[test]
fn drift_names_the_live_and_the_declared_side() {
    let live = state()
        .nodes([node("talos-test-cp-01")
            .label("node-role.kubernetes.io/control-plane", "")
            .build()])
        .services([traefik_service().etp("Local").build()])
        .build();
    let r = run(&fixture("staging-today"), &live);
    let etp = &r["gate3::staging::drift::external-traffic-policy"];
    assert_eq!(etp.verdict, Verdict::Fail, "{etp:?}");
    assert_eq!(etp.summary, "live Local, declared Cluster");
    assert!(
        etp.details().contains(
            "declared: Cluster at kubernetes/infrastructure/staging/traefik-values.yaml:12"
        ),
        "{}",
        etp.details()
    );
    assert_eq!(
        verdict(&r, "gate1::staging::drift::control-plane-nodes"),
        Verdict::Pass
    );
    let r = run(&fixture("adr-007"), &live);
    let cps = &r["gate1::staging::drift::control-plane-nodes"];
    assert_eq!(
        (cps.verdict, cps.summary.as_str()),
        (Verdict::Fail, "live 1 control plane(s), declared 3")
    );
}

#[test]
fn a_control_plane_taint_keeps_longhorn_off_unless_the_chart_tolerates_it() {
    let dir = copy("adr-007");
    let file = dir.path().join("talos/production/controlplane.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace(
            "allowSchedulingOnControlPlanes: true",
            "allowSchedulingOnControlPlanes: false",
        ),
    )
    .unwrap();
    let r = run(dir.path(), &offline());
    let longhorn = &r["gate5::production::repo::longhorn-disks"];
    assert_eq!(longhorn.verdict, Verdict::Fail, "{longhorn:?}");
    assert!(
        longhorn.details().contains("talos/production/controlplane.yaml:3: cluster.allowSchedulingOnControlPlanes: false keeps Longhorn off talos-prod-cp-01"),
        "{}",
        longhorn.details()
    );
}

#[test]
fn a_typo_in_the_repo_section_is_a_configuration_error_with_the_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("environments")).unwrap();
    std::fs::write(
        dir.path().join("environments/staging.yaml"),
        "kube: {context: x}\nrepo:\n  path: ../fleet\n  terrafrom: terraform\n",
    )
    .unwrap();
    let err = Config::load(dir.path(), &[]).unwrap_err().to_string();
    assert!(
        err.contains("staging.yaml:4:3: unknown key `terrafrom`"),
        "{err}"
    );
    assert!(err.contains("did you mean `terraform`?"), "{err}");
}

#[test]
fn every_repository_and_drift_kind_of_the_shipped_gates_is_described() {
    let config = config();
    let env = config.environment("staging").unwrap();
    let declared = ["staging".to_string(), "production".to_string()];
    let trials = super::trials(
        &config.gates,
        &config.environments,
        env,
        &declared,
        "staging",
    );
    assert!(trials.iter().any(|t| t.drift) && trials.iter().any(|t| !t.drift));
    for trial in &trials {
        let (_, name) = trial.kind().split_once("::").unwrap();
        assert!(super::about(name).is_some(), "{name} has no description");
    }
    assert_eq!(super::about("etcd-members"), None, "a live-only check");
}
