"""One writer at a time per backend sprite.

The Sprite handlers (on a spec change, on delete), the fleet observer's resync and recreate,
and a remediation all converge the same backend sprite. Each decides from its own view of
the Sprite object; two of them at once can undo each other: a resync deciding from a view
taken before a spec change puts the old URL auth back right after the handler set the new
one, and no status write (preconditioned on the view's resourceVersion) can undo that.
Holding this lock for the read-decide-write of one backend sprite, and taking the view
inside it, makes the later writer decide from what the earlier one was asked to do.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from lattice_operator.api.v1alpha1 import Sprite

SpriteKey = tuple[str, str]
"""(namespace, name) of the Sprite object."""


def sprite_key(sprite: Sprite) -> SpriteKey:
    return (sprite.metadata.namespace or "", sprite.metadata.name)


class SpriteWriters:
    """A lock per Sprite, kept only while someone holds it or waits for it (bounded by the
    writers in flight, not by the number of Sprites ever seen)."""

    def __init__(self) -> None:
        self._locks: dict[SpriteKey, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: SpriteKey) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            _, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)
