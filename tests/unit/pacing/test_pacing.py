from __future__ import annotations

from lattice_operator.pacing import TokenBucket
from tests.support.clock import FakeClock


def _phase_changed(old: dict[str, object] | None, new: dict[str, object]) -> bool:
    return old is None or old.get("phase") != new.get("phase")


def test_token_bucket_limits_bursts_and_refills() -> None:
    clock = FakeClock()
    bucket = TokenBucket(clock, rate=2.0, burst=5)
    assert [bucket.take() for _ in range(7)] == [True] * 5 + [False] * 2
    clock.advance(1.0)
    assert [bucket.take() for _ in range(3)] == [True, True, False]
    clock.advance(100)
    assert sum(bucket.take() for _ in range(10)) == 5
