"""Writing an Intent pass: a phase change is written only onto the spec it was decided on,
and before anything is created from it."""

from __future__ import annotations

from typing import Any

import kopf

from lattice_adapters.kube import AlreadyExists, NotFound, PatchTestFailed
from lattice_operator.handlers import intent as intent_handlers
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.handlers._created_runs import INDEX_PATIENCE, CreatedRuns
from lattice_operator.handlers.intent import _apply, intent_daemon
from lattice_operator.reconcilers.intent import reconcile_intent
from tests.support.clock import FakeClock
from tests.support.intent_world import approval, intent, policy, world


class RecordingKube:
    """The calls _apply makes; a failed `test` (as the client raises it) for a JSON patch
    testing another generation than the stored one."""

    def __init__(self, stored_generation: int) -> None:
        self.stored_generation = stored_generation
        self.calls: list[tuple[str, str, Any]] = []
        self.existing: dict[str, dict[str, Any]] = {}
        """Objects by name whose create is refused as already there (a GET finds them)."""

    async def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("patch", path, body))
        return {}

    async def json_patch(self, path: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls.append(("json-patch", path, ops))
        for op in ops:
            if op["op"] == "test" and op["value"] != self.stored_generation:
                # As KubeClient.json_patch raises it (the API server's answer says only
                # 422 Invalid; the client finds the test that failed).
                raise PatchTestFailed(
                    422,
                    "Invalid",
                    "the server rejected our request due to an error in our request",
                    {"kind": "Status", "code": 422, "reason": "Invalid", "details": {}},
                    [op["path"]],
                )
        return {}

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("create", path, body))
        if body["metadata"]["name"] in self.existing:
            raise AlreadyExists(409, "AlreadyExists", "already exists", {})
        stored = {**body, "metadata": {**body["metadata"], "uid": "run-uid"}}
        self.existing[body["metadata"]["name"]] = stored
        return stored

    async def get(self, path: str, params: Any = None) -> dict[str, Any]:
        self.calls.append(("get", path, None))
        name = path.rsplit("/", 1)[-1]
        if name not in self.existing:
            raise NotFound(404, "NotFound", f"{path} not found", {})
        return self.existing[name]


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
    created = CreatedRuns()
    assert await _apply(ctx, it, plan, kopf.Body({"metadata": {"name": "i"}}), created) is False
    assert len(created) == 0
    [(kind, path, ops)] = kube.calls
    assert (kind, ops[0]) == (
        "json-patch",
        {"op": "test", "path": "/metadata/generation", "value": 7},
    )
    assert path.endswith("/intents/i/status")


async def test_the_decided_version_gets_its_status_first_then_the_run() -> None:
    it, plan = _approved_pass()
    kube = RecordingKube(stored_generation=7)
    ctx = OperatorContext(kube=kube, clock=FakeClock())  # type: ignore[arg-type]
    created = CreatedRuns()
    assert await _apply(ctx, it, plan, kopf.Body({"metadata": {"name": "i"}}), created) is True
    assert [c[0] for c in kube.calls] == ["json-patch", "create"]
    assert kube.calls[0][2][1]["value"]["phase"] == "Executing"  # the whole status
    assert kube.calls[1][2]["kind"] == "Run"
    # Born with the operator's finalizer: kopf has nothing to add (no PATCH of its own).
    assert kube.calls[1][2]["metadata"]["finalizers"] == [ctx.settings.finalizer]
    assert "finalizers" not in plan.create[0]["metadata"]  # the plan itself is left as it was
    # Noted as the API server answered, for the passes before the Run index shows it.
    name = kube.calls[1][2]["metadata"]["name"]
    now = ctx.clock.monotonic()
    run = created.view(name, None, now + 1.0)
    assert run is not None
    assert run.metadata.uid == "run-uid"
    assert created.view(name, None, now + INDEX_PATIENCE + 0.1) is None


async def test_a_run_found_already_there_is_read_and_decided_on() -> None:
    """A create refused as already there (a retried pass's Run, or someone else's): the Run
    is read once and the next passes decide on it, not on the lagging index."""
    it, plan = _approved_pass()
    name = plan.create[0]["metadata"]["name"]
    theirs = {**plan.create[0], "metadata": {"name": name, "namespace": "ns", "uid": "theirs"}}
    kube = RecordingKube(stored_generation=7)
    kube.existing = {name: theirs}
    ctx = OperatorContext(kube=kube, clock=FakeClock())  # type: ignore[arg-type]
    created = CreatedRuns()
    assert await _apply(ctx, it, plan, kopf.Body({"metadata": {"name": "i"}}), created) is True
    assert [c[0] for c in kube.calls] == ["json-patch", "create", "get"]
    run = created.view(name, None, ctx.clock.monotonic())
    assert run is not None
    assert run.metadata.uid == "theirs"
    # Decided on, it is refused: someone else's Run is never executed through.
    nxt = reconcile_intent(
        world(intent_handlers.parse_intent(_body(kube, it)), run=run)  # as the watch has it
    )
    assert nxt.create == []
    assert nxt.status.run_ref is None


def _body(kube: RecordingKube, it: Any) -> kopf.Body:
    """The Intent with the status its last guarded write put there."""
    doc = it.model_dump(mode="json", by_alias=True, exclude_none=True)
    for kind, _, ops in reversed(kube.calls):
        if kind == "json-patch":
            doc["status"] = ops[1]["value"]
            break
    return kopf.Body(doc)


class WatchedKube(RecordingKube):
    """The Intent's watch keeps up: its status writes show in the daemon's body."""

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(stored_generation=raw["metadata"]["generation"])
        self.raw = raw

    async def json_patch(self, path: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        await super().json_patch(path, ops)
        self.raw["status"] = ops[1]["value"]
        return self.raw

    async def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        await super().merge_patch(path, body)
        if path.endswith("/status"):
            self.raw["status"] = {**self.raw.get("status", {}), **body["status"]}
        return self.raw


class Passes:
    """A daemon's `stopped`: false for `count` passes; the clock moves `step` seconds
    between them."""

    def __init__(self, count: int, clock: FakeClock, step: float) -> None:
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
    monkeypatch.setattr(intent_handlers, "SAFETY_POLL", 0.001)
    raw = intent().model_dump(mode="json", by_alias=True, exclude_none=True)
    kube = WatchedKube(raw)
    clock = FakeClock()
    memo = kopf.Memo()
    memo.lattice = OperatorContext(kube=kube, clock=clock)  # type: ignore[arg-type]
    await intent_daemon(
        body=kopf.Body(raw),
        memo=memo,
        stopped=Passes(20, clock, step=30.0),  # type: ignore[arg-type]
        compiled_policies={"ns": [("p", policy("allow"))]},
        runs_by_name={},  # the index never shows the Run within the test
        sprite_directory={},
    )
    # 20 passes 30 s apart: the Run created once, then (past INDEX_PATIENCE, 300 s) created
    # again, told it is there and read: one create per patience, not one per pass.
    assert [c[0] for c in kube.calls] == ["json-patch", "create", "create", "get"]


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
