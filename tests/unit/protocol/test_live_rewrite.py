"""An outbox rewritten or truncated during a live session is found at the next read."""

from __future__ import annotations

from lattice_operator.protocol.engine import RunEventEngine
from lattice_operator.protocol.violations import ViolationCategory as V
from tests.support.streams import SPRITE, WORK, info


def lines(*items: bytes) -> bytes:
    return b"".join(item + b"\n" for item in items)


def read(engine: RunEventEngine, outbox: bytes) -> list[V]:
    """What the Run driver does on each poll: re-read the last line, then what is new."""
    offset = max(0, engine.cursor.outbox_offset - engine.recheck_span())
    return [v.category for v in engine.feed_outbox(outbox[offset:], offset).violations]


def test_an_untouched_outbox_passes_every_check() -> None:
    engine = RunEventEngine(SPRITE, WORK)
    outbox = lines(info("a"), info("b"))
    assert read(engine, outbox) == []
    outbox += lines(info("c"))
    assert read(engine, outbox) == []
    assert read(engine, outbox) == []
    assert engine.cursor.event_count == 3


def test_a_rewritten_last_line_is_reported_once() -> None:
    engine = RunEventEngine(SPRITE, WORK)
    outbox = lines(info("first"), info("b"))
    read(engine, outbox)
    forged = lines(info("first"), info("X"))  # same length, other content
    assert len(forged) == len(outbox)
    assert read(engine, forged) == [V.OUTBOX_REWRITTEN]
    assert read(engine, forged) == []  # not again at every poll
    assert read(engine, forged + lines(info("c"))) == []  # and reading goes on
    assert engine.cursor.event_count == 3


def test_a_truncated_outbox_is_reported_once() -> None:
    engine = RunEventEngine(SPRITE, WORK)
    outbox = lines(info("a"), info("b"), info("c"))
    read(engine, outbox)
    shorter = lines(info("a"))
    assert read(engine, shorter) == [V.OUTBOX_REWRITTEN]
    assert read(engine, shorter) == []
    violation = engine.status().violations[-1]
    assert "truncated" in violation.reason
