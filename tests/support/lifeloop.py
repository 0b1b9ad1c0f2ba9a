"""A hand-moved clock and counting ids, so receipts are predictable in tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lattice_operator.lifeloop import (
    LifecycleEvent,
    LifecycleReceipt,
    ReceiptRequest,
    ReceiptStatus,
    RunReceipts,
    RunReceiptsState,
    RunTransition,
)
from lattice_operator.protocol import EventType
from lattice_operator.protocol.events import decode
from lattice_operator.protocol.merge import CommittedEvent
from tests.support.streams import ev, info


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


def receipts(
    state: RunReceiptsState | None = None,
    ids: CountingIds | None = None,
    adapter_id: str = "sprites",
) -> RunReceipts:
    return RunReceipts(
        run_key="default/run-1",
        work_item_id="issue-17",
        clock=Clock(),
        ids=ids or CountingIds(),
        state=state,
        adapter_id=adapter_id,
    )


def committed(raw: bytes, line: int = 0) -> CommittedEvent:
    return CommittedEvent(line, line * 10, 1, raw, decode(raw))


SAMPLE_EVENTS = {
    EventType.INFO: info("hello"),
    EventType.PHASE_STARTED: ev("PHASE_STARTED", {"phase": "test"}),
    EventType.PHASE_FINISHED: ev("PHASE_FINISHED", {"phase": "test", "success": True}),
    EventType.ACTION_REQUEST: ev("ACTION_REQUEST", {"action": "OPEN_PR", "blocking": True}),
    EventType.ARTIFACT: ev("ARTIFACT", {"kind": "branch", "ref": "b"}),
    EventType.WAITING: ev("WAITING", {"reason": "r", "checkpoint_id": "chk-1"}),
    EventType.COMPLETED: ev("COMPLETED", {"status": "success"}),
    EventType.ERROR: ev("ERROR", {"message": "boom"}),
    EventType.ENVIRONMENT_PROPOSAL: ev(
        "ENVIRONMENT_PROPOSAL",
        {
            "observed_failure": {},
            "suggested_adjustment": {"type": "runtime_install"},
            "confidence": 0.5,
            "evidence": [],
            "scope": "repo_specific",
        },
    ),
}


def every_receipt(adapter_id: str = "sprites") -> list[LifecycleReceipt]:
    """Every receipt the adapter's code can produce: each trigger, a conflict, a gap."""
    book = receipts(adapter_id=adapter_id)
    book.set_session("exec-1")
    out: list[LifecycleReceipt] = []
    for transition in RunTransition:
        out += book.for_transition(transition, key="k1")
    for transition in RunTransition:  # capability transitions the other way round
        out += book.for_transition(transition, key="k2")
    for line, raw in enumerate(SAMPLE_EVENTS.values()):
        out += book.for_event(committed(raw, line))
    ledger = book.ledger
    invocation = ledger.begin()
    for event in (LifecycleEvent.SESSION_STARTED, LifecycleEvent.SESSION_ENDED):
        out.append(
            ledger.emit(
                ReceiptRequest(
                    event=event,
                    event_id="evt-c",
                    status=ReceiptStatus.OBSERVED,
                    idempotency_key="same-key",
                ),
                invocation,
            )
        )
    out += book.audit([1])
    return out


PRODUCED = every_receipt()


PRODUCED_EVENTS = {r.event for r in PRODUCED}


def observed_receipt(sequence: int) -> LifecycleReceipt:
    """A `session.started` receipt numbered `sequence` (for the Event publisher's tests)."""
    return LifecycleReceipt(
        receipt_id=f"lfr-{sequence}",
        idempotency_key=None,
        client_id="lattice",
        adapter_id="sprites",
        invocation_id="inv-1",
        event="session.started",
        event_id=f"evt-{sequence}",
        sequence=sequence,
        parent_receipt_id=None,
        integration_mode="launcher_wrapper",
        status="observed",
        at_epoch_s=1778100000,
        harness_session_id=None,
        harness_run_id=None,
        harness_task_id=None,
        failure_class=None,
        retry_class=None,
    )
