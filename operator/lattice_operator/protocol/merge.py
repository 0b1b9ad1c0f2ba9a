"""Merging the two copies of every event: the outbox is canonical, stdout is a preview.

A sprite writes each event twice: on stdout (fast, lossy: frames drop with
the connection, replay on re-attach) and to the outbox file (durable,
ordered). The outbox line order *is* the event order, and only outbox lines
are committed; a stdout copy is kept as a `ProvisionalEvent` until the
outbox line with the same bytes is committed. So every event is counted
exactly once whatever stdout does, and no time is ever part of an
identity: an event is its outbox position (Run-wide line sequence and byte
offset) plus its raw bytes (digest on demand).

`StreamMerger` is the matching table, bounded in count and bytes: stdout
copies wait in insertion order (the oldest is evicted past the caps), and the
keys of the last N committed lines are remembered so that stdout copies
arriving late or replayed after a re-attach are recognised and dropped.
Provisional copies are a set, not a multiset: two byte-identical events are
indistinguishable on stdout, and the outbox still commits both.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from datetime import datetime
from typing import Any, Literal, NamedTuple

from pydantic import Field

from lattice_operator.api._model import ApiModel
from lattice_operator.protocol.models import EVENT_ADAPTER, EventData, EventType, ProtocolEvent
from lattice_operator.protocol.parse import Rejection

_INLINE_KEY_BYTES = 512


def line_digest(raw: bytes) -> str:
    """The digest that identifies a line's content: `sha256:<hex>`."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def match_key(raw: bytes) -> bytes:
    """The in-memory matching key of a line: its bytes, or a digest when long."""
    if len(raw) <= _INLINE_KEY_BYTES:
        return raw
    return b"\x00" + hashlib.sha256(raw).digest()


Gate = Literal["open", "waiting", "completed"]


class StreamCursor(ApiModel):
    """Everything needed to continue a Run's event stream exactly after a restart.

    Small on purpose: it is stored in the Run's status next to the projection.
    """

    session: int = Field(default=1, ge=1)
    """The exec session: 1, then +1 on each resume."""
    outbox_offset: int = Field(default=0, ge=0)
    """Bytes of the current session's outbox file already consumed (read from here next)."""
    line_count: int = Field(default=0, ge=0)
    """Outbox lines consumed over the whole Run: the sequence number of the next line."""
    event_count: int = Field(default=0, ge=0)
    """Valid events committed over the whole Run."""
    last_digest: str | None = Field(default=None, max_length=80)
    """Digest of the last consumed outbox line (of its first KiB if it was over the cap)."""
    skipping: bool = False
    """The outbox read stopped inside an over-long line (skip to its newline)."""
    gate: Gate = "open"
    """open; waiting (after WAITING, until resumed); completed (after COMPLETED)."""
    checkpoint_id: str | None = Field(default=None, max_length=256)
    """The checkpoint named by the WAITING that closed the gate."""
    blocking_request_line: int | None = Field(default=None, ge=0)
    """Line of a blocking ACTION_REQUEST that WAITING must follow next."""
    terminal_in_session: bool = False
    """COMPLETED, WAITING or ERROR was seen in the current session."""


class CommittedEvent(NamedTuple):
    """A validated event at its place in the outbox."""

    line: int
    """Run-wide 0-based outbox line sequence (the event's position)."""
    offset: int
    """Byte offset of the line in the session's outbox file (-1 when stdout is canonical)."""
    session: int
    """The exec session the line belongs to."""
    raw: bytes
    """The line's JSON bytes."""
    data: EventData
    """The validated event as plain data (`EVENT_DATA_ADAPTER`)."""

    @property
    def event_type(self) -> EventType:
        """The event's type."""
        event_type: EventType = self.data["event_type"]
        return event_type

    @property
    def timestamp(self) -> datetime:
        """The event's own timestamp."""
        timestamp: datetime = self.data["timestamp"]
        return timestamp

    @property
    def payload(self) -> dict[str, Any]:
        """The validated payload as plain data (optional fields may be absent)."""
        payload: dict[str, Any] = self.data["payload"]
        return payload

    @property
    def event(self) -> ProtocolEvent:
        """The event as its pydantic model (validated again from `raw`, on each call)."""
        return EVENT_ADAPTER.validate_json(self.raw)

    @property
    def digest(self) -> str:
        """`sha256:<hex>` of the raw line."""
        return line_digest(self.raw)


class ProvisionalEvent(NamedTuple):
    """A stdout copy of an event the outbox has not committed yet (not validated)."""

    line: int
    """stdout line number."""
    offset: int
    """stdout byte offset."""
    raw: bytes
    """The JSON after the prefix."""


