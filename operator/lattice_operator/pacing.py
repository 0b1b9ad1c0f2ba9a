"""Pacing of writes to the API server: the Event rate limit (Run status writes are paced by
`reconcilers.run.recorder`)."""

from __future__ import annotations

from typing import Any

from lattice_operator.clock import Clock

JsonObject = dict[str, Any]


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


__all__ = ["TokenBucket"]
