"""The reaper: kills every sprite process of a server once that server is gone.

A server killed outright (`kill -9`, an OOM kill) cannot stop its sprites' processes;
those that left their session's process group (grandchildren, daemons that called
`setsid`) would run on. The server starts this small process beside it, in a session of
its own: it waits for the server to exit, however it exits, then kills everything left in
the server's sprite control groups, and unmounts the sprites' root filesystems.

    python -m lattice_devtools.sprites_local._reaper <server pid> <sprites dir> <group dir> [...]
"""

from __future__ import annotations

import os
import select
import signal
import sys
from pathlib import Path

from lattice_devtools.sprites_local._cgroups import kill_below


def main(argv: list[str]) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # only the server's exit ends it
    server = int(argv[0])
    sprites = argv[1]
    directories = [Path(a) for a in argv[2:]]
    try:
        fd = os.pidfd_open(server)
    except ProcessLookupError:
        pass  # already gone
    else:
        select.select([fd], [], [])
        os.close(fd)
    kill_below(directories, within=30.0)
    unmount_below(sprites)
    return 0


def unmount_below(top: str) -> None:
    """Detach every mount below `top` (the containers' overlays), deepest first."""
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    prefix = top.rstrip("/") + "/"
    points = []
    try:
        with open("/proc/self/mountinfo") as info:
            for line in info:
                point = line.split()[4].encode().decode("unicode_escape")
                if point.startswith(prefix):
                    points.append(point)
    except OSError:
        return
    for point in sorted(points, key=len, reverse=True):
        libc.umount2(os.fsencode(point), 2)  # MNT_DETACH


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
