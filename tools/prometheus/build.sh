#!/usr/bin/env bash
# Builds the real Prometheus the measured-load tests run (tests/integration/prometheus.rs):
# `prometheus` and `promtool` from github.com/prometheus/prometheus at the version in VERSION
# (pinned with its dependencies in go.mod and go.sum). Each binary is built only when missing
# from target/prometheus-bin/<version>/, so a second run costs nothing; a cold build takes
# about ten minutes on two cores. Binaries are never committed.
#
# Usage: tools/prometheus/build.sh [BIN_DIR]   (prints the directory holding the binaries)
# Runs niced with few parallel jobs: the machine is shared with Rust builds.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
version="$(cat "$here/VERSION")"
out="${1:-$root/target/prometheus-bin/$version}"
jobs="${GATES_GO_JOBS:-2}"
mkdir -p "$out"

build() { # NAME PACKAGE
  local name="$1" pkg="$2"
  [ -x "$out/$name" ] && return 0
  local start=$SECONDS
  echo "tools/prometheus: building $name ($pkg)" >&2
  (cd "$here" && nice -n 19 go build -p "$jobs" -trimpath -ldflags "-s -w" -o "$out/$name.partial" "$pkg")
  mv "$out/$name.partial" "$out/$name"
  echo "tools/prometheus: built $name in $((SECONDS - start)) s" >&2
}

build prometheus github.com/prometheus/prometheus/cmd/prometheus
build promtool github.com/prometheus/prometheus/cmd/promtool
echo "$out"
