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

# Fuzz one parser (snapshot, environment, gate, journal, chaos_report, list_page,
# talos_template) with cargo-fuzz's
# libFuzzer on the stable toolchain (RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its -Z flags), for
# SECONDS. The target is built once and its binary run directly, so a run never rebuilds with
# other flags. Crashes and hangs land in fuzz/artifacts/TARGET, which `cargo test` replays; the
# growing corpus stays in fuzz/target/corpus/TARGET (`just fuzz-keep TARGET` adds
# those that reach new code to fuzz/corpus/TARGET). Needs `cargo install cargo-fuzz`.
fuzz target="snapshot" seconds="60":
    cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz build --sanitizer none {{target}}
    mkdir -p fuzz/target/corpus/{{target}} fuzz/artifacts/{{target}}
    cd fuzz && target/x86_64-unknown-linux-gnu/release/{{target}} target/corpus/{{target}} corpus/{{target}} -max_total_time={{seconds}} -timeout=60 -rss_limit_mb=2048 -artifact_prefix=artifacts/{{target}}/ -print_final_stats=1

# Add to fuzz/corpus/TARGET (replayed by every `cargo test`) only those inputs of
# fuzz/target/corpus/TARGET that reach code the kept ones do not.
fuzz-keep target="snapshot":
    cd fuzz && target/x86_64-unknown-linux-gnu/release/{{target}} -merge=1 -use_counters=0 -use_value_profile=0 -use_cmp=0 -timeout=120 -rss_limit_mb=2048 corpus/{{target}} target/corpus/{{target}}

# Build the real Kubernetes control plane of the conformance tests (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, kwok) into target/k8s-bin/; only what is missing.
k8s:
    tools/k8s/build.sh

# Build the real Prometheus of the measured-load tests (prometheus, promtool) into
# target/prometheus-bin/; only what is missing.
prometheus:
    tools/prometheus/build.sh

# Repository trials on the public corpus of tools/corpus/repos.tsv, checked out under DIR as
# owner+name (outside this project; `tools/corpus/run DIR --clone` clones them): per repository
# the trials by verdict, the wrong ones against tools/corpus/EXPECTED.md, time and peak RSS;
# then every Kustomize directory rendered by gates and by `kubectl kustomize`, compared.
corpus dir:
    cargo build --release --bins --example kustomize_render
    tools/corpus/run {{dir}}
