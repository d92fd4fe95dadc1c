use crate::support::*;

#[test]
fn junit_reports_validate_and_carry_the_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("staging.xml");
    let (out, reports) = check(
        "staging",
        STAGING_TODAY,
        &["--junit", junit.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    validate_junit(&junit);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("classname=\"adr007.gate1\""), "{xml}");
    assert!(xml.contains("<failure message="), "{xml}");
    assert!(xml.contains("type=\"GateViolation\""), "{xml}");
    assert!(
        xml.contains("<skipped message=\"no chaos report for staging"),
        "{xml}"
    );
    assert!(
        xml.contains("talos-test-worker-01"),
        "the evidence is in the failure body:\n{xml}"
    );
    // The timestamped copy and the JSON report sit in the reports directory.
    let names: Vec<String> = std::fs::read_dir(reports.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("staging-") && n.ends_with(".xml")),
        "{names:?}"
    );
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("staging-") && n.ends_with(".json")),
        "{names:?}"
    );
    for name in names.iter().filter(|n| n.ends_with(".xml")) {
        validate_junit(&reports.path().join(name));
        // The copy `--junit` asked for is the timestamped one, byte for byte.
        assert_eq!(
            std::fs::read_to_string(reports.path().join(name)).unwrap(),
            xml
        );
    }
}

#[test]
fn junit_with_errors_validates() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("production.xml");
    // Without metrics the capacity check cannot be evaluated: an <error>.
    let (out, _reports) = check(
        "production",
        &["target-production.json"],
        &["--junit", junit.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    validate_junit(&junit);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<error message="), "{xml}");
    assert!(
        xml.contains("metrics-server"),
        "the error says what to fix:\n{xml}"
    );
}

/// The value of the first `<property name="NAME" value="..."/>` of a JUnit document.
fn property<'a>(xml: &'a str, name: &str) -> &'a str {
    let start = xml
        .find(&format!("<property name=\"{name}\" value=\""))
        .unwrap_or_else(|| panic!("no property {name} in\n{xml}"));
    let rest = &xml[start..];
    let value = &rest[rest.find("value=\"").unwrap() + 7..];
    &value[..value.find('"').unwrap()]
}

#[test]
fn every_check_suite_carries_the_provenance_of_its_evidence_as_properties() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("staging.xml");
    let (out, _reports) = check(
        "staging",
        STAGING_TODAY,
        &["--junit", junit.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    validate_junit(&junit);
    let xml = std::fs::read_to_string(&junit).unwrap();
    let suites = xml.matches("<testsuite ").count();
    assert!(suites >= 4, "{xml}");
    for name in [
        "provenance.environment",
        "provenance.collected_at",
        "provenance.kube_system_uid",
        "provenance.api_ca_sha256",
        "provenance.etcd_members",
        "provenance.topology_digest",
        "provenance.control_planes",
    ] {
        assert_eq!(
            xml.matches(&format!("<property name=\"{name}\"")).count(),
            suites,
            "{name} in every suite:\n{xml}"
        );
    }
    assert_eq!(property(&xml, "provenance.environment"), "staging");
    let digest = property(&xml, "provenance.topology_digest");
    assert!(
        digest.len() == 64 && digest.chars().all(|c| c.is_ascii_hexdigit()),
        "{digest}"
    );
    // A kubectl dump proves no CA: the part is there and says it is not known.
    assert_eq!(property(&xml, "provenance.api_ca_sha256"), "unknown");
    assert!(
        chrono::DateTime::parse_from_rfc3339(property(&xml, "provenance.collected_at")).is_ok()
    );
}
