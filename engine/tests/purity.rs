//! The engine evaluates and never prints: it must not pull in the command line's parser, its
//! progress bars or the libtest printer, nor the lab (the simulator is the command line's, for
//! `gates demo`). This asks cargo for the engine's normal dependencies and fails on any of them.

use std::process::Command;

/// Crates that belong to the command line: argument parsing, terminal output, the simulator.
const FORBIDDEN: &[&str] = &[
    "clap",
    "clap_builder",
    "clap_complete",
    "clap_mangen",
    "indicatif",
    "libtest-mimic",
    "tracing-subscriber",
    "gates-lab",
    "gates",
];

#[test]
fn the_engine_depends_on_no_command_line_and_no_terminal_printer() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-p",
            "gates-engine",
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
    assert!(names.contains(&"gates-engine"), "cargo tree listed: {tree}");
    assert!(names.contains(&"gates-core"), "cargo tree listed: {tree}");
    let found: Vec<&&str> = FORBIDDEN.iter().filter(|f| names.contains(f)).collect();
    assert!(found.is_empty(), "the engine depends on {found:?}:\n{tree}");
}
