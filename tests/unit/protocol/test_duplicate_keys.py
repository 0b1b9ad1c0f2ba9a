"""A line that names a key twice is ambiguous: refused as duplicate_key, by both parsers."""

from __future__ import annotations

import pytest

from lattice_operator.protocol.engine import RunEventEngine
from lattice_operator.protocol.models import EventType
from lattice_operator.protocol.parse import Rejection, batch_parser, parse_line
from lattice_operator.protocol.violations import ViolationCategory as V
from tests.support.streams import SPRITE, WORK, info, ts

COMPLETED_THEN_INFO = (
    b'{"protocol_version":"v1","event_type":"COMPLETED","event_type":"INFO",'
    b'"sprite_id":"' + SPRITE.encode() + b'","work_item_id":"' + WORK.encode() + b'",'
    b'"timestamp":"' + ts().encode() + b'","payload":{"message":"hi","status":"success",'
    b'"summary":"done"}}'
)
NESTED = (
    b'{"protocol_version":"v1","event_type":"INFO","sprite_id":"' + SPRITE.encode() + b'",'
    b'"work_item_id":"' + WORK.encode() + b'","timestamp":"' + ts().encode() + b'",'
    b'"payload":{"message":"first","message":"second"}}'
)


def parse(raw: bytes) -> object:
    return parse_line(raw, sprite_id=SPRITE, work_item_id=WORK, max_payload_bytes=65536)


def test_a_duplicate_event_type_is_not_committed_as_the_last_value() -> None:
    result = parse(COMPLETED_THEN_INFO)
    assert isinstance(result, Rejection)
    assert result.category is V.DUPLICATE_KEY
    assert "'event_type'" in result.reason


def test_a_duplicate_key_inside_the_payload_is_ambiguous_too() -> None:
    result = parse(NESTED)
    assert isinstance(result, Rejection)
    assert result.category is V.DUPLICATE_KEY


def test_the_batch_parser_agrees_line_by_line() -> None:
    parse_many = batch_parser(sprite_id=SPRITE, work_item_id=WORK, max_payload_bytes=65536)
    raws = [info("a"), NESTED, info("b"), COMPLETED_THEN_INFO, info("c")]
    results, rejected = parse_many(raws)
    assert rejected == [1, 3]
    assert [r.category for r in results if isinstance(r, Rejection)] == [V.DUPLICATE_KEY] * 2
    assert results == [parse(raw) for raw in raws]


def test_the_engine_reports_it_and_goes_on() -> None:
    engine = RunEventEngine(SPRITE, WORK)
    data = b"".join(x + b"\n" for x in (info("a"), COMPLETED_THEN_INFO, info("b")))
    result = engine.feed_outbox(data)
    assert [c.event_type for c in result.committed] == [EventType.INFO, EventType.INFO]
    assert [v.category for v in result.violations] == [V.DUPLICATE_KEY]
    assert result.violations[0].line == 1
    assert engine.status().state != "Completed"


def _line(body: str) -> bytes:
    head = (
        f'{{"protocol_version":"v1","sprite_id":"{SPRITE}","work_item_id":"{WORK}",'
        f'"timestamp":"{ts()}",'
    )
    return (head + body + "}").encode()


@pytest.mark.parametrize(
    "raw",
    [
        # Spelled differently, the same key: an escape, whitespace before the colon.
        _line('"event_type":"COMPLETED","event\\u005ftype":"INFO","payload":{"message":"m"}'),
        _line('"event_type" :"COMPLETED","event_type":"INFO","payload":{"message":"m"}'),
        _line('"event_type":"INFO","payload":{"message":"a\\":b","message":"c"}'),
        _line('"event_type":"INFO","payload":{"message":"a\\\\","message":"c"}'),
    ],
)
def test_every_spelling_of_a_duplicate_is_found_in_a_batch(raw: bytes) -> None:
    parse_many = batch_parser(sprite_id=SPRITE, work_item_id=WORK, max_payload_bytes=65536)
    results, rejected = parse_many([info("a"), raw, info("b")])
    assert rejected == [1], results[1]
    assert isinstance(results[1], Rejection)
    assert results[1].category is V.DUPLICATE_KEY


@pytest.mark.parametrize(
    "body",
    [
        '"event_type":"INFO","payload":{"message":"quotes \\": inside, twice \\":"}',
        '"event_type":"INFO","payload":{"message":"caf\\u00e9","metadata":{"message":1}}',
        '"event_type" : "INFO", "payload" : {"message" : "spaced"}',
    ],
)
def test_look_alikes_are_not_duplicates(body: str) -> None:
    parse_many = batch_parser(sprite_id=SPRITE, work_item_id=WORK, max_payload_bytes=65536)
    results, rejected = parse_many([_line(body), info("b")])
    assert rejected == [], results
