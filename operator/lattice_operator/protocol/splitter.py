"""Stdout frames → lines, with a carry-over buffer for lines split across frames.

WebSocket frames cut lines anywhere. `StdoutSplitter.feed` keeps the partial
last line until the rest arrives (the earlier system split each frame on its
own and lost every event that straddled two frames), strips `\\r\\n`, and
sorts complete lines into event lines (`LATTICE_EVENT ` prefix) and ordinary
output, of which only a bounded tail is kept. A line longer than the cap is
not buffered: its start is reported and the rest is skipped up to the next
newline, so a hostile stream cannot grow memory.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from io import BytesIO as _BytesIO
from itertools import accumulate, compress, count, repeat
from operator import is_, is_not

from lattice_operator.protocol.models import LINE_PREFIX
from lattice_operator.text import clip

_PREFIX_LEN = len(LINE_PREFIX)
_removeprefix = bytes.removeprefix
_strip = bytes.strip
_NEWLINE = ord("\n")
_PREFIXES = repeat(LINE_PREFIX)  # endless, so one can serve every map()

EventLine = tuple[int, int, bytes, bool]
"""A `LATTICE_EVENT ` line from stdout: (line, offset, body, too_long).

`line` is the 0-based line number in the stdout stream and `offset` the byte
offset of its start; `body` is the JSON after the prefix with surrounding
whitespace removed (only its start when `too_long`: the line was over the cap
and was not read to its end). A plain tuple: it is built for every event.
"""

EventColumns = tuple[list[int], list[int], list[bytes], list[EventLine]]
"""`StdoutSplitter.feed_columns`'s result: (lines, offsets, bodies, slow)."""


