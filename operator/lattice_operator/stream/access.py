"""Who may subscribe, and which events each subscriber may see.

A subscriber authenticates with a Kubernetes bearer token (TokenReview) and sees an event
only if it may `get` the event's object (SubjectAccessReview). Answers are cached for a few
seconds per (user, namespace, resource, name): a stream of events about one Run costs one
review per subscriber per period, not one per event. A token nobody knows costs the API
server a TokenReview: refused tokens are remembered apart (garbage never pushes an accepted
token out), and each client address may cause only so many reviews (TooManyReviews).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from lattice_operator.clock import Clock
from lattice_operator.errors import LatticeError
from lattice_operator.pacing import TokenBucket
from lattice_operator.stream.envelope import Subject


class TooManyReviews(LatticeError):
    """A client address asked for more TokenReviews than its rate allows (answered 429)."""

    def __init__(self, client: str, retry_after: int) -> None:
        super().__init__(f"too many unknown tokens from {client}; retry in {retry_after} s")
        self.client = client
        self.retry_after = retry_after


@dataclass(frozen=True)
class ReviewLimits:
    """How often one client address may make the API server review a token."""

    per_minute: float = 30.0
    burst: int = 10
    refused_ttl: float = 5.0
    """Seconds a refused token is answered from memory."""
    clients: int = 10_000
    """Client addresses whose budget is remembered (the least recently seen go first)."""


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

    def __init__(
        self,
        reviews: Reviews,
        clock: Clock,
        *,
        ttl: float = 10.0,
        size: int = 10_000,
        limits: ReviewLimits | None = None,
    ):
        self._reviews = reviews
        self._clock = clock
        self._ttl = ttl
        self._size = size
        self._limits = limits or ReviewLimits()
        self._tokens: dict[str, tuple[float, Identity | None]] = {}
        self._refused: dict[str, tuple[float, Identity | None]] = {}
        self._answers: dict[tuple[Identity, Subject], tuple[float, bool]] = {}
        self._budgets: dict[str, TokenBucket] = {}

    async def authenticate(self, token: str, client: str = "") -> Identity | None:
        """The token's user, None when the API server refuses it; TooManyReviews when
        `client` (its address) has caused too many reviews of tokens not in memory."""
        now = self._clock.monotonic()
        hit = self._tokens.get(token) or self._refused.get(token)
        if hit is not None and hit[0] > now:
            return hit[1]
        self._spend(client)
        who = await self._reviews.authenticate(token)
        if who is None:
            self._remember(self._refused, token, (now + self._limits.refused_ttl, None))
        else:
            self._remember(self._tokens, token, (now + self._ttl, who))
        return who

    def _spend(self, client: str) -> None:
        limits = self._limits
        bucket = self._budgets.pop(client, None)
        if bucket is None:
            bucket = TokenBucket(self._clock, rate=limits.per_minute / 60, burst=limits.burst)
            while len(self._budgets) >= limits.clients:
                del self._budgets[next(iter(self._budgets))]
        self._budgets[client] = bucket  # last: the least recently seen are first to go
        if not bucket.take():
            raise TooManyReviews(client, max(1, math.ceil(60 / limits.per_minute)))

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


__all__ = ["AccessCache", "Identity", "ReviewLimits", "Reviews", "TooManyReviews"]
