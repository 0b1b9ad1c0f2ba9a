#!/usr/bin/env bash
# Build the root filesystem the local Sprites server gives each sprite (runc
# containers, --isolation container): Debian's minimal base from Debian's
# packages (mmdebstrap) plus the tools agents expect, unpacked as a directory.
# /root is traversable (0755): the server shares its own Python below it with
# sprites, read-only, so that `lattice mcp --sprite` runs inside.
# Idempotent: cached outside the clone under a key of its inputs; a warm call
# only prints the path.
#
# Prints the rootfs directory on its last line of stdout. Needs root and, on
# first use, the pinned mmdebstrap and runc (installed through apt-pinned.sh).
#
#   LATTICE_CACHE   cache root (default ~/.cache/lattice-operator)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck disable=SC1091
source "$here/image.env"
# shellcheck disable=SC1091
source "$here/sprite-rootfs.env"

cache="${LATTICE_CACHE:-$HOME/.cache/lattice-operator}"
bash "$here/apt-pinned.sh" $IMAGE_TOOL_PACKAGES >&2

key="$(cat "$here/sprite-rootfs.env" "$here/image.env" "$0" | sha256sum | cut -c1-16)"
outdir="$cache/sprite-rootfs/${SPRITE_DEBIAN_SUITE}-${key}"
# `current` names the rootfs for the local Sprites server (its --rootfs default).
point() { printf '%s\n' "$outdir/rootfs" > "$cache/sprite-rootfs/current.tmp" && mv "$cache/sprite-rootfs/current.tmp" "$cache/sprite-rootfs/current"; }
if [ -f "$outdir/.stamp" ] && [ -d "$outdir/rootfs" ]; then
  point
  echo "$outdir/rootfs"
  exit 0
fi

sources="${APT_SOURCES:-/etc/apt/sources.list.d/debian.sources}"
[ -f "$sources" ] || { echo "build-sprite-rootfs: no apt sources file at $sources (set APT_SOURCES)" >&2; exit 1; }
echo "build-sprite-rootfs: debootstrapping ${SPRITE_DEBIAN_SUITE} with ${SPRITE_DEBIAN_PACKAGES}" >&2
rm -rf "$outdir.tmp" && mkdir -p "$outdir.tmp"
export SOURCE_DATE_EPOCH="$SPRITE_SOURCE_DATE_EPOCH"
mmdebstrap --quiet --mode=root --variant=minbase \
  --include="${SPRITE_DEBIAN_PACKAGES}" \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/usr/share/doc "$1"/usr/share/man "$1"/usr/share/locale' \
  --customize-hook='mkdir -p "$1/workspace" "$1/.sprite" && chmod 0755 "$1/workspace" "$1/.sprite"' \
  --customize-hook='chmod 0755 "$1/root"' \
  --customize-hook='chroot "$1" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin dpkg-query -W -f "\${Package}=\${Version}\n" > "$1/etc/sprite-packages.txt"' \
  "${SPRITE_DEBIAN_SUITE}" "$outdir.tmp/rootfs" "$sources" >&2
echo "key=${key}" > "$outdir.tmp/.stamp"
rm -rf "$outdir" && mv "$outdir.tmp" "$outdir"
point
echo "$outdir/rootfs"
