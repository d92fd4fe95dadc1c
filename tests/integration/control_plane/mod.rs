//! A real Kubernetes control plane for the tests: etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler and kwok (simulated kubelets), built from their Go
//! modules by `tools/k8s/build.sh` and run on one loopback address. What the lab's own API
//! server claims about discovery, RBAC, paging, CRDs and the node-lifecycle and disruption
//! controllers is checked against the real thing here.
//!
//! Every component listens on `127.S.9.1` only; etcd keeps its data in the plane's directory.
//! Three identities come from a static token file: an admin (`system:masters`, used by the
//! controllers and to load objects), `gates-reader` bound to the ClusterRole shipped in
//! `deploy/rbac/`, and `gates-narrow`, bound to a copy of it without
//! (core) `nodes`. The directory,
//! with every component's log, is kept when a test fails.

pub mod clear;
pub mod launch;
pub mod load;

pub use launch::{ControlPlane, Identity, Kubelets, Timing};

use std::path::PathBuf;

use crate::support::root;

/// The Kubernetes release `tools/k8s` builds (its `RELEASE` file).
pub fn release() -> String {
    std::fs::read_to_string(root().join("tools/k8s/RELEASE"))
        .expect("tools/k8s/RELEASE is readable")
        .trim()
        .to_string()
}

/// Where the binaries are. `$GATES_K8S_BIN` must hold them when set (`.ci/run` sets it to
/// what `tools/k8s/build.sh` built); otherwise `target/k8s-bin/<release>` is used when
/// complete. `None` (the test then ends without asserting, saying so on stderr) only when
/// neither variable is set: with `GATES_REQUIRE_K8S` set, as in CI, missing binaries fail.
pub fn binaries() -> Option<PathBuf> {
    const NAMES: [&str; 6] = [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kubectl",
        "kwok",
    ];
    let complete = |dir: &PathBuf| NAMES.iter().all(|n| dir.join(n).is_file());
    let required = std::env::var_os("GATES_REQUIRE_K8S").is_some();
    if let Some(dir) = std::env::var_os("GATES_K8S_BIN").map(PathBuf::from) {
        assert!(
            complete(&dir),
            "GATES_K8S_BIN={} lacks one of {NAMES:?}: run tools/k8s/build.sh {}",
            dir.display(),
            dir.display()
        );
        return Some(dir);
    }
    let dir = root().join("target/k8s-bin").join(release());
    // Built binaries alone do not turn the tests on: they add minutes to a run, so they run
    // only when asked for (GATES_K8S_BIN or GATES_REQUIRE_K8S).
    if required && complete(&dir) {
        return Some(dir);
    }
    assert!(
        !required,
        "GATES_REQUIRE_K8S is set but no Kubernetes binaries are in {}: run tools/k8s/build.sh \
         or set GATES_K8S_BIN",
        dir.display()
    );
    eprintln!(
        "not run: neither GATES_K8S_BIN nor GATES_REQUIRE_K8S is set (build the binaries with \
         tools/k8s/build.sh into {}, then set one)",
        dir.display()
    );
    None
}

/// One real control plane at a time: each takes about a gigabyte and a core while it starts.
pub static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A test's real control plane on `subnet` (default timing, one kwok), once no other test's
/// is running, with the guard that keeps the next waiting; `None` without the binaries.
pub async fn start_one(
    subnet: u8,
) -> Option<(tokio::sync::MutexGuard<'static, ()>, launch::ControlPlane)> {
    let bin = binaries()?;
    let one = ONE_AT_A_TIME.lock().await;
    let plane = launch::ControlPlane::start(
        &bin,
        subnet,
        launch::Timing::default(),
        launch::Kubelets::Shared,
    )
    .await
    .unwrap_or_else(|err| panic!("the real control plane starts: {err}"));
    Some((one, plane))
}
