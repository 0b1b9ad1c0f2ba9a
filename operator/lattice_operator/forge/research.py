"""Loop 4, open questions → research dialogue: the notes a research agent declares, read
from its sprite (untrusted input), and the issue comments they become (pure).

The agent writes a JSON object `{"notes": "...", "sources": ["https://...", "docs/x.md"]}`
and declares it with `ARTIFACT {kind: notes, ref: <the file>}`. The operator posts it on the
issue as one comment: the notes, then the sources numbered (a URL as a link, anything else
as a path in the repository); then, when the agent also proposed a plan, a second comment
with the plan and the Intent that awaits its approval.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from lattice_operator.ports.errors import InvalidRequest

NOTES_LIMIT = 50_000
"""Characters of notes posted (a GitHub comment holds 65536)."""
MAX_SOURCES = 30
SOURCE_CHARS = 512
NOTES_HEADING = "### Research notes"
PLAN_HEADING = "### Proposed plan"


@dataclass(frozen=True)
class ResearchNotes:
    notes: str
    sources: tuple[str, ...]


def parse_notes(text: str, ref: str) -> ResearchNotes:
    """The notes file's content; malformed input raises InvalidRequest naming the field
    (the Intent then fails with it: nothing half-posted)."""
    where = f"the notes artifact {ref[:200]!r}"
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidRequest(f"{where} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidRequest(f"{where} must be a JSON object {{notes, sources}}")
    notes = data.get("notes")
    if not isinstance(notes, str) or not notes.strip():
        raise InvalidRequest(f"{where}: `notes` must be a non-empty string")
    raw = data.get("sources", [])
    if not isinstance(raw, list):
        raise InvalidRequest(f"{where}: `sources` must be a list of strings")
    if len(raw) > MAX_SOURCES:
        raise InvalidRequest(f"{where}: `sources` has {len(raw)} items, at most {MAX_SOURCES}")
    sources = []
    for index, source in enumerate(raw):
        if not isinstance(source, str) or not source.strip():
            raise InvalidRequest(f"{where}: `sources[{index}]` must be a non-empty string")
        if len(source) > SOURCE_CHARS or "\n" in source:
            raise InvalidRequest(
                f"{where}: `sources[{index}]` must be one line of at most {SOURCE_CHARS} characters"
            )
        sources.append(source.strip())
    return ResearchNotes(notes=notes.strip()[:NOTES_LIMIT], sources=tuple(sources))


def _source(text: str) -> str:
    if text.startswith(("https://", "http://")) and not any(c in text for c in " <>"):
        return f"<{text}>"
    return "`" + text.replace("`", "") + "`"


def notes_comment(notes: ResearchNotes) -> str:
    """The comment the notes become."""
    if notes.sources:
        listing = "\n".join(f"{i}. {_source(s)}" for i, s in enumerate(notes.sources, 1))
    else:
        listing = "(the agent cited none)"
    return f"{NOTES_HEADING}\n\n{notes.notes}\n\n**Sources**\n\n{listing}"


def plan_comment(plan: str, intent: str) -> str:
    """The plan proposed after the notes, and where its approval is awaited."""
    return f"{PLAN_HEADING}\n\n{plan}\n\nAwaiting approval as Intent `{intent}`."


__all__ = [
    "NOTES_HEADING",
    "PLAN_HEADING",
    "ResearchNotes",
    "notes_comment",
    "parse_notes",
    "plan_comment",
]
