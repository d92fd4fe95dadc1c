#!/usr/bin/env bash
# Builds the real control plane the conformance tests run: kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl from k8s.io/kubernetes at the release in
# RELEASE, etcd at the version that release pins, and kwok. Each binary is built only when
# missing from target/k8s-bin/<release>/, so a second run costs nothing; the Go build cache keeps
# a rebuild after `cargo clean` to about a minute. Binaries are never committed.
#
# Usage: tools/k8s/build.sh [BIN_DIR]   (prints the directory holding the binaries)
# Runs niced with few parallel jobs: the machine is shared with Rust builds.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
release="$(cat "$here/RELEASE")"
out="${1:-$root/target/k8s-bin/$release}"
jobs="${GATES_GO_JOBS:-2}"
mkdir -p "$out"

minor="${release#v1.}"; minor="${minor%%.*}"
date="$(date -u -d @"${SOURCE_DATE_EPOCH:-0}" +%Y-%m-%dT%H:%M:%SZ)"
# What /version and `kubectl version` report; without these they say v0.0.0-master.
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$release -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
done

build() { # NAME MODULE_DIR PACKAGE
  local name="$1" dir="$2" pkg="$3"
  [ -x "$out/$name" ] && return 0
  local start=$SECONDS
  echo "tools/k8s: building $name ($pkg)" >&2
  (cd "$dir" && nice -n 19 go build -p "$jobs" -trimpath -ldflags "$ldflags" -o "$out/$name.partial" "$pkg")
  mv "$out/$name.partial" "$out/$name"
  echo "tools/k8s: built $name in $((SECONDS - start)) s" >&2
}

build kube-apiserver "$here" k8s.io/kubernetes/cmd/kube-apiserver
build etcd "$here" go.etcd.io/etcd/server/v3
build kubectl "$here" k8s.io/kubernetes/cmd/kubectl
build kube-controller-manager "$here" k8s.io/kubernetes/cmd/kube-controller-manager
build kube-scheduler "$here" k8s.io/kubernetes/cmd/kube-scheduler
build kwok "$here/kwok" sigs.k8s.io/kwok/cmd/kwok
# The client-go program the scale benchmark compares gates's lists with (never the tests).
build lister "$here" gates.invalid/tools/k8s/lister
echo "$out"
