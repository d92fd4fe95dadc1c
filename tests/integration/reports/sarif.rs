//! `gates check ENV --repo PATH --sarif FILE`: the repository and drift trials as SARIF
//! 2.1.0, validated against the OASIS schema (`tests/schemas/sarif-schema-2.1.0.json`) with
//! check-jsonschema from the test venv.

use super::*;

/// `gates check staging FILTER --repo fixtures/repo/staging-today --sarif FILE EXTRA...`:
/// the exit code and the SARIF log, after checking it against the schema.
fn sarif_of(filter: &str, extra: &[&str]) -> (Option<i32>, Value) {
    let reports = tempfile::tempdir().unwrap();
    let file = reports.path().join("gates.sarif");
    let out = gates_with_config(reports.path())
        .args(["check", "staging", filter, "--reports"])
        .arg(reports.path())
        .arg("--repo")
        .arg(root().join("fixtures/repo/staging-today"))
        .arg("--sarif")
        .arg(&file)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        stderr(&out).contains(&format!("report: {}", file.display())),
        "{}",
        stderr(&out)
    );
    assert_schema_valid(&file);
    let text = std::fs::read_to_string(&file).unwrap();
    (out.status.code(), serde_json::from_str(&text).unwrap())
}

/// check-jsonschema against the vendored schema. The schema's `language` pattern is not an
/// ECMAScript regex (a stray `]`), so its patterns are read as Python's `re` reads them.
fn assert_schema_valid(file: &Path) {
    let out = bounded(
        {
            let mut cmd = Command::new(python());
            cmd.args(["-m", "check_jsonschema", "--format-regex", "python"])
                .arg("--schemafile")
                .arg(root().join("tests/schemas/sarif-schema-2.1.0.json"))
                .arg(file);
            cmd
        },
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "{} against the SARIF 2.1.0 schema:\n{}{}",
        file.display(),
        stdout(&out),
        stderr(&out)
    );
}

fn results(log: &Value) -> &Vec<Value> {
    log["runs"][0]["results"].as_array().unwrap()
}

fn result_of<'a>(log: &'a Value, trial: &str) -> &'a Value {
    results(log)
        .iter()
        .find(|r| r["properties"]["trial"] == trial)
        .unwrap_or_else(|| panic!("no result for {trial} in {log:#}"))
}

