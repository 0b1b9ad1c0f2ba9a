"""The reaper: kills every sprite process of a server once that server is gone.

A server killed outright (`kill -9`, an OOM kill) cannot stop its sprites' processes;
those that left their session's process group (grandchildren, daemons that called
`setsid`) would run on. The server starts this small process beside it, in a session of
its own: it waits for the server to exit, however it exits, then kills everything left in
the server's sprite control groups.

    python -m lattice_adapters.sprites_local._reaper <server pid> <group dir> [...]
"""

from __future__ import annotations

import os
import select
import signal
import sys
from pathlib import Path

from lattice_adapters.sprites_local._cgroups import kill_below


def main(argv: list[str]) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # only the server's exit ends it
    server = int(argv[0])
    directories = [Path(a) for a in argv[1:]]
    try:
        fd = os.pidfd_open(server)
    except ProcessLookupError:
        pass  # already gone
    else:
        select.select([fd], [], [])
        os.close(fd)
    kill_below(directories, within=30.0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
