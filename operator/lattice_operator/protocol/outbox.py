"""Outbox bytes → complete lines, from a byte offset.

The outbox (`/workspace/.lattice/outbox.jsonl`) is append-only, and the
backend returns its bytes from an offset. `read_lines` takes the bytes read
at `offset`, returns the complete lines and the offset just after the last
one: an unfinished last line is left for the next read, so nothing is held
in memory between reads and the offset alone is the resume point. A line
over the cap is reported by its start and skipped to its newline (the
`skipping` flag carries that across reads).

`read_batch` is the same reading as columns (offsets, lines, which are too
long), which is what the engine uses: in the common case (no line over the
cap) every step runs inside C loops (`readlines`, `map`, `accumulate`), not
once per line in Python.
"""

from __future__ import annotations

from io import BytesIO as _BytesIO
from itertools import accumulate, compress
from typing import NamedTuple

OutboxLine = tuple[int, bytes, bool]
"""One complete outbox line: (offset, raw, too_long).

`offset` is the byte offset of the line's first byte in the file, `raw` the
JSON with surrounding whitespace removed (only its start when `too_long`: the
line was over the cap). A plain tuple: it is built for every event.
"""

_strip = bytes.strip
_LONG_START = 1024
"""How much of an over-long line is kept to report it."""


class OutboxRead(NamedTuple):
    """What one read consumed."""

    lines: list[OutboxLine]
    """Complete non-blank lines, in file order."""
    offset: int
    """The offset to read from next time."""
    skipping: bool
    """Still inside an over-long line whose end has not been read."""


class OutboxBatch(NamedTuple):
    """What one read consumed, as columns (one entry per complete non-blank line)."""

    offsets: list[int]
    """Byte offset of each line's first byte in the file."""
    raws: list[bytes]
    """Each line without surrounding whitespace (only its start when too long)."""
    too_long: list[int]
    """Indices (into `raws`) of the lines over the cap, ascending; usually empty."""
    offset: int
    """The offset to read from next time."""
    skipping: bool
    """Still inside an over-long line whose end has not been read."""


def read_batch(
    data: bytes,
    offset: int,
    *,
    max_line_bytes: int,
    skipping: bool = False,
    final: bool = False,
) -> OutboxBatch:
    """Split the bytes read at `offset` into complete lines, as columns.

    `final` says the writer is gone (the session ended), so an unfinished last
    line is taken as it is. Blank lines are not events and get no position.
    """
    if type(data) is not bytes:
        data = bytes(data)
    offsets: list[int] = []
    raws: list[bytes] = []
    too_long: list[int] = []
    size_read = len(data)
    start = 0
    if skipping:
        newline = data.find(b"\n")
        if newline < 0:
            return OutboxBatch(offsets, raws, too_long, offset + size_read, not final)
        start = newline + 1
    end = data.rfind(b"\n") + 1
    if final and end < size_read:
        data += b"\n"  # the writer is gone: its last line ends at end of file
        end = len(data)
    if end > start:
        # readlines finds newlines with memchr (split looks at every byte) and keeps them:
        # a line's length counts its newline, and strip() removes it.
        parts = _BytesIO(data[start:end] if start or end < len(data) else data).readlines()
        starts = accumulate(map(len, parts), initial=offset + start)
        if max(map(len, parts)) <= max_line_bytes + 1:
            raws = list(map(_strip, parts))
            offsets = list(starts)
            offsets.pop()  # where the line after the last one would start
            if b"" in raws:  # blank lines (rare): dropped, positions kept for the others
                offsets = list(compress(offsets, raws))
                raws = list(compress(raws, raws))
        else:
            # `starts` has one more item (the end): zip stops at the last part.
            for part, pos in zip(parts, starts, strict=False):
                if len(part) > max_line_bytes + 1:
                    too_long.append(len(raws))
                    raws.append(part[:_LONG_START].strip())
                    offsets.append(pos)
                elif body := part.strip():
                    raws.append(body)
                    offsets.append(pos)
    else:
        end = start
    if len(data) - end > max_line_bytes:
        # An unfinished line already over the cap: report it now, skip the rest later.
        too_long.append(len(raws))
        raws.append(data[end : end + _LONG_START].strip())
        offsets.append(offset + end)
        return OutboxBatch(offsets, raws, too_long, offset + len(data), True)
    return OutboxBatch(offsets, raws, too_long, offset + min(end, size_read), False)


def read_lines(
    data: bytes,
    offset: int,
    *,
    max_line_bytes: int,
    skipping: bool = False,
    final: bool = False,
) -> OutboxRead:
    """Split the bytes read at `offset` into complete lines (see `read_batch`)."""
    batch = read_batch(data, offset, max_line_bytes=max_line_bytes, skipping=skipping, final=final)
    flags = [False] * len(batch.raws)
    for index in batch.too_long:
        flags[index] = True
    return OutboxRead(
        list(zip(batch.offsets, batch.raws, flags, strict=True)), batch.offset, batch.skipping
    )


__all__ = ["OutboxBatch", "OutboxLine", "OutboxRead", "read_batch", "read_lines"]
