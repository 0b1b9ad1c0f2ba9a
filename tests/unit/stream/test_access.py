"""Reviews are asked once per period, not once per event; answers expire."""

from __future__ import annotations

import pytest

from lattice_operator.stream.access import AccessCache, Identity, ReviewLimits, TooManyReviews
from lattice_operator.stream.envelope import Subject
from tests.support.clock import FakeClock

ALICE = Identity(user="alice", groups=("dev",))
RUN = Subject(namespace="a", resource="runs", name="r1")


class CountingReviews:
    def __init__(self) -> None:
        self.tokens = 0
        self.checks = 0
        self.allowed = True

    async def authenticate(self, token: str) -> Identity | None:
        self.tokens += 1
        return ALICE if token == "good" else None

    async def may_get(self, who: Identity, subject: Subject) -> bool:
        self.checks += 1
        return self.allowed


async def test_answers_are_reused_within_their_time_and_asked_again_after() -> None:
    reviews, clock = CountingReviews(), FakeClock()
    cache = AccessCache(reviews, clock, ttl=10)
    assert await cache.authenticate("good") == ALICE
    assert await cache.authenticate("bad") is None
    for _ in range(100):
        assert await cache.authenticate("good") == ALICE
        assert await cache.may_get(ALICE, RUN)
    assert (reviews.tokens, reviews.checks) == (2, 1)
    reviews.allowed = False  # a RoleBinding removed
    clock.advance(10.5)
    assert not await cache.may_get(ALICE, RUN)
    assert reviews.checks == 2


async def test_the_cache_is_bounded() -> None:
    reviews, clock = CountingReviews(), FakeClock()
    cache = AccessCache(reviews, clock, ttl=60, size=50)
    for n in range(500):
        await cache.may_get(ALICE, Subject(namespace="a", resource="runs", name=f"r{n}"))
    assert len(cache._answers) <= 50


async def test_unknown_tokens_are_rate_limited_per_client_address() -> None:
    reviews, clock = CountingReviews(), FakeClock()
    cache = AccessCache(reviews, clock, limits=ReviewLimits(per_minute=60, burst=3))
    for n in range(3):
        assert await cache.authenticate(f"garbage-{n}", "10.0.0.1") is None
    with pytest.raises(TooManyReviews) as refused:
        await cache.authenticate("garbage-3", "10.0.0.1")
    assert refused.value.retry_after == 1
    assert reviews.tokens == 3  # the fourth never reached the API server
    # A refused token is answered from memory (no review, no budget) ...
    assert await cache.authenticate("garbage-0", "10.0.0.1") is None
    # ... another address has its own budget, and a known token needs none.
    assert await cache.authenticate("good", "10.0.0.2") == ALICE
    assert await cache.authenticate("good", "10.0.0.1") == ALICE
    assert reviews.tokens == 4
    clock.advance(1.0)  # one more review per second
    assert await cache.authenticate("garbage-4", "10.0.0.1") is None
    assert reviews.tokens == 5


async def test_refused_tokens_never_push_out_accepted_ones_and_all_tables_are_bounded() -> None:
    reviews, clock = CountingReviews(), FakeClock()
    cache = AccessCache(reviews, clock, size=50, limits=ReviewLimits(refused_ttl=5, clients=100))
    assert await cache.authenticate("good", "10.0.0.1") == ALICE
    for n in range(1_000):  # each from an address of its own: no budget runs out
        assert await cache.authenticate(f"garbage-{n}", f"10.1.{n // 256}.{n % 256}") is None
    assert await cache.authenticate("good", "10.0.0.1") == ALICE
    assert reviews.tokens == 1_001  # "good" was reviewed once
    assert len(cache._refused) <= 50
    assert len(cache._budgets) <= 100
    clock.advance(5.5)  # a refused token is asked about again after refused_ttl
    assert await cache.authenticate("garbage-999", "10.0.0.9") is None
    assert reviews.tokens == 1_002
