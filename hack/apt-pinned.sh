#!/usr/bin/env bash
# Install Debian packages at exact versions (`name=version` arguments) with apt-get, only
# those missing or at another version. Needs root when something must be installed.
set -euo pipefail
# make's set-up lanes may call this at once (the sprites' rootfs, the node tools): one at a
# time, each checking what is installed only once the lock is its own.
lock="${APT_PINNED_LOCK:-/run/lock/lattice-apt-pinned.lock}"
exec 9>>"$lock" 2>/dev/null || exec 9>>"${TMPDIR:-/tmp}/lattice-apt-pinned.lock"
flock 9
want=()
for spec in "$@"; do
  name="${spec%%=*}" version="${spec#*=}"
  have="$(dpkg-query -W -f '${Version}' "$name" 2>/dev/null || true)"
  [ "$have" = "$version" ] || want+=("$spec")
done
[ "${#want[@]}" -eq 0 ] && exit 0
echo "apt-pinned: installing ${want[*]}" >&2
# No service a package ships (prometheus does) is started by its install: invoke-rc.d asks
# policy-rc.d, and 101 means "not now". The tests start what they need on 127.0.0.1.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi
export DEBIAN_FRONTEND=noninteractive
# Another apt user (not ours) holding dpkg's lock is waited for, not failed on.
wait_lock=(-o DPkg::Lock::Timeout=600)
apt-get install "${wait_lock[@]}" -y -q --no-install-recommends "${want[@]}" || {
  apt-get update "${wait_lock[@]}" -q && apt-get install "${wait_lock[@]}" -y -q --no-install-recommends "${want[@]}"
}
