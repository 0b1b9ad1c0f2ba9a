#!/usr/bin/env bash
# Build the test registry (CNCF distribution's `registry`), `crane` (go-containerregistry)
# and `htpasswd` (bcrypt lines for the registry's basic auth, hack/registry/htpasswd)
# from the pinned wrapper module hack/registry, into a cache directory of their own keyed by
# the pins, so neither the control plane nor the node's binaries are rebuilt. The node tests
# run the registry inside the node's network namespace with TLS and htpasswd auth and push
# `make image`'s image with crane (an OCI layout, byte for byte: the same digest).
# Idempotent; prints the bin directory on its last line.
#
#   LATTICE_CACHE   cache root (default ~/.cache/lattice-operator)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck disable=SC1091
source "$here/registry.env"

cache="${LATTICE_CACHE:-$HOME/.cache/lattice-operator}"
key="$(cat "$here/registry.env" "$here/registry/go.mod" "$here/registry/go.sum" "$here/registry/htpasswd/main.go" "$0" | sha256sum | cut -c1-16)"
bindir="$cache/registry-bin/${DISTRIBUTION_VERSION}-${key}"
want_stamp="distribution=${DISTRIBUTION_VERSION} crane=${CRANE_VERSION} key=${key}"
if [ -f "$bindir/.stamp" ] && [ "$(cat "$bindir/.stamp")" = "$want_stamp" ]; then
  echo "$bindir"
  exit 0
fi

command -v go >/dev/null || { echo "build-registry: Go is required on PATH" >&2; exit 1; }
export CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=readonly GOTOOLCHAIN=local
export GOMODCACHE="${GOMODCACHE:-$cache/go/mod}" GOCACHE="${GOCACHE:-$cache/go/build}"
tmpbin="$bindir.tmp"
mkdir -p "$tmpbin"
echo "build-registry: building registry" >&2
( cd "$here/registry" && go build -trimpath -buildvcs=false \
    -ldflags "-s -w -X github.com/distribution/distribution/v3/version.version=${DISTRIBUTION_VERSION}" \
    -o "$tmpbin/registry" github.com/distribution/distribution/v3/cmd/registry )
echo "build-registry: building crane" >&2
( cd "$here/registry" && go build -trimpath -buildvcs=false \
    -ldflags "-s -w -X github.com/google/go-containerregistry/cmd/crane/cmd.Version=${CRANE_VERSION}" \
    -o "$tmpbin/crane" github.com/google/go-containerregistry/cmd/crane )
echo "build-registry: building htpasswd" >&2
( cd "$here/registry" && go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$tmpbin/htpasswd" ./htpasswd )
"$tmpbin/registry" --version | grep -q " ${DISTRIBUTION_VERSION}" \
  || { echo "build-registry: registry does not report ${DISTRIBUTION_VERSION}" >&2; exit 1; }
[ "$("$tmpbin/crane" version)" = "${CRANE_VERSION}" ] \
  || { echo "build-registry: crane does not report ${CRANE_VERSION}" >&2; exit 1; }
echo "$want_stamp" > "$tmpbin/.stamp"
rm -rf "$bindir"
mv "$tmpbin" "$bindir"
echo "$bindir"
