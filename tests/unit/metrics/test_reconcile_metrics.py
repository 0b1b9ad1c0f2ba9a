"""reconcile_timer: one count and one duration per reconcile, with a bounded outcome."""

from __future__ import annotations

import asyncio

import pytest

from lattice_operator.metrics import RECONCILE_OUTCOMES, REGISTRY, reconcile_timer

KIND = "UnitTestKind"


class Refused(Exception):
    pass


def _count(outcome: str) -> float:
    return (
        REGISTRY.get_sample_value("lattice_reconcile_total", {"kind": KIND, "outcome": outcome})
        or 0.0
    )


def _observed() -> float:
    return (
        REGISTRY.get_sample_value("lattice_reconcile_duration_seconds_count", {"kind": KIND}) or 0.0
    )


def test_each_end_is_counted_once_with_its_outcome() -> None:
    before = {o: _count(o) for o in RECONCILE_OUTCOMES}
    observed = _observed()
    with reconcile_timer(KIND, blocked=(Refused,)):
        pass
    with pytest.raises(Refused), reconcile_timer(KIND, blocked=(Refused,)):
        raise Refused
    with pytest.raises(ValueError, match="retry"), reconcile_timer(KIND, blocked=(Refused,)):
        raise ValueError("retry")
    with pytest.raises(asyncio.CancelledError), reconcile_timer(KIND):
        raise asyncio.CancelledError
    assert {o: _count(o) - before[o] for o in RECONCILE_OUTCOMES} == {
        "ok": 1,
        "blocked": 1,
        "error": 2,
    }
    assert _observed() == observed + 4
