"""An Intent's work whose own object was deleted under it ends quietly; any other 404 is an
error, tried again; a deleted Intent's work creates nothing for it.

Deleting a namespace with thousands of open Intents and Runs made every daemon's next write
fail with 404 and kopf retry each a minute later, for objects no longer there. The Intent's
work is the operator's own task (no kopf daemon, no finalizer): a deletion no watch event
reported (a watch re-listed after a 410) leaves it running until something wakes it, its
Run's deletion by the garbage collector above all.
"""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from lattice_adapters.kube import Conflict, KubeApiError, NotFound
from lattice_operator.handlers import intent as intent_handlers

# not_found_in (handlers/_writes) decides a daemon's quiet end; OperatorContext is its ctx.
from lattice_operator.handlers._writes import not_found_in
from lattice_operator.handlers.intent import RETRY_AFTER
from lattice_operator.reconcilers.intent_workers import StopFlag, Work
from tests.support.cluster_writer import FakeClusterWriter
from tests.support.intent_work import run_work
from tests.support.intent_world import intent


def _not_found(what: str) -> KubeApiError:
    return NotFound(404, "NotFound", f"{what} not found", None)


def _gone(stored: dict[str, Any] | None) -> FakeClusterWriter:
    """The Intent's write is refused with 404; a read finds `stored` (None: nothing)."""
    writer = FakeClusterWriter()
    writer.fail("patch_status", _not_found("intents/i"))
    writer.fail("replace_status_if", _not_found("intents/i"))
    if stored is not None:
        writer.put("intents", stored)
    return writer


async def _daemon(writer: FakeClusterWriter) -> None:
    await run_work(writer, intent().model_dump(mode="json", by_alias=True, exclude_none=True))


def _reads(writer: FakeClusterWriter) -> list[tuple[str, str]]:
    return [(c.plural, c.name) for c in writer.calls if c.verb == "read"]


async def test_an_intent_deleted_under_its_daemon_ends_it() -> None:
    writer = _gone(stored=None)
    await _daemon(writer)  # returns: no exception for kopf to retry
    assert _reads(writer) == [("intents", "i")]


async def test_a_recreated_intent_of_the_same_name_is_not_taken_for_gone() -> None:
    # A 404 while another object of that name exists now: also gone (another uid).
    writer = _gone(stored={"metadata": {"name": "i", "namespace": "ns", "uid": "another"}})
    await _daemon(writer)
    assert _reads(writer) == [("intents", "i")]


async def test_a_404_of_something_else_is_still_an_error(monkeypatch: Any) -> None:
    stored = {"metadata": {"name": "i", "namespace": "ns", "uid": "u"}}  # the Intent is there
    waits: list[float] = []

    async def retried(seconds: float, work: Work) -> None:
        waits.append(seconds)
        work.stopped.set()  # the test's end: the operator stops

    monkeypatch.setattr(intent_handlers, "sleep_unless_stopped", retried)
    await _daemon(_gone(stored=stored))
    assert waits == [RETRY_AFTER]  # logged and tried again, not taken for a deletion


async def test_a_deleted_intents_work_woken_by_its_runs_deletion_creates_nothing() -> None:
    """The Intent executes; it is deleted and no watch event says so; the garbage collector
    deletes its Run, which wakes the work: the pass plans the Run again (no status change,
    so no Intent write would refuse it with 404), and must not create it."""
    raw = intent(phase="Executing", runRef={"name": "i-run"}, observedGeneration=1).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    writer = FakeClusterWriter()  # the Intent is not there: deleted
    await run_work(writer, raw)
    assert "create_or_read" not in writer.verbs(), writer.verbs()
    assert _reads(writer) == [("intents", "i")]  # asked once, found gone, ended


async def test_an_executing_intent_whose_run_was_deleted_gets_it_again() -> None:
    """The same pass for an Intent still there: the Run is created again (the guard reads
    the Intent, and only that)."""
    it = intent(phase="Executing", runRef={"name": "i-run"}, observedGeneration=1)
    raw = it.model_dump(mode="json", by_alias=True, exclude_none=True)
    writer = FakeClusterWriter()
    writer.put("intents", raw)
    stopped = StopFlag()

    async def one_pass() -> None:
        await run_work(writer, raw, stopped)

    task = asyncio.create_task(one_pass())
    for _ in range(100):
        await asyncio.sleep(0)
        if "create_or_read" in writer.verbs():
            break
    stopped.set()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    # The policies listed first: the Intent has no Classified condition, a classification.
    assert writer.verbs()[:3] == ["list", "read", "create_or_read"], writer.verbs()


def test_a_404_is_found_behind_the_errors_that_wrap_it() -> None:
    wrapped = kopf.TemporaryError("cannot create Run")
    wrapped.__cause__ = _not_found("/x")
    assert not_found_in(wrapped)
    assert not not_found_in(Conflict(409, "Conflict", "", None))
    assert not not_found_in(RuntimeError("x"))
