use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixture(name: &str) -> String {
    root()
        .join("fixtures/snapshots")
        .join(name)
        .display()
        .to_string()
}

/// `gates` run from the repository root, writing its reports into `reports`.
pub fn gates(reports: &Path) -> Command {
    let mut cmd = Command::cargo_bin("gates").expect("the gates binary is built");
    cmd.current_dir(root())
        .env("NO_COLOR", "1")
        .env_remove("GATES_LOG");
    cmd.env("GATES_TEST_REPORTS", reports);
    cmd
}

/// `gates --config <repo>/gates`.
pub fn gates_with_config(reports: &Path) -> Command {
    let mut cmd = gates(reports);
    cmd.arg("--config").arg(root().join("gates"));
    cmd
}

/// `gates check ENV --snapshot ...` with reports in a temporary directory.
pub fn check(env: &str, snapshots: &[&str], extra: &[&str]) -> (Output, tempfile::TempDir) {
    let reports = tempfile::tempdir().unwrap();
    let mut cmd = gates_with_config(reports.path());
    cmd.args(["check", env, "--reports"]).arg(reports.path());
    for snapshot in snapshots {
        cmd.arg("--snapshot").arg(fixture(snapshot));
    }
    cmd.args(extra);
    (cmd.output().unwrap(), reports)
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The line libtest prints for one trial, e.g. `test gate1::staging::distinct-hosts ... FAILED`
/// (libtest pads names to a common width).
pub fn trial_line<'a>(out: &'a str, name: &str) -> Option<&'a str> {
    out.lines().find(|l| {
        l.strip_prefix("test ")
            .and_then(|rest| rest.split_once(" ..."))
            .is_some_and(|(n, _)| n.trim_end() == name)
    })
}

pub fn assert_trial(out: &str, name: &str, word: &str) {
    let line = trial_line(out, name).unwrap_or_else(|| panic!("no trial {name} in:\n{out}"));
    assert!(
        line.ends_with(word),
        "expected {name} to be {word}, got `{line}` in:\n{out}"
    );
}

pub const STAGING_TODAY: &[&str] = &["staging-today.json", "staging-today-crds.json"];

/// Validates a JUnit file against the vendored Jenkins schema (`tests/schemas/junit-10.xsd`)
/// with xmllint, which `tools/test-deps` installs.
pub fn validate_junit(xml: &std::path::Path) {
    let schema = root().join("tests/schemas/junit-10.xsd");
    let out = std::process::Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(&schema)
        .arg(xml)
        .output()
        .expect("xmllint runs (Debian package libxml2-utils; tools/test-deps installs it)");
    assert!(
        out.status.success(),
        "{} does not validate:\n{}",
        xml.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A built-in scenario's lab on `127.<subnet>.x.y` (or the next free subnet), its state and
/// environment files under `dir` (`dir/environments`).
pub async fn start_lab(scenario: &str, subnet: u8, dir: &Path) -> gates_lab::Lab {
    gates_lab::Lab::start(gates_lab::LabOptions {
        scenario: scenario.to_string(),
        subnet,
        speed: 1.0,
        state_dir: dir.to_path_buf(),
        env_dir: Some(dir.join("environments")),
        ..gates_lab::LabOptions::default()
    })
    .await
    .unwrap_or_else(|err| panic!("the lab starts on 127.{subnet}.x.y: {err}"))
}

/// Each trial of a check's JSON report as (name, verdict), in report order.
pub fn trial_verdicts(json: &serde_json::Value) -> Vec<(String, String)> {
    json["trials"]
        .as_array()
        .expect("trials")
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}
