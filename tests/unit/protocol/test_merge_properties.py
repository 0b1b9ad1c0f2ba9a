"""Exactness of the merge: whatever stdout does, the committed events are the outbox's lines.

Each example draws a stream of events (valid ones and some invalid outbox
lines), writes them to an outbox and to stdout, and then drives an engine with
a random schedule: stdout frames cut anywhere, stdout frames lost, stdout
replayed after a re-attach, stdout-only events, outbox reads of random growing
prefixes (stdout ahead of or behind the outbox), reads restarting from older
offsets, and operator restarts from the persisted cursor + status (through
their JSON form). The merged sequence must always equal the outbox.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lattice_operator.protocol import (
    EngineLimits,
    RunEventEngine,
    RunEventsStatus,
    StreamCursor,
    ViolationCategory,
)
from lattice_operator.protocol.merge import CommittedEvent
from tests.support.streams import PREFIX, SPRITE, WORK, ev, info

_messages = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], min_codepoint=32), max_size=30
)


@st.composite
def outbox_lines(draw: st.DrawFn) -> list[bytes]:
    """Distinct outbox lines: mostly valid events, some invalid lines."""
    count = draw(st.integers(0, 30))
    lines: list[bytes] = []
    for i in range(count):
        kind = draw(st.sampled_from(["info", "info", "progress", "phase", "artifact", "bad"]))
        message = f"{i}:{draw(_messages)}"
        if kind == "info":
            lines.append(info(message, at=i))
        elif kind == "progress":
            lines.append(info(message, percent=draw(st.integers(0, 100)), at=i))
        elif kind == "phase":
            lines.append(ev("PHASE_STARTED", {"phase": f"p{i}"}, at=i))
        elif kind == "artifact":
            lines.append(ev("ARTIFACT", {"kind": "file", "ref": message}, at=i))
        else:
            lines.append(draw(st.sampled_from([b"{not json " + str(i).encode(), b"[%d]" % i])))
    return lines


@dataclass
class Run:
    """The engine under test, restarted from its persisted state when asked."""

    limits: EngineLimits
    engine: RunEventEngine = field(init=False)
    committed: list[CommittedEvent] = field(default_factory=list)
    violations: list[ViolationCategory] = field(default_factory=list)
    restarts: int = 0

    def __post_init__(self) -> None:
        self.engine = RunEventEngine(SPRITE, WORK, limits=self.limits)

    def restart(self) -> None:
        cursor = json.loads(self.engine.cursor.model_dump_json(by_alias=True))
        status = json.loads(self.engine.status().model_dump_json(by_alias=True))
        self.engine = RunEventEngine(
            SPRITE,
            WORK,
            limits=self.limits,
            cursor=StreamCursor.model_validate(cursor),
            status=RunEventsStatus.model_validate(status),
        )
        self.restarts += 1

    def record(self, result: object) -> None:
        self.committed.extend(result.committed)  # type: ignore[attr-defined]
        self.violations.extend(v.category for v in result.violations)  # type: ignore[attr-defined]


def _stdout_stream(draw: st.DrawFn, lines: list[bytes], extra: list[bytes]) -> bytes:
    """stdout as the sprite prints it: log noise, CRLF or LF, stdout-only events mixed in."""
    out = bytearray()
    pending_extra = list(extra)
    for item in lines:
        if draw(st.booleans()):
            out += b"compiling module...\r\n"
        out += PREFIX + item + draw(st.sampled_from([b"\n", b"\r\n"]))
        if pending_extra and draw(st.booleans()):
            out += PREFIX + pending_extra.pop() + b"\n"
    for item in pending_extra:
        out += PREFIX + item + b"\n"
    return bytes(out)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=outbox_lines(), data=st.data())
def test_committed_sequence_equals_the_outbox(lines: list[bytes], data: st.DataObject) -> None:
    extra = [info(f"stdout only {i}", at=999) for i in range(data.draw(st.integers(0, 3)))]
    outbox = b"".join(item + b"\n" for item in lines)
    stdout = _stdout_stream(data.draw, lines, extra)
    run = Run(EngineLimits())
    visible = 0  # how much of the outbox the sprite has written so far
    sent = 0  # how much of stdout has been delivered
    lost_stdout = False
    for _ in range(data.draw(st.integers(0, 60))):
        action = data.draw(
            st.sampled_from(["stdout", "stdout", "stdout", "outbox", "lose", "replay", "restart"])
        )
        if action in ("stdout", "lose") and sent < len(stdout):
            size = data.draw(st.integers(1, 80))
            frame = stdout[sent : sent + size]
            sent += len(frame)
            if action == "stdout":
                run.record(run.engine.feed_stdout(frame))
            else:
                # A dropped connection loses the frame; the re-attach drops the partial line.
                lost_stdout = True
                run.engine.stdout_reattached()
        elif action == "outbox":
            visible = data.draw(st.integers(visible, len(outbox)))
            cursor = run.engine.cursor.outbox_offset
            start = data.draw(st.integers(0, cursor))  # re-reading from older offsets is fine
            run.record(run.engine.feed_outbox(outbox[start:visible], start))
        elif action == "replay" and sent:
            # Re-attach replays recent output from an earlier point. The unfinished line
            # is dropped; unless the replay starts before it, that line is lost.
            run.engine.stdout_reattached()
            partial_start = stdout.rfind(b"\n", 0, sent) + 1
            replay_from = data.draw(st.integers(0, sent))
            lost_stdout |= partial_start < sent and replay_from > partial_start
            sent = replay_from
        elif action == "restart":
            run.restart()
            # A restarted operator re-reads the outbox from an earlier offset, so that stdout
            # copies replayed by the re-attach are recognised as committed.
            run.record(run.engine.feed_outbox(outbox[:visible], 0))
    if sent < len(stdout):
        run.record(run.engine.feed_stdout(stdout[sent:]))
    run.record(run.engine.feed_outbox(outbox[run.engine.cursor.outbox_offset :], final=True))
    run.record(run.engine.end_session(0))

    valid = [item for item in lines if not item.startswith((b"{not", b"["))]
    assert [c.raw for c in run.committed] == valid
    positions = [i for i, item in enumerate(lines) if item in valid]
    assert [c.line for c in run.committed] == positions
    cursor = run.engine.cursor
    assert cursor.line_count == len(lines)
    assert cursor.event_count == len(valid)
    assert cursor.outbox_offset == len(outbox)
    status = run.engine.status()
    assert status.event_count == len(valid)
    invalid = len(lines) - len(valid)
    assert (
        run.violations.count(ViolationCategory.NOT_JSON)
        + run.violations.count(ViolationCategory.NOT_OBJECT)
        == invalid
    )
    stdout_only = run.violations.count(ViolationCategory.STDOUT_ONLY_EVENT)
    # Each stdout-only event is reported at most once; without restarts (which forget the
    # provisional table) or lost frames, every one of them is.
    assert stdout_only <= len(extra)
    if not run.restarts and not lost_stdout:
        assert stdout_only == len(extra)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=outbox_lines(), data=st.data())
def test_status_is_the_same_however_the_stream_arrived(
    lines: list[bytes], data: st.DataObject
) -> None:
    outbox = b"".join(item + b"\n" for item in lines)
    stdout = _stdout_stream(data.draw, lines, [])

    clean = RunEventEngine(SPRITE, WORK)
    clean.feed_outbox(outbox, final=True)
    clean.end_session(0)

    run = Run(EngineLimits())
    cuts = sorted(data.draw(st.lists(st.integers(0, len(outbox)), max_size=8)))
    frames = sorted(data.draw(st.lists(st.integers(0, len(stdout)), max_size=8)))
    for cut, frame_end in zip(cuts, frames, strict=False):
        run.record(run.engine.feed_stdout(stdout[:frame_end]))
        run.record(run.engine.feed_outbox(outbox[:cut], 0))
        if data.draw(st.booleans()):
            run.restart()
            run.record(run.engine.feed_outbox(outbox[:cut], 0))
        run.engine.stdout_reattached()
    run.record(run.engine.feed_outbox(outbox, 0, final=True))
    run.record(run.engine.end_session(0))
    # stdout copies never appear in the outbox-independent parts of the status.
    assert run.engine.status() == clean.status()


def test_a_small_provisional_table_still_commits_everything() -> None:
    """Eviction from the provisional table loses previews, never events."""
    lines = [info(f"event {i}", at=i) for i in range(200)]
    outbox = b"".join(item + b"\n" for item in lines)
    stdout = b"".join(PREFIX + item + b"\n" for item in lines)
    engine = RunEventEngine(SPRITE, WORK, limits=EngineLimits(max_provisional=3))
    engine.feed_stdout(stdout)
    assert len(engine.provisional) == 3
    assert engine.provisional_evicted == 197
    result = engine.feed_outbox(outbox)
    assert [c.raw for c in result.committed] == lines
    assert engine.end_session(0).violations[0].category is ViolationCategory.MISSING_TERMINAL_EVENT


def test_replayed_stdout_after_the_outbox_is_not_provisional_again() -> None:
    lines = [info(f"event {i}", at=i) for i in range(5)]
    engine = RunEventEngine(SPRITE, WORK)
    engine.feed_outbox(b"".join(item + b"\n" for item in lines))
    result = engine.feed_stdout(b"".join(PREFIX + item + b"\n" for item in lines))
    assert result.provisional == 0
    assert not engine.outbox_behind
