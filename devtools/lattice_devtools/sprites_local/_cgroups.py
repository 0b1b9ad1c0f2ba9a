"""One control group per sprite: CPU, memory and process-count limits, and a way to kill
every process the sprite ever started (grandchildren, daemons that called `setsid`).

cgroup v1 (one hierarchy per controller, as on this machine) and v2 (the unified tree) are
both handled. The groups live below the server's own group in each hierarchy (so limits
that apply to the server still apply to its sprites), under `lattice-sprites/<key>/`, where
the key names the server's state directory: a restarted server finds the groups of its
sprites again, and a server that was killed is cleaned up after by its reaper.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

_log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
_V1_CONTROLLERS = ("pids", "memory", "cpu")


class CgroupError(RuntimeError):
    """Control groups cannot be used here (and why)."""


@dataclass(frozen=True)
class Limits:
    """What one sprite may use."""

    cpus: float = 1.0
    """CPU time as a number of CPUs (0.5 = half of one)."""
    memory_bytes: int = 1024 * 1024 * 1024
    """Memory (resident and page cache) before the kernel's OOM killer acts in the sprite."""
    pids: int = 512
    """Processes and threads at once (fork bombs stop here)."""


def server_key(state_dir: Path) -> str:
    return hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:12]


def _own_path(controller: str | None) -> str:
    """This process's group in a v1 controller's hierarchy (or the v2 tree for None)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, names, path = line.split(":", 2)
        if controller is None and number == "0" and names == "":
            return path
        if controller is not None and controller in names.split(","):
            return path
    raise CgroupError(f"this process is in no {controller or 'v2'} cgroup")


def is_v2() -> bool:
    return (CGROUP_ROOT / "cgroup.controllers").exists()


class SpriteGroups:
    """The control groups of all sprites of one server."""

    def __init__(self, state_dir: Path, limits: Limits) -> None:
        self.limits = limits
        self.key = server_key(state_dir)
        self.v2 = is_v2()
        self.controllers: list[tuple[str, Path]]
        """(controller, the server's group in its hierarchy); "" for the v2 tree."""
        if self.v2:
            self.controllers = [("", CGROUP_ROOT / "lattice-sprites" / self.key)]
        else:
            self.controllers = [
                (c, CGROUP_ROOT / c / _own_path(c).lstrip("/") / "lattice-sprites" / self.key)
                for c in _V1_CONTROLLERS
            ]
        self.bases = [base for _, base in self.controllers]

    def check(self) -> None:
        """Create the server's groups (or say why they cannot be)."""
        try:
            for base in self.bases:
                base.mkdir(parents=True, exist_ok=True)
                # A reaper that cleaned up after an earlier server left forks stopped here
                # (pids.max 0 stops a fork bomb while it kills): open them again.
                if (base / "pids.max").exists():
                    (base / "pids.max").write_text("max")
            if self.v2:
                for parent in (self.bases[0].parent, self.bases[0]):
                    (parent / "cgroup.subtree_control").write_text("+pids +memory +cpu")
        except OSError as exc:
            raise CgroupError(
                f"cannot create control groups under {self.bases[0].parent} ({exc.strerror}): "
                "sprite limits need root and a writable /sys/fs/cgroup"
            ) from None

    def dirs(self, sprite: str) -> list[Path]:
        return [base / sprite for base in self.bases]

    def create(self, sprite: str) -> list[str]:
        """The sprite's groups with their limits; the `cgroup.procs` files a process writes
        "0" into to join them."""
        limits = self.limits
        for controller, base in self.controllers:
            directory = base / sprite
            directory.mkdir(exist_ok=True)
            period = 100_000
            quota = max(1000, int(limits.cpus * period))
            if self.v2:
                _write(directory / "pids.max", str(limits.pids))
                _write(directory / "memory.max", str(limits.memory_bytes))
                _write(directory / "memory.swap.max", "0", optional=True)
                _write(directory / "cpu.max", f"{quota} {period}")
            elif controller == "pids":
                _write(directory / "pids.max", str(limits.pids))
            elif controller == "memory":
                _write(directory / "memory.limit_in_bytes", str(limits.memory_bytes))
                memsw = directory / "memory.memsw.limit_in_bytes"
                _write(memsw, str(limits.memory_bytes), optional=True)
            else:
                _write(directory / "cpu.cfs_period_us", str(period))
                _write(directory / "cpu.cfs_quota_us", str(quota))
        return [str(d / "cgroup.procs") for d in self.dirs(sprite)]

    def pids(self, sprite: str) -> set[int]:
        return _pids_below(self.dirs(sprite)[0])

    def kill(self, sprite: str, within: float = 10.0) -> bool:
        """Kill every process in the sprite's groups; True once none is left. The groups
        stay, with their limits, for the sprite's next processes."""
        done = kill_below(self.dirs(sprite), within)
        if all(d.is_dir() for d in self.dirs(sprite)):
            self.create(sprite)  # pids.max back from 0
        return done

    def remove(self, sprite: str) -> None:
        """Kill what is left and remove the sprite's groups."""
        kill_below(self.dirs(sprite))
        for directory in self.dirs(sprite):
            _remove_tree(directory)

    def leftovers(self, known: set[str]) -> list[str]:
        """Groups of sprites this server no longer has (deleted while it was down)."""
        base = self.bases[0]
        if not base.is_dir():
            return []
        return sorted(p.name for p in base.iterdir() if p.is_dir() and p.name not in known)


def _write(path: Path, value: str, *, optional: bool = False) -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        if optional and exc.errno in (errno.ENOENT, errno.EACCES, errno.EINVAL, errno.EPERM):
            return
        raise


def _pids_below(directory: Path) -> set[int]:
    found: set[int] = set()
    if not directory.is_dir():
        return found
    for procs in directory.rglob("cgroup.procs"):
        with contextlib.suppress(OSError, ValueError):
            found.update(int(line) for line in procs.read_text().split())
    return found


def kill_below(directories: list[Path], within: float = 10.0) -> bool:
    """SIGKILL every process in these groups (and their children) until none is left. New
    forks are stopped first (pids.max 0 in v1, cgroup.kill in v2), so a fork bomb cannot
    outrun the loop."""
    for directory in directories:
        for path in (directory / "cgroup.kill", directory / "pids.max"):
            if path.exists():
                with contextlib.suppress(OSError):
                    path.write_text("1" if path.name == "cgroup.kill" else "0")
    deadline = time.monotonic() + within
    while True:
        pids: set[int] = set()
        for directory in directories:
            pids |= _pids_below(directory)
        if not pids:
            return True
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            _log.warning("processes still alive in %s: %s", directories[0], sorted(pids)[:10])
            return False
        time.sleep(0.02)


def _remove_tree(directory: Path) -> None:
    if not directory.is_dir():
        return
    # Groups are removed children first; their files cannot be deleted, only the dirs.
    for child in sorted((p for p in directory.rglob("*") if p.is_dir()), reverse=True):
        with contextlib.suppress(OSError):
            child.rmdir()
    with contextlib.suppress(OSError):
        directory.rmdir()


__all__ = [
    "CgroupError",
    "Limits",
    "SpriteGroups",
    "is_v2",
    "kill_below",
    "server_key",
]
