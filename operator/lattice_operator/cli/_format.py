"""Text shown by more than one command."""

from __future__ import annotations

from typing import Any


def progress_line(status: dict[str, Any]) -> str:
    """One line: phase, committed events, current protocol phase, last progress report."""
    events = status.get("events") or {}
    progress = events.get("progress") or {}
    percent = progress.get("percent")
    return (
        f"{status.get('phase') or 'Pending':<10} events={events.get('eventCount', 0):<6} "
        f"phase={events.get('currentPhase') or '-'} "
        f"progress={'-' if percent is None else f'{percent:g}%'} {progress.get('message', '')}"
    ).rstrip()
