"""Runs asleep until their Sprite may be theirs, and who to wake when something changes.

Each Run's daemon registers one event for its life. A change of the Sprite (readiness,
policy, deletion) may concern every Run on it; a Run's end concerns only the Run next in
line, so only that one is woken: waking all ~30 Runs queued on a busy Sprite at every
hand-over cost each of them a look, a hand-over a few dozen looks.
"""

from __future__ import annotations

import asyncio

SpriteKey = tuple[str, str]
"""(namespace, Sprite name)."""


class SpriteWaiters:
    """Runs' wake-up events by Sprite and Run uid."""

    def __init__(self) -> None:
        self._by_sprite: dict[SpriteKey, dict[str, asyncio.Event]] = {}

    def add(self, sprite: SpriteKey, uid: str) -> asyncio.Event:
        event = asyncio.Event()
        self._by_sprite.setdefault(sprite, {})[uid] = event
        return event

    def remove(self, sprite: SpriteKey, uid: str) -> None:
        waiters = self._by_sprite.get(sprite)
        if waiters is None:
            return
        waiters.pop(uid, None)
        if not waiters:
            del self._by_sprite[sprite]

    def wake_all(self, sprite: SpriteKey) -> None:
        for event in self._by_sprite.get(sprite, {}).values():
            event.set()

    def wake(self, sprite: SpriteKey, uid: str) -> None:
        event = self._by_sprite.get(sprite, {}).get(uid)
        if event is not None:
            event.set()

    def __len__(self) -> int:
        return sum(len(w) for w in self._by_sprite.values())


__all__ = ["SpriteKey", "SpriteWaiters"]
