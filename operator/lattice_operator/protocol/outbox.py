"""Outbox bytes → complete lines, from a byte offset.

The outbox (`/workspace/.lattice/outbox.jsonl`) is append-only, and the
backend returns its bytes from an offset. `read_lines` takes the bytes read
at `offset`, returns the complete lines and the offset just after the last
one: an unfinished last line is left for the next read, so nothing is held
in memory between reads and the offset alone is the resume point. A line
over the cap is reported by its start and skipped to its newline (the
`skipping` flag carries that across reads).
"""

from __future__ import annotations

from typing import NamedTuple

OutboxLine = tuple[int, bytes, bool]
"""One complete outbox line: (offset, raw, too_long).

`offset` is the byte offset of the line's first byte in the file, `raw` the
JSON with surrounding whitespace removed (only its start when `too_long`: the
line was over the cap). A plain tuple: it is built for every event.
"""


class OutboxRead(NamedTuple):
    """What one read consumed."""

    lines: list[OutboxLine]
    """Complete non-blank lines, in file order."""
    offset: int
    """The offset to read from next time."""
    skipping: bool
    """Still inside an over-long line whose end has not been read."""


def read_lines(
    data: bytes,
    offset: int,
    *,
    max_line_bytes: int,
    skipping: bool = False,
    final: bool = False,
) -> OutboxRead:
    """Split the bytes read at `offset` into complete lines.

    `final` says the writer is gone (the session ended), so an unfinished last
    line is taken as it is. Blank lines are not events and get no position.
    """
    lines: list[OutboxLine] = []
    size_read = len(data)
    start = 0
    if skipping:
        newline = data.find(b"\n")
        if newline < 0:
            return OutboxRead(lines, offset + len(data), not final)
        start = newline + 1
    end = data.rfind(b"\n") + 1
    if final and end < size_read:
        data += b"\n"  # the writer is gone: its last line ends at end of file
        end = len(data)
    if end > start:
        pos = offset + start
        for part in data[start : end - 1].split(b"\n"):
            size = len(part)
            if size > max_line_bytes:
                lines.append((pos, part[:1024].strip(), True))
            else:
                body = part.strip()
                if body:
                    lines.append((pos, body, False))
            pos += size + 1
    else:
        end = start
    tail = len(data) - end
    if tail > max_line_bytes:
        # An unfinished line already over the cap: report it now, skip the rest later.
        lines.append((offset + end, data[end : end + 1024].strip(), True))
        return OutboxRead(lines, offset + len(data), True)
    return OutboxRead(lines, offset + min(end, size_read), False)


__all__ = ["OutboxLine", "OutboxRead", "read_lines"]
