"""RunReceipts: the mapping table applied to protocol events and Run transitions."""

from __future__ import annotations

from pathlib import Path

from lattice_operator.lifeloop import (
    LIFECYCLE_MAP,
    FailureClass,
    LifecycleEvent,
    ReceiptStatus,
    RunReceiptsState,
    RunTransition,
    SupportState,
)
from lattice_operator.lifeloop.mapping import mapping_table_markdown
from lattice_operator.protocol import EventType
from tests.support.lifeloop import CountingIds, committed, receipts
from tests.support.streams import ev, info

E = LifecycleEvent
DOC = Path(__file__).resolve().parents[3] / "docs" / "protocol-engine.md"


def test_every_protocol_event_type_is_in_the_table() -> None:
    assert {t for t in LIFECYCLE_MAP if isinstance(t, EventType)} == set(EventType)
    assert {t for t in LIFECYCLE_MAP if isinstance(t, RunTransition)} == set(RunTransition)


def test_the_documentation_shows_the_table_in_code() -> None:
    assert mapping_table_markdown() in DOC.read_text()


def test_phases_are_frames() -> None:
    book = receipts()
    opened = book.for_event(committed(ev("PHASE_STARTED", {"phase": "test"}), line=4))
    closed = book.for_event(
        committed(ev("PHASE_FINISHED", {"phase": "test", "success": False}), line=5)
    )
    assert [r.event for r in opened] == [E.FRAME_OPENING, E.FRAME_OPENED]
    assert [r.event for r in closed] == [E.FRAME_ENDING, E.FRAME_ENDED]
    assert closed[1].telemetry_summary == {
        "event_type": "PHASE_FINISHED",
        "outbox_line": 5,
        "phase": "test",
        "success": False,
    }
    assert [r.sequence for r in opened + closed] == [1, 2, 3, 4]


def test_chatty_events_make_no_receipts() -> None:
    assert receipts().for_event(committed(info("hello"))) == []


def test_waiting_then_exit_then_resume_is_a_session_boundary() -> None:
    book = receipts()
    book.set_session("exec-1")
    starting = book.for_transition(RunTransition.EXEC_STARTING, key="exec-1")
    started = book.for_transition(RunTransition.EXEC_STARTED, key="exec-1")
    waiting = book.for_event(
        committed(ev("WAITING", {"reason": "review", "checkpoint_id": "chk-1"}), line=9)
    )
    ended = book.for_transition(RunTransition.EXEC_EXITED, key="exec-1", exit_code=0)
    book.set_session("exec-2")
    resuming = book.for_transition(RunTransition.RESUME_STARTING, key="exec-2")
    resumed = book.for_transition(RunTransition.RESUME_STARTED, key="exec-2")
    events = [r.event for r in starting + started + waiting + ended + resuming + resumed]
    assert events == [
        E.SESSION_STARTING,
        E.SESSION_STARTED,
        E.SESSION_ENDING,
        E.SESSION_ENDED,
        E.SESSION_STARTING,
        E.SESSION_STARTED,
    ]
    assert waiting[0].telemetry_summary["checkpoint_id"] == "chk-1"
    assert ended[0].telemetry_summary == {"transition": "exec_exited", "exit_code": 0}
    assert {r.harness_run_id for r in starting + ended} == {"exec-1"}
    assert {r.harness_run_id for r in resuming + resumed} == {"exec-2"}
    assert {r.harness_session_id for r in starting + resumed} == {"default/run-1"}
    assert {r.harness_task_id for r in starting + resumed} == {"issue-17"}


def test_failures_carry_their_class() -> None:
    book = receipts()
    lost = book.for_transition(RunTransition.SESSION_LOST, key="exec-1", evidence="ws closed")
    timed_out = book.for_transition(RunTransition.TIMED_OUT, key="attempt-1")
    assert [(r.status, r.failure_class) for r in lost] == [
        (ReceiptStatus.FAILED, FailureClass.TRANSPORT_ERROR)
    ] * 2
    assert {r.failure_class for r in timed_out} == {FailureClass.TIMEOUT}
    assert "ws closed" in lost[0].warnings
    unannounced = book.for_transition(RunTransition.EXEC_EXITED_UNANNOUNCED, key="exec-2")
    assert [r.event for r in unannounced] == [E.SESSION_ENDING, E.SESSION_ENDED]
    assert unannounced[0].warnings


