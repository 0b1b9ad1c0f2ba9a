"""Reviews are asked once per period, not once per event; answers expire."""

from __future__ import annotations

from lattice_operator.stream.access import AccessCache, Identity
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
