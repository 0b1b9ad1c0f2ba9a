"""One line of JSON in, one validated event (or the reason it was refused) out.

`parse_line` never raises. The fast path is a single
`EVENT_DATA_ADAPTER.validate_json(line)`: pydantic-core parses and validates
in one pass, against the protocol models' own schema. Only a refused line is
looked at a second time, to name the most useful category.

`batch_parser` does the same for a whole outbox read: the validator is mapped
over the lines inside C (`list.extend(map(...))`), and the per-Run checks
(identity, payload size) are done on the batch at once; a line that fails
anything goes through the one-line parser, so both give the same result for
every line.

JSON lets an object name a key twice and parsers then disagree (pydantic-core and
Python keep the last value, others the first): such a line is ambiguous, and is
refused as `duplicate_key` after it validated, by a second parse with the standard
library's C scanner that checks each object's keys. That second parse would cost
more than the validation, so it is only done where a count cannot rule a duplicate
out (`_maybe_ambiguous`): every `"` of a JSON line delimits a string token or is
escaped inside one, so a line whose `"` are exactly two per key and per string value
of what it validated into has no token the validation dropped, hence no key named
twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import chain, compress, repeat
from operator import is_, itemgetter, length_hint
from typing import Any, NamedTuple, cast

import pydantic_core
from pydantic import ValidationError

from lattice_operator.protocol.models import (
    EVENT_DATA_ADAPTER,
    PROTOCOL_VERSION,
    ActionName,
    AdjustmentType,
    EventData,
    EventType,
)
from lattice_operator.protocol.violations import REASON_CHARS, ViolationCategory
from lattice_operator.text import clip

_EVENT_TYPES = frozenset(t.value for t in EventType)
# The SchemaValidator itself: TypeAdapter.validate_json adds a Python frame per event.
_validate = EVENT_DATA_ADAPTER.validator.validate_json
_identity = itemgetter("sprite_id", "work_item_id")


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

# Endless, so one of each serves every map().
_DICT_TYPE = repeat(dict)
_LIST_TYPE = repeat(list)
_values = dict.values
_QUOTE = b'"'
_payload = itemgetter("payload")
ENVELOPE_STRINGS = 5
"""String values beside the payload in every validated event: protocol_version,
event_type, sprite_id, work_item_id, timestamp (a test checks it against the models)."""


def _string_quotes(events: list[EventData]) -> int:
    """`"` that the keys and string values of validated `events` took in JSON: two each.

    Validation keeps no string it did not read and reads no string twice (strict: a str,
    enum or datetime comes only from a JSON string; no defaults are filled in), so the
    lines hold at least this many `"`, and more exactly when one of their string tokens
    was dropped (an ignored field, the first value of a key named twice) or holds an
    escaped quote. Walked a level of nesting at a time, in C loops; a string of a type
    not counted here only sends its line the slow way.
    """
    tokens = sum(map(len, events)) + ENVELOPE_STRINGS * len(events)
    dicts: list[dict[str, Any]] = list(map(_payload, events))
    lists: list[list[Any]] = []
    while dicts or lists:
        tokens += sum(map(len, dicts))
        values = list(chain.from_iterable(map(_values, dicts)))
        if lists:
            values += chain.from_iterable(lists)
        types = list(map(type, values))
        tokens += types.count(str) + types.count(ActionName) + types.count(AdjustmentType)
        dicts = list(compress(values, map(is_, types, _DICT_TYPE))) if dict in types else []
        lists = list(compress(values, map(is_, types, _LIST_TYPE))) if list in types else []
    return 2 * tokens


def _maybe_ambiguous(raw: bytes, event: EventData) -> bool:
    """Whether `raw`, which validated into `event`, may name a key twice (False: it cannot)."""
    return raw.count(_QUOTE) != _string_quotes([event])


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
        return None  # what pydantic-core accepted and this parser does not: its verdict stands
    return None


class Rejection(NamedTuple):
    """Why a line is not an event."""

    category: ViolationCategory
    reason: str


def line_parser(
    *, sprite_id: str, work_item_id: str, max_payload_bytes: int
) -> Callable[[bytes], EventData | Rejection]:
    """A parser for one Run: `parser(raw)` validates one JSON line (no prefix, no newline).

    A valid event whose sprite_id/work_item_id differ from the Run's is refused as
    spoofed; a payload whose compact JSON is over `max_payload_bytes` is refused as
    too large. (A closure rather than a function with keywords: it runs per event.)
    """

    def parse(raw: bytes) -> EventData | Rejection:
        try:
            event: EventData = _validate(raw)
        except ValidationError as exc:
            return _classify(raw, exc, sprite_id, work_item_id)
        if _maybe_ambiguous(raw, event):
            ambiguous = duplicate_key(raw)
            if ambiguous is not None:
                return ambiguous
        if event["sprite_id"] != sprite_id or event["work_item_id"] != work_item_id:
            return _spoofed(event["sprite_id"], event["work_item_id"], sprite_id, work_item_id)
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


BatchParse = tuple[list[EventData | Rejection], list[int]]
"""(one result per line, the indices of the rejected lines in ascending order)."""


def batch_parser(
    *, sprite_id: str, work_item_id: str, max_payload_bytes: int
) -> Callable[[list[bytes]], BatchParse]:
    """`parser(raws)`: `line_parser`'s result for each line, computed for the batch at once."""
    one = line_parser(
        sprite_id=sprite_id, work_item_id=work_item_id, max_payload_bytes=max_payload_bytes
    )
    run_identity = frozenset({(sprite_id, work_item_id)})

    def parse_many(raws: list[bytes]) -> BatchParse:
        results: list[EventData | Rejection] = []
        rejected: list[int] = []
        source = iter(raws)
        total = len(raws)
        while True:
            try:
                results.extend(map(_validate, source))
                break
            except ValidationError:
                # The list iterator knows how far it got: the line that failed is the
                # one just before what remains. `extend` keeps what it appended before
                # the error; should it not, parse the batch line by line instead.
                failed = total - length_hint(source) - 1
                if len(results) != failed:
                    results = [one(raw) for raw in raws]
                    rejected = [i for i, r in enumerate(results) if type(r) is not dict]
                    return results, rejected
                results.append(one(raws[failed]))
                rejected.append(failed)
        # Lines that validated may still be ambiguous (a key named twice): the same check
        # as the one-line parser, counted over the batch at once (and line by line only
        # when the batch's count differs).
        kept = [i for i, r in enumerate(results) if type(r) is dict] if rejected else range(total)
        valid = cast("list[EventData]", [results[i] for i in kept] if rejected else results)
        valid_raws = [raws[i] for i in kept] if rejected else raws
        if b"".join(valid_raws).count(_QUOTE) != _string_quotes(valid):
            ambiguous = [
                (index, rejection)
                for index, raw, event in zip(kept, valid_raws, valid, strict=True)
                if _maybe_ambiguous(raw, event) and (rejection := duplicate_key(raw))
            ]
            if ambiguous:
                for index, rejection in ambiguous:
                    results[index] = rejection
                    rejected.append(index)
                rejected.sort()
                valid = cast("list[EventData]", [r for r in results if type(r) is dict])
        if not run_identity.issuperset(map(_identity, valid)):
            for index, result in enumerate(results):
                if type(result) is dict and _identity(result) not in run_identity:
                    results[index] = one(raws[index])
                    rejected.append(index)
            rejected.sort()
        # The payload is never larger than the line, so only long lines are measured.
        if max(map(len, raws), default=0) > max_payload_bytes:
            for index, raw in enumerate(raws):
                if len(raw) > max_payload_bytes and type(results[index]) is dict:
                    results[index] = checked = one(raw)
                    if type(checked) is not dict:
                        rejected.append(index)
            rejected.sort()
        return results, rejected

    return parse_many


def parse_line(
    raw: bytes, *, sprite_id: str, work_item_id: str, max_payload_bytes: int
) -> EventData | Rejection:
    """Validate one JSON line; see `line_parser`."""
    parse = line_parser(
        sprite_id=sprite_id, work_item_id=work_item_id, max_payload_bytes=max_payload_bytes
    )
    return parse(raw)


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


__all__ = ["BatchParse", "Rejection", "batch_parser", "compact_size", "line_parser", "parse_line"]
