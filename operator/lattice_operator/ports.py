"""Protocols the reconcilers depend on; adapters implement them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from lattice_operator.backend import (
    CheckpointInfo,
    ExecOutput,
    ExecSession,
    FileStat,
    KillEvent,
    KillResult,
    ServiceEvent,
    ServiceInfo,
    SessionInfo,
    SpriteBackend,
    SpriteInfo,
    SpritePage,
)


class Clock(Protocol):
    """Where the current time comes from (injected so tests control it)."""

    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """A monotonic clock in seconds, for deadlines and rate limits."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        import time

        return time.monotonic()


__all__ = [
    "CheckpointInfo",
    "Clock",
    "ExecOutput",
    "ExecSession",
    "FileStat",
    "KillEvent",
    "KillResult",
    "ServiceEvent",
    "ServiceInfo",
    "SessionInfo",
    "SpriteBackend",
    "SpriteInfo",
    "SpritePage",
    "SystemClock",
]
