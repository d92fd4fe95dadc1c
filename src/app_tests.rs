//! Each command, run in this process with captured streams: what the user asked for comes
//! out of `out`, what the command says about its work out of `err`, nothing on the process's
//! own stdout.

use std::path::{Path, PathBuf};

use clap::Parser;

use super::run;
use crate::cli::Cli;
use crate::streams::{Captured, Streams};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn snapshot(name: &str) -> String {
    root()
        .join("fixtures/snapshots")
        .join(name)
        .display()
        .to_string()
}

/// `gates --config gates ARGS...`, its exit code and what it wrote.
async fn gates(args: &[&str]) -> (u8, Captured) {
    let config = root().join("gates").display().to_string();
    let mut all = vec!["gates", "--config", config.as_str()];
    all.extend_from_slice(args);
    let (mut streams, captured) = Streams::captured();
    let code = match run(Cli::parse_from(all), &mut streams).await {
        Ok(code) => code,
        Err(err) => panic!("gates {args:?}: {err}"),
    };
    (code.code(), captured)
}

fn text(path: &Path) -> String {
    path.display().to_string()
}

/// `gates check ENV --format json --reports REPORTS --snapshot F...` over fixture snapshots.
async fn check_json(env: &str, snapshots: &[&str], reports: &str) -> (u8, Captured) {
    let files: Vec<String> = snapshots.iter().map(|name| snapshot(name)).collect();
    let mut args = vec!["check", env, "--format", "json", "--reports", reports];
    for file in &files {
        args.extend(["--snapshot", file.as_str()]);
    }
    gates(&args).await
}

#[tokio::test]
async fn list_writes_the_gates_the_environments_and_the_check_kinds_to_its_stream() {
    let (code, said) = gates(&["list"]).await;
    assert_eq!(code, 0);
    let out = said.out();
    assert!(out.starts_with("Gates:\n  gate 1: "), "{out}");
    for want in [
        "Environments:\n",
        "  staging",
        "Check kinds:\n",
        "  host-loss: ",
    ] {
        assert!(out.contains(want), "{want:?} missing from {out}");
    }
    assert_eq!(said.err(), "");
}

#[tokio::test]
async fn validate_writes_what_it_loaded_to_its_stream() {
    let (_, said) = gates(&["validate"]).await;
    let out = said.out();
    assert!(
        out.lines()
            .next()
            .unwrap_or_default()
            .ends_with("environments loaded"),
        "{out}"
    );
}

#[tokio::test]
async fn check_writes_its_json_report_to_out_and_names_each_report_file_on_err() {
    let dir = tempfile::tempdir().unwrap();
    let reports = text(dir.path());
    let (code, said) = check_json(
        "staging",
        &["staging-today.json", "staging-today-crds.json"],
        &reports,
    )
    .await;
    assert_eq!(code, 1, "ADR 007's open items fail today");
    let json: serde_json::Value = serde_json::from_str(&said.out()).expect("out is the JSON");
    assert_eq!(json["environment"], "staging");
    assert_eq!(
        said.out().trim_start().lines().nth(1).map(str::trim),
        Some(r#""schema_version": 1,"#),
        "the version comes first"
    );
    let err = said.err();
    let written: Vec<&str> = err
        .lines()
        .filter_map(|l| l.strip_prefix("report: "))
        .collect();
    assert_eq!(written.len(), 3, "xml, json and html: {err}");
    for path in written {
        assert!(
            path.starts_with(&reports) && Path::new(path).exists(),
            "{path}"
        );
    }
}

#[tokio::test]
async fn predict_writes_its_json_prediction_to_out() {
    let (today, crds) = (
        snapshot("staging-today.json"),
        snapshot("staging-today-crds.json"),
    );
    let (_, said) = gates(&[
        "predict",
        "staging",
        "--format",
        "json",
        "--snapshot",
        &today,
        "--snapshot",
        &crds,
    ])
    .await;
    let json: serde_json::Value = serde_json::from_str(&said.out()).expect("out is the JSON");
    assert_eq!(json["environment"], "staging");
    assert!(json["prediction"]["hosts"].is_array(), "{json}");
}

#[tokio::test]
async fn history_writes_the_runs_of_the_environment_to_out() {
    let reports = text(&root().join("fixtures/reports/history"));
    let (code, said) = gates(&["history", "lab", "--reports", &reports]).await;
    assert_eq!(code, 0, "{}", said.err());
    let out = said.out();
    assert!(out.starts_with("History of lab (last 10 runs"), "{out}");
    assert!(out.contains("\nGates:\n  gate 1  "), "{out}");
}

#[tokio::test]
async fn adr_writes_the_diff_to_out_and_each_gates_decision_to_err() {
    let dir = tempfile::tempdir().unwrap();
    let reports = text(dir.path());
    check_json(
        "staging",
        &["staging-today.json", "staging-today-crds.json"],
        &reports,
    )
    .await;
    check_json(
        "production",
        &["target-production.json", "target-production-metrics.json"],
        &reports,
    )
    .await;
    let adr = dir.path().join("adr-007.txt");
    std::fs::copy(
        root().join("fixtures/adr/adr-007-talos-production-topology.txt"),
        &adr,
    )
    .unwrap();
    let before = std::fs::read_to_string(&adr).unwrap();
    let (code, said) = gates(&[
        "adr",
        "staging",
        "production",
        "--dry-run",
        "--update",
        &text(&adr),
        "--reports",
        &reports,
    ])
    .await;
    assert_eq!(code, 0, "{}", said.err());
    let err = said.err();
    assert!(
        err.contains("gate 5 done: production pass") && err.contains("dry run, not written"),
        "{err}"
    );
    let out = said.out();
    assert!(
        out.starts_with(&format!("--- {0}\n+++ {0}\n@@ ", adr.display()))
            && out.contains("\n+1 of 5 gates\n"),
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(&adr).unwrap(), before);
}
