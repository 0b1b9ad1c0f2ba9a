"""A SpriteBackend wrapper that measures every call (latency, errors by failure class)."""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from lattice_operator.metrics import BACKEND_CALL_SECONDS, BACKEND_ERRORS
from lattice_operator.ports.errors import AdapterError
from lattice_operator.ports.sprites import SpriteBackend


class InstrumentedBackend:
    """Forwards to the wrapped backend; coroutine methods are timed and their errors counted."""

    def __init__(self, inner: SpriteBackend) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not inspect.iscoroutinefunction(attr):
            return attr
        return _measured(name, attr)


def _measured(operation: str, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    latency = BACKEND_CALL_SECONDS.labels(operation=operation)

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return await fn(*args, **kwargs)
        except AdapterError as exc:
            BACKEND_ERRORS.labels(operation=operation, failure_class=exc.failure_class).inc()
            raise
        finally:
            latency.observe(time.monotonic() - started)

    return call


def instrumented(backend: SpriteBackend) -> SpriteBackend:
    """`backend`, measured."""
    return cast(SpriteBackend, InstrumentedBackend(backend))