class StdoutSplitter:
    """Stateful line splitter for one stdout stream."""

    def __init__(self, *, max_line_bytes: int, log_lines: int = 50, log_line_chars: int = 512):
        self._max = max_line_bytes
        self._carry = b""
        self._skipping = False
        self._line = 0
        self._offset = 0  # stream offset of the first byte not yet consumed into a line
        self._log_chars = log_line_chars
        self._log_lines = log_lines
        # Ordinary output as byte segments (several lines each), bounded in bytes: room for
        # `log_lines` full lines of `log_line_chars` characters of up to four bytes.
        self._log: deque[bytes] = deque()
        self._log_bytes = 0
        self._log_cap = log_lines * log_line_chars * 4
        # Ordinary output of a replayed scrollback, bounded the same way, until it is merged
        # into the tail (`end_replay`); the replay's first line may begin inside a line.
        self._replayed: deque[bytes] = deque()
        self._replayed_bytes = 0
        self._replay_head = True

    @property
    def partial_bytes(self) -> int:
        """Bytes held for an unfinished line."""
        return len(self._carry)

    def feed(self, data: bytes, *, keep_log: bool = True) -> list[EventLine]:
        """Consume one frame; return the event lines it completed, in order. `keep_log`
        False: a replay; its ordinary lines join the tail only at `end_replay`, after the
        lines the tail already holds."""
        lines, offsets, bodies, slow = self.feed_columns(data, keep_log)
        if slow:
            return slow
        return list(zip(lines, offsets, bodies, repeat(False)))

    def feed_columns(self, data: bytes, keep_log: bool = True) -> EventColumns:
        """Consume one frame; return the event lines it completed, as columns.

        (lines, offsets, bodies, slow): the event lines' numbers, offsets and bodies
        as in `EventLine`. When the buffer was longer than the line cap (so a line
        may be over it), the frame is split line by line instead and every event
        line comes as an `EventLine` in `slow`, in order, with empty columns.
        """
        if type(data) is not bytes:
            data = bytes(data)
        if self._skipping:
            newline = data.find(b"\n")
            if newline < 0:
                self._offset += len(data)
                return [], [], [], []
            self._skipping = False
            self._offset += newline + 1
            self._line += 1
            data = data[newline + 1 :]
        buffer = self._carry + data if self._carry else data
        if len(buffer) > self._max:  # a line in it may be over the cap: line by line
            return [], [], [], self._feed_long(buffer, keep_log)
        # Columns built by C loops over the frame's lines (readlines, map, compress): no
        # Python-level step per line. `readlines` finds newlines with memchr (`split` looks
        # at every byte) and keeps them, so each line's length already counts its newline.
        lines = _BytesIO(buffer).readlines()
        if not lines:
            return [], [], [], []
        if buffer[-1] == _NEWLINE:
            carry = b""
        else:
            carry = lines.pop()
            if not lines:
                self._carry = carry
                return [], [], [], []
        self._carry = carry
        line, offset = self._line, self._offset
        self._line = line + len(lines)
        self._offset = offset + len(buffer) - len(carry)
        # removeprefix returns the line itself when it is not an event line.
        cut = list(map(_removeprefix, lines, _PREFIXES))
        is_event = list(map(is_not, cut, lines))
        events = is_event.count(True)
        if events < len(lines):
            # Ordinary output, as one segment of its lines: only a bounded tail is kept.
            segment = b"".join(compress(lines, map(is_, cut, lines)))[:-1]
            if keep_log:
                self._keep_log(segment)
            else:
                self._keep_replayed(segment)
            if not events:
                return [], [], [], []
        return (
            list(compress(count(line), is_event)),
            list(compress(accumulate(map(len, lines), initial=offset), is_event)),
            list(map(_strip, compress(cut, is_event))),  # strip() also removes the newline
            [],
        )

    def _feed_long(self, buffer: bytes, keep_log: bool = True) -> list[EventLine]:
        out: list[EventLine] = []
        parts = buffer.split(b"\n")
        carry = parts.pop()
        line, offset, limit = self._line, self._offset, self._max
        for part in parts:
            if len(part) > limit:
                self._long_line(out, part, line, offset, keep_log)
            elif part.startswith(LINE_PREFIX):
                out.append((line, offset, part[_PREFIX_LEN:].strip(), False))
            elif part and part != b"\r" and keep_log:
                self._keep_log(part)
            elif part and part != b"\r":
                self._keep_replayed(part)
            offset += len(part) + 1
            line += 1
        self._line, self._offset = line, offset
        if len(carry) > limit:
            # Report the start now and drop the rest of this line as it streams in.
            self._long_line(out, carry, line, offset, keep_log)
            self._offset += len(carry)
            self._carry = b""
            self._skipping = True
        else:
            self._carry = carry
        return out

    def _keep_log(self, segment: bytes) -> None:
        """Ordinary output: keep the most recent bytes of it, a few lines' worth."""
        if not self._log_cap or not segment:
            return  # (an empty segment adds nothing to the tail, but would take a slot)
        segment = segment[-self._log_cap :]
        self._log.append(segment)
        self._log_bytes += len(segment)
        while self._log_bytes > self._log_cap:
            self._log_bytes -= len(self._log.popleft())

    def _keep_replayed(self, segment: bytes) -> None:
        if not self._log_cap or not segment:
            return
        segment = segment[-self._log_cap :]
        self._replayed.append(segment)
        self._replayed_bytes += len(segment)
        while self._replayed_bytes > self._log_cap:
            self._replayed_bytes -= len(self._replayed.popleft())

    def end_replay(self) -> None:
        """Add the replayed lines that the tail does not hold yet: those after the longest run
        of the tail's last lines found in the replay (output printed while nobody followed the
        session, such as between two operators). No such run: the scrollback has moved past the
        tail's last line, so all of it is newer, except its first line, which may be the end of
        a line. A line repeated across the gap can match too early and be left out; the tail is
        a view of the output, and no event depends on it."""
        if not self._replayed:
            return
        replayed = self._printable(self._replayed)
        self._replayed.clear()
        self._replayed_bytes = 0
        new = _after_overlap(self.log_tail(), replayed)
        if new is None:
            new = replayed[1:] if self._replay_head else replayed
        self._replay_head = False
        for line in new[-self._log_lines :] if self._log_lines else ():
            self._keep_log(line.encode())

    def seed_log(self, lines: Iterable[str]) -> None:
        """Start the log tail with lines kept before (a restored Run's status.logTail)."""
        for line in lines:
            self._keep_log(line.encode())

    def flush(self) -> list[EventLine]:
        """End of stream: the unfinished last line, if any, counts as complete."""
        if self._skipping:
            self._skipping = False
            self._line += 1
            return []
        tail, self._carry = self._carry, b""
        if not tail:
            return []
        return self.feed(tail + b"\n")

    def reset(self) -> None:
        """The stream was re-attached: an unfinished line from the old connection is dropped."""
        self.end_replay()
        self._replay_head = True
        self._offset += len(self._carry)
        if self._carry or self._skipping:
            self._line += 1
        self._carry = b""
        self._skipping = False

    def log_tail(self) -> list[str]:
        """The last ordinary (non-event) output lines, oldest first, made printable."""
        if not self._log_lines:
            return []
        return self._printable(self._log)[-self._log_lines :]

    def _printable(self, segments: Iterable[bytes]) -> list[str]:
        text = b"\n".join(segments).decode("utf-8", "replace")
        # A terminal shows only what follows the last carriage return of a line.
        shown = [line.rstrip("\r").rsplit("\r", 1)[-1] for line in text.split("\n")]
        return [clip(line, self._log_chars) for line in shown if line]

    def _long_line(
        self, out: list[EventLine], part: bytes, line: int, offset: int, keep_log: bool
    ) -> None:
        if part.startswith(LINE_PREFIX):
            out.append((line, offset, part[_PREFIX_LEN : _PREFIX_LEN + 1024].strip(), True))
        elif keep_log:
            self._keep_log(part[: self._log_chars * 4])


def _after_overlap(tail: list[str], replayed: list[str]) -> list[str] | None:
    """The replayed lines after the longest run of `tail`'s last lines found in `replayed`
    (its latest place), or None when not even the tail's last line is there."""
    for k in range(min(len(tail), len(replayed)), 0, -1):
        suffix = tail[-k:]
        for end in range(len(replayed), k - 1, -1):
            if replayed[end - k : end] == suffix:
                return replayed[end:]
    return None


__all__ = ["EventColumns", "EventLine", "StdoutSplitter"]
