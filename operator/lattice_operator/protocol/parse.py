"""One line of JSON in, one validated event (or the reason it was refused) out.

`parse_line` never raises. The fast path is a single `events.decode(line)`:
msgspec parses and validates in one pass, into the Structs of `events`. Only
a refused line is looked at a second time, by the pydantic models, so that the
reason names the field and the category is the most useful one.

`batch_parser` does the same for a whole outbox read: the decoder is mapped
over the lines inside C (`list.extend(map(...))`), and the per-Run checks
(identity, payload size, duplicate keys) are done on the batch at once; a line
that fails anything goes through the one-line parser, so both give the same
result for every line.

JSON lets an object name a key twice and parsers then disagree (msgspec and
Python keep the last value, others the first): such a line is ambiguous, and is
refused as `duplicate_key` after it validated, by a second parse with the standard
library's C scanner that checks each object's keys. That second parse would cost
more than the decoding, so it is only done where a count cannot rule a duplicate
out (`maybe_ambiguous`): every `"` of a JSON line delimits a string token or is an
escaped `\"` inside one, and re-encoding what was decoded writes each kept token
and each quote inside a kept string the same way. Decoding only drops tokens
(ignored fields, the first value of a key named twice; a left-out optional field
is UNSET and is not written back), so a line holds at least as many `"` as its
re-encoding, and exactly as many only when nothing was dropped: then no key was
named twice. The one way to write a quote without `"`, the escape `\u0022`, sends
its line the slow way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from operator import attrgetter, length_hint
from typing import Any, NamedTuple, cast

import msgspec
import pydantic_core
from pydantic import ValidationError

from lattice_operator.protocol.events import AnyEvent, decode, encode
from lattice_operator.protocol.models import EVENT_ADAPTER, PROTOCOL_VERSION, EventType
from lattice_operator.protocol.violations import REASON_CHARS, ViolationCategory
from lattice_operator.text import clip

_EVENT_TYPES = frozenset(t.value for t in EventType)
_QUOTE = b'"'
_ESCAPED_QUOTE = b"\\u0022"
_identity = attrgetter("sprite_id", "work_item_id")
_payload = attrgetter("payload")


_sprite_id = attrgetter("sprite_id")
_work_item_id = attrgetter("work_item_id")


def _valid(
    raws: list[bytes], results: list[ParseResult], rejected: list[int]
) -> tuple[Sequence[int], list[AnyEvent], list[bytes]]:
    """(indices, events, lines) of the lines that decoded."""
    if not rejected:
        return range(len(raws)), cast("list[AnyEvent]", results), raws
    kept = [i for i, r in enumerate(results) if type(r) is not Rejection]
    return kept, [r for r in results if not isinstance(r, Rejection)], [raws[i] for i in kept]


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return result


_pairs_decoder = json.JSONDecoder(object_pairs_hook=_unique_pairs)


def _envelope_quotes(sprite_id: str, work_item_id: str) -> int:
    """`"` of an event's envelope, its payload left out: six keys (protocol_version,
    event_type, sprite_id, work_item_id, timestamp, payload) and five string values, two
    each, and the escaped quotes inside the Run's identity (the values are this Run's:
    other lines are refused first). A test checks it against the Structs."""
    return 2 * (6 + 5) + sprite_id.count('"') + work_item_id.count('"')


def maybe_ambiguous(raws: bytes, events: list[AnyEvent], envelope_quotes: int) -> bool:
    """Whether `raws` (one line, or lines joined), which decoded into `events` with the
    Run's identity, may name a key twice somewhere (False: it cannot; see the module
    docstring). Only the payloads are encoded again: the envelope's count is known."""
    expected = envelope_quotes * len(events) + encode(list(map(_payload, events))).count(_QUOTE)
    return raws.count(_QUOTE) != expected or _ESCAPED_QUOTE in raws


def duplicate_key(raw: bytes) -> Rejection | None:
    """The rejection of a line in which some object names a key twice, else None.

    Only called on lines that validated (so they are UTF-8 JSON objects)."""
    try:
        _pairs_decoder.decode(raw.decode())
    except _DuplicateKey as dup:
        return Rejection(
            ViolationCategory.DUPLICATE_KEY,
            clip(f"key {dup.key!r} appears twice in one object: ambiguous line", REASON_CHARS),
        )
    except (ValueError, RecursionError):
        return None  # what msgspec accepted and this parser does not: its verdict stands
    return None


class Rejection(NamedTuple):
    """Why a line is not an event."""

    category: ViolationCategory
    reason: str


ParseResult = AnyEvent | Rejection
"""A decoded event, or why the line is not one."""


