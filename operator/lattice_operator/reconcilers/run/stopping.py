"""Waiting that a stop interrupts: a Run's daemon is told to stop when the operator exits or
the Run is deleted, and then detaches at once (the session keeps running)."""

from __future__ import annotations

import asyncio
import contextlib


class Stop(Exception):
    """The daemon was told to stop: detach, keep the session."""


class SessionLostError(Exception):
    """Re-attaching to a session failed past the deadline."""


class Stopper:
    """The daemon's stop signal, and sleeps that end early when it is set."""

    def __init__(self, stopped: asyncio.Event) -> None:
        self.event = stopped

    @property
    def stopped(self) -> bool:
        return self.event.is_set()

    def check(self) -> None:
        if self.event.is_set():
            raise Stop

    async def sleep(self, seconds: float, wake: asyncio.Event | None = None) -> None:
        """Sleep `seconds`, less if stopped (then raise Stop) or if `wake` is set meanwhile."""
        if wake is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.event.wait(), timeout=seconds)
        else:
            waiters = [asyncio.ensure_future(self.event.wait()), asyncio.ensure_future(wake.wait())]
            try:
                await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()
        self.check()


__all__ = ["SessionLostError", "Stop", "Stopper"]
