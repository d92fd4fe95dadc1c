//! The CI examples against the GitHub workflow and GitLab CI schemas check-jsonschema vendors.

use super::*;

/// check-jsonschema (in the test venv) against the GitHub workflow and GitLab CI schemas it
/// vendors.
fn assert_schema_valid(schema: &str, file: &str) {
    let out = bounded(
        {
            let mut cmd = Command::new(python());
            cmd.args(["-m", "check_jsonschema", "--builtin-schema", schema])
                .arg(root().join("examples/ci").join(file));
            cmd
        },
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "{file} against {schema}:\n{}{}",
        stdout(&out),
        stderr(&out)
    );
}

fn example(name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(root().join("examples/ci").join(name)).unwrap();
    gates_core::yaml::from_str(&text).unwrap()
}

#[test]
fn the_github_workflow_validates_publishes_a_test_report_and_keeps_secrets_out_of_scripts() {
    assert_schema_valid(
        "vendor.github-workflows",
        "github-actions-nightly-chaos.yml",
    );
    let workflow = example("github-actions-nightly-chaos.yml");
    let permissions = workflow["permissions"]
        .as_object()
        .expect("top-level permissions");
    for (scope, level) in permissions {
        let (scope, level) = (scope.as_str(), level.as_str().unwrap());
        assert!(
            level == "read" || (scope == "checks" && level == "write"),
            "{scope}: {level} is more than the workflow needs"
        );
    }
    let steps = workflow["jobs"]["chaos"]["steps"].as_array().unwrap();
    let uses = |prefix: &str| {
        steps
            .iter()
            .position(|s| s["uses"].as_str().is_some_and(|u| u.starts_with(prefix)))
    };
    assert_eq!(
        steps[uses("actions/checkout").unwrap()]["with"]["persist-credentials"].as_bool(),
        Some(false)
    );
    assert!(uses("actions/cache").is_some(), "the build is cached");
    let report = &steps[uses("mikepenz/action-junit-report").expect("a JUnit test report")];
    assert_eq!(report["if"].as_str(), Some("always()"));
    assert!(
        report["with"]["report_paths"]
            .as_str()
            .unwrap()
            .contains(".xml")
    );
    let upload = &steps[uses("actions/upload-artifact").unwrap()];
    assert!(
        upload["with"]["path"]
            .as_str()
            .unwrap()
            .contains("reports/*.html")
    );
    for step in steps {
        let run = step["run"].as_str().unwrap_or_default();
        assert!(
            !run.contains("${{"),
            "an expression pasted into a script: {run}"
        );
    }
    let cleanup = steps
        .iter()
        .rposition(|s| {
            s["run"]
                .as_str()
                .is_some_and(|r| r.contains("rm -rf .secrets"))
        })
        .expect("a step removing the credential files");
    assert_eq!(steps[cleanup]["if"].as_str(), Some("always()"));
    let last_gates = steps
        .iter()
        .rposition(|s| s["run"].as_str().is_some_and(|r| r.contains("gates ")))
        .unwrap();
    assert!(
        cleanup > last_gates,
        "credentials removed after the last gates step"
    );
}

