"""Looking at host processes from a test (local server tests only), and starting them."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

SIGINT_IGNORED = [
    sys.executable,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "os.execv(sys.argv[1], sys.argv[1:])",
]
"""Prefix for a command line: runs it with SIGINT ignored (exec keeps it so), as a
non-interactive shell starts `cmd &` and as `make soak`'s runner was started."""


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def host_pids(described: dict[str, Any], inner: list[int]) -> list[int]:
    """The host's ids of processes a sprite reported by its own (`echo $!` inside).

    `described` is the local server's view of the sprite (`LocalSprites.describe`): with a
    container, pids inside are those of its PID namespace and are translated through
    `NSpid`; without one they are the host's already."""
    container = described.get("container")
    if not container:
        return list(inner)
    namespace = os.stat(f"/proc/{container['init_pid']}/ns/pid").st_ino
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(entry / "ns" / "pid").st_ino != namespace:
                continue
            status = (entry / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("NSpid:"):
                ids = [int(x) for x in line.split()[1:]]
                found[ids[-1]] = ids[0]
    missing = [p for p in inner if p not in found]
    assert not missing, f"no host process for {missing} in the sprite's namespace"
    return [found[p] for p in inner]


__all__ = ["alive", "host_pids"]
