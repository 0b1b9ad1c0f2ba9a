#!/usr/bin/env bash
# Build the operator's container image without a container engine, as an OCI
# archive of two layers: (1) a Debian base from Debian's packages (mmdebstrap)
# with a venv in /opt/lattice holding the pinned dependencies, (2) the project's
# wheel installed into that venv by the venv's own pip (umoci unpack, chroot,
# umoci repack). The result is the image the Containerfile describes (same
# Debian release, same Python, same venv path, user, entrypoint and labels).
# Idempotent: the base layer is cached under a key of the pins (the lock file,
# the dependency list, this script), the archive under a key of every input; a
# change to the sources rebuilds the second layer only (seconds, where the base
# takes minutes), a warm call only prints the archive's path.
#
# Prints the archive path on its last line of stdout. Needs root (mmdebstrap in
# root mode, umoci writing files owned by other users) and, on first use, the
# Debian packages mmdebstrap and umoci (installed here through apt-get).
#
#   LATTICE_CACHE   cache root (default ~/.cache/lattice-operator)
#   IMAGE_NAME      image reference stored in the archive (default lattice-operator:<version>)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck disable=SC1091
source "$here/image.env"

cache="${LATTICE_CACHE:-$HOME/.cache/lattice-operator}"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/pyproject.toml" | head -n1)"
image_name="${IMAGE_NAME:-lattice-operator:${version}}"

# Tools from Debian's packages, at the pinned versions.
bash "$here/apt-pinned.sh" $IMAGE_TOOL_PACKAGES >&2

# The key covers everything that goes into the image: the pins, this script,
# the package sources and the lock file.
key="$(
  {
    cat "$here/image.env" "$0" "$root/pyproject.toml" "$root/requirements.lock" "$root/Containerfile"
    echo "$image_name"
    (cd "$root" && find operator adapters -type f \( -name '*.py' -o -name '*.yaml' -o -name '*.json' \
      -o -name '*.sh' -o -name 'py.typed' -o -name '*.html' -o -name '*.js' -o -name '*.css' \) -not -path '*/__pycache__/*' | LC_ALL=C sort | xargs sha256sum)
  } | sha256sum | cut -c1-16
)"
# The base layer's key: what decides the dependencies and the Debian base (the
# project's version line left out, so a release reuses the base).
base_key="$(
  { cat "$here/image.env" "$0" "$root/requirements.lock"; grep -v '^version = ' "$root/pyproject.toml"; } \
    | sha256sum | cut -c1-16
)"
outdir="$cache/image/${version}-${key}"
archive="$outdir/lattice-operator-oci.tar"
# One build at a time per cache (make test's node tests and its suite may both ask): a second
# caller waits, then finds the archive made.
mkdir -p "$cache/image"
exec 9>"$cache/image/.build.lock"
flock 9
if [ -f "$outdir/.stamp" ] && [ -f "$archive" ]; then
  echo "$archive"
  exit 0
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/lattice-image.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# 1. The operator's wheel (devtools/ is not copied: the dev tools are a distribution of their
#    own), and every runtime dependency as a binary wheel at the pinned
#    version (the lock file also pins the test and dev tools; only what the
#    wheel requires is fetched). The wheelhouse is cached by the lock's hash.
lock_key="$({ cat "$root/requirements.lock" "$here/image.env"; grep -v '^version = ' "$root/pyproject.toml"; } | sha256sum | cut -c1-16)"
wheelhouse="$cache/image/wheels-${lock_key}"
py="${PYTHON:-python3}"
echo "build-image: building the wheel" >&2
# From a copy, so no build/ or egg-info is left in (or reused from) the clone.
mkdir -p "$work/src"
cp -r "$root/pyproject.toml" "$root/README.md" "$root/operator" "$root/adapters" "$work/src/"
find "$work/src" \( -name __pycache__ -o -name '*.egg-info' \) -prune -exec rm -rf {} +
"$py" -m pip wheel --quiet --disable-pip-version-check --no-deps --wheel-dir "$work/wheel" "$work/src" >&2
wheel="$(ls "$work"/wheel/*.whl)"
if [ ! -f "$wheelhouse/.stamp" ]; then
  echo "build-image: fetching the pinned dependencies as wheels for CPython ${PY_VERSION}" >&2
  rm -rf "$wheelhouse.tmp" && mkdir -p "$wheelhouse.tmp"
  platforms=()
  for p in $WHEEL_PLATFORMS; do platforms+=(--platform "$p"); done
  "$py" -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
    "${platforms[@]}" --python-version "$PY_VERSION" --implementation cp \
    -c "$root/requirements.lock" --dest "$wheelhouse.tmp" "$wheel" >&2
  rm -f "$wheelhouse.tmp"/lattice_operator-*.whl
  touch "$wheelhouse.tmp/.stamp"
  rm -rf "$wheelhouse" && mv "$wheelhouse.tmp" "$wheelhouse"
