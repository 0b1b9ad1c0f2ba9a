"""What kopf keeps per object, kept to what a running daemon needs.

kopf keeps one `ResourceMemory` per object. For a kind with a daemon (Runs, HealthChecks;
Intents have the operator's own tasks) kopf 1.45 also keeps the object's last whole body in it
(`daemons_memory.live_fresh_body`, what its daemons read) — set on every event of such a kind,
before the daemons' filters are looked at, and kept for as long as the object exists, whether
or not a daemon runs or ever will again. A finished Run's body is ~30 KB of parsed JSON
(managedFields, the status's events and receipts): 10,000 finished Runs held ~300 MB.

`release_idle_bodies` drops the body of every object none of whose daemons is running; kopf
builds a new one from the next event of that object (as on its first event), so a daemon
started later reads the same as it would have. Nothing else of kopf's reads the kept body
between events. `keep_lean` does it every `interval` seconds, so a finished object's body
outlives its last event by at most that.

It also hands the C allocator's free pages back to the OS (glibc's `malloc_trim`) after a pass
that released bodies, and once a minute: the bodies, the API responses and each TLS
connection's read buffer (64 KiB: `boot.lean_tls_reads`) are malloc'ed by the event loop's
thread, and glibc keeps what a burst freed in that thread's arena otherwise (the RSS stays at
the burst's high-water mark). Trimming walks the free lists once (milliseconds); elsewhere
than glibc it does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from collections.abc import Callable

from kopf._core.reactor.inventory import ResourceMemories

log = logging.getLogger(__name__)

RELEASE_INTERVAL = 5.0
"""Seconds between passes: bodies of objects with no running daemon live at most this long."""
TRIM_EVERY = 12
"""Passes between two trims when no body was released (a minute)."""


def _malloc_trim() -> Callable[[], None]:
    """glibc's `malloc_trim(0)`, or nothing where the C library has none."""
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        trim = None
    if trim is None:
        return lambda: None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int

    def trim_all() -> None:
        trim(0)

    return trim_all


trim_allocator = _malloc_trim()


def release_idle_bodies(memories: ResourceMemories) -> int:
    """Drop the kept body of every object with no running daemon; how many were dropped."""
    released = 0
    for memory in memories.iter_all_memories():
        daemons = memory.daemons_memory
        if daemons.live_fresh_body is not None and not daemons.running_daemons:
            daemons.live_fresh_body = None
            released += 1
    return released


async def keep_lean(memories: ResourceMemories, interval: float = RELEASE_INTERVAL) -> None:
    """Run `release_idle_bodies` every `interval` seconds until cancelled."""
    passes = 0
    while True:
        await asyncio.sleep(interval)
        released = release_idle_bodies(memories)
        passes += 1
        if released:
            log.debug("released the kept bodies of %d objects with no running daemon", released)
        if released or passes % TRIM_EVERY == 0:
            trim_allocator()


__all__ = [
    "RELEASE_INTERVAL",
    "ResourceMemories",
    "keep_lean",
    "release_idle_bodies",
    "trim_allocator",
]
