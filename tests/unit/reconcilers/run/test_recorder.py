"""RunRecorder: when the status is written, and the order of status and receipts."""

from __future__ import annotations

from typing import Any

from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.api.v1alpha1 import Run
from lattice_operator.lifeloop.mapping import RunTransition
from lattice_operator.reconcilers.run.reasons import Reason
from lattice_operator.reconcilers.run.recorder import RunRecorder
from tests.support.clock import FakeClock
from tests.support.run_harness import Publisher, run_doc

REF = ObjectRef("lattice.dev/v1alpha1", "Run", "team", "job", "uid-job")


class Writer:
    def __init__(self, log: list[str]) -> None:
        self.writes: list[dict[str, Any]] = []
        self.log = log

    async def write_run_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.writes.append(status)
        self.log.append("write")


class OrderedPublisher(Publisher):
    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    async def publish(self, regarding: ObjectRef, receipts: Any) -> None:
        self.log.append("publish")
        await super().publish(regarding, receipts)


def _recorder(
    doc: dict[str, Any] | None = None,
) -> tuple[RunRecorder, Writer, FakeClock, list[str]]:
    log: list[str] = []
    writer, clock = Writer(log), FakeClock()
    recorder = RunRecorder(
        Run.model_validate(doc or run_doc()),
        ref=REF,
        writer=writer,
        publisher=OrderedPublisher(log),
        clock=clock,
        patch_interval=1.0,
    )
    return recorder, writer, clock, log


async def test_nothing_changed_is_never_written() -> None:
    recorder, writer, _, _ = _recorder()
    await recorder.flush()
    assert writer.writes == []
    assert recorder.wait_time(idle=7.0) == 7.0


async def test_a_phase_change_is_written_at_once_then_changes_are_coalesced() -> None:
    recorder, writer, clock, _ = _recorder()
    recorder.set("Unknown", Reason.RUNNING, "running")
    assert recorder.wait_time(idle=7.0) == 0.0
    await recorder.flush()
    assert len(writer.writes) == 1
    recorder.status.session_id = "s1"
    recorder.changed()
    assert recorder.wait_time(idle=7.0) == 1.0
    await recorder.flush()
    assert len(writer.writes) == 1  # not due yet
    clock.advance(0.6)
    assert abs(recorder.wait_time(idle=7.0) - 0.4) < 1e-9
    clock.advance(0.4)
    await recorder.flush()
    assert len(writer.writes) == 2
    assert writer.writes[-1]["sessionId"] == "s1"
    recorder.set("Unknown", Reason.WAITING, "waiting")  # a phase change: not paced
    await recorder.flush()
    assert len(writer.writes) == 3


async def test_a_change_that_leaves_the_status_equal_is_not_written() -> None:
    recorder, writer, _, _ = _recorder()
    recorder.changed()
    await recorder.flush()
    assert writer.writes == []
    assert recorder.wait_time(idle=7.0) == 7.0  # and no longer pending


async def test_a_status_read_after_a_restart_is_not_written_again() -> None:
    doc = run_doc()
    doc["status"] = {"phase": "Running", "sessionId": "s1"}
    recorder, writer, _, _ = _recorder(doc)
    await recorder.flush()
    assert writer.writes == []


async def test_receipts_are_published_after_the_status_that_holds_them() -> None:
    recorder, writer, _, log = _recorder()
    recorder.emit(recorder.receipts.for_transition(RunTransition.EXEC_STARTING, key="a1-s1"))
    await recorder.flush(force=True)
    assert log == ["write", "publish"]
    assert writer.writes[0]["receipts"]["state"]["ledger"]["sequence"] == 1


def _oldest_activity() -> float | None:
    from lattice_operator.metrics import REGISTRY

    return REGISTRY.get_sample_value("lattice_run_oldest_activity_timestamp_seconds")


def test_activity_is_tracked_while_running_only() -> None:
    from lattice_operator.metrics import RUN_OLDEST_ACTIVITY

    recorder, _, clock, _ = _recorder()
    try:
        recorder.set("Unknown", Reason.RUNNING, "running")
        started = clock.now().timestamp()
        assert _oldest_activity() == started
        clock.advance(30)
        recorder.active()  # output read
        assert _oldest_activity() == started + 30
        recorder.set("Unknown", Reason.WAITING, "waiting")  # waiting for a person: not stalled
        assert _oldest_activity() is None
        recorder.set("Unknown", Reason.RUNNING, "resumed")
        recorder.set("True", Reason.RUNNING, "done")
        assert _oldest_activity() is None
    finally:
        RUN_OLDEST_ACTIVITY.forget(REF.uid)
