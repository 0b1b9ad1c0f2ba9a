"""Writing an Intent pass: a phase change is written only onto the spec it was decided on,
and before anything is created from it."""

from __future__ import annotations

import copy
from typing import Any, cast

import kopf

from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.handlers import intent as intent_handlers

# The Intent work's write step (apply_plan) and its plumbing, driven without running kopf.
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.handlers.intent_effects import apply_plan
from lattice_operator.metrics import AWAITING_APPROVAL_SECONDS
from lattice_operator.reconcilers import intent_loop
from lattice_operator.reconcilers.intent import Notice, reconcile_intent
from lattice_operator.reconcilers.intent_created_runs import INDEX_PATIENCE, CreatedRuns
from lattice_operator.reconcilers.intent_workers import StopFlag
from tests.support.clock import FakeClock
from tests.support.cluster_writer import FakeClusterWriter, Posted
from tests.support.intent_work import run_work
from tests.support.intent_world import approval, intent, policy, world


def writer_for(it: Any, stored_generation: int) -> FakeClusterWriter:
    """A cluster holding the Intent at `stored_generation` (another than the pass's: its
    spec was edited meanwhile)."""
    writer = FakeClusterWriter()
    doc = it.model_dump(mode="json", by_alias=True, exclude_none=True)
    doc["metadata"]["generation"] = stored_generation
    writer.put("intents", doc)
    return writer


def _approved_pass() -> tuple[Any, Any]:
    it = intent(phase="AwaitingApproval")
    it.metadata.generation = 7
    plan = reconcile_intent(
        world(it, policies=[policy("require_approval")], approvals=[approval("alice")])
    )
    assert plan.phase == "Executing"  # approved and executing in one pass ...
    assert plan.create  # ... with its Run to create
    return it, plan


async def test_an_edit_after_the_decision_writes_and_creates_nothing() -> None:
    it, plan = _approved_pass()
    writer = writer_for(it, stored_generation=8)  # someone edited the spec meanwhile
    ctx = OperatorContext(writer=writer)
    created = CreatedRuns()
    assert await apply_plan(ctx, it, plan, created) is False
    assert len(created) == 0
    [call] = writer.calls
    assert (call.verb, call.plural, call.name, call.generation) == (
        "replace_status_if",
        "intents",
        "i",
        7,
    )
    assert writer.objects[("intents", "ns", "i")].get("status", {}).get("phase") != "Executing"


async def test_the_decided_version_gets_its_status_first_then_the_run() -> None:
    it, plan = _approved_pass()
    writer = writer_for(it, stored_generation=7)
    ctx = OperatorContext(writer=writer, clock=FakeClock())
    created = CreatedRuns()
    assert await apply_plan(ctx, it, plan, created) is True
    assert writer.verbs() == ["replace_status_if", "create_or_read"]
    status, run_manifest = writer.calls[0].body, writer.calls[1].body
    assert status is not None
    assert status["phase"] == "Executing"  # the whole status
    assert run_manifest is not None
    assert run_manifest["kind"] == "Run"
    # Born with the operator's finalizer: kopf has nothing to add (no PATCH of its own).
    assert run_manifest["metadata"]["finalizers"] == [ctx.settings.finalizer]
    assert "finalizers" not in plan.create[0]["metadata"]  # the plan itself is left as it was
    # Noted as the API server answered, for the passes before the Run index shows it.
    name = run_manifest["metadata"]["name"]
    now = ctx.clock.monotonic()
    run = created.view(name, None, now + 1.0)
    assert run is not None
    assert run.metadata.uid == f"{name}-uid"
    assert created.view(name, None, now + INDEX_PATIENCE + 0.1) is None


async def test_a_run_found_already_there_is_read_and_decided_on() -> None:
    """A create refused as already there (a retried pass's Run, or someone else's): the Run
    is read once and the next passes decide on it, not on the lagging index."""
    it, plan = _approved_pass()
    name = plan.create[0]["metadata"]["name"]
    theirs = {**plan.create[0], "metadata": {"name": name, "namespace": "ns", "uid": "theirs"}}
    writer = writer_for(it, stored_generation=7)
    writer.put("runs", theirs)
    ctx = OperatorContext(writer=writer, clock=FakeClock())
    created = CreatedRuns()
    assert await apply_plan(ctx, it, plan, created) is True
    assert writer.verbs() == ["replace_status_if", "create_or_read"]  # told it is there
    run = created.view(name, None, ctx.clock.monotonic())
    assert run is not None
    assert run.metadata.uid == "theirs"
    # Decided on, it is refused: someone else's Run is never executed through.
    nxt = reconcile_intent(
        world(intent_handlers.parse_intent(_body(writer)), run=run)  # as the watch has it
    )
    assert nxt.create == []
    assert nxt.status.run_ref is None


