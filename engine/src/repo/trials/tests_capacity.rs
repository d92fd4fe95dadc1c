//! Gate 5's capacity on the repository: every workload the repository deploys is counted or
//! named, never silently zero.

use crate::repo::flux::HelmRelease;
use crate::repo::site::Site;
use crate::repo::yaml::{Node, parse};
use crate::verdict::Verdict;

use super::chart_requests::{NodeSize, NotCounted, chart_requests};
use super::tests::{copy, fixture, offline, run};
use super::workload_requests::{Amount, NodeLabels, tally_manifests};

const TRIAL: &str = "gate5::production::repo::capacity-headroom";
const LONGHORN: &str = "kubernetes/infrastructure/controllers/longhorn/release.yaml";

fn docs(text: &str) -> Vec<Node> {
    parse("apps/workloads.yaml", text).unwrap()
}

/// `n` declared nodes with only their hostname label.
fn nodes(n: usize) -> Vec<NodeLabels> {
    (1..=n)
        .map(|i| NodeLabels::from([("kubernetes.io/hostname".to_string(), format!("cp-{i}"))]))
        .collect()
}

/// Declared nodes of these CPUs (millicores), labelled `disk=ssd` on the first only.
fn sizes(cpus: &[i128]) -> Vec<NodeSize> {
    cpus.iter()
        .enumerate()
        .map(|(i, &cpu)| NodeSize {
            cpu,
            labels: if i == 0 {
                NodeLabels::from([("disk".to_string(), "ssd".to_string())])
            } else {
                NodeLabels::new()
            },
        })
        .collect()
}

fn release(chart: &str, values: &str) -> HelmRelease {
    HelmRelease {
        namespace: "longhorn-system".into(),
        name: chart.into(),
        chart: Some(chart.into()),
        site: Site::new("release.yaml", 1),
        values: Ok(parse("release.yaml", values).unwrap().remove(0)),
    }
}

fn edit(dir: &std::path::Path, file: &str, from: &str, to: &str) {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{file} has no `{from}`");
    std::fs::write(&path, text.replace(from, to)).unwrap();
}

const WEB: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: apps}
spec:
  replicas: 3
  template:
    spec:
      initContainers:
        - name: migrate
          resources: {requests: {cpu: '2', memory: 64Mi}}
      containers:
        - name: web
          resources: {requests: {cpu: 500m, memory: 256Mi}}
        - name: proxy
          resources: {limits: {cpu: 100m, memory: 64Mi}}
";

#[test]
fn the_adr_007_repository_counts_every_workload_and_its_capacity_passes() {
    let r = run(&fixture("adr-007"), &offline());
    let capacity = &r[TRIAL];
    assert_eq!(capacity.verdict, Verdict::Pass, "{capacity:?}");
    let text = capacity.details();
    for line in [
        "Deployment whoami/whoami: 10m CPU, 16Mi memory per pod × kubernetes/apps/production/kustomization.yaml:12: spec.replicas: 2",
        "instance-manager: 12% of the CPU of each node, one per declared node, 3: 2.88 in all",
        "kubernetes/infrastructure/controllers/longhorn/release.yaml:20: defaultSettings.guaranteedInstanceManagerCPU: 12",
        "longhorn-manager: 100m CPU, 256Mi memory per pod × one per declared node, 3",
        "csi-attacher: requests nothing: longhorn-manager creates it without requests",
    ] {
        assert!(text.contains(line), "no `{line}` in\n{text}");
    }
}

#[test]
fn a_chart_workload_left_to_the_charts_defaults_is_named_and_the_capacity_is_a_skip() {
    let dir = copy("adr-007");
    edit(
        dir.path(),
        LONGHORN,
        "    longhornDriver:\n      resources:\n        requests:\n          cpu: 10m\n          memory: 32Mi\n",
        "",
    );
    let r = run(dir.path(), &offline());
    let capacity = &r[TRIAL];
    assert_eq!(capacity.verdict, Verdict::Skip, "{capacity:?}");
    assert!(
        capacity.details().contains(
            "HelmRelease longhorn-system/longhorn (longhorn): requests unknown, not counted: longhornDriver.resources.requests.cpu is not set (the chart's default decides)"
        ),
        "{capacity:?}"
    );
    // Too much is too much, whatever is not counted.
    edit(
        dir.path(),
        "kubernetes/infrastructure/controllers/traefik/release.yaml",
        "        cpu: 100m\n",
        "        cpu: \"10\"\n",
    );
    let r = run(dir.path(), &offline());
    assert_eq!(r[TRIAL].verdict, Verdict::Fail, "{:?}", r[TRIAL]);
}

