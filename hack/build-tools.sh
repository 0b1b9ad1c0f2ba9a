#!/usr/bin/env bash
# Build the local control plane and its tools from the pinned wrapper Go
# modules under hack/tools/, into a cache directory outside the clone that is
# keyed by the pins. Idempotent: when the stamp matches, it only prints the
# directory. Prints the bin directory on its last line of stdout.
#
#   LATTICE_CACHE   cache root (default ~/.cache/lattice-operator)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck disable=SC1091
source "$here/versions.env"

cache="${LATTICE_CACHE:-$HOME/.cache/lattice-operator}"
# The key covers the pins and the committed module files, so any change to
# either builds into a fresh directory.
key="$(cat "$here/versions.env" "$here"/tools/*/go.mod "$here"/tools/*/go.sum "$here"/tools/etcd/main.go "$0" | sha256sum | cut -c1-16)"
bindir="$cache/k8s-bin/${K8S_VERSION}-${key}"
stamp="$bindir/.stamp"
want_stamp="k8s=${K8S_VERSION} etcd=${ETCD_VERSION} helm=${HELM_VERSION} kubeconform=${KUBECONFORM_VERSION} key=${key}"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want_stamp" ]; then
  echo "$bindir"
  exit 0
fi

command -v go >/dev/null || { echo "build-tools: Go ${GO_MIN}+ is required on PATH" >&2; exit 1; }
go_have="$(go env GOVERSION | sed 's/^go//')"
if [ "$(printf '%s\n%s\n' "$GO_MIN" "$go_have" | sort -V | head -n1)" != "$GO_MIN" ]; then
  echo "build-tools: Go ${GO_MIN}+ is required, found ${go_have}" >&2; exit 1
fi

export CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=readonly GOTOOLCHAIN=local
export GOMODCACHE="${GOMODCACHE:-$cache/go/mod}" GOCACHE="${GOCACHE:-$cache/go/build}"
mkdir -p "$bindir.tmp"
tmpbin="$bindir.tmp"
# A reproducible build date: the release's own publication time from the module proxy.
build_date="$(go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | sed -n 's/.*"Time": "\([^"]*\)".*/\1/p')"
build_date="${build_date:-1970-01-01T00:00:00Z}"

k8s_minor="$(echo "$K8S_VERSION" | cut -d. -f2)"
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X ${pkg}.gitVersion=${K8S_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${k8s_minor}"
  k8s_ldflags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=${build_date}"
done

build() {  # build <module dir> <output name> <package> <ldflags>
  echo "build-tools: building $2" >&2
  ( cd "$here/tools/$1" && go build -trimpath -buildvcs=false -ldflags "$4" -o "$tmpbin/$2" "$3" )
}

build kube kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$k8s_ldflags"
build kube kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$k8s_ldflags"
build kube kubectl k8s.io/kubernetes/cmd/kubectl "$k8s_ldflags"
build etcd etcd . "-s -w"
build helm helm helm.sh/helm/v4/cmd/helm \
  "-s -w -X helm.sh/helm/v4/internal/version.version=${HELM_VERSION} -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
build kubeconform kubeconform github.com/yannh/kubeconform/cmd/kubeconform "-s -w"

# Verify that every binary reports the pinned version before stamping.
check() { grep -q -- "$2" <<<"$1" || { echo "build-tools: version check failed: wanted '$2' in: $1" >&2; exit 1; }; }
check "$("$tmpbin/kube-apiserver" --version)" "Kubernetes ${K8S_VERSION}"
check "$("$tmpbin/kube-controller-manager" --version)" "Kubernetes ${K8S_VERSION}"
check "$("$tmpbin/kubectl" version --client)" "Client Version: ${K8S_VERSION}"
check "$("$tmpbin/etcd" --version)" "etcd Version: ${ETCD_VERSION#v}"
check "$("$tmpbin/helm" version --short)" "${HELM_VERSION}"
"$tmpbin/kubeconform" -v >/dev/null

echo "$want_stamp" > "$tmpbin/.stamp"
rm -rf "$bindir"
mv "$tmpbin" "$bindir"
echo "$bindir"
