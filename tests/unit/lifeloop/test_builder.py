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
from lattice_operator.lifeloop.mapping import SpriteOperation, mapping_table_markdown
from lattice_operator.lifeloop.operations import operation_receipts
from lattice_operator.protocol import EventType
from tests.support.lifeloop import Clock, CountingIds, committed, receipts
from tests.support.streams import ev, info

E = LifecycleEvent
DOC = Path(__file__).resolve().parents[3] / "docs" / "protocol-engine.md"


def test_every_protocol_event_type_is_in_the_table() -> None:
    assert {t for t in LIFECYCLE_MAP if isinstance(t, EventType)} == set(EventType)
    assert {t for t in LIFECYCLE_MAP if isinstance(t, RunTransition)} == set(RunTransition)
    assert {t for t in LIFECYCLE_MAP if isinstance(t, SpriteOperation)} == set(SpriteOperation)


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


def test_the_environment_is_a_root_receipt_before_the_session_with_its_outcome() -> None:
    book = receipts()
    facts = {"digest": "0123456789ab", "steps": ["own"], "cluster_steps": ["everywhere"]}
    applied = book.for_transition(RunTransition.ENVIRONMENT_APPLIED, key="a1-s1", facts=facts)
    book.set_session("exec-1")
    starting = book.for_transition(RunTransition.EXEC_STARTING, key="exec-1")
    [receipt] = applied
    assert (receipt.event, receipt.status, receipt.sequence) == (
        E.SESSION_STARTING,
        ReceiptStatus.OBSERVED,
        1,
    )
    assert receipt.parent_receipt_id is None  # an invocation of its own, not the session's
    assert receipt.invocation_id != starting[0].invocation_id
    assert starting[0].parent_receipt_id is None
    assert starting[0].sequence == 2
    assert receipt.telemetry_summary == {"transition": "environment_applied", **facts}

    [skipped] = receipts().for_transition(RunTransition.ENVIRONMENT_ALREADY_APPLIED, key="a2-s1")
    assert (skipped.status, skipped.failure_class) == (ReceiptStatus.SKIPPED, None)
    failing = {"failed_step": "broken", "exit_code": 127}
    [failed] = receipts().for_transition(
        RunTransition.ENVIRONMENT_FAILED, key="a1-s1", facts=failing, evidence="step broken"
    )
    assert (failed.status, failed.failure_class) == (
        ReceiptStatus.FAILED,
        FailureClass.OPERATOR_REQUIRED,
    )
    assert failed.telemetry_summary["failed_step"] == "broken"
    assert failed.warnings == ["step broken"]


def test_an_environment_receipt_inside_an_open_session_does_not_join_it() -> None:
    book = receipts()
    book.set_session("exec-1")
    starting = book.for_transition(RunTransition.EXEC_STARTING, key="exec-1")
    [env] = book.for_transition(RunTransition.ENVIRONMENT_APPLIED, key="a2-s1")
    started = book.for_transition(RunTransition.EXEC_STARTED, key="exec-1")
    assert env.invocation_id != starting[0].invocation_id
    assert started[0].parent_receipt_id == starting[0].receipt_id  # the chain is unbroken


def test_a_restore_is_one_chained_invocation_scoped_by_its_intent() -> None:
    facts = {"sprite": "box", "checkpoint_id": "v3", "approved_by": ["alice"]}
    made = operation_receipts(
        SpriteOperation.CHECKPOINT_RESTORED,
        scope="uid-1",
        task="restore",
        sprite="ns-box",
        facts=facts,
        clock=Clock(),
        ids=CountingIds(),
    )
    assert [(r.event, r.status, r.sequence) for r in made] == [
        (E.SESSION_STARTING, ReceiptStatus.OBSERVED, 1),
        (E.SESSION_STARTED, ReceiptStatus.OBSERVED, 2),
    ]
    assert made[0].parent_receipt_id is None
    assert made[1].parent_receipt_id == made[0].receipt_id
    assert {r.invocation_id for r in made} == {made[0].invocation_id}
    assert {(r.harness_session_id, r.harness_task_id, r.harness_run_id) for r in made} == {
        ("uid-1", "restore", "ns-box")
    }
    assert made[0].telemetry_summary == {"operation": "checkpoint_restored", **facts}
    again = operation_receipts(
        SpriteOperation.CHECKPOINT_RESTORED,
        scope="uid-1",
        task="restore",
        sprite="ns-box",
        facts=facts,
        clock=Clock(),
    )
    assert [r.event_id for r in again] == [r.event_id for r in made]  # stable across tries
    assert [r.idempotency_key for r in again] == [r.idempotency_key for r in made]


def test_a_failed_restore_names_the_backend_errors_class() -> None:
    [failed] = operation_receipts(
        SpriteOperation.CHECKPOINT_RESTORE_FAILED,
        scope="uid-1",
        task="restore",
        sprite="ns-box",
        facts={"checkpoint_id": "v9"},
        clock=Clock(),
        failure=FailureClass.INVALID_REQUEST,
        warning="no SpriteCheckpoint gone",
    )
    assert (failed.event, failed.status, failed.failure_class) == (
        E.SESSION_STARTING,
        ReceiptStatus.FAILED,
        FailureClass.INVALID_REQUEST,
    )
    assert failed.warnings == ["no SpriteCheckpoint gone"]
    [default] = operation_receipts(
        SpriteOperation.CHECKPOINT_RESTORE_FAILED,
        scope="uid-1",
        task="restore",
        sprite=None,
        facts={},
        clock=Clock(),
    )
    assert default.failure_class is FailureClass.ADAPTER_UNAVAILABLE
