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
from datetime import datetime
from itertools import compress, repeat
from operator import is_, is_not, lshift, or_
from typing import Literal, NamedTuple

from msgspec import Struct
from pydantic import Field

from lattice_operator.modeling import ApiModel
from lattice_operator.protocol.events import AnyEvent, aware
from lattice_operator.protocol.models import EVENT_ADAPTER, EventType, ProtocolEvent
from lattice_operator.protocol.parse import ParseResult

_INLINE_KEY_BYTES = 512


def line_digest(raw: bytes) -> str:
    """The digest that identifies a line's content: `sha256:<hex>`."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def match_key(raw: bytes) -> bytes:
    """The in-memory matching key of a (stripped) line: its bytes, or a digest when long.

    A digest key ends with a newline, which no stripped line does: a short line can
    never be taken for the digest of a long one.
    """
    if len(raw) <= _INLINE_KEY_BYTES:
        return raw
    return b"\x00" + hashlib.sha256(raw).digest() + b"\n"


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
    """Digest of the line that ends at `outbox_offset` (of its first KiB if it was over the
    cap); None when unknown. A restored engine checks it on its first read from before the
    offset (see `RunEventEngine.feed_outbox`)."""
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


class CommittedEvent(Struct, frozen=True, gc=False):
    """A validated event at its place in the outbox.

    A Struct: built in C (`map(CommittedEvent, ...)` has no Python frame per event) and,
    holding no cycles, not tracked by the garbage collector.
    """

    line: int
    """Run-wide 0-based outbox line sequence (the event's position)."""
    offset: int
    """Byte offset of the line in the session's outbox file (-1 when stdout is canonical)."""
    session: int
    """The exec session the line belongs to."""
    raw: bytes
    """The line's JSON bytes."""
    data: AnyEvent
    """The decoded event (`events.decode`)."""

    @property
    def event_type(self) -> EventType:
        """The event's type."""
        return self.data.event_type

    @property
    def timestamp(self) -> datetime:
        """The event's own timestamp (timezone-aware: naive means UTC)."""
        return aware(self.data.timestamp)

    @property
    def payload(self) -> object:
        """The decoded payload: the Struct of the event's type (see `events`)."""
        return self.data.payload

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

# Endless, so one of each can serve every map() (a new repeat() per call costs more).
_NONE = repeat(None)
MAX_UNSEEN = 10_000
"""Outbox lines waiting for their stdout copy that are tracked at most."""
_BITS = repeat(_LINE_BITS)


def _held(key: bytes, value: _Held) -> ProvisionalEvent:
    packed, raw = (value, key) if isinstance(value, int) else value
    return ProvisionalEvent(packed & _LINE_MASK, packed >> _LINE_BITS, raw)


def _held_size(key: bytes, value: _Held) -> int:
    return len(key) if isinstance(value, int) else len(value[1])


class StreamMerger:
    """The provisional table and the memory of recently committed lines.

    Both are plain dicts used through bulk operations (`update`, `map(dict.pop, ...)`,
    key-view intersections), so a batch of lines costs a few C loops, not a Python
    step per line.
    """

    def __init__(self, *, max_provisional: int, max_provisional_bytes: int, window: int):
        # Insertion-ordered: the oldest copy is evicted first.
        self._pending: dict[bytes, _Held] = {}
        self._parsed: dict[bytes, ParseResult] = {}
        self._pending_bytes = 0
        self._max = max_provisional
        self._max_bytes = max_provisional_bytes
        # Keys of recently committed lines in two generations: when the current one holds
        # `window` keys it becomes the older one (and the older is dropped), so at least the
        # last `window` lines are always remembered, at no per-line cost.
        self._recent: dict[bytes, None] = {}
        self._older: dict[bytes, None] = {}
        self._window = window
        self.evicted = 0
        """Provisional copies dropped to stay under the caps (their fate is unknown)."""
        self._unseen: dict[bytes, None] = {}
        """Outbox lines committed before any stdout copy of them arrived (one may follow)."""
        self.unseen_overflow = False
        """More lines waited for a stdout copy than are tracked, or copies were evicted (their
        outbox lines will find none, though they were printed): the check is given up."""
        self.duplicates = 0
        """stdout copies recognised as already committed or already pending."""

    def __len__(self) -> int:
        return len(self._pending)

    def pending(self) -> list[tuple[bytes, ProvisionalEvent]]:
        """(key, provisional event), oldest first."""
        return [(key, _held(key, value)) for key, value in self._pending.items()]

    def parsed(self, key: bytes) -> ParseResult | None:
        """The cached validation result of a pending copy, if it was validated."""
        return self._parsed.get(key)

    def remember(self, key: bytes, result: ParseResult) -> None:
        """Cache the validation result of a pending copy (its outbox line reuses it)."""
        if key in self._pending:
            self._parsed[key] = result

    def offer(self, lines: list[tuple[int, int, bytes, bool]]) -> tuple[int, int]:
        """stdout event lines: hold each new one; return (new copies held, lines too long)."""
        kept = [item for item in lines if not item[3]]
        held = self.hold(
            [item[0] for item in kept], [item[1] for item in kept], [item[2] for item in kept]
        )
        return held, len(lines) - len(kept)

    def hold(self, lines: list[int], offsets: list[int], bodies: list[bytes]) -> int:
        """stdout event lines within the cap, as columns: hold each new one; return how many.

        A copy already pending, or of a recently committed line, is a duplicate; so is a
        second copy within the batch (the first one is held).
        """
        if not bodies:
            return 0
        packed = list(map(or_, map(lshift, offsets, _BITS), lines))
        keys: list[bytes]
        values: list[_Held]
        inline = max(map(len, bodies)) <= _INLINE_KEY_BYTES
        if inline:
            keys, values = bodies, packed
        else:
            keys = list(map(match_key, bodies))
            values = [p if k is b else (p, b) for k, b, p in zip(keys, bodies, packed, strict=True)]
        pending, recent, older = self._pending, self._recent, self._older
        if (
            pending.keys().isdisjoint(keys)
            and recent.keys().isdisjoint(keys)
            and older.keys().isdisjoint(keys)
        ):
            # The common case: all new (stdout ahead of the outbox).
            size = len(pending)
            pending.update(zip(keys, values, strict=True))
            held = len(pending) - size
            if held < len(keys):
                # The same line twice in this batch: its first copy's position is kept (the
                # dict's order), but update() left the last copy's value.
                first: dict[bytes, _Held] = {}
                for key, value in zip(keys, values, strict=True):
                    first.setdefault(key, value)
                pending.update(first)
                self.duplicates += len(keys) - held
                keys, values = list(first), list(first.values())
            self._pending_bytes += (
                sum(map(len, keys)) if inline else sum(map(_held_size, keys, values))
            )
            if len(pending) > self._max or self._pending_bytes > self._max_bytes:
                self._evict()
            return held
        new = dict(zip(keys, values, strict=True))
        if len(new) < len(keys):  # the same line twice in this batch: hold the first copy
            new = {}
            for key, value in zip(keys, values, strict=True):
                new.setdefault(key, value)
        seen: set[bytes] = set()
        if pending:
            seen = new.keys() & pending.keys()
        if recent:
            seen |= new.keys() & recent.keys()
        if older:
            seen |= new.keys() & older.keys()
        for key in seen:
            del new[key]
        if self._unseen:  # a stdout copy of a line the outbox had first: seen after all
            for key in seen:
                self._unseen.pop(key, None)
        self.duplicates += len(keys) - len(new)
        pending.update(new)
        if inline:
            self._pending_bytes += sum(map(len, new))
        else:
            self._pending_bytes += sum(map(_held_size, new.keys(), new.values()))
        if len(pending) > self._max or self._pending_bytes > self._max_bytes:
            self._evict()
        return len(new)

    def _evict(self) -> None:
        # Oldest first, in one pass (a dict has no cheap "pop the first item").
        pending = self._pending
        size, total = len(pending), self._pending_bytes
        doomed: list[bytes] = []
        for key, value in pending.items():
            if size <= self._max and total <= self._max_bytes:
                break
            doomed.append(key)
            size -= 1
            total -= _held_size(key, value)
        for key in doomed:
            del pending[key]
            self._parsed.pop(key, None)
        self._pending_bytes = total
        self.evicted += len(doomed)
        if doomed:
            # Printed, then dropped here: no outbox-only charge can be told from them now.
            self._unseen.clear()
            self.unseen_overflow = True

    def commit(self, raws: list[bytes], *, track: bool = True) -> list[ParseResult | None] | None:
        """Outbox lines (none over the line cap) were committed: forget their stdout copies.

        Returns, per line, the stdout copy's cached validation result, if there was one;
        None (rather than a list of Nones) when no stdout copy had been validated. With
        `track`, lines without a stdout copy yet are remembered until one arrives.
        """
        if not raws:
            return None
        inline = max(map(len, raws)) <= _INLINE_KEY_BYTES
        keys = raws if inline else list(map(match_key, raws))
        recent = self._recent
        recent.update(dict.fromkeys(keys))
        if len(recent) >= self._window:
            if len(recent) > 2 * self._window:  # one huge read: keep only its last lines
                recent = dict.fromkeys(list(recent)[-self._window :])
            self._older, self._recent = recent, {}
        pending = self._pending
        if not pending:
            if track:
                self._track_unseen(keys)
            return None
        parsed = self._parsed
        # Cached results exist only for pending keys: take them before the copies go.
        cached = list(map(parsed.pop, keys, _NONE)) if parsed else None
        values = list(map(pending.pop, keys, _NONE))
        if track:
            self._track_unseen(list(compress(keys, map(is_, values, _NONE))))
        hits = map(is_not, values, _NONE)
        if inline:
            self._pending_bytes -= sum(map(len, compress(keys, hits)))
        else:
            held = [value for value in values if value is not None]
            self._pending_bytes -= sum(map(_held_size, compress(keys, hits), held))
        return cached

    def _track_unseen(self, keys: list[bytes]) -> None:
        if not keys or self.unseen_overflow:
            return
        self._unseen.update(dict.fromkeys(keys))
        if len(self._unseen) > MAX_UNSEEN:
            self._unseen.clear()
            self.unseen_overflow = True

    def take_unseen(self) -> tuple[list[bytes], bool]:
        """(the outbox lines no stdout copy ever matched, oldest first; whether the tracking
        overflowed), and start over for the next session."""
        keys, overflow = list(self._unseen), self.unseen_overflow
        self._unseen.clear()
        self.unseen_overflow = False
        return keys, overflow

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