def test_a_lost_stdout_is_a_degradation_with_the_support_transition() -> None:
    book = receipts()
    (lost,) = book.for_transition(RunTransition.STDOUT_LOST, key="1", evidence="socket reset")
    assert lost.event is E.CAPABILITY_DEGRADED
    assert lost.status is ReceiptStatus.DEGRADED
    assert lost.failure_class is FailureClass.CAPABILITY_DEGRADED
    (change,) = lost.capability_degradations
    assert (change.capability, change.previous_support, change.current_support) == (
        "stdout_stream",
        SupportState.NATIVE,
        SupportState.UNAVAILABLE,
    )
    assert change.evidence == "socket reset"
    # Losing it again changes nothing; getting it back is reported as a change too.
    assert book.for_transition(RunTransition.STDOUT_LOST, key="2") == []
    (back,) = book.for_transition(RunTransition.STDOUT_RESTORED, key="3")
    assert back.status is ReceiptStatus.OBSERVED
    assert back.failure_class is None
    assert back.capability_degradations[0].previous_support is SupportState.UNAVAILABLE
    assert back.capability_degradations[0].current_support is SupportState.NATIVE


def test_a_synthesized_checkpoint_is_reported_once_per_session() -> None:
    book = receipts()
    book.for_transition(RunTransition.EXEC_STARTING, key="exec-1")
    (taken,) = book.for_transition(
        RunTransition.CHECKPOINT_SYNTHESIZED, key="exec-1:chk-9", evidence="took chk-9"
    )
    assert taken.status is ReceiptStatus.DEGRADED
    (change,) = taken.capability_degradations
    assert (change.capability, change.previous_support, change.current_support) == (
        "checkpoint",
        SupportState.NATIVE,
        SupportState.SYNTHESIZED,
    )
    assert book.for_transition(RunTransition.CHECKPOINT_SYNTHESIZED, key="exec-1:chk-10") == []
    # A new session starts from the baseline: its own synthesized checkpoint is reported.
    book.for_transition(RunTransition.RESUME_STARTING, key="exec-2")
    assert len(book.for_transition(RunTransition.CHECKPOINT_SYNTHESIZED, key="exec-2:c")) == 1


def test_a_new_session_brings_stdout_back() -> None:
    book = receipts()
    book.for_transition(RunTransition.STDOUT_LOST, key="1")
    book.for_transition(RunTransition.RESUME_STARTING, key="exec-2")
    assert book.state.capabilities["stdout_stream"] is SupportState.NATIVE
    assert len(book.for_transition(RunTransition.STDOUT_LOST, key="2")) == 1


def test_capability_state_survives_a_restart() -> None:
    book = receipts()
    book.for_transition(RunTransition.OUTBOX_UNREADABLE, key="1")
    state = RunReceiptsState.model_validate_json(book.state.model_dump_json(by_alias=True))
    restored = receipts(state)
    assert restored.for_transition(RunTransition.OUTBOX_UNREADABLE, key="2") == []
    assert restored.for_transition(RunTransition.OUTBOX_RESTORED, key="3")[0].sequence == 2


def test_replaying_an_outbox_event_gives_the_same_event_id() -> None:
    raw = ev("COMPLETED", {"status": "success"})
    first = receipts(ids=CountingIds()).for_event(committed(raw, line=12))
    again = receipts(ids=CountingIds()).for_event(committed(raw, line=12))
    elsewhere = receipts().for_event(committed(raw, line=13))
    assert first[0].event_id == again[0].event_id != elsewhere[0].event_id
    assert first[0].idempotency_key == again[0].idempotency_key


def test_a_retried_transition_is_an_idempotent_replay() -> None:
    book = receipts()
    first = book.for_transition(RunTransition.EXEC_STARTED, key="exec-1")
    again = book.for_transition(RunTransition.EXEC_STARTED, key="exec-1")
    assert again == first
    assert book.state.ledger.sequence == 1
