"""Links between documents: found in bodies and front matter, resolved, put in normal form.

A link to a document is a markdown link whose target names its Lattice ID: the shorthand
`[text](LCGWQN)`, or the normal form `[text](../api/docs/design.md#LCGWQN)` (the path
relative to the linking document, then the ID as fragment). `lattice fmt` rewrites the
shorthand, a stale path, and a bare path to a document into the normal form.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

# Inline links, not images; a target without spaces or parentheses (the forms we write).
_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]\n]*)\]\((?P<target>[^()\s]+)\)")
SHORTHAND = re.compile(r"^L[A-Z0-9]{5}$")
_FRAGMENT_ID = re.compile(r"^(?P<path>[^#]*)#(?P<id>L[A-Z0-9]{5})$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)

# Front-matter fields whose values are Lattice IDs (besides any `*-id`/`*-ids` field).
ID_FIELDS = ("parent-id", "blocked-by", "blocking", "discovered-from")


@dataclass(frozen=True)
class Link:
    """One inline link in a body: offsets of its target in the body, and its line (1-based)."""

    text: str
    target: str
    start: int
    end: int
    line: int


def _masked(body: str) -> str:
    """The body with fenced code blocks and code spans blanked (same length, same lines):
    a link shown as code is an example, never rewritten or checked."""
    out, fence = [], ""
    for line in body.splitlines(keepends=True):
        opening = _FENCE.match(line)
        if fence:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = ""
            out.append(re.sub(r"[^\n]", " ", line))
        elif opening:
            fence = opening.group(1)
            out.append(re.sub(r"[^\n]", " ", line))
        else:
            out.append(line)
    text = "".join(out)
    return _CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


def body_links(body: str) -> list[Link]:
    """Every inline link of the body outside code, in order."""
    masked = _masked(body)
    found = []
    for match in _LINK.finditer(masked):
        start, end = match.span("target")
        found.append(
            Link(
                text=body[match.start("text") : match.end("text")],
                target=body[start:end],
                start=start,
                end=end,
                line=body.count("\n", 0, start) + 1,
            )
        )
    return found


def is_external(target: str) -> bool:
    """A URL (`https:`, `mailto:`) or an anchor in the same page: not a file link."""
    return bool(_SCHEME.match(target)) or target.startswith("#")


def target_id(target: str) -> str | None:
    """The Lattice ID a link target names (shorthand or fragment), else None."""
    if SHORTHAND.match(target):
        return target
    found = _FRAGMENT_ID.match(target)
    return found.group("id") if found else None


def target_path(source: str, target: str) -> str:
    """The project-relative path a relative link target points at (fragment dropped)."""
    path = unquote(target.split("#", 1)[0])
    return posixpath.normpath(posixpath.join(posixpath.dirname(source), path))


def normal_target(source: str, target_path_: str, lattice_id: str) -> str:
    """The normal form: the target's path relative to the linking document, then `#ID`."""
    relative = posixpath.relpath(target_path_, posixpath.dirname(source) or ".")
    # Percent-encoded: a space or parenthesis in a file name would end the link.
    return f"{quote(relative, safe='/-_.~')}#{lattice_id}"


def normalised(source: str, body: str, paths: Mapping[str, str], ids: Mapping[str, str]) -> str:
    """The body with every link to a known document in normal form; all else untouched.

    `paths` maps a Lattice ID to its document's path, `ids` a path to its document's ID.
    """
    pieces, last = [], 0
    for link in body_links(body):
        if is_external(link.target):
            continue
        lattice_id = target_id(link.target)
        if lattice_id is None:
            if "#" in link.target:
                continue  # a section of a file: not ours to change
            lattice_id = ids.get(target_path(source, link.target))
        if lattice_id is None or lattice_id not in paths:
            continue  # unknown: `lattice check` reports it, fmt leaves it as written
        pieces += [body[last : link.start], normal_target(source, paths[lattice_id], lattice_id)]
        last = link.end
    return "".join(pieces) + body[last:]


def front_matter_ids(front: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(field, ID) for every ID a front-matter field refers to; `lattice-id` is the doc's own."""
    for key, value in front.items():
        name = str(key)
        if name == "lattice-id":
            continue
        if name in ID_FIELDS or name.endswith(("-id", "-ids")):
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, str) and item:
                    yield name, item


__all__ = [
    "ID_FIELDS",
    "SHORTHAND",
    "Link",
    "body_links",
    "front_matter_ids",
    "is_external",
    "normal_target",
    "normalised",
    "target_id",
    "target_path",
]