#[test]
fn a_malformed_request_in_a_charts_values_is_an_error_at_its_line() {
    let dir = copy("adr-007");
    edit(dir.path(), LONGHORN, "cpu: 100m\n", "cpu: lots\n");
    let r = run(dir.path(), &offline());
    let capacity = &r[TRIAL];
    assert_eq!(capacity.verdict, Verdict::Error, "{capacity:?}");
    assert!(
        capacity.summary.contains(&format!(
            "{LONGHORN}:34: longhornManager.resources.requests.cpu"
        )),
        "{capacity:?}"
    );
}

#[test]
fn a_pod_requests_the_larger_of_its_containers_sum_and_its_largest_init_container() {
    let tally = tally_manifests(&docs(WEB), &nodes(3)).unwrap();
    // Containers: 500m + 100m (the proxy's limit stands in) = 600m < the init's 2 CPU;
    // memory: 256Mi + 64Mi = 320Mi > the init's 64Mi.
    assert_eq!(
        tally.total,
        Amount {
            cpu: 3 * 2000,
            memory: 3 * 320 * 1024 * 1024
        }
    );
    assert!(
        tally.unknown.is_empty() && tally.zero.is_empty(),
        "{tally:?}"
    );
}

/// A workload `ops/agent` of `kind` whose one container asks for nothing.
fn requestless_agent(kind: &str) -> String {
    format!(
        "kind: {kind}\nmetadata: {{name: agent, namespace: ops}}\nspec:\n  template:\n    spec:\n      containers:\n        - name: agent\n"
    )
}

#[test]
fn a_container_without_requests_is_counted_as_zero_and_named() {
    let tally = tally_manifests(&docs(&requestless_agent("DaemonSet")), &nodes(3)).unwrap();
    assert_eq!(tally.total, Amount::default());
    assert_eq!(tally.counted.len(), 1, "{tally:?}");
    assert!(
        tally.zero[0].contains("DaemonSet ops/agent container agent requests no cpu: counted as 0"),
        "{tally:?}"
    );
}

#[test]
fn a_limit_range_in_the_namespace_makes_a_container_without_requests_unknown() {
    let text = format!(
        "kind: LimitRange\nmetadata: {{name: defaults, namespace: ops}}\n---\n{}",
        requestless_agent("Deployment")
    );
    let tally = tally_manifests(&docs(&text), &nodes(3)).unwrap();
    assert!(tally.counted.is_empty(), "{tally:?}");
    assert!(
        tally.unknown[0].contains("Deployment ops/agent: requests unknown, not counted")
            && tally.unknown[0].contains("the LimitRange at apps/workloads.yaml:1"),
        "{tally:?}"
    );
}

#[test]
fn a_daemon_set_counts_once_per_declared_node_its_selector_admits_and_a_job_is_named_not_counted() {
    let text = "\
kind: DaemonSet
metadata: {name: agent}
spec:
  template:
    spec:
      containers:
        - {name: a, resources: {requests: {cpu: 100m, memory: 10Mi}}}
---
kind: Job
metadata: {name: once}
spec: {}
";
    let tally = tally_manifests(&docs(text), &nodes(4)).unwrap();
    assert_eq!(tally.total.cpu, 400);
    // A nodeSelector admits only the nodes that carry its labels.
    let selective = text.replace(
        "    spec:\n      containers:",
        "    spec:\n      nodeSelector: {disk: ssd}\n      containers:",
    );
    let mut four = nodes(4);
    four[1].insert("disk".into(), "ssd".into());
    let tally = tally_manifests(&docs(&selective), &four).unwrap();
    assert_eq!(tally.total.cpu, 100, "{tally:?}");
    assert!(
        tally.counted[0].contains("one per declared node its nodeSelector admits, 1 of 4 (apps/workloads.yaml:6: nodeSelector: {disk: ssd})"),
        "{tally:?}"
    );
    assert!(
        tally.transient[0].contains("Job once: runs to completion, not counted"),
        "{tally:?}"
    );
}

