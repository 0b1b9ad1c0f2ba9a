"""parse_line: a line in, an event or the one most useful reason out; never an exception."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lattice_operator.protocol.events import Event, InfoEvent
from lattice_operator.protocol.models import EventType
from lattice_operator.protocol.parse import Rejection, batch_parser, parse_line
from lattice_operator.protocol.violations import ViolationCategory as V
from tests.support.streams import SPRITE, WORK, envelope, ev, info


def parse(raw: bytes, max_payload_bytes: int = 65536) -> object:
    return parse_line(raw, sprite_id=SPRITE, work_item_id=WORK, max_payload_bytes=max_payload_bytes)


def category(raw: bytes, **kw: int) -> V:
    result = parse(raw, **kw)
    assert isinstance(result, Rejection), result
    return result.category


def test_a_valid_line_is_its_decoded_event() -> None:
    result = parse(info("hello", percent=40))
    assert isinstance(result, InfoEvent)
    assert result.event_type is EventType.INFO
    assert result.payload.metadata == {"percent": 40, "phase": "test"}


@pytest.mark.parametrize(
    ("stamp", "read"),
    [
        ("2026-01-15T10:30:00Z", "2026-01-15T10:30:00+00:00"),  # RFC 3339: the fast path
        ("2026-01-15T10:30Z", "2026-01-15T10:30:00+00:00"),  # ISO-8601 without seconds
        ("2026-01-15 10:30:00Z", "2026-01-15T10:30:00+00:00"),
        ("2026-01-15T11:30:00+01:00", "2026-01-15T11:30:00+01:00"),
    ],
)
def test_an_iso_8601_timestamp_is_read_by_the_line_and_the_batch_parser(
    stamp: str, read: str
) -> None:
    """The protocol asks for ISO-8601; the fast decoder takes RFC 3339 only, so the other
    forms the models take are decoded again (they were refused when the decoder changed)."""
    raw = json.dumps({**envelope("INFO", {"message": "x"}), "timestamp": stamp}).encode()
    one = parse(raw)
    assert isinstance(one, InfoEvent), one
    assert one.timestamp.isoformat() == read
    many = batch_parser(sprite_id=SPRITE, work_item_id=WORK, max_payload_bytes=65536)
    results, rejected = many([info("before"), raw, b"{not json", info("after")])
    assert rejected == [2]
    assert [type(r) for r in results] == [InfoEvent, InfoEvent, Rejection, InfoEvent]
    # Still one reading per line: a key named twice beside such a timestamp is refused.
    twice = raw.replace(b'{"message": "x"}', b'{"message": "x", "message": "y"}')
    assert category(twice) is V.DUPLICATE_KEY


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"{not json", V.NOT_JSON),
        (b"\xff\xfe", V.NOT_JSON),
        (b'{"message": "\\ud800"}', V.NOT_JSON),
        (b"", V.NOT_JSON),
        (b"[1, 2]", V.NOT_OBJECT),
        (b'"just a string"', V.NOT_OBJECT),
        (b"42", V.NOT_OBJECT),
        (
            json.dumps({**envelope("INFO", {"message": "x"}), "protocol_version": "v2"}).encode(),
            V.WRONG_PROTOCOL_VERSION,
        ),
        (
            json.dumps(
                {
                    k: v
                    for k, v in envelope("INFO", {"message": "x"}).items()
                    if k != "protocol_version"
                }
            ).encode(),
            V.WRONG_PROTOCOL_VERSION,
        ),
        (ev("QUESTION", {"message": "x"}), V.UNKNOWN_EVENT_TYPE),
        (
            json.dumps(
                {k: v for k, v in envelope("INFO", {"message": "x"}).items() if k != "event_type"}
            ).encode(),
            V.UNKNOWN_EVENT_TYPE,
        ),
        (ev("INFO", {}), V.INVALID_FIELD),
        (ev("INFO", {"message": 7}), V.INVALID_FIELD),
        (ev("PHASE_FINISHED", {"phase": "test", "success": "false"}), V.INVALID_FIELD),
        (ev("ACTION_REQUEST", {"action": "DEPLOY", "blocking": False}), V.INVALID_FIELD),
        (ev("INFO", {"message": "x"}, sprite_id="sprite-666"), V.SPOOFED_IDENTITY),
        (ev("INFO", {"message": "x"}, work_item_id="issue-1"), V.SPOOFED_IDENTITY),
        (ev("WAITING", {"reason": "review"}), V.WAITING_WITHOUT_CHECKPOINT),
        (ev("WAITING", {"reason": "review", "checkpoint_id": None}), V.WAITING_WITHOUT_CHECKPOINT),
        (ev("WAITING", {"reason": "review", "checkpoint_id": ""}), V.WAITING_WITHOUT_CHECKPOINT),
        (ev("WAITING", {"reason": "r", "checkpoint_id": "has space"}), V.INVALID_FIELD),
        (
            json.dumps({**envelope("INFO", {"message": "x"}), "timestamp": "later"}).encode(),
            V.BAD_TIMESTAMP,
        ),
        (
            json.dumps(
                {k: v for k, v in envelope("INFO", {"message": "x"}).items() if k != "timestamp"}
            ).encode(),
            V.BAD_TIMESTAMP,
        ),
    ],
)
def test_each_category(raw: bytes, expected: V) -> None:
    assert category(raw) is expected


def test_spoofing_is_named_even_when_the_event_is_otherwise_broken() -> None:
    raw = ev("INFO", {"message": 7}, sprite_id="someone-else")
    result = parse(raw)
    assert isinstance(result, Rejection)
    assert result.category is V.SPOOFED_IDENTITY
    assert "someone-else" in result.reason


def test_invalid_field_reason_names_the_field() -> None:
    result = parse(ev("PHASE_FINISHED", {"phase": "test", "success": "no"}))
    assert isinstance(result, Rejection)
    assert result.reason.startswith("payload.success:")


def test_payload_over_the_cap() -> None:
    raw = info("x" * 5000)
    assert category(raw, max_payload_bytes=4096) is V.PAYLOAD_TOO_LARGE
    assert isinstance(parse(raw, max_payload_bytes=8192), Event)


def test_a_long_line_with_a_small_payload_passes_the_payload_cap() -> None:
    # Ignored envelope fields make the line long; only the payload counts against its cap.
    event = {**envelope("INFO", {"message": "short"}), "padding": "x" * 5000}
    assert isinstance(parse(json.dumps(event).encode(), max_payload_bytes=1024), Event)


@settings(max_examples=500, deadline=None)
@given(raw=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_never_raises(raw: bytes) -> None:
    result = parse(raw)
    assert isinstance(result, Event | Rejection)


_any_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
_ENVELOPE_KEYS = [
    "protocol_version",
    "event_type",
    "sprite_id",
    "work_item_id",
    "timestamp",
    "payload",
]


@settings(max_examples=500, deadline=None)
@given(
    fields=st.dictionaries(st.sampled_from(_ENVELOPE_KEYS), _any_json),
    base=st.sampled_from(["INFO", "WAITING", "ACTION_REQUEST", "ENVIRONMENT_PROPOSAL"]),
)
def test_never_raises_on_any_json_shape(fields: dict[str, object], base: str) -> None:
    event = {**envelope(base, {}), **fields}
    result = parse(json.dumps(event).encode())
    assert isinstance(result, Event | Rejection)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"protocol_version":"v1","event_type":[1],"sprite_id":"sprite-42"}',
        b'{"protocol_version":"v1","event_type":{"a":1}}',
        b"[" * 5000 + b"]" * 5000,
        b'{"a":' * 3000 + b"1" + b"}" * 3000,
    ],
)
def test_odd_shapes_are_refused_not_raised(raw: bytes) -> None:
    assert isinstance(parse(raw), Rejection)


@settings(max_examples=300, deadline=None)
@given(
    payload=st.dictionaries(
        st.sampled_from(["message", "kind", "metadata", "phase", "success", "checkpoint_id"]),
        st.none() | st.booleans() | st.integers() | st.text(max_size=5) | st.just({}),
    ),
    event_type=st.sampled_from([t.value for t in EventType]),
)
def test_rejections_always_carry_a_bounded_reason(
    payload: dict[str, object], event_type: str
) -> None:
    result = parse(ev(event_type, payload))
    if isinstance(result, Rejection):
        assert 0 < len(result.reason) <= 256
