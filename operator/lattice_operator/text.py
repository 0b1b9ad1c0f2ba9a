"""Making untrusted text safe and short for status, tables and logs."""

from __future__ import annotations

# Control characters would be escaped to six bytes each in JSON and garble terminals.
_CONTROLS = {c: " " for c in (*range(0x00, 0x20), 0x7F)}
ELLIPSIS = "…"


def clip(text: str, limit: int) -> str:
    """`text` without control characters, cut to at most `limit` characters.

    Idempotent, so a status restored from the API server and clipped again is unchanged.
    """
    text = text.translate(_CONTROLS)
    if len(text) <= limit:
        return text
    return text[: limit - 1] + ELLIPSIS


def excerpt(raw: bytes, limit: int) -> str:
    """The printable start of a raw line."""
    return clip(raw[: limit * 4].decode("utf-8", "replace"), limit)


__all__ = ["clip", "excerpt"]
