"""The public surface of the protocol package, pinned."""

from __future__ import annotations

import lattice_operator.protocol as protocol


def test_public_names() -> None:
    assert set(protocol.__all__) == {
        "EVENT_ADAPTER",
        "ActionRequestStatus",
        "CommittedEvent",
        "EngineLimits",
        "EngineStateError",
        "EventType",
        "FeedResult",
        "InputProblem",
        "OutboxGapError",
        "ProtocolEngineError",
        "ProtocolEvent",
        "ProvisionalEvent",
        "RunEventEngine",
        "RunEventsStatus",
        "StreamCursor",
        "UnknownActionRequestError",
        "Violation",
        "ViolationCategory",
        "fold",
        "reduce",
        "resolve_action_request",
        "validate_resume_inputs",
    }
    for name in protocol.__all__:
        assert getattr(protocol, name) is not None


def test_errors_belong_to_the_operator_tree() -> None:
    from lattice_operator.errors import LatticeError

    assert issubclass(protocol.ProtocolEngineError, LatticeError)
    for error in (
        protocol.EngineStateError,
        protocol.OutboxGapError,
        protocol.UnknownActionRequestError,
    ):
        assert issubclass(error, protocol.ProtocolEngineError)


def test_every_issue_category_exists() -> None:
    V = protocol.ViolationCategory
    required = {
        "not_json",
        "not_object",
        "wrong_protocol_version",
        "unknown_event_type",
        "invalid_field",
        "payload_too_large",
        "line_too_long",
        "spoofed_identity",
        "event_after_completed",
        "event_after_waiting",
        "waiting_without_checkpoint",
        "blocking_request_without_waiting",
        "bad_timestamp",
        "stdout_only_event",
    }
    assert required <= {c.value for c in V}