/// The (uri, startLine) of each location of a result; line 0 for a whole-file one.
fn locations(result: &Value) -> Vec<(String, u64)> {
    result["locations"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|l| {
                    let physical = &l["physicalLocation"];
                    assert_eq!(physical["artifactLocation"]["uriBaseId"], "SRCROOT");
                    (
                        physical["artifactLocation"]["uri"]
                            .as_str()
                            .unwrap()
                            .to_string(),
                        physical["region"]["startLine"].as_u64().unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_staging_today_repository_trials_validate_as_sarif_with_the_failures_at_their_lines() {
    let (code, log) = sarif_of("::repo::", &[]);
    assert_eq!(code, Some(1), "the gates fail as without --sarif");
    assert_eq!(log["version"], "2.1.0");
    let runs = log["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    let driver = &runs[0]["tool"]["driver"];
    assert_eq!(driver["name"], "gates");
    assert_eq!(driver["version"], env!("CARGO_PKG_VERSION"));

    // The failures the ADR cites, each at the file and line it breaks.
    for (trial, rule, at) in [
        (
            "gate3::production::repo::external-traffic-policy",
            "external-traffic-policy",
            (
                "kubernetes/infrastructure/controllers/traefik/release.yaml",
                78,
            ),
        ),
        (
            "gate3::staging::repo::l2-announcement",
            "l2-announcement",
            (
                "kubernetes/infrastructure/staging/network/ingress-address.yaml",
                19,
            ),
        ),
        (
            "gate5::production::repo::longhorn-disks",
            "longhorn-disks",
            ("terraform/modules/talos_vms/variables.tf", 134),
        ),
        (
            "gate5::production::repo::longhorn-disks",
            "longhorn-disks",
            ("terraform/variables_talos.tf", 56),
        ),
        (
            "gate2::staging::repo::replicated-controller::traefik",
            "replicated-controller",
            (
                "kubernetes/infrastructure/controllers/traefik/release.yaml",
                28,
            ),
        ),
        (
            "gate1::staging::repo::control-plane-nodes",
            "control-plane-nodes",
            ("terraform/environments/staging.tfvars", 6),
        ),
    ] {
        let result = result_of(&log, trial);
        assert_eq!(result["ruleId"], rule, "{result:#}");
        assert_eq!(result["level"], "error", "a fail is an error: {result:#}");
        let rule_index = result["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(driver["rules"][rule_index]["id"], rule);
        let found = locations(result);
        assert!(
            found.contains(&(at.0.to_string(), at.1)),
            "{trial}: no location at {}:{} in {found:?}",
            at.0,
            at.1
        );
        let mut unique = found.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), found.len(), "{trial}: duplicated locations");
    }
    // A failure whose evidence names no file still is a result, with no locations.
    let untold = result_of(&log, "gate1::staging::repo::schedulable-control-plane");
    assert_eq!(untold["level"], "error");
    assert!(untold.get("locations").is_none(), "{untold:#}");

    // Passes and skips are no results, and nothing live is in the log.
    let names: Vec<&str> = results(&log)
        .iter()
        .map(|r| r["properties"]["trial"].as_str().unwrap())
        .collect();
    for absent in [
        "gate3::staging::repo::external-traffic-policy",
        "gate1::staging::repo::vip",
        "gate5::production::repo::distinct-hosts",
        "gate2::staging::repo::replicated-controller::coredns",
        "gate5::production::repo::capacity-headroom",
    ] {
        assert!(!names.contains(&absent), "{absent} is a result: {names:?}");
    }
    assert!(names.iter().all(|n| n.contains("::repo::")), "{names:?}");
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "results are sorted by trial name");
    // Every failing or erroring repository trial of staging-today, and only those.
    assert_eq!(
        names,
        vec![
            "gate1::staging::repo::control-plane-nodes",
            "gate1::staging::repo::distinct-hosts",
            "gate1::staging::repo::schedulable-control-plane",
            "gate2::staging::repo::replicated-controller::longhorn-csi-attacher",
            "gate2::staging::repo::replicated-controller::longhorn-csi-provisioner",
            "gate2::staging::repo::replicated-controller::longhorn-csi-resizer",
            "gate2::staging::repo::replicated-controller::longhorn-csi-snapshotter",
            "gate2::staging::repo::replicated-controller::traefik",
            "gate3::production::repo::external-traffic-policy",
            "gate3::staging::repo::l2-announcement",
            "gate5::production::repo::longhorn-disks",
        ]
    );

    // One rule per kind that ran, described by the check's own words and tagged with gates.
    let rules = driver["rules"].as_array().unwrap();
    let ids: Vec<&str> = rules.iter().map(|r| r["id"].as_str().unwrap()).collect();
    for kind in ["vip", "external-traffic-policy", "replicated-controller"] {
        assert!(ids.contains(&kind), "{ids:?}");
    }
    let etp = rules
        .iter()
        .find(|r| r["id"] == "external-traffic-policy")
        .unwrap();
    assert_eq!(
        etp["shortDescription"]["text"],
        "Each ingress Service uses externalTrafficPolicy: Cluster"
    );
    assert_eq!(
        etp["properties"]["tags"],
        serde_json::json!(["gate3", "repository"])
    );
}

#[test]
fn beside_a_snapshot_the_sarif_holds_drift_trials_and_no_live_ones() {
    let snapshots: Vec<String> = STAGING_TODAY
        .iter()
        .flat_map(|f| ["--snapshot".to_string(), fixture(f)])
        .collect();
    let extra: Vec<&str> = snapshots.iter().map(String::as_str).collect();
    let (_, log) = sarif_of("staging", &extra);
    let names: Vec<&str> = results(&log)
        .iter()
        .map(|r| r["properties"]["trial"].as_str().unwrap())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| n.contains("::repo::") || n.contains("::drift::")),
        "a live trial in the SARIF: {names:?}"
    );
    assert!(
        names.iter().any(|n| n.contains("::drift::")),
        "no drift result: {names:?}"
    );
    for result in results(&log) {
        let level = result["level"].as_str().unwrap();
        let verdict = result["properties"]["verdict"].as_str().unwrap();
        assert!(
            (verdict, level) == ("fail", "error") || (verdict, level) == ("error", "warning"),
            "{result:#}"
        );
    }
}
