# Recipes for gates. `just --list` shows them.

# Run the main job on the built-in lab (staging, production, chaos), reports in reports/.
demo:
    cargo run --release -- demo

# Everything CI runs: tests, formatting, lints.
test:
    tools/test

# Formatting and lints, as CI checks them.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings

# Check staging as the ADR's implementation status describes it (offline snapshot).
staging-today:
    cargo run -- check staging --snapshot fixtures/snapshots/staging-today.json --snapshot fixtures/snapshots/staging-today-crds.json

# Regenerate the snapshot fixtures.
fixtures:
    python3 fixtures/snapshots/generate.py

# Everything CI does, the same way.
ci:
    bash .ci/run

# How long check takes and how much memory it needs on thousands of nodes (no assertions).
bench:
    cargo bench --bench check_scale

# Build the real Kubernetes control plane of the conformance tests (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, kwok) into target/k8s-bin/; only what is missing.
k8s:
    tools/k8s/build.sh