def line_parser(
    *, sprite_id: str, work_item_id: str, max_payload_bytes: int
) -> Callable[[bytes], ParseResult]:
    """A parser for one Run: `parser(raw)` validates one JSON line (no prefix, no newline).

    A valid event whose sprite_id/work_item_id differ from the Run's is refused as
    spoofed; a payload whose compact JSON is over `max_payload_bytes` is refused as
    too large.
    """

    def parse(raw: bytes) -> ParseResult:
        try:
            event = decode(raw)
        except (msgspec.DecodeError, RecursionError) as exc:  # (nesting deeper than it goes)
            repaired = _iso_timestamp(raw, exc)
            if repaired is None:
                return _refused(raw, exc, sprite_id, work_item_id)
            event = repaired
        quotes = _envelope_quotes(event.sprite_id, event.work_item_id)
        if maybe_ambiguous(raw, [event], quotes):
            ambiguous = duplicate_key(raw)
            if ambiguous is not None:
                return ambiguous
        if event.sprite_id != sprite_id or event.work_item_id != work_item_id:
            return _spoofed(event.sprite_id, event.work_item_id, sprite_id, work_item_id)
        # The payload is never larger than the line, so only long lines pay for measuring it.
        if len(raw) > max_payload_bytes:
            size = compact_size(pydantic_core.from_json(raw).get("payload"))
            if size > max_payload_bytes:
                return Rejection(
                    ViolationCategory.PAYLOAD_TOO_LARGE,
                    f"payload is {size} bytes; the cap is {max_payload_bytes}",
                )
        return event

    return parse


BatchParse = tuple[list[ParseResult], list[int]]
"""(one result per line, the indices of the rejected lines in ascending order)."""


def batch_parser(
    *, sprite_id: str, work_item_id: str, max_payload_bytes: int
) -> Callable[[list[bytes]], BatchParse]:
    """`parser(raws)`: `line_parser`'s result for each line, computed for the batch at once."""
    one = line_parser(
        sprite_id=sprite_id, work_item_id=work_item_id, max_payload_bytes=max_payload_bytes
    )
    run_identity = (sprite_id, work_item_id)
    envelope_quotes = _envelope_quotes(sprite_id, work_item_id)

    def parse_many(raws: list[bytes]) -> BatchParse:
        results: list[ParseResult] = []
        rejected: list[int] = []
        source = iter(raws)
        total = len(raws)
        while True:
            try:
                results.extend(map(decode, source))
                break
            except (msgspec.DecodeError, RecursionError):
                # The list iterator knows how far it got: the line that failed is the
                # one just before what remains. `extend` keeps what it appended before
                # the error; should it not, parse the batch line by line instead.
                failed = total - length_hint(source) - 1
                if len(results) != failed:
                    results = [one(raw) for raw in raws]
                    return results, [i for i, r in enumerate(results) if type(r) is Rejection]
                result = one(raws[failed])
                results.append(result)
                if type(result) is Rejection:  # (else an ISO-8601 timestamp, repaired)
                    rejected.append(failed)
        kept, valid, valid_raws = _valid(raws, results, rejected)
        # Another sprite's or work item's events: the one-line parser says which (rare).
        if list(map(_sprite_id, valid)).count(sprite_id) != len(valid) or (
            list(map(_work_item_id, valid)).count(work_item_id) != len(valid)
        ):
            for index in kept:
                if _identity(results[index]) != run_identity:
                    results[index] = one(raws[index])
                    rejected.append(index)
            rejected.sort()
            kept, valid, valid_raws = _valid(raws, results, rejected)
        # Lines that decoded may still be ambiguous (a key named twice): counted over the
        # batch at once, and line by line only when the batch's count differs.
        if valid and maybe_ambiguous(b"".join(valid_raws), valid, envelope_quotes):
            for index, raw, event in zip(kept, valid_raws, valid, strict=True):
                if maybe_ambiguous(raw, [event], envelope_quotes) and (
                    rejection := duplicate_key(raw)
                ):
                    results[index] = rejection
                    rejected.append(index)
            rejected.sort()
        # The payload is never larger than the line, so only long lines are measured.
        if max(map(len, raws), default=0) > max_payload_bytes:
            for index, raw in enumerate(raws):
                if len(raw) > max_payload_bytes and type(results[index]) is not Rejection:
                    results[index] = checked = one(raw)
                    if type(checked) is Rejection:
                        rejected.append(index)
            rejected.sort()
        return results, rejected

    return parse_many


def parse_line(
    raw: bytes, *, sprite_id: str, work_item_id: str, max_payload_bytes: int
) -> ParseResult:
    """Validate one JSON line; see `line_parser`."""
    parse = line_parser(
        sprite_id=sprite_id, work_item_id=work_item_id, max_payload_bytes=max_payload_bytes
    )
    return parse(raw)


def _iso_timestamp(raw: bytes, error: Exception) -> AnyEvent | None:
    """The event of a line whose one fault for the Structs is an ISO-8601 timestamp outside
    RFC 3339 that the models take (the spec asks for ISO-8601: `2026-01-15T10:30Z` is one),
    decoded again with that timestamp written in RFC 3339; None for any other fault. Rare,
    so it may be slow. A key named twice is still caught after it (by the caller)."""
    if not isinstance(error, msgspec.ValidationError) or not str(error).endswith(
        " - at `$.timestamp`"
    ):
        return None
    try:
        model = EVENT_ADAPTER.validate_json(raw)
    except ValidationError:
        return None
    obj: dict[str, Any] = pydantic_core.from_json(raw)
    obj["timestamp"] = model.timestamp.isoformat()
    try:
        return decode(msgspec.json.encode(obj))
    except msgspec.DecodeError:
        return None


