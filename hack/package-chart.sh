#!/usr/bin/env bash
# Package charts/lattice-operator for release, its default values pinned to the released
# image: image.repository, image.tag (the chart's appVersion) and image.digest set in the
# packaged values.yaml, so `helm install` of the package runs repository@digest with no
# --set. The clone's chart is not changed (its digest stays empty: no image is built yet).
# Checks the package with `helm lint --strict` and by rendering it; prints the .tgz path on
# its last line of stdout.
#
#   hack/package-chart.sh REPOSITORY DIGEST [DESTINATION]
#     REPOSITORY   where the image was pushed, e.g. registry.example/lattice/lattice-operator
#     DIGEST       the pushed manifest's digest, sha256:<64 hex> (crane push --image-refs,
#                  crane digest, or skopeo's --digestfile print it)
#     DESTINATION  directory for the .tgz (default: the current directory)
#   HELM           the helm binary (default: the pinned one, hack/build-tools.sh)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
usage() { echo "usage: hack/package-chart.sh REPOSITORY DIGEST [DESTINATION]" >&2; exit 2; }
[ "$#" -ge 2 ] && [ "$#" -le 3 ] || usage
repository="$1" digest="$2" destination="${3:-.}"
if ! [[ "$repository" =~ ^[a-z0-9]([-a-z0-9._:/]*[a-z0-9])?$ ]] || [[ "$repository" == *@* ]] \
  || [[ "${repository##*/}" == *:* ]]; then
  echo "package-chart: REPOSITORY '$repository' is not an image repository (no tag, no digest)" >&2; exit 2
fi
if ! [[ "$digest" =~ ^sha256:[a-f0-9]{64}$ ]]; then
  echo "package-chart: DIGEST '$digest' is not sha256:<64 hex digits>" >&2; exit 2
fi
helm="${HELM:-$(bash "$here/build-tools.sh" | tail -n1)/helm}"

work="$(mktemp -d "${TMPDIR:-/tmp}/lattice-chart.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp -r "$root/charts/lattice-operator" "$work/lattice-operator"
values="$work/lattice-operator/values.yaml"
app_version="$(sed -n 's/^appVersion: "\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$work/lattice-operator/Chart.yaml")"
# The three lines of the `image:` block, each replaced exactly once (checked below).
sed -i -e '/^image:$/,/^[^ #]/{
s|^  repository: .*$|  repository: '"$repository"'|
s|^  tag: .*$|  tag: "'"$app_version"'"|
s|^  digest: .*$|  digest: "'"$digest"'"|
}' "$values"
for want in "  repository: $repository" "  tag: \"$app_version\"" "  digest: \"$digest\""; do
  [ "$(grep -cxF -- "$want" "$values")" = 1 ] \
    || { echo "package-chart: could not set '$want' in values.yaml" >&2; exit 1; }
done
"$helm" lint --strict "$work/lattice-operator" >&2
mkdir -p "$destination"
package="$("$helm" package "$work/lattice-operator" --destination "$destination" | sed -n 's/^Successfully packaged chart and saved it to: //p')"
[ -f "$package" ] || { echo "package-chart: helm package wrote no chart" >&2; exit 1; }
"$helm" template lattice "$package" --show-only templates/deployment.yaml \
  | grep -qF "image: \"$repository@$digest\"" \
  || { echo "package-chart: the packaged chart does not run $repository@$digest" >&2; exit 1; }
echo "package-chart: $package runs $repository@$digest" >&2
echo "$package"
