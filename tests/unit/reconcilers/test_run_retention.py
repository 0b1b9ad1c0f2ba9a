"""Finished Runs past their TTL or beyond the per-Sprite history limit are deleted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lattice_operator.reconcilers.run_retention import expired_runs
from lattice_operator.reconcilers.sprite_claims import RunClaim

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def claim(name: str, phase: str = "Succeeded", *, done: int | None = 0, **kw: object) -> RunClaim:
    finished = T0 + timedelta(minutes=done) if done is not None else None
    return RunClaim(uid=f"u-{name}", name=name, created=T0, phase=phase, finished=finished, **kw)  # type: ignore[arg-type]


def names(claims: list[RunClaim], *, now_minutes: float, limit: int = 0) -> list[str]:
    now = T0 + timedelta(minutes=now_minutes)
    return [e.name for e in expired_runs({("ns", "box"): claims}, now=now, history_limit=limit)]


def test_ttl_after_finish() -> None:
    runs = [claim("a", ttl=60), claim("b", ttl=600), claim("c")]
    assert names(runs, now_minutes=0.5) == []
    assert names(runs, now_minutes=1) == ["a"]
    assert sorted(names(runs, now_minutes=10)) == ["a", "b"]


def test_active_runs_are_never_deleted() -> None:
    runs = [claim("live", "Running", done=None, ttl=0), claim("waiting", "Waiting", ttl=0)]
    assert names(runs, now_minutes=100, limit=1) == []


def test_history_limit_keeps_the_newest_finished_per_sprite() -> None:
    runs = [claim(f"r{i}", "Failed" if i % 2 else "Succeeded", done=i) for i in range(5)]
    assert sorted(names(runs, now_minutes=10, limit=2)) == ["r0", "r1", "r2"]
    assert names(runs, now_minutes=10, limit=0) == []  # 0 keeps all


def test_runs_an_intent_created_go_with_their_intent() -> None:
    runs = [claim("mine", ttl=0, from_intent=True), claim("old", done=-5, from_intent=True)]
    assert names(runs, now_minutes=10, limit=1) == []


def test_the_limit_counts_each_sprite_apart() -> None:
    claims = {("ns", "a"): [claim("a1", done=1)], ("ns", "b"): [claim("b1", done=2)]}
    assert expired_runs(claims, now=T0 + timedelta(hours=1), history_limit=1) == []
