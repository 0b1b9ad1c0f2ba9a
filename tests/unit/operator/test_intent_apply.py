"""Writing an Intent pass: a phase change is written only onto the version it was decided
on, and before anything is created from the spec."""

from __future__ import annotations

from typing import Any

import kopf

from lattice_adapters.kube import KubeApiError
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.handlers.intent import _apply
from lattice_operator.reconcilers.intent import reconcile_intent
from tests.unit.operator.test_intent_pipeline import approval, intent, policy, world


class RecordingKube:
    """The calls _apply makes; a 409 for a patch carrying a stale resourceVersion."""

    def __init__(self, stored_version: str) -> None:
        self.stored_version = stored_version
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    async def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("patch", path, body))
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != self.stored_version:
            raise KubeApiError(409, "Conflict", "the object has been modified", None)
        return {}

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("create", path, body))
        return body


def _approved_pass() -> tuple[Any, Any]:
    it = intent(phase="AwaitingApproval")
    it.metadata.resource_version = "7"
    plan = reconcile_intent(
        world(it, policies=[policy("require_approval")], approvals=[approval("alice")])
    )
    assert plan.phase == "Executing"  # approved and executing in one pass ...
    assert plan.create  # ... with its Run to create
    return it, plan


async def test_an_edit_after_the_decision_writes_and_creates_nothing() -> None:
    it, plan = _approved_pass()
    kube = RecordingKube(stored_version="8")  # someone edited the Intent meanwhile
    ctx = OperatorContext(kube=kube)  # type: ignore[arg-type]
    assert await _apply(ctx, it, plan, kopf.Body({"metadata": {"name": "i"}})) is False
    [(kind, path, body)] = kube.calls
    assert (kind, body["metadata"]) == ("patch", {"resourceVersion": "7"})
    assert path.endswith("/intents/i/status")


async def test_the_decided_version_gets_its_status_first_then_the_run() -> None:
    it, plan = _approved_pass()
    kube = RecordingKube(stored_version="7")
    ctx = OperatorContext(kube=kube)  # type: ignore[arg-type]
    assert await _apply(ctx, it, plan, kopf.Body({"metadata": {"name": "i"}})) is True
    assert [c[0] for c in kube.calls] == ["patch", "create"]
    assert kube.calls[1][2]["kind"] == "Run"


async def test_a_pass_without_a_phase_change_is_not_guarded() -> None:
    it = intent(phase="AwaitingApproval")
    it.metadata.resource_version = "7"
    plan = reconcile_intent(world(it, policies=[policy("require_approval")]))
    assert plan.phase == "AwaitingApproval"
    kube = RecordingKube(stored_version="8")
    ctx = OperatorContext(kube=kube)  # type: ignore[arg-type]
    assert await _apply(ctx, it, plan, kopf.Body({"metadata": {"name": "i"}})) is True
    [(kind, _, body)] = kube.calls
    assert kind == "patch"
    assert "metadata" not in body