def _body(writer: FakeClusterWriter) -> kopf.Body:
    """The Intent as stored (with the status its last guarded write put there)."""
    return kopf.Body(cast(kopf.RawBody, copy.deepcopy(writer.objects[("intents", "ns", "i")])))


class Passes(StopFlag):
    """An Intent task's `stopped`: false for `count` passes; the clock moves `step` seconds
    between them."""

    def __init__(self, count: int, clock: FakeClock, step: float) -> None:
        super().__init__()
        self.left, self.clock, self.step = count, clock, step

    def __bool__(self) -> bool:
        self.left -= 1
        self.clock.advance(self.step)
        return self.left < 0


async def test_a_run_is_created_once_while_the_index_lags_for_minutes(monkeypatch: Any) -> None:
    """The Run index minutes behind the API server (an overloaded operator): the passes in
    between decide on the Run the create answered and create nothing more. A fixed wait
    before creating again (10 s, then 60 s) still left 2,398 refused creates for 6,057
    Intents at 100/s offered."""
    monkeypatch.setattr(intent_loop, "SAFETY_POLL", 0.001)
    raw = intent().model_dump(mode="json", by_alias=True, exclude_none=True)
    writer = FakeClusterWriter()
    writer.put("intents", raw)  # the same dict: the watch keeps up with the status writes
    clock = FakeClock()
    # The index never shows the Run within the test.
    await run_work(writer, raw, Passes(20, clock, step=30.0), clock=clock)
    # 20 passes 30 s apart: the Run created once, then (past INDEX_PATIENCE, 300 s) created
    # again, told it is there and read: one create per patience, not one per pass. The
    # second create has no Intent write before it: the Intent is read first (still there).
    # The policies are listed once, for the one classification.
    assert writer.verbs() == [
        "list",
        "replace_status_if",
        "create_or_read",
        "read",
        "create_or_read",
    ]


async def test_a_pass_without_a_phase_change_is_not_guarded() -> None:
    it = intent(phase="AwaitingApproval")
    it.metadata.generation = 7
    plan = reconcile_intent(world(it, policies=[policy("require_approval")]))
    assert plan.phase == "AwaitingApproval"
    writer = writer_for(it, stored_generation=8)
    ctx = OperatorContext(writer=writer)
    assert await apply_plan(ctx, it, plan, CreatedRuns()) is True
    # A plain merge patch: nothing decided that an edit could undo.
    assert writer.verbs() == ["patch_status"]


def _observed() -> float:
    return next(
        sample.value
        for metric in AWAITING_APPROVAL_SECONDS.collect()
        for sample in metric.samples
        if sample.name.endswith("_count")
    )


async def test_leaving_approval_is_observed_once_when_a_stale_pass_sees_the_noted_run() -> None:
    """The next pass may read the Intent before the first pass's write (still AwaitingApproval)
    and its Run from the created-Runs note: it plans the same exit from AwaitingApproval, with
    nothing to create. The wait is observed once (the soak saw a count of 2 for one Intent)."""
    it, plan = _approved_pass()
    plan.left_approval_after = 30.0  # what a pass plans when the Intent waited 30 s
    ctx = OperatorContext(writer=writer_for(it, stored_generation=7), clock=FakeClock())
    created = CreatedRuns()
    before = _observed()
    assert await apply_plan(ctx, it, plan, created)
    name = plan.create[0]["metadata"]["name"]
    noted = created.view(name, None, ctx.clock.monotonic())
    assert noted is not None
    stale = reconcile_intent(
        world(it, policies=[policy("require_approval")], approvals=[approval("alice")], run=noted)
    )
    assert stale.phase == "Executing"
    assert not stale.create
    stale.left_approval_after = 31.0
    assert await apply_plan(ctx, it, stale, created)
    assert _observed() == before + 1


async def test_a_pass_posts_its_notices_on_the_intent_after_its_writes() -> None:
    it, plan = _approved_pass()
    plan.notices.append(Notice("Noted", "something to say", warning=True))
    writer = writer_for(it, stored_generation=7)
    ctx = OperatorContext(writer=writer, clock=FakeClock())
    assert await apply_plan(ctx, it, plan, CreatedRuns())
    assert writer.posted[-1] == Posted(
        ObjectRef("lattice.dev/v1alpha1", "Intent", "ns", "i", "u"),
        "Noted",
        "something to say",
        warning=True,
    )
    assert writer.verbs() == ["replace_status_if", "create_or_read"]  # Events are no writes
