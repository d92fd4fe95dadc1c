//! The Helm chart (`deploy/helm/gates`), judged by the real Helm CLI built from helm.sh/helm/v4
//! (`tools/helm/build.sh`): it lints, renders a CronJob that runs `gates check ENV` as a
//! service account bound to exactly the shipped read-only role, mounts a configuration gates
//! itself validates, and refuses to render without what it needs, naming it. The rendered
//! manifests are applied with server-side dry-run to a real kube-apiserver in
//! `real_kube_in_cluster.rs`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::*;

/// The Helm CLI: `GATES_HELM_BIN` (a directory), else `target/helm-bin/<version>/helm`.
/// `None` (the tests end early) when neither is built, unless `GATES_REQUIRE_HELM` is set.
pub fn helm() -> Option<PathBuf> {
    let version = std::fs::read_to_string(root().join("tools/helm/VERSION")).unwrap();
    let dir = std::env::var_os("GATES_HELM_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/helm-bin").join(version.trim()));
    let bin = dir.join("helm");
    if bin.is_file() {
        return Some(bin);
    }
    assert!(
        std::env::var_os("GATES_REQUIRE_HELM").is_none(),
        "GATES_REQUIRE_HELM is set but {} is missing: run tools/helm/build.sh",
        bin.display()
    );
    None
}

/// The chart's values for the repository's staging environment and ADR 007's gate files.
pub fn staging_values() -> Vec<String> {
    let mut args: Vec<String> = [
        "--set",
        "image.repository=registry.example.internal/platform/gates",
        "--set",
        "image.tag=0.1.0",
        "--set",
        "environment=staging",
    ]
    .map(String::from)
    .to_vec();
    for env in ["staging", "production"] {
        args.push("--set-file".into());
        args.push(format!(
            "environmentFiles.{env}={}",
            root()
                .join(format!("gates/environments/{env}.yaml"))
                .display()
        ));
    }
    for file in gate_files() {
        args.push("--set-file".into());
        args.push(format!(
            "gateFiles.adr-007/{}={}",
            file.file_name()
                .unwrap()
                .to_string_lossy()
                .replace('.', "\\."),
            file.display()
        ));
    }
    args
}

fn gate_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("gates/adr-007"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

fn run(helm: &Path, args: &[&str], values: &[String]) -> Output {
    Command::new(helm)
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("gates-helm-cache"),
        )
        .env(
            "HELM_CONFIG_HOME",
            std::env::temp_dir().join("gates-helm-config"),
        )
        .env(
            "HELM_DATA_HOME",
            std::env::temp_dir().join("gates-helm-data"),
        )
        .args(args)
        .arg(root().join("deploy/helm/gates"))
        .args(values)
        .output()
        .unwrap()
}

/// `helm template` with `values`, its documents parsed.
pub fn template(helm: &Path, values: &[String]) -> Vec<Value> {
    let out = run(helm, &["template", "t", "--namespace", "default"], values);
    assert!(out.status.success(), "{}", stderr(&out));
    gates_core::yaml::documents(&stdout(&out)).unwrap()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn shipped_rules(file: &str) -> Value {
    let text = std::fs::read_to_string(root().join("deploy/rbac").join(file)).unwrap();
    let role: Value = gates_core::yaml::from_str(&text).unwrap();
    role["rules"].clone()
}

#[test]
fn the_chart_lints_and_renders_a_nightly_check_bound_to_the_shipped_read_only_role() {
    let Some(helm) = helm() else { return };
    let values = staging_values();
    let lint = run(&helm, &["lint", "--strict"], &values);
    assert!(
        lint.status.success(),
        "{}\n{}",
        stdout(&lint),
        stderr(&lint)
    );
    let docs = template(&helm, &values);
    let kinds: std::collections::BTreeSet<&str> =
        docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "CronJob",
            "ServiceAccount"
        ]
    );
    // Exactly the read-only role, and no PolicyReport writer unless asked for.
    let roles = of_kind(&docs, "ClusterRole");
    assert_eq!(roles.len(), 1);
    assert_eq!(roles[0]["rules"], shipped_rules("gates-reader.yaml"));
    let job = of_kind(&docs, "CronJob")[0];
    let pod = &job["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    let args: Vec<&str> = pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        &args[..6],
        [
            "--config",
            "/etc/gates",
            "check",
            "staging",
            "--reports",
            "/reports"
        ]
    );
    assert!(!args.contains(&"--policy-report"));
    assert_eq!(
        pod["serviceAccountName"],
        of_kind(&docs, "ServiceAccount")[0]["metadata"]["name"]
    );
    assert_eq!(job["spec"]["jobTemplate"]["spec"]["backoffLimit"], 0);

    let with_reports = [
        values.clone(),
        vec!["--set".into(), "policyReport.enabled=true".into()],
    ]
    .concat();
    let docs = template(&helm, &with_reports);
    let roles = of_kind(&docs, "ClusterRole");
    assert_eq!(roles.len(), 2);
    assert_eq!(
        roles[1]["rules"],
        shipped_rules("gates-policy-reports.yaml")
    );
    let job = of_kind(&docs, "CronJob")[0];
    let args = &job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        args.as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--policy-report")
    );
}

