#!/usr/bin/env bash
# Build the node's Kubernetes binaries (kubelet, kube-scheduler, kube-proxy)
# and its sandbox (pause) binary,
# from the pinned wrapper module hack/tools/kube-node (same release as hack/tools/kube),
# into their own cache directory keyed by the pins, so the fast control-plane
# tools are not rebuilt. Idempotent; prints the bin directory on its last line.
#
#   LATTICE_CACHE   cache root (default ~/.cache/lattice-operator)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck disable=SC1091
source "$here/versions.env"

# shellcheck disable=SC1091
source "$here/node.env"
# The node's runtime from Debian's packages, at the pinned versions (a no-op when present).
bash "$here/apt-pinned.sh" $NODE_PACKAGES >&2

cache="${LATTICE_CACHE:-$HOME/.cache/lattice-operator}"
key="$(cat "$here/versions.env" "$here/node.env" "$here"/tools/kube-node/go.mod "$here"/tools/kube-node/go.sum "$here"/tools/pause/go.mod "$here"/tools/pause/main.go "$0" | sha256sum | cut -c1-16)"
bindir="$cache/k8s-node-bin/${K8S_VERSION}-${key}"
want_stamp="k8s=${K8S_VERSION} key=${key}"
if [ -f "$bindir/.stamp" ] && [ "$(cat "$bindir/.stamp")" = "$want_stamp" ]; then
  echo "$bindir"
  exit 0
fi

command -v go >/dev/null || { echo "build-node-tools: Go ${GO_MIN}+ is required on PATH" >&2; exit 1; }
export CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=readonly GOTOOLCHAIN=local
export GOMODCACHE="${GOMODCACHE:-$cache/go/mod}" GOCACHE="${GOCACHE:-$cache/go/build}"
tmpbin="$bindir.tmp"
mkdir -p "$tmpbin"
k8s_minor="$(echo "$K8S_VERSION" | cut -d. -f2)"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X ${pkg}.gitVersion=${K8S_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${k8s_minor}"
  ldflags+=" -X ${pkg}.gitTreeState=clean"
done
for cmd in kubelet kube-scheduler kube-proxy; do
  echo "build-node-tools: building $cmd" >&2
  ( cd "$here/tools/kube-node" && go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$tmpbin/$cmd" "k8s.io/kubernetes/cmd/$cmd" )
  "$tmpbin/$cmd" --version | grep -q "Kubernetes ${K8S_VERSION}" \
    || { echo "build-node-tools: $cmd does not report ${K8S_VERSION}" >&2; exit 1; }
done
echo "build-node-tools: building pause" >&2
( cd "$here/tools/pause" && go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$tmpbin/pause" . )
echo "$want_stamp" > "$tmpbin/.stamp"
rm -rf "$bindir"
mv "$tmpbin" "$bindir"
echo "$bindir"
