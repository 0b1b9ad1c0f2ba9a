"""Looking at host processes from a test (local server tests only)."""

from __future__ import annotations

from pathlib import Path


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


__all__ = ["alive"]
