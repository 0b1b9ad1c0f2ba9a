"""The effects of the Intent kinds that act outside the cluster (fly_machines, health_remediate,
checkpoint_restore): each outcome recorded in the Intent's status through the cluster writer,
the Intent as stored handed back for the next pass; nothing done and nothing written while
the backend (or Fly) is not configured; a restore's receipts published after its outcome."""

from __future__ import annotations

from typing import Any

from lattice_operator.api.v1alpha1 import Intent, Sprite
from lattice_operator.api.v1alpha1.intent import FlyMachinesParams

# The effects take the handlers' own context (private to handlers/), built as start-up does.
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.handlers.intent_fly import fly_step
from lattice_operator.handlers.intent_remediation import remediate
from lattice_operator.handlers.intent_restore import restore
from lattice_operator.lifeloop.classes import FailureClass
from lattice_operator.ports.errors import TransportError
from lattice_operator.reconcilers.intent_pass import FlyWork, RemediationWork, RestoreWork
from tests.support.admission_cases import sample
from tests.support.clock import FakeClock
from tests.support.cluster_writer import FakeClusterWriter
from tests.support.fake_backend import FakeBackend


def _stored(writer: FakeClusterWriter, sample_name: str, name: str) -> Intent:
    doc = sample(sample_name)
    doc["metadata"] = {"name": name, "namespace": "ns", "uid": f"{name}-uid", "generation": 1}
    writer.put("intents", doc)
    return Intent.model_validate(doc)


def _status(writer: FakeClusterWriter, name: str) -> dict[str, Any]:
    status: dict[str, Any] = writer.objects[("intents", "ns", name)]["status"]
    return status


class DownFly:
    """Fly's Machines API, unreachable."""

    async def get_machine(self, app: str, machine_id: str) -> Any:
        raise TransportError("connection refused")


def _fly_work(it: Intent) -> FlyWork:
    params = it.spec.params.fly_machines
    assert isinstance(params, FlyMachinesParams)
    return FlyWork(params=params, attempt=2, machine_name="m")


async def test_fly_without_a_token_does_nothing_and_writes_nothing() -> None:
    writer = FakeClusterWriter()
    it = _stored(writer, "intent-fly-machines.yaml", "deploy")
    ctx = OperatorContext(writer=writer)
    assert await fly_step(ctx, it, _fly_work(it)) is None
    assert writer.calls == []


async def test_a_fly_failure_is_recorded_as_the_result_and_the_attempt_finished() -> None:
    writer = FakeClusterWriter()
    it = _stored(writer, "intent-fly-machines.yaml", "deploy")
    ctx = OperatorContext(writer=writer, fly=DownFly())  # type: ignore[arg-type]
    stored = await fly_step(ctx, it, _fly_work(it))
    assert writer.verbs() == ["patch_status"]
    status = _status(writer, "deploy")
    assert status["result"]["status"] == "failure"
    assert "connection refused" in status["result"]["summary"]
    assert status["fly"] == {
        "app": "preview-app",
        "action": "start",
        "machineId": "3d8d9015be7e89",
        "attempts": 2,
        "finished": True,
    }
    assert stored is not None
    assert stored["status"] == status  # the Intent as stored, for the next pass


def _sprite() -> Sprite:
    doc = sample("sprite.yaml")
    doc["metadata"] = {"name": "sample", "namespace": "ns", "uid": "s-uid"}
    return Sprite.model_validate(doc)


async def test_a_remediation_without_a_backend_does_nothing_and_writes_nothing() -> None:
    writer = FakeClusterWriter()
    it = _stored(writer, "intent-health-remediate.yaml", "fix")
    ctx = OperatorContext(writer=writer)
    work = RemediationWork(action="restart_service", sprite=_sprite(), service="web")
    assert await remediate(ctx, it, work) is None
    assert writer.calls == []


async def test_a_failed_restart_is_recorded_as_the_result() -> None:
    writer = FakeClusterWriter()
    it = _stored(writer, "intent-health-remediate.yaml", "fix")
    backend = FakeBackend()  # has no service "web": stopping it fails
    ctx = OperatorContext(writer=writer, backend=backend)  # type: ignore[arg-type]
    work = RemediationWork(action="restart_service", sprite=_sprite(), service="web")
    stored = await remediate(ctx, it, work)
    assert writer.verbs() == ["patch_status"]
    result = _status(writer, "fix")["result"]
    assert result["status"] == "failure"
    assert result["summary"].startswith("restart service failed: ")
    assert stored is not None
    assert stored["status"]["result"] == result


def _restore_ctx(writer: FakeClusterWriter, backend: FakeBackend) -> OperatorContext:
    return OperatorContext(writer=writer, backend=backend, clock=FakeClock())  # type: ignore[arg-type]


def _receipts_of(writer: FakeClusterWriter) -> list[tuple[str, str, str | None]]:
    return [(r.event, r.status, r.failure_class) for _, r in writer.receipts]


async def test_a_restore_of_a_checkpoint_that_is_not_there_fails_naming_it() -> None:
    writer = FakeClusterWriter()
    it = _stored(writer, "intent-checkpoint-restore.yaml", "restore")
    ctx = _restore_ctx(writer, FakeBackend())
    work = RestoreWork(sprite="sample-backend", checkpoint_id=None, checkpoint="sample-before")
    stored = await restore(ctx, it, work)
    assert writer.verbs() == ["read", "patch_status"]
    result = _status(writer, "restore")["result"]
    assert result == {
        "status": "failure",
        "summary": "no SpriteCheckpoint sample-before",
        "artifacts": [],
    }
    assert stored is not None
    # Published after the outcome is stored, regarding the Intent.
    assert {(r.kind, r.name, r.uid) for r, _ in writer.receipts} == {
        ("Intent", "restore", "restore-uid")
    }
    assert _receipts_of(writer)[-1][2] == FailureClass.INVALID_REQUEST


async def test_a_restore_from_a_sprite_checkpoint_rolls_the_sprite_back() -> None:
    writer = FakeClusterWriter()
    it = _stored(writer, "intent-checkpoint-restore.yaml", "restore")
    backend = FakeBackend()
    backend.append("sample-backend", "/workspace/a", b"before")
    taken = backend.take_checkpoint("sample-backend")
    backend.append("sample-backend", "/workspace/a", b" after")
    writer.put(
        "spritecheckpoints",
        {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "SpriteCheckpoint",
            "metadata": {"name": "sample-before", "namespace": "ns"},
            "spec": {"spriteRef": {"name": "sample"}},
            "status": {"phase": "Ready", "spriteName": "sample-backend", "checkpointId": taken},
        },
    )
    ctx = _restore_ctx(writer, backend)
    work = RestoreWork(
        sprite="sample-backend",
        checkpoint_id=None,
        checkpoint="sample-before",
        approved_by=("alice",),
    )
    await restore(ctx, it, work)
    assert backend.read("sample-backend", "/workspace/a") == b"before"
    result = _status(writer, "restore")["result"]
    assert result == {
        "status": "success",
        "summary": f"restored sample-backend to checkpoint {taken} "
        "(SpriteCheckpoint sample-before)",
        "artifacts": [],
    }
    assert all(failure is None for _, _, failure in _receipts_of(writer))
    facts = writer.receipts[-1][1].telemetry_summary
    assert (facts["checkpoint_id"], facts["approved_by"]) == (taken, ["alice"])