#[test]
fn malformed_replicas_or_quantities_in_a_manifest_are_errors_at_their_line() {
    let bad_replicas = WEB.replace("replicas: 3", "replicas: three");
    let err = tally_manifests(&docs(&bad_replicas), &nodes(3))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "apps/workloads.yaml:5: spec.replicas: three is not a count"
    );
    let bad_cpu = WEB.replace("cpu: 500m", "cpu: half");
    let err = tally_manifests(&docs(&bad_cpu), &nodes(3))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("apps/workloads.yaml:13: resources.requests.cpu:"),
        "{err}"
    );
}

#[test]
fn longhorns_per_engine_cpu_share_counts_the_v1_engine_and_a_v2_engine_is_unknown() {
    let values = "\
defaultSettings:
  guaranteedInstanceManagerCPU: '{\"v1\":\"20\",\"v2\":\"20\"}'
longhornManager: {resources: {requests: {cpu: 0, memory: 0}}}
longhornDriver: {resources: {requests: {cpu: 0, memory: 0}}}
longhornUI: {replicas: 0, resources: {requests: {cpu: 0, memory: 0}}}
";
    let counted = chart_requests(&release("longhorn", values), &sizes(&[4000, 8000])).unwrap();
    assert_eq!(counted.amount.cpu, 800 + 1600);
    let v2 = values.replace(
        "defaultSettings:\n",
        "defaultSettings:\n  v2DataEngine: true\n",
    );
    match chart_requests(&release("longhorn", &v2), &sizes(&[4000])) {
        Err(NotCounted::Unknown(why)) => assert!(why.contains("v2DataEngine is true"), "{why}"),
        other => panic!("{:?}", other.map(|c| c.evidence)),
    }
}

#[test]
fn cert_manager_counts_each_workload_its_values_size_and_skips_one_they_turn_off() {
    let values = "\
replicaCount: 2
resources: {requests: {cpu: 10m, memory: 32Mi}}
webhook:
  replicaCount: 3
  resources: {requests: {cpu: 10m, memory: 16Mi}}
cainjector:
  enabled: false
";
    let counted = chart_requests(&release("cert-manager", values), &sizes(&[4000])).unwrap();
    assert_eq!(
        counted.amount,
        Amount {
            cpu: 2 * 10 + 3 * 10,
            memory: (2 * 32 + 3 * 16) * 1024 * 1024
        }
    );
    assert!(
        counted.evidence.contains(
            &"cert-manager-cainjector: not deployed: release.yaml:7: cainjector.enabled: false"
                .to_string()
        ),
        "{:?}",
        counted.evidence
    );
    // Left on, the CA injector's requests are the chart's defaults: unknown.
    let on = values.replace("enabled: false", "enabled: true");
    match chart_requests(&release("cert-manager", &on), &sizes(&[4000])) {
        Err(NotCounted::Unknown(why)) => {
            assert_eq!(
                why,
                "cainjector.replicaCount is not set (the chart's default decides)"
            )
        }
        other => panic!("{:?}", other.map(|c| c.evidence)),
    }
}

#[test]
fn longhorns_manager_and_instance_managers_count_on_the_nodes_its_selector_admits() {
    let values = "\
defaultSettings:
  guaranteedInstanceManagerCPU: 10
longhornManager:
  nodeSelector: {disk: ssd}
  resources: {requests: {cpu: 100m, memory: 0}}
longhornDriver: {resources: {requests: {cpu: 0, memory: 0}}}
longhornUI: {replicas: 0, resources: {requests: {cpu: 0, memory: 0}}}
";
    let counted = chart_requests(&release("longhorn", values), &sizes(&[4000, 8000])).unwrap();
    // One manager (100m) and one instance manager (10% of 4 CPUs) on the ssd node only.
    assert_eq!(counted.amount.cpu, 100 + 400, "{:?}", counted.evidence);
    assert!(
        counted.evidence.iter().any(|l| l.contains(
            "one per declared node release.yaml:4: longhornManager.nodeSelector: {disk: ssd} admits, 1 of 2"
        )),
        "{:?}",
        counted.evidence
    );
}

#[test]
fn a_chart_gates_does_not_know_is_unknown_never_zero() {
    match chart_requests(
        &release("cilium", "operator: {replicas: 2}\n"),
        &sizes(&[4000]),
    ) {
        Err(NotCounted::Unknown(why)) => {
            assert!(
                why.contains("gates does not know the chart's workloads"),
                "{why}"
            )
        }
        other => panic!("{:?}", other.map(|c| c.evidence)),
    }
}