# A pending copy's stdout line and offset packed in one int: copies wait across feeds, and an
# int, unlike a tuple, is not one more object for the garbage collector to scan each time.
_LINE_BITS = 40
_LINE_MASK = (1 << _LINE_BITS) - 1
_Held = int | tuple[int, bytes]
"""(offset << 40 | line), with the raw bytes beside it when the key is a digest."""


def _held(key: bytes, value: _Held) -> ProvisionalEvent:
    packed, raw = (value, key) if type(value) is int else value  # type: ignore[misc]
    return ProvisionalEvent(packed & _LINE_MASK, packed >> _LINE_BITS, raw)


def _held_size(key: bytes, value: _Held) -> int:
    return len(key) if type(value) is int else len(value[1])  # type: ignore[index]


class StreamMerger:
    """The provisional table and the memory of recently committed lines."""

    def __init__(self, *, max_provisional: int, max_provisional_bytes: int, window: int):
        self._pending: OrderedDict[bytes, _Held] = OrderedDict()
        self._parsed: dict[bytes, EventData | Rejection] = {}
        self._pending_bytes = 0
        self._max = max_provisional
        self._max_bytes = max_provisional_bytes
        # Keys of recently committed lines, oldest first: a plain dict trimmed in batches
        # (between `window` and twice as many entries) is cheaper than a per-line LRU.
        self._recent: dict[bytes, None] = {}
        self._window = window
        self.evicted = 0
        """Provisional copies dropped to stay under the caps (their fate is unknown)."""
        self.duplicates = 0
        """stdout copies recognised as already committed or already pending."""

    def __len__(self) -> int:
        return len(self._pending)

    def pending(self) -> list[tuple[bytes, ProvisionalEvent]]:
        """(key, provisional event), oldest first."""
        return [(key, _held(key, value)) for key, value in self._pending.items()]

    def parsed(self, key: bytes) -> EventData | Rejection | None:
        """The cached validation result of a pending copy, if it was validated."""
        return self._parsed.get(key)

    def remember(self, key: bytes, result: EventData | Rejection) -> None:
        """Cache the validation result of a pending copy (its outbox line reuses it)."""
        if key in self._pending:
            self._parsed[key] = result

    def offer(self, lines: list[tuple[int, int, bytes, bool]]) -> tuple[int, int]:
        """stdout event lines: hold each new one; return (new copies held, lines too long)."""
        pending, recent = self._pending, self._recent
        held = too_long = 0
        for line, offset, body, is_long in lines:
            if is_long:
                too_long += 1
                continue
            packed = offset << _LINE_BITS | line
            value: _Held
            if len(body) <= _INLINE_KEY_BYTES:
                key, value = body, packed
            else:
                key, value = match_key(body), (packed, body)
            if key in pending or key in recent:
                self.duplicates += 1
                continue
            pending[key] = value
            self._pending_bytes += len(body)
            held += 1
        if len(pending) > self._max or self._pending_bytes > self._max_bytes:
            self._evict()
        return held, too_long

    def _evict(self) -> None:
        pending = self._pending
        while len(pending) > self._max or self._pending_bytes > self._max_bytes:
            key, value = pending.popitem(last=False)
            self._parsed.pop(key, None)
            self._pending_bytes -= _held_size(key, value)
            self.evicted += 1

    def commit_lines(
        self, lines: list[tuple[int, bytes, bool]]
    ) -> list[EventData | Rejection | None]:
        """Outbox lines (offset, raw, too_long) were committed: forget their stdout copies.

        Returns, per line, the stdout copy's cached validation result, if there was one.
        """
        recent, pending, parsed = self._recent, self._pending, self._parsed
        results: list[EventData | Rejection | None] = []
        for _, raw, too_long in lines:
            if too_long:
                results.append(None)
                continue
            key = raw if len(raw) <= _INLINE_KEY_BYTES else match_key(raw)
            recent[key] = None
            value = pending.pop(key, None)
            if value is None:
                results.append(None)
            else:
                self._pending_bytes -= _held_size(key, value)
                results.append(parsed.pop(key, None) if parsed else None)
        if len(recent) > 2 * self._window:
            self._recent = dict.fromkeys(list(recent)[-self._window :])
        return results

    def drain(self) -> list[ProvisionalEvent]:
        """Take every provisional event out (end of session), oldest first."""
        items = [_held(key, value) for key, value in self._pending.items()]
        self._pending.clear()
        self._parsed.clear()
        self._pending_bytes = 0
        return items


__all__ = [
    "CommittedEvent",
    "Gate",
    "ProvisionalEvent",
    "StreamCursor",
    "StreamMerger",
    "line_digest",
    "match_key",
]
