"""The open Intents' tasks (reconcilers.intent_workers), driven by watch events: one task per
live Intent, none for a final phase, a deletion or another object under the name ends it at
once, a final phase stops it after its pass, a task that ended on its own is not started
again by a late event, and the operator's stop cancels every task."""

from __future__ import annotations

import asyncio
from typing import Any

from lattice_operator.reconcilers.intent_workers import IntentWorkers, Work


def _raw(uid: str = "u", phase: str | None = None, version: str = "1", **meta: Any) -> Any:
    return {
        "metadata": {"name": "i", "namespace": "ns", "uid": uid, "resourceVersion": version} | meta,
        "status": {"phase": phase} if phase else {},
    }


class Recorder:
    """A task's work: waits until stopped or told to finish; records what it saw."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.cancelled: list[str] = []
        self.done = False
        self.seen: list[Work] = []

    def finish(self) -> None:
        """Every task's Intent finished: each returns on its next wake-up."""
        self.done = True
        for work in self.seen:
            work.wakeup.set()

    async def __call__(self, work: Work) -> None:
        self.started.append(work.uid)
        self.seen.append(work)
        try:
            while not work.stopped and not self.done:
                work.wakeup.clear()
                await work.wakeup.wait()
        except asyncio.CancelledError:
            self.cancelled.append(work.uid)
            raise


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_one_task_per_open_intent_and_none_for_a_final_phase() -> None:
    work = Recorder()
    workers = IntentWorkers(work)
    workers.seen(("ns", "i"), _raw(), deleted=False, open_=True)
    workers.seen(("ns", "i"), _raw(version="2"), deleted=False, open_=True)  # its next event
    workers.seen(("ns", "done"), _raw(uid="d", phase="Succeeded"), deleted=False, open_=False)
    await _settle()
    assert work.started == ["u"]
    assert workers.running() == {("ns", "i"): "u"}
    # Each event hands the task the newest body.
    assert work.seen[0].body["metadata"]["resourceVersion"] == "2"
    await workers.stop_all()


async def test_a_deletion_ends_the_task_at_once() -> None:
    work = Recorder()
    workers = IntentWorkers(work)
    workers.seen(("ns", "i"), _raw(), deleted=False, open_=True)
    await _settle()
    workers.seen(("ns", "i"), _raw(), deleted=True, open_=True)
    await _settle()
    assert work.cancelled == ["u"]
    assert len(workers) == 0
    # An event that shows the deletion under way (a deletionTimestamp) starts nothing either.
    workers.seen(
        ("ns", "i"), _raw(deletionTimestamp="2026-01-01T00:00:00Z"), deleted=False, open_=True
    )
    await _settle()
    assert work.started == ["u"]


async def test_another_object_under_the_name_replaces_the_task() -> None:
    work = Recorder()
    workers = IntentWorkers(work)
    workers.seen(("ns", "i"), _raw(uid="old"), deleted=False, open_=True)
    await _settle()
    # The old Intent was deleted while the watch was down; a new one has its name.
    workers.seen(("ns", "i"), _raw(uid="new"), deleted=False, open_=True)
    await _settle()
    assert work.cancelled == ["old"]
    assert work.started == ["old", "new"]
    assert workers.running() == {("ns", "i"): "new"}
    await workers.stop_all()


async def test_a_final_phase_stops_the_task_after_its_pass() -> None:
    work = Recorder()
    workers = IntentWorkers(work)
    workers.seen(("ns", "i"), _raw(), deleted=False, open_=True)
    await _settle()
    workers.seen(("ns", "i"), _raw(phase="Canceled"), deleted=False, open_=False)
    await _settle()
    assert work.cancelled == []  # not cancelled: told to stop, and it returned
    assert len(workers) == 0


async def test_a_task_that_ended_on_its_own_is_not_started_again_by_a_late_event() -> None:
    work = Recorder()
    workers = IntentWorkers(work)
    workers.seen(("ns", "i"), _raw(version="1"), deleted=False, open_=True)
    await _settle()
    work.finish()  # the Intent finished: its final write made, the loop returned
    await _settle()
    assert len(workers) == 0
    # The watch delivers an event from before that write: still open by its phase.
    workers.seen(("ns", "i"), _raw(version="2"), deleted=False, open_=True)
    await _settle()
    assert work.started == ["u"]
    assert len(workers) == 0


async def test_the_ended_are_remembered_within_a_bound() -> None:
    work = Recorder()
    work.done = True  # every task ends at once
    workers = IntentWorkers(work, remembered=2)
    for uid in ("a", "b", "c"):
        workers.seen(("ns", uid), _raw(uid=uid), deleted=False, open_=True)
        await _settle()
    workers.seen(("ns", "a"), _raw(uid="a"), deleted=False, open_=True)  # forgotten: again
    workers.seen(("ns", "c"), _raw(uid="c"), deleted=False, open_=True)  # remembered
    await _settle()
    assert work.started == ["a", "b", "c", "a"]


async def test_the_operators_stop_cancels_every_task() -> None:
    work = Recorder()
    workers = IntentWorkers(work)
    for name in ("a", "b"):
        workers.seen(("ns", name), _raw(uid=name), deleted=False, open_=True)
    await _settle()
    await workers.stop_all()
    assert sorted(work.cancelled) == ["a", "b"]
    assert len(workers) == 0


async def test_a_wake_up_reaches_the_intents_task_only() -> None:
    work = Recorder()
    workers = IntentWorkers(work)
    workers.seen(("ns", "i"), _raw(), deleted=False, open_=True)
    await _settle()
    [task_work] = work.seen
    task_work.wakeup.clear()
    workers.wake(("ns", "other"))
    assert not task_work.wakeup.is_set()
    workers.wake(("ns", "i"))
    assert task_work.wakeup.is_set()
    await workers.stop_all()


async def test_an_event_wakes_the_task_with_its_own_body_in_place() -> None:
    """kopf calls index functions before event handlers: a wake-up from there let the pass
    read the object before the event's; the event's own wake-up comes after its body."""
    versions: list[str] = []

    async def work(it: Work) -> None:
        while not it.stopped:
            it.wakeup.clear()
            await it.wakeup.wait()
            versions.append(it.body["metadata"]["resourceVersion"])

    workers = IntentWorkers(work)
    workers.seen(("ns", "i"), _raw(version="1"), deleted=False, open_=True)
    await _settle()
    workers.seen(("ns", "i"), _raw(version="2"), deleted=False, open_=True)
    await _settle()
    assert versions == ["2"]
    await workers.stop_all()
