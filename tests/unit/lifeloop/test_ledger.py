"""The ledger: sequence, invocations, idempotency, gaps, and its persisted state."""

from __future__ import annotations

import re

import pytest

from lattice_operator.lifeloop import (
    FailureClass,
    IntegrationMode,
    LedgerState,
    LifecycleEvent,
    ReceiptLedger,
    ReceiptRequest,
    ReceiptRequestError,
    ReceiptStatus,
    RetryClass,
    UlidIds,
)
from lattice_operator.lifeloop.ledger import IDEMPOTENCY_MEMORY
from tests.support.lifeloop import Clock, CountingIds


def ledger(state: LedgerState | None = None, ids: CountingIds | None = None) -> ReceiptLedger:
    return ReceiptLedger(
        client_id="lattice",
        adapter_id="sprites",
        integration_mode=IntegrationMode.LAUNCHER_WRAPPER,
        clock=Clock(),
        ids=ids or CountingIds(),
        state=state,
    )


def request(event: str = "session.started", key: str | None = None, **kw: object) -> ReceiptRequest:
    return ReceiptRequest(
        event=LifecycleEvent(event),
        event_id="evt-x",
        status=ReceiptStatus.OBSERVED,
        idempotency_key=key,
        **kw,
    )


def test_sequence_is_monotonic_and_invocations_chain() -> None:
    book = ledger()
    first = book.begin()
    a = book.emit(request("session.starting"), first)
    b = book.emit(request("session.started"), first)
    second = book.begin()
    c = book.emit(request("frame.opening"), second)
    assert [r.sequence for r in (a, b, c)] == [1, 2, 3]
    assert a.invocation_id == b.invocation_id != c.invocation_id
    assert (a.parent_receipt_id, b.parent_receipt_id, c.parent_receipt_id) == (
        None,
        a.receipt_id,
        None,
    )
    assert len({a.receipt_id, b.receipt_id, c.receipt_id}) == 3


def test_the_sequence_continues_after_a_restart() -> None:
    book = ledger()
    for _ in range(5):
        book.emit(request(), book.begin())
    restored = ledger(LedgerState.model_validate_json(book.state.model_dump_json(by_alias=True)))
    assert restored.emit(request(), restored.begin()).sequence == 6


def test_identical_replay_returns_the_earlier_receipt() -> None:
    book = ledger()
    original = book.emit(request(key="idem-1"), book.begin())
    book.emit(request(), book.begin())
    replay = book.emit(request(key="idem-1"), book.begin())
    assert replay == original
    assert book.state.sequence == 2  # no new number for a replay


def test_identical_replay_after_a_restart_returns_the_same_receipt() -> None:
    book = ledger()
    original = book.emit(request(key="idem-1", telemetry_summary={"a": 1}), book.begin())
    saved = LedgerState.model_validate_json(book.state.model_dump_json(by_alias=True))
    restored = ledger(saved, ids=CountingIds())
    assert restored.emit(request(key="idem-1", telemetry_summary={"a": 1}), restored.begin()) == (
        original
    )


def test_same_key_different_content_is_a_state_conflict() -> None:
    book = ledger()
    first = book.emit(request(key="idem-1"), book.begin())
    conflict = book.emit(request("session.ending", key="idem-1"), book.begin())
    assert conflict.status is ReceiptStatus.FAILED
    assert conflict.failure_class is FailureClass.STATE_CONFLICT
    assert conflict.retry_class is RetryClass.RETRY_AFTER_REREAD
    assert conflict.receipt_id != first.receipt_id
    assert conflict.sequence == 2
    assert first.receipt_id in conflict.warnings[-1]
    # The key still means the first content.
    assert book.emit(request(key="idem-1"), book.begin()) == first


def test_idempotency_is_scoped_by_client_and_adapter() -> None:
    state = ledger()
    state.emit(request(key="k"), state.begin())
    other = ReceiptLedger(
        client_id="another-client",
        adapter_id="sprites",
        integration_mode=IntegrationMode.LAUNCHER_WRAPPER,
        clock=Clock(),
        ids=CountingIds(),
        state=state.state,
    )
    receipt = other.emit(request("session.ending", key="k"), other.begin())
    assert receipt.status is ReceiptStatus.OBSERVED  # not a conflict: another scope


def test_idempotency_memory_is_bounded() -> None:
    book = ledger()
    for i in range(IDEMPOTENCY_MEMORY + 10):
        book.emit(request(key=f"k{i}"), book.begin())
    assert len(book.state.idempotency) == IDEMPOTENCY_MEMORY
    assert book.state.idempotency[0].key == "k10"


def test_gaps_are_detected_never_reconstructed() -> None:
    book = ledger()
    for _ in range(7):
        book.emit(request(), book.begin())
    gaps = book.audit([1, 2, 5, 7])
    assert [g.event for g in gaps] == [LifecycleEvent.RECEIPT_GAP_DETECTED] * 2
    assert [g.telemetry_summary for g in gaps] == [
        {"missing_from": 3, "missing_to": 4},
        {"missing_from": 6, "missing_to": 6},
    ]
    assert [g.sequence for g in gaps] == [8, 9]
    assert gaps[1].parent_receipt_id == gaps[0].receipt_id
    assert book.audit(range(1, 10)) == []


def test_audit_ignores_receipts_older_than_since() -> None:
    book = ledger()
    for _ in range(5):
        book.emit(request(), book.begin())
    assert book.audit([4, 5], since=4) == []


def test_audit_moves_the_sequence_past_published_numbers() -> None:
    book = ledger(LedgerState(sequence=3))
    assert book.audit([1, 2, 3, 4, 5]) == []
    assert book.emit(request(), book.begin()).sequence == 6


def test_receipt_emitted_is_refused() -> None:
    book = ledger()
    with pytest.raises(ReceiptRequestError):
        book.emit(request("receipt.emitted"), book.begin())


def test_default_ids_are_lowercase_ulids_with_prefixes() -> None:
    ids = UlidIds()
    first, second = ids.new_id("lfr"), ids.new_id("lfr")
    assert re.fullmatch(r"lfr-[0-9a-hjkmnp-tv-z]{26}", first)
    assert first != second


def test_time_comes_from_the_injected_clock() -> None:
    clock = Clock()
    book = ReceiptLedger(
        client_id="lattice",
        adapter_id="sprites",
        integration_mode=IntegrationMode.LAUNCHER_WRAPPER,
        clock=clock,
    )
    clock.advance(60)
    assert book.emit(request(), book.begin()).at_epoch_s == int(clock.at.timestamp())
