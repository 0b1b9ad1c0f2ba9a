"""The status projection: what it records, that it is pure, bounded and a structural schema."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from lattice_operator.api.crdgen import model_schema
from lattice_operator.protocol import (
    EVENT_ADAPTER,
    RunEventEngine,
    RunEventsStatus,
    UnknownActionRequestError,
    fold,
    reduce,
    resolve_action_request,
)
from lattice_operator.protocol.events import decode
from lattice_operator.protocol.merge import CommittedEvent
from lattice_operator.protocol.projection import (
    MAX_ARTIFACTS,
    MAX_PHASES,
    STATUS_BUDGET_BYTES,
    Projector,
    record_violation,
    status_size,
)
from lattice_operator.protocol.violations import Violation, ViolationCategory
from tests.support.streams import SPRITE, WORK, ev, info, realistic_events

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


def committed(raw: bytes, line: int = 0, session: int = 1) -> CommittedEvent:
    return CommittedEvent(line, line * 100, session, raw, decode(raw))


def status_of(*lines: bytes) -> RunEventsStatus:
    return fold(committed(raw, i) for i, raw in enumerate(lines))


def test_phases_start_finish_and_success() -> None:
    status = status_of(
        ev("PHASE_STARTED", {"phase": "implement"}, at=1),
        ev("PHASE_STARTED", {"phase": "test"}, at=2),
        ev("PHASE_FINISHED", {"phase": "test", "success": False}, at=3),
        ev("PHASE_FINISHED", {"phase": "implement", "success": True}, at=4),
    )
    phases = {p.name: p for p in status.phases}
    assert phases["test"].state == "Failed"
    assert phases["test"].success is False
    assert phases["implement"].state == "Succeeded"
    assert phases["implement"].success is True
    assert phases["test"].started_at is not None
    assert phases["test"].finished_at is not None
    assert status.current_phase is None


def test_current_phase_falls_back_to_the_phase_still_running() -> None:
    status = status_of(
        ev("PHASE_STARTED", {"phase": "outer"}),
        ev("PHASE_STARTED", {"phase": "inner"}),
        ev("PHASE_FINISHED", {"phase": "inner", "success": True}),
    )
    assert status.current_phase == "outer"


def test_a_failed_phase_is_never_success() -> None:
    status = status_of(ev("PHASE_FINISHED", {"phase": "lint", "success": False}))
    assert status.phases[0].state == "Failed"
    assert status.phases[0].started_at is None  # its start was never seen
    assert status.recent[0].summary == "lint FAILED"


def test_progress_from_info_progress_metadata() -> None:
    status = status_of(
        info("starting", percent=10),
        info("a note"),  # not progress: leaves progress alone
        ev("INFO", {"message": "halfway", "kind": "progress", "metadata": {"phase": "test"}}),
    )
    assert status.progress is not None
    assert status.progress.percent == 10  # the last report without a percent keeps it
    assert status.progress.message == "halfway"
    assert status.progress.phase == "test"
    assert status.progress.line == 2


@pytest.mark.parametrize("percent", [-1, 101, "50", True, None])
def test_unusable_percentages_are_ignored(percent: object) -> None:
    bad = ev("INFO", {"message": "m", "kind": "progress", "metadata": {"percent": percent}})
    status = status_of(info("first", percent=30), bad)
    assert status.progress is not None
    assert status.progress.percent == 30


def test_artifacts_errors_and_proposals() -> None:
    proposal = {
        "observed_failure": {"phase": "bootstrap", "exit_code": 127},
        "suggested_adjustment": {"type": "runtime_install", "details": {"runtime": "node"}},
        "confidence": 0.85,
        "evidence": ["package.json present"],
        "scope": "repo_specific",
    }
    status = status_of(
        ev("ARTIFACT", {"kind": "pr_url", "url": "https://example.test/pr/1"}),
        ev("ERROR", {"message": "build failed", "details": {"exit_code": 1}}),
        ev("ENVIRONMENT_PROPOSAL", proposal),
    )
    assert [(a.kind, a.url) for a in status.artifacts] == [("pr_url", "https://example.test/pr/1")]
    assert status.errors[0].message == "build failed"
    assert status.errors[0].details == {"exit_code": 1}
    assert status.proposals[0].adjustment.value == "runtime_install"
    assert status.proposals[0].confidence == 0.85
    assert (status.artifact_count, status.error_count, status.proposal_count) == (1, 1, 1)
    assert status.counts.artifact == 1
    assert status.counts.environment_proposal == 1


def test_completion() -> None:
    status = status_of(ev("COMPLETED", {"status": "failure", "summary": "tests fail"}))
    assert status.state == "Completed"
    assert status.completion is not None
    assert (status.completion.status, status.completion.summary) == ("failure", "tests fail")


def test_action_requests_are_pending_until_resolved() -> None:
    status = status_of(
        ev("ACTION_REQUEST", {"action": "OPEN_PR", "parameters": {"title": "t"}, "blocking": True}),
        ev("ACTION_REQUEST", {"action": "NOTIFY_USER", "blocking": False}),
    )
    assert [r.request_id for r in status.pending_action_requests()] == ["req-0", "req-1"]
    answered = resolve_action_request(status, "req-0", answered=True, at=NOW, message="PR #3")
    refused = resolve_action_request(answered, "req-1", answered=False, at=NOW, message="no")
    assert [r.state for r in refused.action_requests] == ["Answered", "Refused"]
    assert refused.action_requests[0].resolved_at == NOW
    assert refused.pending_action_requests() == []
    # Pure: the earlier statuses are untouched; repeating an outcome is a no-op.
    assert [r.state for r in status.action_requests] == ["Pending", "Pending"]
    assert resolve_action_request(refused, "req-0", answered=True, at=NOW) == refused
    with pytest.raises(UnknownActionRequestError):
        resolve_action_request(refused, "req-0", answered=False, at=NOW)
    with pytest.raises(UnknownActionRequestError):
        resolve_action_request(refused, "req-99", answered=True, at=NOW)


def test_large_action_parameters_are_left_in_the_outbox() -> None:
    raw = ev(
        "ACTION_REQUEST",
        {"action": "POST_COMMENT", "parameters": {"body": "x" * 5000}, "blocking": False},
    )
    status = status_of(raw)
    request = status.action_requests[0]
    assert request.parameters is None
    assert request.parameters_omitted
    assert request.digest == committed(raw).digest  # enough to find and check the line again
    assert request.offset == 0


def test_reduce_is_pure_and_agrees_with_fold() -> None:
    lines = list(realistic_events(300, seed=3))
    events = [committed(raw, i) for i, raw in enumerate(lines)]
    status = RunEventsStatus()
    before = status.model_copy(deep=True)
    stepped = status
    for event in events:
        stepped = reduce(stepped, event)
    assert status == before
    assert stepped == fold(events)


def test_restoring_a_projector_mid_stream_changes_nothing() -> None:
    events = [committed(raw, i) for i, raw in enumerate(realistic_events(400, seed=4))]
    for cut in (0, 1, 57, 399):
        head = Projector()
        for event in events[:cut]:
            head.apply(event)
        saved = RunEventsStatus.model_validate_json(head.snapshot().model_dump_json(by_alias=True))
        tail = Projector(saved)
        for event in events[cut:]:
            tail.apply(event)
        assert tail.snapshot() == fold(events), cut


def test_violations_are_bounded_with_a_count() -> None:
    status = RunEventsStatus()
    for i in range(50):
        status = record_violation(
            status,
            Violation(
                category=ViolationCategory.NOT_JSON, source="outbox", session=1, line=i, reason="x"
            ),
        )
    assert status.violation_count == 50
    assert len(status.violations) == 20
    assert status.violations[-1].line == 49
    assert status.violation_counts == {"not_json": 50}


def test_the_status_is_a_structural_schema() -> None:
    schema = model_schema(RunEventsStatus)
    assert schema["type"] == "object"
    assert "eventCount" in schema["properties"]
    assert schema["properties"]["phases"]["maxItems"] == MAX_PHASES
    params = schema["properties"]["actionRequests"]["items"]["properties"]["parameters"]
    assert params.get("x-kubernetes-preserve-unknown-fields") is True

    def strings_bounded(node: object, path: str = "") -> Iterator[str]:
        if isinstance(node, dict):
            unbounded = "maxLength" not in node and "enum" not in node
            if node.get("type") == "string" and unbounded and node.get("format") != "date-time":
                yield path
            if node.get("type") == "array" and "maxItems" not in node:
                yield path
            for key, value in node.items():
                yield from strings_bounded(value, f"{path}.{key}")

    assert list(strings_bounded(schema)) == []


# -- the byte budget ------------------------------------------------------------------------------

HUGE = "\U0001f600" * 4000  # four UTF-8 bytes a character, clipped by the status


def adversarial() -> Iterator[bytes]:
    """Every list filled with the largest entries the models allow, forever."""
    for i in itertools.count():
        kind = i % 8
        if kind == 0:
            yield ev("PHASE_STARTED", {"phase": f"{i}{HUGE}"}, at=i)
        elif kind == 1:
            yield ev("ARTIFACT", {"kind": HUGE, "ref": HUGE, "url": HUGE}, at=i)
        elif kind == 2:
            big = {f"k{n}": "\U0001f600" * 100 for n in range(2)}
            yield ev(
                "ACTION_REQUEST",
                {"action": "NOTIFY_USER", "parameters": big, "blocking": False},
                at=i,
            )
        elif kind == 3:
            yield ev("ERROR", {"message": HUGE, "details": {"d": "\U0001f600" * 200}}, at=i)
        elif kind == 4:
            yield ev(
                "ENVIRONMENT_PROPOSAL",
                {
                    "observed_failure": {"x": "\U0001f600" * 200},
                    "suggested_adjustment": {
                        "type": "escalate_to_human",
                        "details": {"y": "\U0001f600" * 200},
                    },
                    "confidence": 0.5,
                    "evidence": [HUGE] * 3,
                    "scope": "global_candidate",
                },
                at=i,
            )
        elif kind == 5:
            yield info(HUGE, percent=50, at=i)
        else:
            yield ev("PHASE_FINISHED", {"phase": f"{i - 6}{HUGE}", "success": False}, at=i)


def test_adversarial_payloads_stay_under_the_budget() -> None:
    engine = RunEventEngine(SPRITE, WORK)
    stream = adversarial()
    for _ in range(40):
        engine.feed_outbox(b"".join(next(stream) + b"\n" for _ in range(25)))
        engine.feed_outbox(b"\x00garbage " + HUGE.encode() + b"\n")
        assert status_size(engine.status()) <= STATUS_BUDGET_BYTES
    status = engine.status()
    assert status.trimmed
    assert status.phases_dropped > 0
    assert status.artifact_count > MAX_ARTIFACTS
    assert status.violation_count == 40


def test_pending_requests_survive_trimming() -> None:
    engine = RunEventEngine(SPRITE, WORK)
    stream = adversarial()
    engine.feed_outbox(b"".join(next(stream) + b"\n" for _ in range(1000)))
    status = engine.status()
    assert status_size(status) <= STATUS_BUDGET_BYTES
    assert len(status.pending_action_requests()) == 32


def test_a_long_stream_stays_under_the_budget() -> None:
    # 200,000 lines (a realistic pool, cycled 40 times), fed 20,000 at a time: every ring is
    # full long before the end, so the size has reached its plateau (the benchmark feeds
    # millions: `make bench`).
    pool = list(realistic_events(5000, seed=5))
    stream = itertools.islice(itertools.cycle(pool), 200_000)
    engine = RunEventEngine(SPRITE, WORK)
    largest = 0
    while chunk := list(itertools.islice(stream, 20_000)):
        engine.feed_outbox(b"".join(raw + b"\n" for raw in chunk))
        largest = max(largest, status_size(engine.status()))
    status = engine.status()
    assert status.event_count == 200_000
    assert engine.cursor.line_count == 200_000
    assert largest <= STATUS_BUDGET_BYTES
    assert sum(json.loads(status.counts.model_dump_json()).values()) == 200_000


def test_events_carry_their_models() -> None:
    raw = ev("WAITING", {"reason": "r", "checkpoint_id": "chk-9"})
    assert committed(raw).event == EVENT_ADAPTER.validate_json(raw)


def test_everything_the_run_status_will_embed_is_structural() -> None:
    from lattice_operator.lifeloop import RunReceiptsState
    from lattice_operator.protocol import StreamCursor

    for model in (StreamCursor, RunReceiptsState):
        schema = model_schema(model)
        assert schema["type"] == "object"
        text = json.dumps(schema)
        assert '"anyOf"' not in text
        assert '"$ref"' not in text