fi
mkdir -p "$work/wheels"
cp "$wheelhouse"/*.whl "$wheel" "$work/wheels/"
cp "$root/requirements.lock" "$work/wheels/requirements.lock"

# 2. The base layer: Debian's minimal base plus Python, a venv in /opt/lattice
#    with the pinned dependencies only (no index), the non-root user. Cached.
#    The package sources are the host's own apt sources.
base="$cache/image/base-${base_key}"
export SOURCE_DATE_EPOCH
created="$(date -u -d "@${SOURCE_DATE_EPOCH}" +%Y-%m-%dT%H:%M:%SZ)"
if [ ! -f "$base/.stamp" ]; then
  sources="${APT_SOURCES:-/etc/apt/sources.list.d/debian.sources}"
  [ -f "$sources" ] || { echo "build-image: no apt sources file at $sources (set APT_SOURCES)" >&2; exit 1; }
  echo "build-image: building the base layer: debootstrapping ${DEBIAN_SUITE} with ${DEBIAN_PACKAGES} and the pinned dependencies" >&2
  # Every dependency of the wheel, as pip resolves it, then the wheel itself uninstalled:
  # the base holds exactly the dependencies, whatever the sources say later.
  mmdebstrap --quiet --mode=root --variant=minbase --format=tar \
    --include="${DEBIAN_PACKAGES}" \
    --skip=output/dev \
    --customize-hook='mkdir -p "$1/tmp/wheels"' \
    --customize-hook="sync-in $work/wheels /tmp/wheels" \
    --customize-hook='chroot "$1" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root python3 -m venv /opt/lattice' \
    --customize-hook='chroot "$1" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root /opt/lattice/bin/pip install --quiet --disable-pip-version-check --no-index --find-links /tmp/wheels -c /tmp/wheels/requirements.lock lattice-operator' \
    --customize-hook='chroot "$1" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root /opt/lattice/bin/pip uninstall --quiet --yes lattice-operator' \
    --customize-hook='rm -rf "$1/tmp/wheels" "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/usr/share/doc "$1"/usr/share/man "$1"/usr/share/locale' \
    --customize-hook='echo "lattice:x:65532:65532:lattice operator:/nonexistent:/usr/sbin/nologin" >> "$1/etc/passwd"' \
    --customize-hook='echo "lattice:x:65532:" >> "$1/etc/group"' \
    --customize-hook='chroot "$1" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root dpkg-query -W -f "\${Package}=\${Version}\n" > "$1/opt/lattice/debian-packages.txt"' \
    "${DEBIAN_SUITE}" "$work/rootfs.tar" "$sources" >&2
  rm -rf "$base.tmp" && mkdir -p "$base.tmp"
  umoci init --layout "$base.tmp/oci"
  umoci new --image "$base.tmp/oci:base"
  umoci raw add-layer --image "$base.tmp/oci:base" --history.created "$created" \
    --history.created_by "hack/build-image.sh (mmdebstrap ${DEBIAN_SUITE}, pinned dependencies)" "$work/rootfs.tar"
  rm -f "$work/rootfs.tar"
  echo "key=${base_key}" > "$base.tmp/.stamp"
  rm -rf "$base" && mv "$base.tmp" "$base"
fi

# 3. The second layer: the wheel installed into the base's venv by its own pip (no
#    dependency can come in: --no-deps, no index), then pip itself removed; umoci
#    records the difference as a layer.
echo "build-image: building the operator layer" >&2
layout="$work/oci"
cp -a "$base/oci" "$layout"
umoci unpack --image "$layout:base" "$work/bundle" >/dev/null
rootfs="$work/bundle/rootfs"
cp "$wheel" "$rootfs/tmp/"
in_image() { chroot "$rootfs" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"; }
in_image /opt/lattice/bin/pip install --quiet --disable-pip-version-check --no-index --no-deps "/tmp/$(basename "$wheel")"
in_image /opt/lattice/bin/pip check >&2
in_image /opt/lattice/bin/pip uninstall --quiet --yes pip
in_image /opt/lattice/bin/lattice --help >/dev/null
# The operator's distribution only (the dev tools, devtools/, are one of their own): `lattice dev`
# answers that they are not installed (writing no bytecode of what it imports into the layer).
dev_answer="$(in_image /usr/bin/env PYTHONDONTWRITEBYTECODE=1 /opt/lattice/bin/lattice dev 2>&1 || true)"
grep -q "the dev tools, which are not installed" <<<"$dev_answer" \
  || { echo "build-image: \`lattice dev\` in the image answered: $dev_answer" >&2; exit 1; }
rm -f "$rootfs/tmp/$(basename "$wheel")"
umoci repack --image "$layout:${version}" --history.created "$created" \
  --history.created_by "hack/build-image.sh (the lattice-operator wheel)" "$work/bundle"
umoci rm --image "$layout:base"

# 4. The image's config (user, entrypoint, environment, labels) and the name
#    containerd reads when it imports the archive.
umoci config --image "$layout:${version}" --created "$created" --history.created "$created" \
  --architecture amd64 --os linux --author "Lattice Operator" \
  --config.user 65532:65532 --config.workingdir / \
  --config.entrypoint /opt/lattice/bin/lattice --config.entrypoint run \
  --config.env PATH=/opt/lattice/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.env PYTHONDONTWRITEBYTECODE=1 --config.env PYTHONUNBUFFERED=1 --config.env HOME=/tmp \
  --config.label "org.opencontainers.image.title=lattice-operator" \
  --config.label "org.opencontainers.image.version=${version}" \
  --config.label "org.opencontainers.image.licenses=Apache-2.0" \
  --config.label "org.opencontainers.image.source=${IMAGE_SOURCE}" \
  --config.label "org.opencontainers.image.created=${created}"
umoci gc --layout "$layout"
"$py" - "$layout/index.json" "$image_name" <<'PY'
import json, sys
path, name = sys.argv[1], sys.argv[2]
index = json.load(open(path))
for manifest in index["manifests"]:
    manifest.setdefault("annotations", {})["io.containerd.image.name"] = name
json.dump(index, open(path, "w"), separators=(",", ":"))
PY

mkdir -p "$outdir.tmp"
tar --sort=name --mtime="@${SOURCE_DATE_EPOCH}" --owner=0 --group=0 --numeric-owner \
  -C "$layout" -cf "$outdir.tmp/lattice-operator-oci.tar" .
echo "$image_name" > "$outdir.tmp/image-name"
echo "key=${key}" > "$outdir.tmp/.stamp"
rm -rf "$outdir" && mv "$outdir.tmp" "$outdir"
echo "$archive"
