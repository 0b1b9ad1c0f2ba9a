"""The count that spares most lines the duplicate-key parse never lets a duplicate through.

`parse` compares a line's `"` with those of what it decoded into, written again
(the envelope's known count, the payload encoded); only a line where they differ is
parsed a second time to look for a key named twice. These tests pin the facts that
comparison rests on (strict decoding reads strings only from JSON strings and fills
in no defaults: a left-out field is UNSET; the envelope's string fields) and check,
on adversarial lines, that the parsers give exactly what checking every line would
give.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, cast

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lattice_operator.protocol.events import AnyEvent, Event, decode, encode
from lattice_operator.protocol.parse import (
    Rejection,
    _envelope_quotes,
    batch_parser,
    duplicate_key,
    maybe_ambiguous,
    parse_line,
)
from lattice_operator.protocol.violations import ViolationCategory as V
from tests.support.streams import SPRITE, WORK, envelope, ev, info, realistic_events, ts

MINIMAL: dict[str, dict[str, Any]] = {
    "INFO": {"message": "m"},
    "PHASE_STARTED": {"phase": "p"},
    "PHASE_FINISHED": {"phase": "p", "success": True},
    "ACTION_REQUEST": {"action": "OPEN_PR", "blocking": False},
    "ARTIFACT": {"kind": "file"},
    "WAITING": {"reason": "r", "checkpoint_id": "cp-1"},
    "COMPLETED": {"status": "success"},
    "ERROR": {"message": "m"},
    "ENVIRONMENT_PROPOSAL": {
        "observed_failure": {},
        "suggested_adjustment": {"type": "runtime_install"},
        "confidence": 0.5,
        "evidence": [],
        "scope": "repo_specific",
    },
}


ENVELOPE = _envelope_quotes(SPRITE, WORK)


def parse(raw: bytes) -> object:
    return parse_line(raw, sprite_id=SPRITE, work_item_id=WORK, max_payload_bytes=65536)


def _ambiguous(raw: bytes, event: object) -> bool:
    assert isinstance(event, Event)
    return maybe_ambiguous(raw, [cast("AnyEvent", event)], ENVELOPE)


def reference(raw: bytes) -> object:
    """What a parser that looks for a duplicate key in every valid line returns."""
    result = parse(raw)
    if not isinstance(result, Rejection):
        return duplicate_key(raw) or result
    return result


def keys_and_strings(value: object) -> int:
    if isinstance(value, dict):
        return len(value) + sum(keys_and_strings(v) for v in value.values())
    if isinstance(value, list):
        return sum(keys_and_strings(v) for v in value)
    return 1 if isinstance(value, str | datetime) else 0


@pytest.mark.parametrize("event_type", sorted(MINIMAL))
def test_decoding_fills_in_nothing_the_line_did_not_hold(event_type: str) -> None:
    # A default filled in would be a key or string the count expects but the line lacks.
    obj = envelope(event_type, MINIMAL[event_type])
    event = decode(json.dumps(obj))
    written = json.loads(encode(event))
    assert keys_and_strings(written) == keys_and_strings(obj)
    payload = keys_and_strings(json.loads(encode(event.payload)))
    assert 2 * (keys_and_strings(written) - payload) == ENVELOPE


@pytest.mark.parametrize("event_type", sorted(MINIMAL))
def test_every_event_type_takes_the_fast_path(event_type: str) -> None:
    # Enums (action, adjustment type) are counted as the strings they were read from.
    raw = ev(event_type, MINIMAL[event_type])
    event = parse(raw)
    assert not _ambiguous(raw, event)


def test_the_envelope_strings_are_the_structs_string_fields() -> None:
    for struct in AnyEvent.__args__:
        info = msgspec.inspect.type_info(struct)
        assert isinstance(info, msgspec.inspect.StructType)
        assert info.tag_field == "event_type"
        names = [f.name for f in info.fields if f.name != "payload"]
        assert names == ["protocol_version", "sprite_id", "work_item_id", "timestamp"]
    # Keys: those four, event_type and payload; string values: the four and event_type.
    assert ENVELOPE == 2 * (6 + 5)
    assert _envelope_quotes('a"b', "c") == ENVELOPE + 1


@pytest.mark.parametrize("timestamp", [1768473000, 1768473000.5, True, None, ["x"]])
def test_a_timestamp_is_only_ever_read_from_a_json_string(timestamp: object) -> None:
    # The count takes a datetime for a string token: strict validation must not make one
    # from a number.
    obj = {**envelope("INFO", {"message": "m"}), "timestamp": timestamp}
    assert isinstance(parse(json.dumps(obj).encode()), Rejection)


def test_the_realistic_stream_takes_the_fast_path() -> None:
    for raw in realistic_events(2000, seed=3):
        event = parse(raw)
        assert not _ambiguous(raw, event), raw


def _line(body: str) -> bytes:
    head = (
        f'{{"protocol_version":"v1","sprite_id":"{SPRITE}","work_item_id":"{WORK}",'
        f'"timestamp":"{ts()}",'
    )
    return (head + body + "}").encode()


AMBIGUOUS = [
    _line('"event_type":"INFO","event_type":"INFO","payload":{"message":"m"}'),
    _line('"event_type":"INFO","payload":{"message":"m","message":"m"}'),
    _line('"event_type":"INFO","payload":{"message":"m","metadata":{"a":1,"a":1}}'),
    _line('"event_type":"INFO","payload":{"message":"m","metadata":{"x":[{"a":1,"a":2}]}}'),
    _line('"event_type":"INFO","payload":{"message":"m","metadata":{"a":"s","\\u0061":"s"}}'),
    # A duplicate whose dropped value is a string, next to an extra field that is not one.
    _line('"event_type":"INFO","payload":{"message":"a","message":"b"},"extra":1'),
    # Escaped quotes and a dropped key, together.
    _line('"event_type":"INFO","payload":{"message":"a\\"b","message":"c"}'),
    _line('"event_type":"ARTIFACT","payload":{"kind":"file","kind":"file","url":null}'),
    _line(
        '"event_type":"ACTION_REQUEST","payload":{"action":"OPEN_PR","blocking":false,'
        '"parameters":{"b":true,"b":false}}'
    ),
]


@pytest.mark.parametrize("raw", AMBIGUOUS)
def test_every_kind_of_duplicate_is_still_found(raw: bytes) -> None:
    result = parse(raw)
    assert isinstance(result, Rejection), result
    assert result.category is V.DUPLICATE_KEY
    parse_many = batch_parser(sprite_id=SPRITE, work_item_id=WORK, max_payload_bytes=65536)
    results, rejected = parse_many([info("a"), raw, info("b"), raw])
    assert rejected == [1, 3]
    assert results[1] == results[3] == result


_keys = st.sampled_from(["a", "b", "message", "kind", "\\u0061", 'a\\"', "k\\\\"])
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.sampled_from(['"s"', '"\\""', '"a\\\\"', '"x\\u0022y"', '""']),
)


@st.composite
def json_text(draw: st.DrawFn, depth: int = 0) -> str:
    """A JSON value as text, with keys that may repeat or be spelled with escapes."""
    kind = draw(st.sampled_from(["scalar", "object", "array"] if depth < 3 else ["scalar"]))
    if kind == "scalar":
        value = draw(_scalars)
        return json.dumps(value) if not isinstance(value, str) else value
    items = draw(st.lists(json_text(depth + 1), max_size=3))
    if kind == "array":
        return "[" + ",".join(items) + "]"
    return "{" + ",".join(f'"{draw(_keys)}":{item}' for item in items) + "}"


@st.composite
def adversarial_lines(draw: st.DrawFn) -> bytes:
    event_type = draw(st.sampled_from(sorted(MINIMAL)))
    payload = json.dumps(MINIMAL[event_type], separators=(",", ":"))[1:-1]
    extra = draw(st.lists(st.tuples(_keys, json_text()), max_size=3))
    fields = [payload, *(f'"{k}":{v}' for k, v in extra)]
    fields = draw(st.permutations(fields))
    body = f'"event_type":"{event_type}","payload":{{{",".join(f for f in fields if f)}}}'
    if draw(st.booleans()):
        body += f',"{draw(_keys)}":{draw(json_text())}'
    return _line(body)


@settings(max_examples=400, deadline=None)
@given(lines=st.lists(adversarial_lines(), min_size=1, max_size=6))
def test_the_parsers_agree_with_checking_every_line(lines: list[bytes]) -> None:
    expected = [reference(raw) for raw in lines]
    assert [parse(raw) for raw in lines] == expected
    parse_many = batch_parser(sprite_id=SPRITE, work_item_id=WORK, max_payload_bytes=65536)
    results, rejected = parse_many([*lines, *map(info, ["x", "y"])])
    assert results[: len(lines)] == expected
    assert rejected == [i for i, r in enumerate(expected) if isinstance(r, Rejection)]


def test_an_artifact_with_a_null_url_is_counted_right() -> None:
    raw = ev("ARTIFACT", {"kind": "file", "ref": "a.py", "url": None, "metadata": {}})
    event = parse(raw)
    assert not _ambiguous(raw, event)
