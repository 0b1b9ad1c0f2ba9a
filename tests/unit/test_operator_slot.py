"""The worker's shared operator: started once, never beside another, replaced when dead."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from tests.support import operator_slot
from tests.support.operator_slot import OperatorSlot, release_shared


class FakeOperator:
    def __init__(self, log_path: Path) -> None:
        self.running, self.log_path, self.log_start = True, log_path, 0

    def alive(self) -> bool:
        return self.running

    def mark_log(self) -> None:
        self.log_start = self.log_path.stat().st_size


class FakeStack:
    def __init__(self, log_path: Path) -> None:
        self.operator = FakeOperator(log_path)


@pytest.fixture
def lifecycle(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """What the slot did, in order ("start", "stop", "served"), instead of real processes."""
    done: list[str] = []
    log = tmp_path / "operator.log"

    def start(*_: Any) -> FakeStack:
        done.append("start")
        log.write_text("started\n")
        return FakeStack(log)

    def stop(stack: FakeStack) -> None:
        done.append("stop")
        stack.operator.running = False

    monkeypatch.setattr(operator_slot, "start_stack", start)
    monkeypatch.setattr(operator_slot, "stop_stack", stop)
    monkeypatch.setattr(operator_slot, "wait_webhooks_served", lambda _: done.append("served"))
    return done


def slot(tmp_path: Path) -> OperatorSlot:
    return OperatorSlot(cast(Any, None), cast(Any, None), tmp_path)


def test_modules_share_one_operator_until_another_is_to_start(
    lifecycle: list[str], tmp_path: Path
) -> None:
    with slot(tmp_path) as shared:
        first = shared.acquire()
        assert shared.acquire() is first  # the next module: the same one, its webhooks checked
        assert lifecycle == ["start", "served"]
        release_shared()  # a module with its own operator is about to start
        assert lifecycle == ["start", "served", "stop"]
        release_shared()  # nothing left to stop
        shared.acquire()
        assert lifecycle == ["start", "served", "stop", "start"]
        assert shared.starts == 2
    assert lifecycle[-1] == "stop"  # the session's end stops it


def test_a_dead_operator_is_replaced_and_each_module_reads_its_own_log(
    lifecycle: list[str], tmp_path: Path
) -> None:
    with slot(tmp_path) as shared:
        first = shared.acquire()
        first.operator.log_path.write_text("started\nwritten in the first module\n")
        cast(FakeOperator, first.operator).running = False  # crashed, not restarted
        second = shared.acquire()
        assert lifecycle == ["start", "stop", "start"]  # its webhook configurations removed
        assert second is not first
        second.operator.log_path.write_text("started\nstill the second module's\n")
        assert shared.acquire().operator.log_start == len("started\nstill the second module's\n")
