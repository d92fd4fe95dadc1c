#!/usr/bin/env bash
# The wgpolicyk8s.io v1alpha2 PolicyReport CRDs the conformance test installs in the real
# kube-apiserver (tests/integration/real_kube_policy_report.rs), taken from the Go module
# proxy: Kyverno's module ships them (config/crds/policyreport), at the version in KYVERNO.
# Downloaded once into the Go module cache; nothing is committed. Prints the directory.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="$(cat "$here/KYVERNO")"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
dir="$(cd "$scratch" && GOFLAGS=-mod=mod go mod download -json "github.com/kyverno/kyverno@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [ -z "$dir" ] || [ ! -d "$dir/config/crds/policyreport" ]; then
  echo "tools/policy-reports: github.com/kyverno/kyverno@$version has no config/crds/policyreport" >&2
  exit 1
fi
echo "$dir/config/crds/policyreport"
