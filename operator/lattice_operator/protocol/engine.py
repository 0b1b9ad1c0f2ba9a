"""`RunEventEngine`: the one object the operator drives for a Run's event stream.

How the operator uses it (one engine per Run, no I/O inside)::

    engine = RunEventEngine(sprite_id, work_item_id)               # new Run
    engine = RunEventEngine(sprite_id, work_item_id,                # after a restart
                            cursor=saved_cursor, status=saved_status)
    engine.feed_outbox(tail, tail_offset)             # ... then re-read some of the outbox
                                                      # before the cursor (recognises stdout
                                                      # replayed by the re-attach)

    result = engine.feed_stdout(frame_bytes)          # each stdout WebSocket frame
    engine.preview()                                  # live view of stdout-only-so-far events
    if engine.outbox_behind:                          # stdout saw events the outbox has not
        data = backend.read(outbox_path, offset=engine.cursor.outbox_offset)
        result = engine.feed_outbox(data, engine.cursor.outbox_offset)
    for event in result.committed: ...                # act on ACTION_REQUESTs, emit receipts
    status, cursor = engine.status(), engine.cursor   # persist both in one status patch

    engine.stdout_reattached()                        # after a WebSocket re-attach
    engine.feed_outbox(last_bytes, offset, final=True)
    engine.end_session(exit_code)                     # stdout-only events, missing WAITING...
    engine.resumed(checkpoint_id, outbox_size=size)   # after restoring the checkpoint
    engine.restart_session(outbox_size=size)          # another attempt (not a resume)

Guarantees: the committed events are exactly the outbox's complete lines
that validate, in file order, each once, however stdout frames are split,
lost, duplicated, replayed or ahead of or behind the outbox, and across a
restart from `cursor` + `status`. Nothing a sprite writes raises; misuse by
the caller does (`ProtocolEngineError`).

`canonical="stdout"` is for when there is no outbox (the offline replay tool
given only a stdout capture): stdout event lines are then committed directly,
in stdout order, without the durability the outbox gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import repeat
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict, Field

from lattice_operator.protocol.budget import STATUS_BUDGET_BYTES
from lattice_operator.protocol.errors import EngineStateError, OutboxGapError
from lattice_operator.protocol.events import ActionRequestEvent, AnyEvent, WaitingEvent
from lattice_operator.protocol.merge import (
    CommittedEvent,
    ProvisionalEvent,
    StreamCursor,
    StreamMerger,
    line_digest,
)
from lattice_operator.protocol.models import EVENT_ADAPTER, EventType, ProtocolEvent
from lattice_operator.protocol.outbox import OutboxBatch, read_batch
from lattice_operator.protocol.parse import ParseResult, Rejection, batch_parser, line_parser
from lattice_operator.protocol.reducer import Projector
from lattice_operator.protocol.splitter import EventLine, StdoutSplitter
from lattice_operator.protocol.status import RunEventsStatus
from lattice_operator.protocol.violations import (
    EXCERPT_CHARS,
    REASON_CHARS,
    Violation,
    ViolationCategory,
    ViolationSource,
)
from lattice_operator.text import clip, excerpt

Canonical = Literal["outbox", "stdout"]

# Event types that change the sequence state (the others skip the rules while the gate is open).
_STATEFUL = frozenset(
    {EventType.ACTION_REQUEST, EventType.WAITING, EventType.COMPLETED, EventType.ERROR}
)


class EngineLimits(BaseModel):
    """Caps that keep an untrusted stream from growing memory or status without bound."""

    model_config = ConfigDict(frozen=True)

    max_line_bytes: int = Field(default=256 * 1024, ge=1024)
    """A longer line is reported (line_too_long) and skipped without being buffered."""
    max_payload_bytes: int = Field(default=64 * 1024, ge=1)
    """A longer payload (compact JSON) is refused (payload_too_large)."""
    max_provisional: int = Field(default=1024, ge=1)
    """stdout copies waiting for the outbox, at most."""
    max_provisional_bytes: int = Field(default=8 * 1024 * 1024, ge=1)
    """... and their bytes, at most."""
    committed_window: int = Field(default=4096, ge=1)
    """Recently committed lines remembered to drop late or replayed stdout copies."""
    log_tail_lines: int = Field(default=50, ge=0)
    """Ordinary stdout lines kept."""
    log_line_chars: int = Field(default=512, ge=16)
    """... each clipped to this many characters."""
    status_budget_bytes: int = Field(default=STATUS_BUDGET_BYTES, ge=16 * 1024)
    """The projection's serialised size cap."""