#[test]
fn the_mounted_configuration_is_one_gates_validates() {
    let Some(helm) = helm() else { return };
    let docs = template(&helm, &staging_values());
    let config = of_kind(&docs, "ConfigMap")[0];
    let job = of_kind(&docs, "CronJob")[0];
    let volumes = &job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"];
    let items = volumes
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "config")
        .unwrap()["configMap"]["items"]
        .as_array()
        .unwrap();
    // The directory the kubelet makes of the ConfigMap at /etc/gates.
    let dir = tempfile::tempdir().unwrap();
    for item in items {
        let path = dir.path().join(item["path"].as_str().unwrap());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text = config["data"][item["key"].as_str().unwrap()]
            .as_str()
            .unwrap();
        std::fs::write(path, text).unwrap();
    }
    for file in gate_files() {
        let mounted = dir.path().join("adr-007").join(file.file_name().unwrap());
        assert_eq!(
            std::fs::read_to_string(mounted).unwrap(),
            std::fs::read_to_string(&file).unwrap()
        );
    }
    let reports = tempfile::tempdir().unwrap();
    let out = gates(reports.path())
        .arg("--config")
        .arg(dir.path())
        .arg("validate")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
}

#[test]
fn the_chart_refuses_to_render_without_what_it_needs_naming_it() {
    let Some(helm) = helm() else { return };
    let values = staging_values();
    // The values come in pairs (`--set K=V`, `--set-file K=FILE`): leave out the pairs of `key`.
    let without = |key: &str| -> Vec<String> {
        values
            .chunks(2)
            .filter(|pair| !pair[1].starts_with(key))
            .flatten()
            .cloned()
            .collect()
    };
    for (key, said) in [
        (
            "image.repository=",
            "image.repository is required: gates ships no image",
        ),
        (
            "environmentFiles.staging=",
            "environmentFiles.staging is required",
        ),
        ("gateFiles.", "gateFiles is required"),
    ] {
        let out = run(&helm, &["template", "t"], &without(key));
        assert!(!out.status.success(), "{key}: rendered anyway");
        assert!(stderr(&out).contains(said), "{key}: {}", stderr(&out));
    }
    // A null drops the chart's schedule: refused by name, not rendered as `schedule: ""`
    // (which the API server refuses only at install). A null time zone leaves it out.
    let nulls = |set: &str| [values.clone(), vec!["--set".into(), set.into()]].concat();
    let out = run(&helm, &["template", "t"], &nulls("schedule=null"));
    assert!(!out.status.success(), "rendered without a schedule");
    assert!(
        stderr(&out).contains("schedule is required"),
        "{}",
        stderr(&out)
    );
    let docs = template(&helm, &nulls("timeZone=null"));
    let cronjob = of_kind(&docs, "CronJob")[0];
    assert!(cronjob["spec"].get("timeZone").is_none(), "{cronjob}");
    assert_eq!(cronjob["spec"]["schedule"], "0 3 * * *");
}

