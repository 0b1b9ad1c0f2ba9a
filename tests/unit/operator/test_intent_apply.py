"""Writing an Intent pass: a phase change is written only onto the spec it was decided on,
and before anything is created from it."""

from __future__ import annotations

from typing import Any

import kopf

from lattice_adapters.kube import KubeApiError
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.handlers.intent import (
    RUN_FOUND_WAIT,
    RUN_SEEN_WITHIN,
    _apply,
    _just_created,
)
from lattice_operator.reconcilers.intent import reconcile_intent
from tests.support.intent_world import approval, intent, policy, world


class RecordingKube:
    """The calls _apply makes; a failed `test` (as the API server words it) for a JSON patch
    testing another generation than the stored one."""

    def __init__(self, stored_generation: int) -> None:
        self.stored_generation = stored_generation
        self.calls: list[tuple[str, str, Any]] = []
        self.existing: set[str] = set()
        """Names whose create is refused as already there."""

    async def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("patch", path, body))
        return {}

    async def json_patch(self, path: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls.append(("json-patch", path, ops))
        for op in ops:
            if op["op"] == "test" and op["value"] != self.stored_generation:
                raise KubeApiError(
                    422,
                    "Invalid",
                    "the server rejected our request due to an error in our request",
                    {"details": {"causes": [{"message": f"testing value {op['path']} failed"}]}},
                )
        return {}

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("create", path, body))
        if body["metadata"]["name"] in self.existing:
            raise KubeApiError(409, "AlreadyExists", "already exists", {})
        return body


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
    kube = RecordingKube(stored_generation=8)  # someone edited the spec meanwhile
    ctx = OperatorContext(kube=kube)  # type: ignore[arg-type]
    created: dict[str, float] = {}
    assert await _apply(ctx, it, plan, kopf.Body({"metadata": {"name": "i"}}), created) is False
    assert created == {}
    [(kind, path, ops)] = kube.calls
    assert (kind, ops[0]) == (
        "json-patch",
        {"op": "test", "path": "/metadata/generation", "value": 7},
    )
    assert path.endswith("/intents/i/status")


async def test_the_decided_version_gets_its_status_first_then_the_run() -> None:
    it, plan = _approved_pass()
    kube = RecordingKube(stored_generation=7)
    ctx = OperatorContext(kube=kube)  # type: ignore[arg-type]
    created: dict[str, float] = {}
    assert await _apply(ctx, it, plan, kopf.Body({"metadata": {"name": "i"}}), created) is True
    assert [c[0] for c in kube.calls] == ["json-patch", "create"]
    assert kube.calls[0][2][1]["value"]["phase"] == "Executing"  # the whole status
    assert kube.calls[1][2]["kind"] == "Run"
    # Born with the operator's finalizer: kopf has nothing to add (no PATCH of its own).
    assert kube.calls[1][2]["metadata"]["finalizers"] == [ctx.settings.finalizer]
    assert "finalizers" not in plan.create[0]["metadata"]  # the plan itself is left as it was
    # noted, so that a pass not seeing it yet does not create it again for RUN_SEEN_WITHIN
    [(name, until)] = created.items()
    assert name == kube.calls[1][2]["metadata"]["name"]
    now = ctx.clock.monotonic()
    assert _just_created(plan.create, created, now=now + 1.0)
    assert not _just_created(plan.create, created, now=until + 0.1)
    assert until - now <= RUN_SEEN_WITHIN


async def test_a_run_found_already_there_is_not_created_again_while_the_index_lags() -> None:
    """Under an overload the Run index can be behind the API server for longer than
    RUN_SEEN_WITHIN: a pass that is told its Run exists waits longer before trying again, not
    a create (and an admission webhook call) at every wake-up."""
    it, plan = _approved_pass()
    kube = RecordingKube(stored_generation=7)
    kube.existing = {plan.create[0]["metadata"]["name"]}
    ctx = OperatorContext(kube=kube)  # type: ignore[arg-type]
    created: dict[str, float] = {}
    assert await _apply(ctx, it, plan, kopf.Body({"metadata": {"name": "i"}}), created) is True
    assert [c[0] for c in kube.calls] == ["json-patch", "create"]
    now = ctx.clock.monotonic()
    assert _just_created(plan.create, created, now=now + RUN_SEEN_WITHIN + 1.0)
    assert not _just_created(plan.create, created, now=now + RUN_FOUND_WAIT + 1.0)


async def test_a_pass_without_a_phase_change_is_not_guarded() -> None:
    it = intent(phase="AwaitingApproval")
    it.metadata.generation = 7
    plan = reconcile_intent(world(it, policies=[policy("require_approval")]))
    assert plan.phase == "AwaitingApproval"
    kube = RecordingKube(stored_generation=8)
    ctx = OperatorContext(kube=kube)  # type: ignore[arg-type]
    assert await _apply(ctx, it, plan, kopf.Body({"metadata": {"name": "i"}}), {}) is True
    [(kind, _, _)] = kube.calls
    assert kind == "patch"  # a plain merge patch: nothing decided that an edit could undo
