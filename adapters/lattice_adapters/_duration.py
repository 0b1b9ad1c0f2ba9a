"""Go-style duration strings (`10s`, `1m30s`, `500ms`, `0`) as the Sprites API uses them."""

from __future__ import annotations

import math
import re

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds from a Go duration (`1h2m3.5s`) or a bare number of seconds (`10`, `2.5`)."""
    value = text.strip()
    if not value:
        raise ValueError("empty duration")
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        if seconds < 0 or not math.isfinite(seconds):
            raise ValueError(f"invalid duration {text!r}")
        return seconds
    pos, total = 0, 0.0
    while pos < len(value):
        match = _PART.match(value, pos)
        if match is None:
            raise ValueError(f"invalid duration {text!r}")
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    return total


def format_duration(seconds: float) -> str:
    """A Go duration string for a non-negative number of seconds (`0`, `10s`, `1500ms`)."""
    if seconds < 0 or not math.isfinite(seconds):
        raise ValueError(f"invalid duration {seconds!r}")
    if seconds == 0:
        return "0"
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"


__all__ = ["format_duration", "parse_duration"]
