"""A hand-moved clock and counting ids, so receipts are predictable in tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lattice_operator.lifeloop import RunReceipts, RunReceiptsState
from lattice_operator.protocol.merge import CommittedEvent
from lattice_operator.protocol.models import EVENT_DATA_ADAPTER


class Clock:
    def __init__(self) -> None:
        self.at = datetime(2026, 1, 15, 10, 30, tzinfo=UTC)

    def now(self) -> datetime:
        return self.at

    def monotonic(self) -> float:
        return self.at.timestamp()

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


class CountingIds:
    def __init__(self) -> None:
        self.count = 0

    def new_id(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}-{self.count:04d}"


def receipts(state: RunReceiptsState | None = None, ids: CountingIds | None = None) -> RunReceipts:
    return RunReceipts(
        run_key="default/run-1",
        work_item_id="issue-17",
        clock=Clock(),
        ids=ids or CountingIds(),
        state=state,
    )


def committed(raw: bytes, line: int = 0) -> CommittedEvent:
    return CommittedEvent(line, line * 10, 1, raw, EVENT_DATA_ADAPTER.validate_json(raw))
