"""The protocol models, and the proof that the engine's Structs decode exactly like them."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import msgspec
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from lattice_operator.protocol.events import aware, decode
from lattice_operator.protocol.models import (
    EVENT_ADAPTER,
    ActionName,
    AdjustmentType,
    EventType,
    PhaseFinishedEvent,
    WaitingEvent,
)
from tests.support.streams import envelope

SPEC_EXAMPLES: dict[str, dict[str, Any]] = {
    # The payloads of the examples in sprite-protocol-v1.md, verbatim.
    "INFO": {
        "message": "Running test suite (75% complete)",
        "kind": "progress",
        "metadata": {"percent": 75, "phase": "test"},
    },
    "PHASE_STARTED": {"phase": "implement"},
    "PHASE_FINISHED": {"phase": "implement", "success": True},
    "ACTION_REQUEST": {
        "action": "OPEN_PR",
        "parameters": {
            "title": "Fix cache invalidation",
            "body": "Resolves #17",
            "base": "main",
            "head": "sprite/fix-cache",
        },
        "blocking": True,
    },
    "ARTIFACT": {"kind": "branch", "ref": "sprite/fix-cache", "url": None, "metadata": {}},
    "WAITING": {
        "reason": "PR_REVIEW",
        "checkpoint_id": "chk_abc123",
        "expected_inputs": {"approved": "boolean", "comments": "array<string>"},
    },
    "COMPLETED": {
        "status": "success",
        "summary": "Implemented cache invalidation. All tests passing.",
    },
    "ERROR": {
        "message": "Build failed with exit code 1 after 3 retries",
        "details": {"phase": "test", "exit_code": 1, "attempts": 3},
    },
    "ENVIRONMENT_PROPOSAL": {
        "observed_failure": {
            "phase": "bootstrap",
            "exit_code": 127,
            "stderr_hint": "bash: node: command not found",
        },
        "suggested_adjustment": {
            "type": "runtime_install",
            "details": {"runtime": "node", "version": "20"},
        },
        "confidence": 0.85,
        "evidence": ["package.json present", "no .nvmrc found"],
        "scope": "repo_specific",
    },
}


def _raw(event_type: str, payload: dict[str, Any], **changes: Any) -> bytes:
    event = envelope(event_type, payload)
    event.update(changes)
    return json.dumps(event).encode()


def _valid(raw: bytes) -> bool:
    try:
        EVENT_ADAPTER.validate_json(raw)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("event_type", list(SPEC_EXAMPLES))
def test_every_example_of_the_spec_is_valid(event_type: str) -> None:
    event = EVENT_ADAPTER.validate_json(_raw(event_type, SPEC_EXAMPLES[event_type]))
    assert event.event_type is EventType(event_type)
    assert event.timestamp == datetime(2026, 1, 15, 10, 30, tzinfo=UTC)


def test_every_event_type_has_a_spec_example() -> None:
    assert set(SPEC_EXAMPLES) == {t.value for t in EventType}


def test_phase_finished_success_false_is_kept_false() -> None:
    event = EVENT_ADAPTER.validate_json(_raw("PHASE_FINISHED", {"phase": "test", "success": False}))
    assert isinstance(event, PhaseFinishedEvent)
    assert event.payload.success is False


@pytest.mark.parametrize("success", ["false", 0, 1, None, "true"])
def test_phase_finished_success_must_be_a_real_boolean(success: object) -> None:
    assert not _valid(_raw("PHASE_FINISHED", {"phase": "test", "success": success}))


def test_phase_finished_without_success_is_invalid() -> None:
    assert not _valid(_raw("PHASE_FINISHED", {"phase": "test"}))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-01-15T10:30:00Z", datetime(2026, 1, 15, 10, 30, tzinfo=UTC)),
        ("2026-01-15T10:30:00.250Z", datetime(2026, 1, 15, 10, 30, 0, 250000, tzinfo=UTC)),
        ("2026-01-15T12:30:00+02:00", datetime(2026, 1, 15, 10, 30, tzinfo=UTC)),
        ("2026-01-15T10:30:00", datetime(2026, 1, 15, 10, 30, tzinfo=UTC)),
    ],
)
def test_the_events_own_timestamp_is_parsed_and_kept(text: str, expected: datetime) -> None:
    event = EVENT_ADAPTER.validate_json(_raw("INFO", {"message": "x"}, timestamp=text))
    assert event.timestamp == expected
    assert event.timestamp.utcoffset() is not None


def test_an_explicit_offset_is_kept_as_given() -> None:
    event = EVENT_ADAPTER.validate_json(
        _raw("INFO", {"message": "x"}, timestamp="2026-01-15T12:30:00+02:00")
    )
    assert event.timestamp.utcoffset() == timezone(timedelta(hours=2)).utcoffset(None)


@pytest.mark.parametrize("text", ["yesterday", "2026-01-15", "2026-13-01T00:00:00Z", 1700000000])
def test_unparseable_timestamps_are_invalid(text: object) -> None:
    assert not _valid(_raw("INFO", {"message": "x"}, timestamp=text))


@pytest.mark.parametrize(
    "spec", ["string", "integer", "boolean", "map", "array<string>", "array<array<map>>"]
)
def test_expected_input_vocabulary(spec: str) -> None:
    payload = {"reason": "r", "checkpoint_id": "chk-1", "expected_inputs": {"x": spec}}
    event = EVENT_ADAPTER.validate_json(_raw("WAITING", payload))
    assert isinstance(event, WaitingEvent)
    assert event.payload.expected_inputs == {"x": spec}


@pytest.mark.parametrize(
    "spec", ["str", "array<str>", "array<string", "array<>", "arraystring>", "number", "Map"]
)
def test_unknown_input_types_are_invalid(spec: str) -> None:
    payload = {"reason": "r", "checkpoint_id": "chk-1", "expected_inputs": {"x": spec}}
    assert not _valid(_raw("WAITING", payload))


def test_known_actions_and_nothing_else() -> None:
    assert {a.value for a in ActionName} == {
        "OPEN_PR",
        "POST_COMMENT",
        "LABEL_ISSUE",
        "NOTIFY_USER",
        "FETCH_CREDENTIAL",
    }
    request = {"action": "PUSH_TO_BRANCH", "parameters": {}, "blocking": False}
    assert not _valid(_raw("ACTION_REQUEST", request))


def test_allowed_adjustment_types_and_confidence_range() -> None:
    assert len(AdjustmentType) == 8
    base = SPEC_EXAMPLES["ENVIRONMENT_PROPOSAL"]
    for confidence, ok in [(0, True), (1, True), (0.5, True), (-0.01, False), (1.01, False)]:
        assert _valid(_raw("ENVIRONMENT_PROPOSAL", {**base, "confidence": confidence})) is ok
    wrong = {**base, "suggested_adjustment": {"type": "rm_rf", "details": {}}}
    assert not _valid(_raw("ENVIRONMENT_PROPOSAL", wrong))
    for field in ("observed_failure", "suggested_adjustment", "confidence", "evidence", "scope"):
        partial = {k: v for k, v in base.items() if k != field}
        assert not _valid(_raw("ENVIRONMENT_PROPOSAL", partial)), field


def test_unknown_extra_fields_are_ignored() -> None:
    event = EVENT_ADAPTER.validate_json(
        _raw("INFO", {"message": "x", "colour": "blue"}, trace_id="abc")
    )
    assert event.model_dump(exclude_unset=True)["payload"] == {"message": "x"}


# -- the fast adapter is the models, as plain data --------------------------------------------

_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 200),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=12),
)
_json = st.recursive(
    _json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


_NEAR_MISS = st.sampled_from(
    [
        "",
        "v2",
        "NOPE",
        "OPEN_PR",
        "runtime_install",
        "success",
        "failure",
        "repo_specific",
        "array<string>",
        "array<bogus>",
        "chk_1",
        "-bad id",
        "2026-01-15 10:30:00.5+01:00",
        "2026-01-15",
        True,
        False,
        0,
        1,
        0.5,
        1.5,
        1700000000,
        [],
        {},
        {"a": "string"},
        {"a": "array<integer>"},
        {"type": "add_system_package"},
        {"type": "bogus"},
        ["evidence"],
        None,
    ]
)


@st.composite
def near_valid_events(draw: st.DrawFn) -> bytes:
    """A spec example with 0-3 mutations: fields dropped, retyped or given near-miss values."""
    event_type = draw(st.sampled_from(list(SPEC_EXAMPLES)))
    event = envelope(event_type, json.loads(json.dumps(SPEC_EXAMPLES[event_type])))
    for _ in range(draw(st.integers(0, 3))):
        target = event if draw(st.booleans()) else event.get("payload")
        if not isinstance(target, dict):
            continue
        key = draw(st.sampled_from([*sorted(target), "extra"]))
        if key in target and draw(st.booleans()):
            del target[key]
        else:
            # A copy: later mutations must not edit the strategy's own constants.
            target[key] = copy.deepcopy(draw(st.one_of(_NEAR_MISS, _json)))
    return json.dumps(event).encode()


@settings(max_examples=600, deadline=None)
@given(raw=near_valid_events())
def test_the_structs_accept_exactly_what_the_models_accept(raw: bytes) -> None:
    try:
        model = EVENT_ADAPTER.validate_json(raw)
    except ValidationError:
        model = None
    try:
        event = decode(raw)
    except msgspec.ValidationError:
        event = None
    if model is None or event is None:
        # A refused line's reason comes from the models either way (see `parse`).
        assert model is None, model
        assert event is None, event
        return
    # The same values, the fields the line left out left out by both.
    wire = msgspec.to_builtins(event, builtin_types=(datetime,))
    wire["timestamp"] = aware(wire["timestamp"])
    assert wire == model.model_dump(exclude_unset=True)


@pytest.mark.parametrize("event_type", list(SPEC_EXAMPLES))
def test_the_generator_reaches_valid_events_of_each_type(event_type: str) -> None:
    """Guards the property above against only ever testing refusals."""

    def valid_of_type(raw: bytes) -> bool:
        return _valid(raw) and json.loads(raw)["event_type"] == event_type

    found = find(near_valid_events(), valid_of_type, settings=settings(max_examples=5000))
    assert decode(found).event_type is EventType(event_type)
