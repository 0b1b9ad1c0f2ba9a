from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lattice_operator.reconcilers.sprite_claims import RunClaim, holder, next_in_line

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def claim(uid: str, phase: str, minute: int) -> RunClaim:
    return RunClaim(uid=uid, name=f"run-{uid}", created=T0 + timedelta(minutes=minute), phase=phase)


def test_alone_a_run_goes() -> None:
    assert holder([claim("a", "Pending", 0)], "a") is None


def test_the_oldest_pending_run_goes_first() -> None:
    claims = [claim("b", "Pending", 1), claim("a", "Pending", 0)]
    assert holder(claims, "a") is None
    first = holder(claims, "b")
    assert first is not None
    assert first.uid == "a"


def test_a_run_in_session_keeps_the_sprite_even_if_younger() -> None:
    claims = [claim("old", "Pending", 0), claim("young", "Running", 5)]
    first = holder(claims, "old")
    assert first is not None
    assert first.uid == "young"
    assert holder(claims, "young") is None


def test_waiting_runs_keep_the_sprite() -> None:
    claims = [claim("w", "Waiting", 0), claim("n", "Pending", 1)]
    first = holder(claims, "n")
    assert first is not None
    assert first.uid == "w"


def test_finished_runs_release_the_sprite() -> None:
    claims = [
        claim(u, p, i)
        for i, (u, p) in enumerate(
            [("s", "Succeeded"), ("f", "Failed"), ("c", "Canceled"), ("n", "Pending")]
        )
    ]
    assert holder(claims, "n") is None


def test_next_in_line_is_the_oldest_pending_run_once_nobody_holds_the_sprite() -> None:
    claims = [claim("done", "Succeeded", 0), claim("b", "Pending", 2), claim("a", "Pending", 1)]
    following = next_in_line(claims)
    assert following is not None
    assert following.uid == "a"


def test_nobody_is_next_while_a_run_holds_the_sprite_or_none_waits() -> None:
    assert next_in_line([claim("w", "Waiting", 0), claim("n", "Pending", 1)]) is None
    assert next_in_line([claim("r", "Starting", 3), claim("n", "Pending", 1)]) is None
    assert next_in_line([claim("done", "Failed", 0)]) is None
    assert next_in_line([]) is None
