#!/usr/bin/env bash
# Builds the Helm CLI the chart's tests run (`helm lint`, `helm template`;
# tests/integration/helm_chart.rs): helm.sh/helm/v4's cmd/helm at the version in VERSION
# (pinned with its dependencies in go.mod and go.sum). Built only when missing from
# target/helm-bin/<version>/, so a second run costs nothing. Binaries are never committed.
#
# Usage: tools/helm/build.sh [BIN_DIR]   (prints the directory holding the binary)
# Runs niced with few parallel jobs: the machine is shared with Rust builds.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
version="$(cat "$here/VERSION")"
out="${1:-$root/target/helm-bin/$version}"
jobs="${GATES_GO_JOBS:-2}"
mkdir -p "$out"
if [ ! -x "$out/helm" ]; then
  start=$SECONDS
  echo "tools/helm: building helm (helm.sh/helm/v4/cmd/helm $version)" >&2
  (cd "$here" && nice -n 19 go build -p "$jobs" -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$version" -o "$out/helm.partial" helm.sh/helm/v4/cmd/helm)
  mv "$out/helm.partial" "$out/helm"
  echo "tools/helm: built helm in $((SECONDS - start)) s" >&2
fi
echo "$out"
