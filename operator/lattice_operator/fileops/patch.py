"""The `apply_patch` format (as coding agents write it), parsed and applied purely.

    *** Begin Patch
    *** Add File: path          then every line prefixed with "+"
    *** Delete File: path
    *** Update File: path       optionally "*** Move to: new/path", then hunks:
    @@ [a line to find first]   then lines prefixed " " (context), "-" (remove), "+" (add),
                                optionally "*** End of File" (the hunk ends the file)
    *** End Patch

A hunk is placed after the previous one: its context and removed lines must appear there in
order (exactly, then ignoring trailing spaces, then ignoring surrounding spaces). A hunk that
matches nowhere refuses the whole patch; nothing is written unless every file applies.

Placing a hunk is a rolling-hash search over the lines after the previous hunk (Rabin-Karp:
each line is looked at once per pass, whatever the hunk's length), and a patch's placing work
is counted against `MATCH_WORK`: a hostile hunk against a huge file is refused, not searched
for minutes. This is pure CPU work: the executor runs it off the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from lattice_operator.fileops.errors import PatchRefused

BEGIN, END = "*** Begin Patch", "*** End Patch"
ADD, DELETE, UPDATE, MOVE = (
    "*** Add File: ",
    "*** Delete File: ",
    "*** Update File: ",
    "*** Move to: ",
)
EOF_MARK = "*** End of File"

MATCH_WORK = 3_000_000
"""Line comparisons (a line hashed, or compared when a window's hash matches) one patch may
use to place its hunks, over all its files and the three passes; beyond it, refused."""

_PRIME = (1 << 61) - 1
_BASE = 1_000_003
_CHUNK = 1024  # lines charged at a time


class Work:
    """The placing work of one patch, charged before it is done: never above `limit`."""

    def __init__(self, limit: int = MATCH_WORK) -> None:
        self.limit = limit
        self.used = 0

    def spend(self, lines: int, path: str) -> None:
        if self.used + lines > self.limit:
            raise PatchRefused(
                f"{path}: placing the hunks needs more than {self.limit:,} line comparisons "
                "(MATCH_WORK)",
                "patch a smaller file, or fewer and more distinctive hunks; or write the "
                "file whole",
            )
        self.used += lines


@dataclass
class Hunk:
    header: str
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    at_end: bool = False
    lines: list[tuple[str, str]] = field(default_factory=list)
    """(marker, text) in order: the file's own context lines are kept as they are."""


@dataclass
class FileChange:
    kind: Literal["add", "delete", "update"]
    path: str
    move_to: str | None = None
    content: list[str] = field(default_factory=list)
    hunks: list[Hunk] = field(default_factory=list)


def parse(text: str) -> list[FileChange]:
    lines = text.replace("\r\n", "\n").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines or lines[0].strip() != BEGIN:
        raise PatchRefused("the patch does not start with '*** Begin Patch'", _FORMAT)
    if lines[-1].strip() != END:
        raise PatchRefused("the patch does not end with '*** End Patch'", _FORMAT)
    body = lines[1:-1]
    changes: list[FileChange] = []
    i = 0
    while i < len(body):
        line = body[i]
        if line.startswith(ADD):
            change = FileChange("add", _path(line[len(ADD) :], i))
            i += 1
            while i < len(body) and not body[i].startswith("*** "):
                if not body[i].startswith("+"):
                    raise PatchRefused(
                        f"line {i + 2}: an added file's lines start with '+'", _FORMAT
                    )
                change.content.append(body[i][1:])
                i += 1
            changes.append(change)
        elif line.startswith(DELETE):
            changes.append(FileChange("delete", _path(line[len(DELETE) :], i)))
            i += 1
        elif line.startswith(UPDATE):
            change = FileChange("update", _path(line[len(UPDATE) :], i))
            i += 1
            if i < len(body) and body[i].startswith(MOVE):
                change.move_to = _path(body[i][len(MOVE) :], i)
                i += 1
            while i < len(body) and body[i].startswith("@@"):
                hunk = Hunk(header=body[i][2:].strip())
                i += 1
                while i < len(body) and not body[i].startswith(("@@", "*** ")):
                    text_line = body[i]
                    marker, rest = (text_line[:1], text_line[1:]) if text_line else (" ", "")
                    hunk.lines.append((marker, rest))
                    if marker == " ":
                        hunk.old.append(rest)
                        hunk.new.append(rest)
                    elif marker == "-":
                        hunk.old.append(rest)
                    elif marker == "+":
                        hunk.new.append(rest)
                    else:
                        raise PatchRefused(
                            f"line {i + 2}: a hunk line starts with ' ', '-' or '+'", _FORMAT
                        )
                    i += 1
                if i < len(body) and body[i].strip() == EOF_MARK:
                    hunk.at_end = True
                    i += 1
                change.hunks.append(hunk)
            if not change.hunks and change.move_to is None:
                raise PatchRefused(f"update of {change.path} has no hunk", _FORMAT)
            changes.append(change)
        elif not line.strip():
            i += 1
        else:
            raise PatchRefused(f"line {i + 2}: unexpected {line[:60]!r}", _FORMAT)
    if not changes:
        raise PatchRefused("the patch changes no file", _FORMAT)
    return changes


def apply_update(path: str, original: str, hunks: list[Hunk], work: Work | None = None) -> str:
    """The file after its hunks; `work` counts (and bounds) the placing."""
    work = work if work is not None else Work()
    lines = original.split("\n")
    trailing_newline = original.endswith("\n")
    if trailing_newline:
        lines.pop()
    cursor = 0
    for number, hunk in enumerate(hunks, 1):
        if hunk.header:
            found = _find(lines, [hunk.header], cursor, work, path)
            if found is None:
                raise PatchRefused(
                    f"{path}: hunk {number}: '@@ {hunk.header}' not found",
                    "read the file again and make the patch against its current content",
                )
            cursor = found + 1
        if not hunk.old:
            where = len(lines) if hunk.at_end or not hunk.header else cursor
            lines[where:where] = hunk.new
            cursor = where + len(hunk.new)
            continue
        start = _find(lines, hunk.old, cursor, work, path, at_end=hunk.at_end)
        if start is None:
            raise PatchRefused(
                f"{path}: hunk {number} does not apply (its context and removed lines are "
                "not in the file where expected)",
                "read the file again and make the patch against its current content",
            )
        segment = iter(lines[start : start + len(hunk.old)])
        replacement: list[str] = []
        for marker, text in hunk.lines:
            if marker == "+":
                replacement.append(text)
            else:
                own = next(segment)
                if marker == " ":
                    replacement.append(own)
        lines[start : start + len(hunk.old)] = replacement
        cursor = start + len(replacement)
    return "\n".join(lines) + ("\n" if trailing_newline or lines else "")


_NORMS = (lambda s: s, str.rstrip, str.strip)


def _find(
    lines: list[str],
    wanted: list[str],
    start: int,
    work: Work,
    path: str,
    *,
    at_end: bool = False,
) -> int | None:
    """The first index from `start` where `wanted` appears (at the very end with `at_end`),
    trying each normalisation in turn."""
    size = len(wanted)
    for norm in _NORMS:
        target = [norm(w) for w in wanted]
        if at_end:
            i = len(lines) - size
            work.spend(size, path)
            if i >= 0 and [norm(x) for x in lines[i:]] == target:
                return i
            continue
        found = _search(lines, target, start, norm, work, path)
        if found is not None:
            return found
    return None


def _search(
    lines: list[str],
    target: list[str],
    start: int,
    norm: Callable[[str], str],
    work: Work,
    path: str,
) -> int | None:
    """Rabin-Karp over line hashes from `start`: each line hashed once, a window compared
    only when its hash is the target's; stops at the first match."""
    size, end = len(target), len(lines)
    if end - start < size:
        return None
    top = pow(_BASE, size - 1, _PRIME)
    want = 0
    for text in target:
        want = (want * _BASE + hash(text)) % _PRIME
    work.spend(size, path)
    hashes: list[int] = []
    have = 0
    for first in range(start, end, _CHUNK):
        last = min(first + _CHUNK, end)
        work.spend(last - first, path)
        hashes += map(hash, map(norm, lines[first:last]))
        for j in range(first - start, last - start):
            if j >= size:
                have = (have - hashes[j - size] * top) % _PRIME
            have = (have * _BASE + hashes[j]) % _PRIME
            if have == want and j + 1 >= size:
                i = start + j + 1 - size
                work.spend(size, path)
                if [norm(x) for x in lines[i : i + size]] == target:
                    return i
    return None


def _path(text: str, index: int) -> str:
    path = text.strip()
    if not path:
        raise PatchRefused(f"line {index + 2}: a file header without a path", _FORMAT)
    return path


_FORMAT = (
    "use the apply_patch format: '*** Begin Patch', then '*** Add File: p' / '*** Delete File: p'"
    " / '*** Update File: p' with '@@' hunks, then '*** End Patch'"
)

__all__ = ["MATCH_WORK", "FileChange", "Hunk", "Work", "apply_update", "parse"]
