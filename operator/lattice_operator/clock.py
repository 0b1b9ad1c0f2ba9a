"""The clock port: where time comes from (injected so that tests control it).

Dependency-free on purpose: every layer imports it.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


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
        return time.monotonic()


__all__ = ["Clock", "SystemClock"]
