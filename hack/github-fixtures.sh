#!/usr/bin/env bash
# Install GitHub's OpenAPI description (@octokit/openapi) and the webhook payload examples
# (@octokit/webhooks-examples) for the tests' local GitHub, at the versions pinned in
# hack/github-fixtures/package-lock.json, with npm, into a cache outside the clone.
# Only the files the tests read are kept (the package ships every GitHub edition).
# Idempotent: a warm call only prints the directory.
#
# Prints the fixtures directory (holding api.github.com.json and webhooks.json) on its last
# line of stdout.
#
#   LATTICE_CACHE   cache root (default ~/.cache/lattice-operator)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${LATTICE_CACHE:-$HOME/.cache/lattice-operator}"
key="$(cat "$here/github-fixtures/package.json" "$here/github-fixtures/package-lock.json" "$0" | sha256sum | cut -c1-16)"
outdir="$cache/github-fixtures/$key"
if [ -f "$outdir/.stamp" ]; then
  echo "$outdir"
  exit 0
fi
command -v npm >/dev/null || { echo "github-fixtures: npm is needed (Debian package npm)" >&2; exit 1; }
rm -rf "$outdir.tmp" && mkdir -p "$outdir.tmp/npm"
cp "$here/github-fixtures/package.json" "$here/github-fixtures/package-lock.json" "$outdir.tmp/npm/"
echo "github-fixtures: npm ci $(tr -d '\n ' < "$here/github-fixtures/package.json" | grep -o '"@octokit[^}]*' | head -1)" >&2
(cd "$outdir.tmp/npm" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2)
modules="$outdir.tmp/npm/node_modules/@octokit"
mv "$modules/openapi/generated/api.github.com.json" "$outdir.tmp/api.github.com.json"
mv "$modules/webhooks-examples/api.github.com/index.json" "$outdir.tmp/webhooks.json"
for pkg in openapi webhooks-examples; do
  node -e "const p=require('$modules/$pkg/package.json');console.log(p.name+'@'+p.version)"
done > "$outdir.tmp/versions.txt"
rm -rf "$outdir.tmp/npm"
echo "key=${key}" > "$outdir.tmp/.stamp"
rm -rf "$outdir" && mv "$outdir.tmp" "$outdir"
echo "$outdir"
