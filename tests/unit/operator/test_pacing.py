from __future__ import annotations

from lattice_operator.pacing import PatchPacer, TokenBucket
from tests.support.clock import FakeClock


def _phase_changed(old: dict[str, object] | None, new: dict[str, object]) -> bool:
    return old is None or old.get("phase") != new.get("phase")


def test_unchanged_snapshot_is_never_written() -> None:
    clock = FakeClock()
    pacer = PatchPacer(clock, urgent=_phase_changed)
    snap = {"phase": "Running", "count": 1}
    assert pacer.due(snap)
    pacer.written(snap)
    clock.advance(60)
    assert not pacer.due(dict(snap))
    assert pacer.wait_time(dict(snap)) is None


def test_changes_are_coalesced_to_one_per_interval() -> None:
    clock = FakeClock()
    pacer = PatchPacer(clock, min_interval=1.0, urgent=_phase_changed)
    pacer.written({"phase": "Running", "count": 1})
    writes = 0
    for i in range(2, 102):  # 100 changes over 5 seconds
        clock.advance(0.05)
        snap = {"phase": "Running", "count": i}
        if pacer.due(snap):
            pacer.written(snap)
            writes += 1
    assert 4 <= writes <= 5


def test_phase_transition_is_written_at_once() -> None:
    clock = FakeClock()
    pacer = PatchPacer(clock, min_interval=1.0, urgent=_phase_changed)
    pacer.written({"phase": "Running", "count": 1})
    clock.advance(0.01)
    assert not pacer.due({"phase": "Running", "count": 2})
    assert pacer.due({"phase": "Succeeded", "count": 2})


def test_wait_time_counts_down() -> None:
    clock = FakeClock()
    pacer = PatchPacer(clock, min_interval=1.0, urgent=_phase_changed)
    pacer.written({"phase": "Running", "count": 1})
    clock.advance(0.25)
    wait = pacer.wait_time({"phase": "Running", "count": 2})
    assert wait is not None
    assert abs(wait - 0.75) < 1e-9


def test_primed_snapshot_is_not_rewritten() -> None:
    pacer = PatchPacer(FakeClock())
    pacer.prime({"phase": "Running"})
    assert not pacer.due({"phase": "Running"})


def test_token_bucket_limits_bursts_and_refills() -> None:
    clock = FakeClock()
    bucket = TokenBucket(clock, rate=2.0, burst=5)
    assert [bucket.take() for _ in range(7)] == [True] * 5 + [False] * 2
    clock.advance(1.0)
    assert [bucket.take() for _ in range(3)] == [True, True, False]
    clock.advance(100)
    assert sum(bucket.take() for _ in range(10)) == 5
