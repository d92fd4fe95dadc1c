//! The compiler guards purity only if the dependency graph does: the core must never pull in
//! an async runtime, an HTTP or gRPC client, or a Kubernetes client. This asks cargo for the
//! core's normal dependencies and fails on any of them.

use std::process::Command;

/// Crates that mean I/O: runtimes, clients, transports.
const FORBIDDEN: &[&str] = &[
    "tokio",
    "reqwest",
    "hyper",
    "kube",
    "kube-client",
    "tonic",
    "rustls",
    "mio",
    "gates-infra",
    "gates-lab",
];

#[test]
fn the_core_crate_depends_on_no_runtime_and_no_client() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-p",
            "gates-core",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree = String::from_utf8_lossy(&output.stdout);
    let names: Vec<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(names.contains(&"gates-core"), "cargo tree listed: {tree}");
    assert!(names.contains(&"k8s-openapi"), "cargo tree listed: {tree}");
    let found: Vec<&&str> = FORBIDDEN.iter().filter(|f| names.contains(f)).collect();
    assert!(found.is_empty(), "the core depends on {found:?}:\n{tree}");
}
