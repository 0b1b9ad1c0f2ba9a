"""Text shown by more than one command, and how text from the cluster is made safe to print."""

from __future__ import annotations

import re
from typing import Any

# C0 and C1 controls and DEL, except tab: a terminal acts on them (colours, cursor moves,
# window titles, OSC 52 clipboard writes), so text from the cluster never carries them raw.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def safe(value: object) -> str:
    """Text from the cluster (written by anyone, a sprite included) made inert for a terminal,
    on one line: control characters and line breaks shown as escapes (`\\x1b`), never raw."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(value))


def progress_line(status: dict[str, Any]) -> str:
    """One line: phase, committed events, current protocol phase, last progress report."""
    events = status.get("events") or {}
    progress = events.get("progress") or {}
    percent = progress.get("percent")
    percent_text = f"{percent:g}%" if isinstance(percent, int | float) else "-"
    return safe(
        f"{status.get('phase') or 'Pending':<10} events={events.get('eventCount', 0):<6} "
        f"phase={events.get('currentPhase') or '-'} "
        f"progress={percent_text} {progress.get('message', '')}"
    ).rstrip()
