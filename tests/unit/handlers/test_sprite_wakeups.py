"""Who a Run's watch event wakes: the Run next in line on its Sprite, not the whole queue."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import kopf

# handlers/_wakeups (the Runs' event handler's logic) under test, without kopf's event loop.
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.handlers._wakeups import wake_for_run
from lattice_operator.reconcilers.intent_workers import IntentWorkers, Work
from lattice_operator.reconcilers.sprite_claims import RunClaim
from lattice_operator.reconcilers.sprite_waiters import SpriteWaiters

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SPRITE = ("ns", "box")


def claim(uid: str, phase: str, minute: int) -> RunClaim:
    return RunClaim(uid=uid, name=f"run-{uid}", created=T0 + timedelta(minutes=minute), phase=phase)


def run_body(uid: str, phase: str, *, generation: int = 1, observed: int | None = 1) -> kopf.Body:
    status: dict[str, Any] = {"phase": phase}
    if observed is not None:
        status["observedGeneration"] = observed
    return kopf.Body(
        {
            "metadata": {
                "namespace": "ns",
                "name": f"run-{uid}",
                "uid": uid,
                "generation": generation,
            },
            "spec": {"spriteRef": {"name": "box"}, "intentRef": {"name": "task"}},
            "status": status,
        }
    )


def queue(ctx: OperatorContext, *uids: str) -> dict[str, Any]:
    return {uid: ctx.sprite_waiters.add(SPRITE, uid) for uid in uids}


def test_a_run_that_ends_wakes_only_the_run_next_in_line() -> None:
    ctx = OperatorContext()
    events = queue(ctx, "a", "b", "c")
    claims = {
        SPRITE: [
            claim("done", "Succeeded", 0),
            claim("b", "Pending", 2),
            claim("a", "Pending", 1),
            claim("c", "Pending", 3),
        ]
    }
    wake_for_run(ctx, "MODIFIED", run_body("done", "Succeeded"), claims)
    assert [uid for uid, e in events.items() if e.is_set()] == ["a"]


def test_a_deleted_run_wakes_the_next_one_too() -> None:
    ctx = OperatorContext()
    events = queue(ctx, "a", "b")
    claims = {SPRITE: [claim("b", "Pending", 2), claim("a", "Pending", 1)]}
    # kopf has dropped the deleted Run's claim; its last body still says Running
    wake_for_run(ctx, "DELETED", run_body("gone", "Running"), claims)
    assert [uid for uid, e in events.items() if e.is_set()] == ["a"]


def test_nobody_is_woken_while_another_run_holds_the_sprite() -> None:
    ctx = OperatorContext()
    events = queue(ctx, "a", "b")
    claims = {
        SPRITE: [claim("x", "Running", 0), claim("a", "Pending", 1), claim("b", "Pending", 2)]
    }
    wake_for_run(ctx, "MODIFIED", run_body("y", "Failed"), claims)
    assert not any(e.is_set() for e in events.values())


def test_a_change_of_its_own_spec_wakes_a_waiting_run() -> None:
    ctx = OperatorContext()
    events = queue(ctx, "a", "b")
    claims = {
        SPRITE: [claim("x", "Running", 0), claim("a", "Pending", 1), claim("b", "Pending", 2)]
    }
    wake_for_run(ctx, "MODIFIED", run_body("b", "Pending", generation=2, observed=1), claims)
    assert [uid for uid, e in events.items() if e.is_set()] == ["b"]
    events["b"].clear()
    wake_for_run(ctx, "MODIFIED", run_body("b", "Pending", generation=2, observed=2), claims)
    assert not events["b"].is_set()  # its own status write wakes nobody


async def test_a_run_event_wakes_its_intent() -> None:
    ctx = OperatorContext()
    started: list[Work] = []

    async def work(it: Work) -> None:
        started.append(it)
        await asyncio.Event().wait()  # until cancelled

    ctx.intent_workers = IntentWorkers(work)
    raw = {"metadata": {"name": "task", "namespace": "ns", "uid": "u"}}
    ctx.intent_workers.seen(("ns", "task"), raw, deleted=False, open_=True)
    await asyncio.sleep(0)
    [intent] = started
    wake_for_run(ctx, "MODIFIED", run_body("a", "Running"), {})
    assert intent.wakeup.is_set()
    await ctx.intent_workers.stop_all()


def test_a_sprite_change_wakes_every_run_waiting_for_it_and_no_other() -> None:
    waiters = SpriteWaiters()
    mine = [waiters.add(SPRITE, uid) for uid in ("a", "b")]
    other = waiters.add(("ns", "other"), "c")
    waiters.wake_all(SPRITE)
    assert all(e.is_set() for e in mine)
    assert not other.is_set()


def test_a_finished_daemon_leaves_no_waiter_behind() -> None:
    waiters = SpriteWaiters()
    waiters.add(SPRITE, "a")
    waiters.add(SPRITE, "b")
    waiters.remove(SPRITE, "a")
    waiters.remove(SPRITE, "b")
    waiters.remove(SPRITE, "b")  # twice is harmless
    assert len(waiters) == 0
    waiters.wake(SPRITE, "a")  # no one there: nothing happens
