"""Who may subscribe, and which events each subscriber may see.

A subscriber authenticates with a Kubernetes bearer token (TokenReview) and sees an event
only if it may `get` the event's object (SubjectAccessReview). Answers are cached for a few
seconds per (user, namespace, resource, name): a stream of events about one Run costs one
review per subscriber per period, not one per event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from lattice_operator.clock import Clock
from lattice_operator.stream.envelope import Subject


@dataclass(frozen=True)
class Identity:
    """A user as the API server authenticated it."""

    user: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


class Reviews(Protocol):
    """The API server's TokenReview and SubjectAccessReview."""

    async def authenticate(self, token: str) -> Identity | None: ...

    async def may_get(self, who: Identity, subject: Subject) -> bool: ...


class AccessCache:
    """Reviews' answers remembered for `ttl` seconds (bounded)."""

    def __init__(self, reviews: Reviews, clock: Clock, *, ttl: float = 10.0, size: int = 10_000):
        self._reviews = reviews
        self._clock = clock
        self._ttl = ttl
        self._size = size
        self._tokens: dict[str, tuple[float, Identity | None]] = {}
        self._answers: dict[tuple[Identity, Subject], tuple[float, bool]] = {}

    async def authenticate(self, token: str) -> Identity | None:
        now = self._clock.monotonic()
        hit = self._tokens.get(token)
        if hit is not None and hit[0] > now:
            return hit[1]
        who = await self._reviews.authenticate(token)
        self._remember(self._tokens, token, (now + self._ttl, who))
        return who

    def known(self, who: Identity, subject: Subject) -> bool | None:
        """The cached answer, or None when a review is due."""
        hit = self._answers.get((who, subject))
        if hit is None or hit[0] <= self._clock.monotonic():
            return None
        return hit[1]

    async def may_get(self, who: Identity, subject: Subject) -> bool:
        cached = self.known(who, subject)
        if cached is not None:
            return cached
        allowed = await self._reviews.may_get(who, subject)
        self._remember(
            self._answers, (who, subject), (self._clock.monotonic() + self._ttl, allowed)
        )
        return allowed

    def _remember(self, table: dict, key: object, value: object) -> None:  # type: ignore[type-arg]
        if len(table) >= self._size:
            now = self._clock.monotonic()
            for stale in [k for k, v in table.items() if v[0] <= now]:
                del table[stale]
            while len(table) >= self._size:
                del table[next(iter(table))]
        table[key] = value


__all__ = ["AccessCache", "Identity", "Reviews"]
