//! `gates adr`: the ADR's Rollout line and gate markers from the newest check reports.

use super::*;

fn adr_copy(dir: &Path) -> PathBuf {
    let copy = dir.join("adr-007.txt");
    std::fs::copy(
        root().join("fixtures/adr/adr-007-talos-production-topology.txt"),
        &copy,
    )
    .unwrap();
    copy
}

/// Check reports of staging (today's snapshot) and production (the target snapshot).
fn staging_and_production_reports(dir: &Path) {
    let mut cmd = gates_with_config(dir);
    cmd.args(["check", "staging", "--reports"]).arg(dir);
    for s in STAGING_TODAY {
        cmd.arg("--snapshot").arg(fixture(s));
    }
    assert_eq!(cmd.output().unwrap().status.code(), Some(1));
    let mut cmd = gates_with_config(dir);
    cmd.args(["check", "production", "--reports"]).arg(dir);
    for s in ["target-production.json", "target-production-metrics.json"] {
        cmd.arg("--snapshot").arg(fixture(s));
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn adr_dry_run_prints_the_diff_of_the_rollout_line_and_markers_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    staging_and_production_reports(dir.path());
    let copy = adr_copy(dir.path());
    let before = std::fs::read_to_string(&copy).unwrap();
    let out = gates_with_config(dir.path())
        .args(["adr", "staging", "production", "--dry-run", "--update"])
        .arg(&copy)
        .arg("--reports")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let shown = copy.display();
    let line = |text: &str| {
        before
            .lines()
            .position(|l| l == text)
            .map(|i| i + 1)
            .unwrap_or_else(|| panic!("no line `{text}`"))
    };
    let rollout = line("0 of 5 gates");
    let gate5 = line("  • Production runs on three hosts with the capacity margin measured. open");
    assert_eq!(
        stdout(&out),
        format!(
            "--- {shown}\n+++ {shown}\n@@ -{rollout},1 +{rollout},1 @@\n-0 of 5 gates\n+1 of 5 gates\n\
             @@ -{gate5},1 +{gate5},1 @@\n-  • Production runs on three hosts with the capacity margin measured. open\n\
             +  • Production runs on three hosts with the capacity margin measured. done\n"
        )
    );
    let e = stderr(&out);
    assert!(
        e.contains("gate 3 open: ") && e.contains("staging fail"),
        "{e}"
    );
    assert!(e.contains("production pass"), "{e}");
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), before);
}

#[test]
fn adr_in_ci_shows_the_diff_without_writing_and_writes_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    staging_and_production_reports(dir.path());
    let copy = adr_copy(dir.path());
    let before = std::fs::read_to_string(&copy).unwrap();
    let run = |ci: bool, extra: &[&str]| {
        let mut cmd = gates_with_config(dir.path());
        if ci {
            cmd.env("CI", "true");
        } else {
            cmd.env_remove("CI");
        }
        cmd.args(["adr", "production", "--update"])
            .arg(&copy)
            .arg("--reports")
            .arg(dir.path())
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(true, &[]);
    assert!(
        stderr(&out).contains("CI is set; pass --write"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), before);
    let out = run(true, &["--write"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let after = std::fs::read_to_string(&copy).unwrap();
    assert_eq!(
        after,
        before.replace("0 of 5 gates", "1 of 5 gates").replace(
            "capacity margin measured. open",
            "capacity margin measured. done"
        )
    );
    // Gate 3 applies to every environment: production alone does not decide it.
    assert!(
        stderr(&out).contains("gate 3 kept: no report given for staging"),
        "{}",
        stderr(&out)
    );
    let again = run(false, &[]);
    assert!(
        stderr(&again).contains("already up to date"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn adr_refuses_when_a_gate_title_differs_from_its_gate_file() {
    let dir = tempfile::tempdir().unwrap();
    staging_and_production_reports(dir.path());
    let copy = adr_copy(dir.path());
    let text = std::fs::read_to_string(&copy)
        .unwrap()
        .replace("The controllers above run", "The controllers run");
    std::fs::write(&copy, &text).unwrap();
    let out = gates_with_config(dir.path())
        .env_remove("CI")
        .args(["adr", "staging", "production", "--update"])
        .arg(&copy)
        .arg("--reports")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(
        e.contains("gate 2 reads `The controllers run two replicas")
            && e.contains("2-controllers.yaml")
            && e.contains("nothing was written"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), text);
}