#[test]
fn the_gitlab_snippet_validates_keeps_the_stages_and_reports_check_and_chaos() {
    assert_schema_valid("vendor.gitlab-ci", "gitlab-ci-nightly-chaos.yml");
    let ci = example("gitlab-ci-nightly-chaos.yml");
    assert!(
        ci.get("stages").is_none(),
        "an include must not replace the project's stages"
    );
    let chaos = &ci["chaos:staging"];
    let junit: Vec<&str> = chaos["artifacts"]["reports"]["junit"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(
        junit.contains(&"reports/check-staging.xml")
            && junit.contains(&"reports/chaos-staging.xml")
    );
    let minutes = |v: &serde_json::Value| -> u64 {
        let text = v.as_str().unwrap().replace(' ', "");
        humantime::parse_duration(&text).unwrap().as_secs() / 60
    };
    let job = minutes(&chaos["timeout"]);
    let script = minutes(&chaos["variables"]["RUNNER_SCRIPT_TIMEOUT"]);
    let after = minutes(&chaos["variables"]["RUNNER_AFTER_SCRIPT_TIMEOUT"]);
    let inner = minutes(&ci["variables"]["GATES_CHAOS_LIMIT"]);
    // A whole-host run waits for the host to boot: an hour at least, and every limit
    // nested so gates, then recover, then after_script each get their turn.
    assert!(
        inner >= 60 && inner < script && script + after <= job,
        "{inner} {script} {after} {job}"
    );
    assert!(
        chaos["after_script"][0]
            .as_str()
            .unwrap()
            .contains("gates recover staging")
    );
    let script_lines: Vec<&str> = chaos["script"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s.as_str())
        .collect();
    let run = script_lines
        .iter()
        .position(|l| l.contains("gates chaos staging"))
        .unwrap();
    assert!(script_lines[run].contains("timeout --signal=TERM"));
    assert!(
        script_lines[run + 1..]
            .iter()
            .any(|l| l.contains("gates recover staging"))
    );
}

#[test]
fn the_pull_request_workflow_validates_uploads_the_sarif_and_then_fails_as_gates_did() {
    let file = "github-actions-pull-request-repo.yml";
    assert_schema_valid("vendor.github-workflows", file);
    let workflow = example(file);
    assert!(workflow["on"].get("pull_request").is_some());
    let job = &workflow["jobs"]["repository-trials"];
    let permissions: Vec<(&str, &str)> = job["permissions"]
        .as_object()
        .expect("job permissions")
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str().unwrap()))
        .collect();
    assert_eq!(
        permissions,
        [("contents", "read"), ("security-events", "write")],
        "what upload-sarif needs, and no more"
    );
    let steps = job["steps"].as_array().unwrap();
    let gates = steps
        .iter()
        .position(|s| {
            s["run"]
                .as_str()
                .is_some_and(|r| r.contains("check staging ::repo::"))
        })
        .expect("a step running the repository trials");
    let run = steps[gates]["run"].as_str().unwrap();
    assert!(run.contains("--repo ."), "{run}");
    let sarif_arg = run
        .split_whitespace()
        .skip_while(|w| *w != "--sarif")
        .nth(1)
        .expect("--sarif FILE");
    // The gates step must not end the job before the upload: it keeps its exit code instead.
    assert!(
        run.contains("set +e") || steps[gates]["continue-on-error"].as_bool() == Some(true),
        "{run}"
    );
    let id = steps[gates]["id"]
        .as_str()
        .expect("the gates step has an id");
    assert!(run.contains("$GITHUB_OUTPUT"), "{run}");

    let upload = steps
        .iter()
        .position(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u == "github/codeql-action/upload-sarif@v3")
        })
        .expect("upload-sarif");
    assert!(upload > gates);
    let with = &steps[upload]["with"];
    // The file gates wrote, from its working directory, is the file upload-sarif reads from
    // the workspace, and the SARIF's repository-relative paths resolve in the fleet checkout.
    let working = steps[gates]["working-directory"].as_str().unwrap_or(".");
    let written = std::path::Path::new("/ws").join(working).join(sarif_arg);
    let read = std::path::Path::new("/ws").join(with["sarif_file"].as_str().unwrap());
    assert_eq!(normalise(&written), normalise(&read));
    assert_eq!(with["checkout_path"].as_str(), Some(working));
    assert!(
        steps[upload]["if"]
            .as_str()
            .is_some_and(|c| c.contains("always()")),
        "the findings are uploaded when the gates fail"
    );

    let last = steps.last().unwrap();
    assert!(last["if"].as_str().is_some_and(|c| c.contains("always()")));
    let exit_code = format!("steps.{id}.outputs.");
    assert!(
        last["env"]
            .as_object()
            .unwrap()
            .values()
            .any(|v| v.as_str().is_some_and(|v| v.contains(&exit_code))),
        "the last step fails the job with the gates step's exit code"
    );
    assert!(last["run"].as_str().unwrap().contains("exit \""));
    for step in steps {
        let run = step["run"].as_str().unwrap_or_default();
        assert!(
            !run.contains("${{"),
            "an expression pasted into a script: {run}"
        );
    }
}

/// `/ws/fleet/../gates.sarif` as `/ws/gates.sarif`.
fn normalise(path: &std::path::Path) -> std::path::PathBuf {
    let mut out = std::path::PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}
