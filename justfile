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
    cargo bench -p gates-core --bench predict_scale

# gates check against a real kube-apiserver holding kwok's 5,000 nodes and 100,000 pods, next to
# the README's kubectl script and one round of the LISTs (GATES_BENCH_NODES, GATES_BENCH_PODS).
bench-k8s: k8s
    cargo build --release
    cargo bench --bench real_kube_scale

# Fuzz one parser (snapshot, environment, gate, journal, chaos_report) with cargo-fuzz on the
# stable toolchain (RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its -Z flags); found crashes land in
# fuzz/artifacts/TARGET, which `cargo test` replays; new corpus entries stay in fuzz/target.
# Needs `cargo install cargo-fuzz`.
fuzz target="snapshot" seconds="60":
    mkdir -p fuzz/target/corpus/{{target}}
    cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none {{target}} target/corpus/{{target}} corpus/{{target}} -- -max_total_time={{seconds}} -timeout=10 -rss_limit_mb=2048

# Build the real Kubernetes control plane of the conformance tests (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, kwok) into target/k8s-bin/; only what is missing.
k8s:
    tools/k8s/build.sh
