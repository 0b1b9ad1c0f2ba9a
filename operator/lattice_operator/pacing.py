"""Pacing of writes to the API server: coalesced status patches and Event rate limits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lattice_operator.clock import Clock

JsonObject = dict[str, Any]


class PatchPacer:
    """Decides when a status snapshot must be written.

    Never when nothing changed; at once when `urgent(previous, current)` says so
    (a phase transition); otherwise at most one write per `min_interval` seconds.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        min_interval: float = 1.0,
        urgent: Callable[[JsonObject | None, JsonObject], bool] | None = None,
    ) -> None:
        self._clock = clock
        self._min_interval = min_interval
        self._urgent = urgent or (lambda old, new: old is None)
        self._last: JsonObject | None = None
        self._last_time: float | None = None

    @property
    def last_written(self) -> JsonObject | None:
        return self._last

    def prime(self, snapshot: JsonObject) -> None:
        """Record what is already stored (after a restart) without writing it."""
        self._last = snapshot

    def due(self, snapshot: JsonObject) -> bool:
        if snapshot == self._last:
            return False
        if self._urgent(self._last, snapshot) or self._last_time is None:
            return True
        return self._clock.monotonic() - self._last_time >= self._min_interval

    def wait_time(self, snapshot: JsonObject) -> float | None:
        """Seconds until `snapshot` becomes due (0 if due now), None if nothing to write."""
        if snapshot == self._last:
            return None
        if self.due(snapshot):
            return 0.0
        assert self._last_time is not None
        return max(0.0, self._last_time + self._min_interval - self._clock.monotonic())

    def written(self, snapshot: JsonObject) -> None:
        self._last = snapshot
        self._last_time = self._clock.monotonic()


class TokenBucket:
    """A token bucket: `burst` tokens, refilled at `rate` per second."""

    def __init__(self, clock: Clock, *, rate: float, burst: int) -> None:
        self._clock = clock
        self._rate = rate
        self._burst = float(burst)
        self._tokens = float(burst)
        self._stamp = clock.monotonic()

    def take(self) -> bool:
        now = self._clock.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
        self._stamp = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


__all__ = ["PatchPacer", "TokenBucket"]