#[test]
fn the_chart_refuses_values_of_the_wrong_shape_naming_every_one_at_once() {
    let Some(helm) = helm() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("values.yaml");
    // A typo, a port that is not a number, a duration gates cannot read, a mount without its
    // path and an interval the Prometheus Operator would refuse: each would render and fail
    // only in the pod (or in the operator) without the chart's schema.
    std::fs::write(
        &file,
        "schedul: \"0 4 * * *\"\nwatch:\n  port: ninety\n  staleAfter: soon\n  serviceMonitor:\n    interval: 1 minute\nsecretMounts:\n  - secretName: gates-talosconfig\n",
    )
    .unwrap();
    let values = [
        staging_values(),
        vec!["-f".to_string(), file.display().to_string()],
    ]
    .concat();
    for command in [&["template", "t"][..], &["lint", "--strict"][..]] {
        let out = run(&helm, command, &values);
        assert!(!out.status.success(), "{command:?}: accepted anyway");
        let said = format!("{}{}", stdout(&out), stderr(&out));
        for path in [
            "'/watch/port'",
            "'/watch/staleAfter'",
            "'/watch/serviceMonitor/interval'",
            "'/secretMounts/0': missing property 'mountPath'",
            "'schedul' not allowed",
        ] {
            assert!(
                said.contains(path),
                "{command:?} does not name {path}: {said}"
            );
        }
    }
    // Durations as gates reads them pass.
    let fine = [
        staging_values(),
        [
            "--set",
            "watch.staleAfter=1h 30m",
            "--set",
            "watch.interval=90s",
        ]
        .map(String::from)
        .to_vec(),
    ]
    .concat();
    let out = run(&helm, &["template", "t"], &fine);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn the_chart_adds_a_watch_deployment_its_service_and_a_service_monitor_when_asked() {
    let Some(helm) = helm() else { return };
    // Off by default.
    let docs = template(&helm, &staging_values());
    assert!(of_kind(&docs, "Deployment").is_empty());
    let values = [
        staging_values(),
        [
            "--set",
            "watch.enabled=true",
            "--set",
            "watch.serviceMonitor.enabled=true",
            "--set",
            "watch.serviceMonitor.labels.release=kube-prometheus-stack",
            "--set",
            "watch.staleAfter=5m",
        ]
        .map(String::from)
        .to_vec(),
    ]
    .concat();
    let lint = run(&helm, &["lint", "--strict"], &values);
    assert!(
        lint.status.success(),
        "{}\n{}",
        stdout(&lint),
        stderr(&lint)
    );
    let docs = template(&helm, &values);
    let deployment = of_kind(&docs, "Deployment")[0];
    let pod = &deployment["spec"]["template"];
    let container = &pod["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        args,
        [
            "--config",
            "/etc/gates",
            "watch",
            "staging",
            "--listen",
            "0.0.0.0:9848",
            "--interval",
            "1m",
            "--stale-after",
            "5m",
            "--reports",
            "/reports"
        ]
    );
    // The arguments are ones `gates watch` accepts.
    let reports = tempfile::tempdir().unwrap();
    let help = gates(reports.path())
        .args(["watch", "--help"])
        .output()
        .unwrap();
    for flag in args
        .iter()
        .filter(|a| a.starts_with("--") && **a != "--config")
    {
        assert!(stdout(&help).contains(flag), "{flag}");
    }
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["ports"][0]["containerPort"], 9848);
    assert_eq!(
        pod["spec"]["serviceAccountName"],
        of_kind(&docs, "ServiceAccount")[0]["metadata"]["name"]
    );
    // The same configuration and secrets as the CronJob's pod.
    let job = of_kind(&docs, "CronJob")[0];
    let job_pod = &job["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["spec"]["volumes"], job_pod["volumes"]);
    assert_eq!(
        container["volumeMounts"],
        job_pod["containers"][0]["volumeMounts"]
    );
    // The Service selects the Deployment's pods, and the ServiceMonitor the Service.
    let selector = &deployment["spec"]["selector"]["matchLabels"];
    let service = of_kind(&docs, "Service")[0];
    assert_eq!(&service["spec"]["selector"], selector);
    for (key, value) in selector.as_object().unwrap() {
        assert_eq!(&pod["metadata"]["labels"][key], value, "{key}");
        assert_eq!(&service["metadata"]["labels"][key], value, "{key}");
    }
    let monitor = of_kind(&docs, "ServiceMonitor")[0];
    assert_eq!(&monitor["spec"]["selector"]["matchLabels"], selector);
    assert_eq!(
        monitor["spec"]["endpoints"][0]["port"],
        service["spec"]["ports"][0]["name"]
    );
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
    assert_eq!(
        monitor["metadata"]["labels"]["release"],
        "kube-prometheus-stack"
    );
}

/// The container arguments of the watch Deployment in `docs`.
fn watch_args(docs: &[Value]) -> Vec<String> {
    of_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_watch_writes_the_policy_report_when_the_chart_does_and_its_account_may() {
    let Some(helm) = helm() else { return };
    let watch = [
        staging_values(),
        vec!["--set".into(), "watch.enabled=true".into()],
    ]
    .concat();
    // Off by default: no flag, no role to write with.
    let docs = template(&helm, &watch);
    assert!(!watch_args(&docs).contains(&"--policy-report".to_string()));
    assert_eq!(of_kind(&docs, "ClusterRoleBinding").len(), 1);

    let values = [
        watch,
        vec!["--set".into(), "policyReport.enabled=true".into()],
    ]
    .concat();
    let lint = run(&helm, &["lint", "--strict"], &values);
    assert!(
        lint.status.success(),
        "{}\n{}",
        stdout(&lint),
        stderr(&lint)
    );
    let docs = template(&helm, &values);
    let args = watch_args(&docs);
    assert_eq!(
        args.iter().filter(|a| *a == "--policy-report").count(),
        1,
        "{args:?}"
    );
    // The flag is one `gates watch` accepts.
    let reports = tempfile::tempdir().unwrap();
    let help = gates(reports.path())
        .args(["watch", "--help"])
        .output()
        .unwrap();
    assert!(stdout(&help).contains("--policy-report"));
    // The policy-reports role is bound to the account the watch's pods run as, in the
    // release's namespace (the CronJob's too).
    let deployment = of_kind(&docs, "Deployment")[0];
    let account = &deployment["spec"]["template"]["spec"]["serviceAccountName"];
    let binding = of_kind(&docs, "ClusterRoleBinding")
        .into_iter()
        .find(|b| b["roleRef"]["name"] == "t-gates-policy-reports")
        .unwrap_or_else(|| panic!("no binding of the policy-reports role: {docs:#?}"));
    let role = of_kind(&docs, "ClusterRole")
        .into_iter()
        .find(|r| r["metadata"]["name"] == binding["roleRef"]["name"])
        .expect("the bound role is rendered");
    assert_eq!(role["rules"], shipped_rules("gates-policy-reports.yaml"));
    assert_eq!(
        binding["subjects"],
        serde_json::json!([{"kind": "ServiceAccount", "name": account, "namespace": "default"}])
    );
    let job = of_kind(&docs, "CronJob")[0];
    assert_eq!(
        &job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["serviceAccountName"],
        account
    );
}

/// Values files a user might write wrong, each with constructs Helm and gates must read
/// alike: YAML 1.1's booleans, quoted and plain numbers, a null over a default and a null
/// with none, unknown keys at every depth, each keyword of the schema, lists of the wrong
/// items, and files that fit.
const VALUES_CASES: &[&str] = &[
    "watch:\n  port: ninety\n  enabled: yes\n  interval: null\nschedul: x\n",
    "watch:\n  port: 70000\n  staleAfter: 5\n  enabled: \"yes\"\n  serviceMonitor:\n    interval: 1 minute\n    labels:\n      a: 1\n",
    "secretMounts:\n  - secretName: a\n    mountPath: rel\n    extra: 1\n  - mountPath: /b\n",
    "secretEnv:\n  - name: a\n    secretName: \"\"\n    key: null\n",
    "schedule: \"\"\nfailedJobsHistoryLimit: -1\nsuccessfulJobsHistoryLimit: 1.5\ntimeZone: ~\n",
    "resources:\n  requests:\n    cpu: [1]\n    memory: 64Mi\n  limits:\n    cpu: 0.5\n  other: {}\n",
    "extraArgs: [1, \"a\", on, 0755]\npushgateway: ftp://x\npolicyReport: true\n",
    "image:\n  pullPolicy: Sometimes\ntimeZone: 1.5\nunknownnull: ~\nenvironmentFiles:\n  a: 1\n",
    "serviceAccount:\n  create: off\n  name: 7\nwatch:\n  port: 8080.0\n  staleAfter: 1h 30m\n",
    "watch:\n  port: 1e3\n  resources:\n    requests:\n      memory: 1e3\nglobal:\n  anything: 1\n",
    "watch: ~\nsecretMounts: []\nschedule: '0 4 * * *'\n",
    "policyReport: ~\nwatch:\n  enabled: true\n  serviceMonitor: ~\nglobal: ~\n",
    "serviceAccount:\n  name: ~\n  create: yes\n",
    "",
];

/// Helm's refusals (`- at '/watch/port': got string, want integer`) as (path, message),
/// one per unknown key for `additional properties 'a', 'b' not allowed` (at the key's path).
fn helm_refusals(said: &str) -> std::collections::BTreeSet<(String, String)> {
    let mut out = std::collections::BTreeSet::new();
    for line in said.lines() {
        let Some(rest) = line.trim_start().strip_prefix("- at '") else {
            continue;
        };
        let (path, message) = rest.split_once("': ").expect("Helm's `- at 'P': M`");
        if message == "validation failed" {
            continue;
        }
        match message
            .strip_prefix("additional properties ")
            .and_then(|m| m.strip_suffix(" not allowed"))
        {
            Some(keys) => {
                for key in keys.split(", ") {
                    let key = key.trim_matches('\'');
                    out.insert((
                        format!("{path}/{key}"),
                        format!("additional property '{key}' not allowed"),
                    ));
                }
            }
            None => {
                out.insert((path.to_string(), message.to_string()));
            }
        }
    }
    out
}

/// `gates chart-values`'s lines (`FILE:LINE: a.b[0].c: M`) as (JSON pointer, message); each
/// must name a line.
fn gates_refusals(said: &str, file: &str) -> std::collections::BTreeSet<(String, String)> {
    said.lines()
        .filter(|line| !line.ends_with("fits the chart's schema"))
        .map(|line| {
            let rest = line
                .strip_prefix(&format!("{file}:"))
                .unwrap_or_else(|| panic!("names the file: {line}"));
            let (number, rest) = rest.split_once(": ").expect("a line");
            assert!(number.parse::<usize>().unwrap() > 0, "names a line: {line}");
            let (key, message) = rest.split_once(": ").expect("a key");
            let pointer: String = key
                .replace('[', ".")
                .replace(']', "")
                .split('.')
                .map(|step| format!("/{step}"))
                .collect();
            (pointer, message.to_string())
        })
        .collect()
}

#[test]
fn gates_refuses_the_chart_values_helm_refuses_naming_the_line_helm_cannot() {
    let Some(helm) = helm() else { return };
    let dir = tempfile::tempdir().unwrap();
    for (i, text) in VALUES_CASES.iter().enumerate() {
        let file = dir.path().join(format!("case-{i}.yaml"));
        std::fs::write(&file, text).unwrap();
        let name = file.display().to_string();
        let values = [staging_values(), vec!["-f".to_string(), name.clone()]].concat();
        let out = run(&helm, &["template", "t"], &values);
        let helm_said = format!("{}{}", stdout(&out), stderr(&out));
        let refused = helm_refusals(&helm_said);
        assert_eq!(
            out.status.success(),
            refused.is_empty(),
            "case {i}: Helm failed otherwise than by the schema: {helm_said}"
        );
        let reports = tempfile::tempdir().unwrap();
        let judged = gates(reports.path())
            .args(["chart-values", &name])
            .output()
            .unwrap();
        let gates_said = stdout(&judged);
        assert_eq!(
            gates_refusals(&gates_said, &name),
            refused,
            "case {i}:\n{text}\ngates said:\n{gates_said}\nHelm said:\n{helm_said}"
        );
        assert_eq!(
            judged.status.code(),
            Some(if refused.is_empty() { 0 } else { 2 }),
            "case {i}"
        );
    }
}
