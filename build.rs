//! Stamps the binary with the commit it was built from, for `gates --version`: `GATES_COMMIT`
//! when the builder sets it (a source tarball has no git), else `git describe`-like output from
//! the checkout, else "unknown commit".

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=GATES_COMMIT");
    // Rebuild the stamp when HEAD moves: HEAD itself, and the branch refs it points into.
    for dir in [
        git(&["rev-parse", "--git-dir"]),
        git(&["rev-parse", "--git-common-dir"]),
    ]
    .into_iter()
    .flatten()
    {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/refs/heads");
        println!("cargo:rerun-if-changed={dir}/packed-refs");
    }
    let commit = std::env::var("GATES_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| git(&["log", "-1", "--format=%h %cs"]))
        .unwrap_or_else(|| "unknown commit".to_string());
    println!("cargo:rustc-env=GATES_COMMIT={commit}");
}