def _refused(raw: bytes, error: Exception, sprite_id: str, work_item_id: str) -> Rejection:
    """Why a line did not decode: the pydantic models name the field and the category."""
    try:
        EVENT_ADAPTER.validate_json(raw)
    except ValidationError as exc:
        return _classify(raw, exc, sprite_id, work_item_id)
    # The models accept what the Structs refused: a key named twice (msgspec checks a
    # repeated `event_type` against the first), or a timestamp outside RFC 3339 (see
    # `events`), unless the two definitions drifted apart (a test checks they do not).
    ambiguous = duplicate_key(raw)
    if ambiguous is not None:
        return ambiguous
    obj: dict[str, Any] = pydantic_core.from_json(raw)
    got_sprite, got_work = obj.get("sprite_id"), obj.get("work_item_id")
    if got_sprite != sprite_id or got_work != work_item_id:
        return _spoofed(got_sprite, got_work, sprite_id, work_item_id)
    message, _, where = str(error).partition(" - at `$.")
    if where == "timestamp`":
        return Rejection(
            ViolationCategory.BAD_TIMESTAMP,
            clip(
                f"timestamp {_show(obj.get('timestamp'))}: not RFC 3339 ({message})",
                REASON_CHARS,
            ),
        )
    path = where.removesuffix("`") or "<event>"
    return Rejection(ViolationCategory.INVALID_FIELD, clip(f"{path}: {message}", REASON_CHARS))


def _spoofed(got_sprite: object, got_work: object, sprite_id: str, work_item_id: str) -> Rejection:
    if got_sprite != sprite_id:
        what = f"sprite_id {_show(got_sprite)} is not this Run's {sprite_id!r}"
    else:
        what = f"work_item_id {_show(got_work)} is not this Run's {work_item_id!r}"
    return Rejection(ViolationCategory.SPOOFED_IDENTITY, clip(what, REASON_CHARS))


def _show(value: object) -> str:
    return clip(repr(value), 80)


def _classify(raw: bytes, exc: ValidationError, sprite_id: str, work_item_id: str) -> Rejection:
    errors = exc.errors(include_url=False, include_input=False)
    if any(e["type"] == "json_invalid" for e in errors):
        return Rejection(ViolationCategory.NOT_JSON, clip(errors[0]["msg"], REASON_CHARS))
    try:
        obj: Any = pydantic_core.from_json(raw)
    except ValueError as unparsable:  # what the validator tolerated, the parser may not
        return Rejection(ViolationCategory.NOT_JSON, clip(str(unparsable), REASON_CHARS))
    if not isinstance(obj, dict):
        kind = type(obj).__name__
        return Rejection(ViolationCategory.NOT_OBJECT, f"a JSON {kind}, not an object")
    got_sprite, got_work = obj.get("sprite_id"), obj.get("work_item_id")
    if (isinstance(got_sprite, str) and got_sprite != sprite_id) or (
        isinstance(got_work, str) and got_work != work_item_id
    ):
        return _spoofed(got_sprite, got_work, sprite_id, work_item_id)
    if obj.get("protocol_version") != PROTOCOL_VERSION:
        return Rejection(
            ViolationCategory.WRONG_PROTOCOL_VERSION,
            f"protocol_version is {_show(obj.get('protocol_version', '<missing>'))}, not 'v1'",
        )
    event_type = obj.get("event_type")
    if not isinstance(event_type, str) or event_type not in _EVENT_TYPES:
        shown = "missing" if "event_type" not in obj else _show(event_type)
        return Rejection(ViolationCategory.UNKNOWN_EVENT_TYPE, f"event_type {shown} is not v1")
    for error in errors:
        loc = error["loc"][1:]  # the first element is the union tag
        if loc[:2] == ("payload", "checkpoint_id") and _blank(obj, "checkpoint_id"):
            return Rejection(
                ViolationCategory.WAITING_WITHOUT_CHECKPOINT, "WAITING must carry a checkpoint_id"
            )
    for error in errors:
        if error["loc"][1:] == ("timestamp",):
            return Rejection(
                ViolationCategory.BAD_TIMESTAMP,
                clip(
                    f"timestamp {_show(obj.get('timestamp', '<missing>'))}: {error['msg']}",
                    REASON_CHARS,
                ),
            )
    first = errors[0]
    path = ".".join(str(part) for part in first["loc"][1:]) or "<event>"
    return Rejection(ViolationCategory.INVALID_FIELD, clip(f"{path}: {first['msg']}", REASON_CHARS))


def _blank(obj: dict[str, Any], key: str) -> bool:
    payload = obj.get("payload")
    return not isinstance(payload, dict) or payload.get(key) in (None, "")


def compact_size(value: object) -> int:
    """Bytes of `value` as compact JSON (what the payload cap measures)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


__all__ = [
    "BatchParse",
    "ParseResult",
    "Rejection",
    "batch_parser",
    "compact_size",
    "duplicate_key",
    "line_parser",
    "maybe_ambiguous",
    "parse_line",
]
