"""Retries where the retry class allows: transport errors and timeouts, 429 after Retry-After.

Jittered exponential backoff ("full jitter") under an overall deadline. Non-idempotent calls
(create, exec start) are retried only when the request provably never reached the backend:
a refused connection, or a 429 (the backend refused to execute it).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from lattice_operator.clock import Clock, SystemClock
from lattice_operator.metrics import BACKEND_THROTTLED
from lattice_operator.ports.errors import (
    AdapterError,
    ExitStatusUnknown,
    RateLimited,
    Timeout,
    TransportError,
)

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]


class RetryPolicy(BaseModel):
    """How often and how long to retry a failed call."""

    # No use_attribute_docstrings: no schema is made of these, and reading the docstrings
    # when the class is defined is start-up CPU (see modeling.ApiModel).
    model_config = ConfigDict(frozen=True, extra="forbid")

    max_attempts: int = Field(default=5, ge=1)
    """Attempts in total, the first included."""
    base_delay: float = Field(default=0.2, gt=0)
    """The first backoff ceiling in seconds; doubles per attempt."""
    max_delay: float = Field(default=5.0, gt=0)
    """The largest backoff ceiling in seconds."""
    deadline: float = Field(default=60.0, gt=0)
    """No retry starts after this many seconds since the first attempt."""
    max_retry_after: float = Field(default=60.0, ge=0)
    """A longer Retry-After than this is not waited for: the error is raised instead."""

    def delay_for(
        self, error: AdapterError, attempt: int, *, idempotent: bool, rng: random.Random
    ) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or None when it must not be retried."""
        if isinstance(error, RateLimited):
            if error.retry_after is None:
                return self._backoff(attempt, rng)
            if error.retry_after > self.max_retry_after:
                return None
            # A little jitter so that many waiting callers do not return in lock-step.
            return error.retry_after + rng.uniform(0, self.base_delay)
        if isinstance(error, ExitStatusUnknown):
            return None
        if isinstance(error, TransportError):
            if idempotent or not error.maybe_executed:
                return self._backoff(attempt, rng)
            return None
        if isinstance(error, Timeout) and idempotent:
            return self._backoff(attempt, rng)
        return None

    def _backoff(self, attempt: int, rng: random.Random) -> float:
        ceiling = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        return rng.uniform(0, ceiling)


async def call_with_retry(
    policy: RetryPolicy,
    operation: Callable[[], Awaitable[T]],
    *,
    idempotent: bool,
    clock: Clock | None = None,
    sleep: Sleep = asyncio.sleep,
    rng: random.Random | None = None,
) -> T:
    """Run `operation`, retrying per `policy`; the last error is raised when retries end."""
    clock = clock or SystemClock()
    rng = rng or random.Random()
    started = clock.monotonic()
    attempt = 0
    while True:
        attempt += 1
        try:
            return await operation()
        except AdapterError as error:
            if isinstance(error, RateLimited):
                BACKEND_THROTTLED.inc()
            delay = policy.delay_for(error, attempt, idempotent=idempotent, rng=rng)
            if delay is None or attempt >= policy.max_attempts:
                raise
            if clock.monotonic() - started + delay > policy.deadline:
                raise
            await sleep(delay)


__all__ = ["RetryPolicy", "call_with_retry"]