@dataclass(slots=True)
class FeedResult:
    """What one call changed."""

    committed: list[CommittedEvent] = field(default_factory=list)
    """Events committed by this call, in order."""
    violations: list[Violation] = field(default_factory=list)
    """Violations recorded by this call."""
    provisional: int = 0
    """New stdout copies now waiting for the outbox (see `RunEventEngine.preview`)."""


class RunEventEngine:
    """Stream assembly, validation, merge and status projection for one Run."""

    def __init__(
        self,
        sprite_id: str,
        work_item_id: str,
        *,
        canonical: Canonical = "outbox",
        limits: EngineLimits | None = None,
        cursor: StreamCursor | None = None,
        status: RunEventsStatus | None = None,
        log_tail: Sequence[str] = (),
        require_stdout_copies: bool = False,
    ) -> None:
        self.require_stdout_copies = require_stdout_copies
        """Report outbox lines never printed on stdout (`outbox_only_event`): for a caller
        that feeds the session's stdout from its start (the operator; not a replay of an
        outbox alone)."""
        self.sprite_id = sprite_id
        self.work_item_id = work_item_id
        self.canonical: Canonical = canonical
        self.limits = limits = limits or EngineLimits()
        c = cursor or StreamCursor()
        self._session = c.session
        self._outbox_offset = c.outbox_offset
        self._line_count = c.line_count
        self._event_count = c.event_count
        self._last_digest = c.last_digest
        self._last_raw: bytes | None = None
        self._last_len: int | None = None
        """Length of the last outbox line read (for `recheck_span`); None when unknown."""
        self._truncation_reported = False
        # A restored engine checks, on its first read that includes the bytes before the
        # cursor, that the outbox still ends there with the line the cursor recorded.
        self._verify = cursor is not None and c.last_digest is not None and c.outbox_offset > 0
        self._skipping = c.skipping
        self._stdout_gap = False
        """stdout was not followed from the start of this session (a re-attach, after a
        dropped socket or a restart): an outbox line without a stdout copy proves nothing."""
        self._gate = c.gate
        self._checkpoint_id = c.checkpoint_id
        self._blocking_line = c.blocking_request_line
        self._terminal = c.terminal_in_session
        self._parse = line_parser(
            sprite_id=sprite_id,
            work_item_id=work_item_id,
            max_payload_bytes=limits.max_payload_bytes,
        )
        self._parse_many = batch_parser(
            sprite_id=sprite_id,
            work_item_id=work_item_id,
            max_payload_bytes=limits.max_payload_bytes,
        )
        self._projector = Projector(status, budget_bytes=limits.status_budget_bytes)
        if status is None:
            self._projector.session = c.session
        self._splitter = StdoutSplitter(
            max_line_bytes=limits.max_line_bytes,
            log_lines=limits.log_tail_lines,
            log_line_chars=limits.log_line_chars,
        )
        # A restored engine's log tail goes on from the one its status kept: a replayed
        # scrollback adds nothing to it (see `feed_stdout`).
        self._splitter.seed_log(log_tail)
        self._merger = StreamMerger(
            max_provisional=limits.max_provisional,
            max_provisional_bytes=limits.max_provisional_bytes,
            window=limits.committed_window,
        )
        self.stdout_too_long = 0
        """stdout event lines over the line cap."""

    # -- state --------------------------------------------------------------------------------

    @property
    def cursor(self) -> StreamCursor:
        """The resume point; store it with `status()` in the same write."""
        if self._last_raw is not None:
            self._last_digest = line_digest(self._last_raw)
            self._last_raw = None
        return StreamCursor(
            session=self._session,
            outbox_offset=self._outbox_offset,
            line_count=self._line_count,
            event_count=self._event_count,
            last_digest=self._last_digest,
            skipping=self._skipping,
            gate=self._gate,
            checkpoint_id=self._checkpoint_id,
            blocking_request_line=self._blocking_line,
            terminal_in_session=self._terminal,
        )

    def status(self) -> RunEventsStatus:
        """The Run's event status now (bounded; a fresh model on each call)."""
        return self._projector.snapshot()

    @property
    def provisional(self) -> list[ProvisionalEvent]:
        """stdout copies the outbox has not committed yet, oldest first."""
        return [item for _, item in self._merger.pending()]

    def preview(self) -> list[ProtocolEvent]:
        """The provisional events that validate, oldest first: a live view, not yet counted.

        Validation happens here, on demand; the result is cached for the outbox copy.
        """
        events: list[ProtocolEvent] = []
        merger = self._merger
        for key, item in merger.pending():
            parsed = merger.parsed(key)
            if parsed is None:
                parsed = self._parse(item.raw)
                merger.remember(key, parsed)
            if not isinstance(parsed, Rejection):
                events.append(EVENT_ADAPTER.validate_json(item.raw))
        return events

    @property
    def outbox_behind(self) -> bool:
        """stdout has shown events the outbox has not: read the outbox now."""
        return len(self._merger) > 0

    def recheck_span(self) -> int:
        """Bytes before the cursor to read again with the next `feed_outbox`, which then checks
        that the outbox still ends there with the line last read: rewrites and truncation are
        found during a live session, not only after a restart. 0 when there is nothing to check
        (nothing read yet in this session, or the last line's length is unknown)."""
        if self.canonical != "outbox" or self._skipping or self._last_len is None:
            return 0
        if self._last_raw is not None:
            self._last_digest = line_digest(self._last_raw)
            self._last_raw = None
        if self._last_digest is None:
            return 0
        self._verify = True
        # The line, its line end (maybe CRLF) and the newline before it, with some margin.
        return min(self._outbox_offset, self._last_len + 16)

    @property
    def gate(self) -> str:
        """open; waiting (after WAITING, until resumed); completed (after COMPLETED)."""
        return self._gate

    @property
    def provisional_count(self) -> int:
        """How many stdout copies wait for the outbox (cheap: no list is built)."""
        return len(self._merger)

    @property
    def provisional_evicted(self) -> int:
        """stdout copies dropped from the provisional table to respect its caps."""
        return self._merger.evicted

    def log_tail(self) -> list[str]:
        """The last ordinary stdout lines, printable, oldest first."""
        self._splitter.end_replay()
        return self._splitter.log_tail()

    def resolve_action_request(
        self, request_id: str, *, answered: bool, at: datetime, message: str | None = None
    ) -> None:
        """Mark an action request Answered or Refused in the status."""
        self._projector.resolve_action_request(
            request_id, answered=answered, at=at, message=message
        )

    def record_violation(
        self, category: ViolationCategory | str, reason: str, *, line: int | None = None
    ) -> Violation:
        """Record a violation the operator found itself (for example `checkpoint_missing`).

        An unknown category raises ValueError: the categories are a closed list.
        """
        violation = Violation(
            category=ViolationCategory(category),
            source="session",
            session=self._session,
            line=line,
            reason=clip(reason, REASON_CHARS),
        )
        self._projector.add_violation(violation)
        return violation

    # -- input --------------------------------------------------------------------------------

    def feed_stdout(self, data: bytes, *, replay: bool = False) -> FeedResult:
        """One stdout frame, cut anywhere.

        `replay` marks scrollback replayed on attach: output from before this attachment,
        whose events the outbox has (or will have) already. Its lines are only used to
        find where lines start; none is held as a provisional copy or committed, so a
        replay longer than what the merger remembers cannot be mistaken for stdout-only
        events. Its ordinary lines join the log tail after those it already holds (a
        restored engine starts from the tail its predecessor kept, `log_tail`): what was
        printed while nobody followed the session is kept, nothing twice, no fragment.
        """
        result = FeedResult()
        if replay:
            self._splitter.feed(data, keep_log=False)
            return result
        self._splitter.end_replay()
        if self.canonical == "outbox":
            lines, offsets, bodies, slow = self._splitter.feed_columns(data)
            if bodies:
                result.provisional = self._merger.hold(lines, offsets, bodies)
            elif slow:
                self._take_stdout(slow, result)
        else:
            self._take_stdout(self._splitter.feed(data), result)
        return result

    def stdout_reattached(self) -> None:
        """The stdout stream was re-attached: drop the unfinished line of the old connection."""
        self._splitter.reset()
        self._stdout_gap = True

    def feed_outbox(
        self, data: bytes, offset: int | None = None, *, final: bool = False
    ) -> FeedResult:
        """Outbox bytes read from `offset` (default: the cursor's offset).

        Bytes before the cursor are not committed again, so re-reading from an older
        offset is harmless, and useful after a restart: the lines in those bytes are
        remembered as committed, so their stdout copies replayed by a re-attach are
        recognised. Bytes starting after the cursor raise `OutboxGapError`. `final`
        means the session is over and an unfinished last line is complete as it is.
        """
        if self.canonical != "outbox":
            raise EngineStateError("this engine takes its events from stdout, not the outbox")
        expected = self._outbox_offset
        if offset is None:
            offset = expected
        if offset > expected:
            raise OutboxGapError(expected, offset)
        result = FeedResult()
        if offset < expected:
            seen = data[: expected - offset]
            if self._verify and len(seen) < expected - offset:
                if not self._truncation_reported:
                    self._truncation_reported = True
                    self._violate(
                        result,
                        ViolationCategory.OUTBOX_REWRITTEN,
                        "outbox",
                        max(self._line_count - 1, 0),
                        offset + len(seen),
                        f"the outbox ends at byte {offset + len(seen)}, before the "
                        f"{expected} bytes already read: it was truncated behind the operator "
                        "(events are append-only); reading continues at that byte",
                        b"",
                    )
            elif self._verify:
                self._truncation_reported = False
                self._check_cursor_line(seen, line_start=offset == 0, result=result)
            self._prime(seen, line_start=offset == 0)
            data = data[expected - offset :]
        self._verify = False
        read = read_batch(
            data,
            expected,
            max_line_bytes=self.limits.max_line_bytes,
            skipping=self._skipping,
            final=final,
        )
        self._outbox_offset, self._skipping = read.offset, read.skipping
        raws = read.raws
        if not raws:
            return result
        # Lines over the cap are neither matched nor validated, only reported (None).
        too_long = read.too_long
        kept = [i for i in range(len(raws)) if i not in set(too_long)] if too_long else None
        kept_raws = raws if kept is None else [raws[i] for i in kept]
        # Where a stdout copy of the same bytes was already validated, its result is
        # reused (only after `preview()`; otherwise the batch is validated at once).
        cached = self._merger.commit(kept_raws)
        fresh: Sequence[ParseResult | None]
        if cached is None or not any(cached):
            fresh, _ = self._parse_many(kept_raws)
        else:
            todo = [i for i, hit in enumerate(cached) if hit is None]
            done, _ = self._parse_many([kept_raws[i] for i in todo])
            for index, parsed_ in zip(todo, done, strict=True):
                cached[index] = parsed_
            fresh = cached
        parsed: Sequence[ParseResult | None] = fresh
        if kept is not None:
            spread: list[ParseResult | None] = [None] * len(raws)
            for index, line_result in zip(kept, fresh, strict=True):
                spread[index] = line_result
            parsed = spread
        self._commit_lines(result, read, parsed)
        self._last_raw = raws[-1]
        self._last_len = len(raws[-1])
        return result

    def _commit_lines(
        self, result: FeedResult, read: OutboxBatch, parsed: Sequence[ParseResult | None]
    ) -> None:
        """Commit a read's lines in order (None: the line was over the cap).

        Runs of valid events that no sequence rule concerns (most of a stream) are
        committed and folded in at once; the other lines go one by one through the
        sequence rules (or are reported, when too long or refused).
        """
        raws, offsets = read.raws, read.offsets
        total = len(raws)
        special = [
            i
            for i, p in enumerate(parsed)
            if p is None
            or isinstance(p, Rejection)
            or (
                p.event_type in _STATEFUL
                # A non-blocking request changes no sequence state: it can join a run.
                and (not isinstance(p, ActionRequestEvent) or p.payload.blocking)
            )
        ]
        special.append(total)
        seq0, session = self._line_count, self._session
        committed, apply_run = result.committed, self._projector.apply_run
        start = 0
        for stop in special:
            # [start, stop): valid events of types the rules do not concern.
            valid = cast("Sequence[AnyEvent]", parsed)
            while start < stop and (self._gate != "open" or self._blocking_line is not None):
                self._accept(
                    result, seq0 + start, offsets[start], raws[start], valid[start], "outbox"
                )
                start += 1
            if start < stop:
                events = list(
                    map(
                        CommittedEvent,
                        range(seq0 + start, seq0 + stop),
                        offsets[start:stop],
                        repeat(session),
                        raws[start:stop],
                        valid[start:stop],
                    )
                )
                apply_run(events)
                committed += events
                self._event_count += stop - start
            if stop < total:
                odd = parsed[stop]
                if odd is None:
                    self._violate(
                        result,
                        ViolationCategory.LINE_TOO_LONG,
                        "outbox",
                        seq0 + stop,
                        offsets[stop],
                        f"line over {self.limits.max_line_bytes} bytes",
                        raws[stop],
                    )
                else:
                    self._accept(result, seq0 + stop, offsets[stop], raws[stop], odd, "outbox")
            start = stop + 1
        self._line_count = seq0 + total

    def _check_cursor_line(self, seen: bytes, *, line_start: bool, result: FeedResult) -> None:
        """Compare the last line before the cursor with the digest the cursor recorded."""
        if not seen.endswith(b"\n"):
            return  # the cursor is inside an over-long line: nothing to compare
        parts = seen.split(b"\n")[:-1]
        first_complete = 0 if line_start else 1
        for index in range(len(parts) - 1, first_complete - 1, -1):
            body = parts[index].strip()
            if not body:
                continue
            if len(parts[index]) > self.limits.max_line_bytes:
                return  # recorded by its first KiB only; not worth re-deriving
            digest = line_digest(body)
            if digest != self._last_digest:
                recorded, self._last_digest = (
                    self._last_digest,
                    digest,
                )  # reported once: the next check compares with this
                self._violate(
                    result,
                    ViolationCategory.OUTBOX_REWRITTEN,
                    "outbox",
                    max(self._line_count - 1, 0),
                    len(seen) - len(parts[index]) - 1,
                    f"the outbox no longer ends at byte {self._outbox_offset} with the line "
                    f"last read there ({recorded}): it was rewritten or replaced "
                    "behind the operator; reading continues at that byte",
                    body,
                )
            return

    def _prime(self, seen: bytes, *, line_start: bool) -> None:
        # `seen` ends at the cursor, a line boundary; its first piece may be a partial line.
        parts = seen.split(b"\n")[:-1]
        if not line_start:
            parts = parts[1:]
        limit = self.limits.max_line_bytes
        self._merger.commit(
            [body for part in parts if len(part) <= limit and (body := part.strip())],
            track=False,
        )

    def end_session(self, exit_code: int | None = None) -> FeedResult:
        """The exec session is over (after the last `feed_outbox(..., final=True)`).

        Reports stdout events that never reached the outbox, a blocking
        ACTION_REQUEST without its WAITING, and a session that ended without
        COMPLETED, WAITING or ERROR.
        """
        result = FeedResult()
        self._take_stdout(self._splitter.flush(), result)
        if self.canonical == "outbox":
            for item in self._merger.drain():
                self._violate(
                    result,
                    ViolationCategory.STDOUT_ONLY_EVENT,
                    "stdout",
                    item.line,
                    item.offset,
                    "seen on stdout, never written to the outbox",
                    item.raw,
                )
            unseen, overflow = self._merger.take_unseen()
            # Only a session followed from its start to a known exit can tell: a gap in
            # stdout, or a process killed between its outbox write and its print, cannot.
            followed = self.require_stdout_copies and not self._stdout_gap
            if followed and exit_code is not None and not overflow:
                # Lines that are not valid events are already reported as what they are.
                readable = [key for key in unseen if not key.startswith(b"\x00")]
                parsed, _ = self._parse_many(readable) if readable else ([], [])
                events = [
                    k for k, p in zip(readable, parsed, strict=True) if not isinstance(p, Rejection)
                ]
                for key in events:
                    self._violate(
                        result,
                        ViolationCategory.OUTBOX_ONLY_EVENT,
                        "outbox",
                        None,
                        None,
                        "written to the outbox, never printed on stdout (the protocol asks "
                        "for both)",
                        key,
                    )
        if self._blocking_line is not None:
            self._violate(
                result,
                ViolationCategory.BLOCKING_REQUEST_WITHOUT_WAITING,
                "session",
                self._blocking_line,
                None,
                "the session ended before the WAITING a blocking ACTION_REQUEST requires",
                b"",
            )
            self._blocking_line = None
        if not self._terminal and self._gate == "open":
            code = "unknown" if exit_code is None else str(exit_code)
            self._violate(
                result,
                ViolationCategory.MISSING_TERMINAL_EVENT,
                "session",
                None,
                None,
                f"the session ended (exit code {code}) without COMPLETED, WAITING or ERROR",
                b"",
            )
        return result

    def resumed(self, checkpoint_id: str, *, outbox_size: int) -> None:
        """The Run was resumed from the WAITING's checkpoint: a new session begins.

        `outbox_size` is the outbox's size after the restore (the checkpoint was
        taken before WAITING was written, so the file is shorter than before), or 0
        when the operator starts a fresh outbox file; reading continues from there.
        """
        if self._gate != "waiting":
            raise EngineStateError(f"cannot resume: the stream is {self._gate}, not waiting")
        if checkpoint_id != self._checkpoint_id:
            raise EngineStateError(
                f"cannot resume from {checkpoint_id!r}: WAITING named {self._checkpoint_id!r}"
            )
        if outbox_size > self._outbox_offset:
            raise EngineStateError(
                f"the restored outbox ({outbox_size} bytes) is longer than what was read "
                f"({self._outbox_offset} bytes): it is not the checkpoint's"
            )
        self._next_session(outbox_size)
        self._projector.resume()

    def start_outbox_at(self, offset: int) -> None:
        """Where the Run's outbox lines begin, when that is learned only once its first
        session has started: before anything was read from the outbox."""
        if self._line_count or self._outbox_offset:
            raise EngineStateError(
                f"the outbox is read from byte {self._outbox_offset} already "
                f"({self._line_count} lines): too late to start it at {offset}"
            )
        self._outbox_offset = offset

    def restart_session(self, *, outbox_size: int | None = None) -> None:
        """A new exec session that is not a resume (another attempt after a failed one).

        The sequence rules start over (an earlier WAITING or COMPLETED no longer
        closes the stream) and the Run-wide line sequence continues. Feed the old
        session's last outbox bytes first: reading continues at the cursor, or at
        `outbox_size` when the outbox is now shorter than that (it was re-created).
        """
        offset = self._outbox_offset if outbox_size is None else outbox_size
        self._next_session(min(offset, self._outbox_offset))
        self._projector.restart()

    def _next_session(self, outbox_offset: int) -> None:
        self._session += 1
        self._gate = "open"
        self._checkpoint_id = None
        self._blocking_line = None
        self._terminal = False
        if outbox_offset != self._outbox_offset:
            self._outbox_offset = outbox_offset
            self._skipping = False
            # The line before the new offset was never read in this file: no digest for it.
            self._last_digest, self._last_raw, self._last_len = None, None, None
        self._verify = False
        self._splitter.reset()
        self._merger.drain()
        self._merger.take_unseen()
        self._stdout_gap = False

    # -- internals ----------------------------------------------------------------------------

    def _take_stdout(self, lines: list[EventLine], result: FeedResult) -> None:
        if self.canonical == "outbox":
            held, too_long = self._merger.offer(lines)
            result.provisional += held
            self.stdout_too_long += too_long
            return
        for _, offset, body, too_long in lines:
            seq = self._line_count
            self._line_count = seq + 1
            self._last_raw = body
            if too_long:
                self._violate(
                    result,
                    ViolationCategory.LINE_TOO_LONG,
                    "stdout",
                    seq,
                    offset,
                    f"line over {self.limits.max_line_bytes} bytes",
                    body,
                )
            else:
                self._accept(result, seq, -1, body, self._parse(body), "stdout")

    def _accept(
        self,
        result: FeedResult,
        seq: int,
        offset: int,
        raw: bytes,
        parsed: ParseResult,
        source: ViolationSource,
    ) -> None:
        if isinstance(parsed, Rejection):
            where = None if offset < 0 else offset
            self._violate(result, parsed.category, source, seq, where, parsed.reason, raw)
            return
        # The sequence rules only concern some events, unless a rule is already in force.
        stateful = self._gate != "open" or self._blocking_line is not None
        if (stateful or parsed.event_type in _STATEFUL) and not self._sequence(
            result, seq, offset, raw, parsed, source
        ):
            return
        committed = CommittedEvent(seq, offset, self._session, raw, parsed)
        self._event_count += 1
        self._projector.apply(committed)
        result.committed.append(committed)

    def _sequence(
        self,
        result: FeedResult,
        seq: int,
        offset: int,
        raw: bytes,
        event: AnyEvent,
        source: ViolationSource,
    ) -> bool:
        """The sequence rules; False when the event must not be committed."""
        event_type = event.event_type
        if self._gate != "open":
            after = "COMPLETED" if self._gate == "completed" else "WAITING"
            self._violate(
                result,
                ViolationCategory.EVENT_AFTER_COMPLETED
                if after == "COMPLETED"
                else ViolationCategory.EVENT_AFTER_WAITING,
                source,
                seq,
                None if offset < 0 else offset,
                f"{event_type.value} after {after}",
                raw,
            )
            return False
        if self._blocking_line is not None:
            if event_type is not EventType.WAITING:
                self._violate(
                    result,
                    ViolationCategory.BLOCKING_REQUEST_WITHOUT_WAITING,
                    source,
                    self._blocking_line,
                    None,
                    f"the next event (line {seq}) was {event_type.value}, not WAITING",
                    raw,
                )
            self._blocking_line = None
        if isinstance(event, ActionRequestEvent):
            if event.payload.blocking:
                self._blocking_line = seq
        elif isinstance(event, WaitingEvent):
            self._gate = "waiting"
            self._checkpoint_id = event.payload.checkpoint_id
            self._terminal = True
        elif event_type is EventType.COMPLETED:
            self._gate = "completed"
            self._terminal = True
        elif event_type is EventType.ERROR:
            self._terminal = True
        return True

    def _violate(
        self,
        result: FeedResult,
        category: ViolationCategory,
        source: ViolationSource,
        line: int | None,
        offset: int | None,
        reason: str,
        raw: bytes,
    ) -> None:
        violation = Violation(
            category=category,
            source=source,
            session=self._session,
            line=line,
            offset=offset,
            reason=reason,
            excerpt=excerpt(raw, EXCERPT_CHARS),
        )
        self._projector.add_violation(violation)
        result.violations.append(violation)


__all__ = ["Canonical", "EngineLimits", "FeedResult", "RunEventEngine"]
