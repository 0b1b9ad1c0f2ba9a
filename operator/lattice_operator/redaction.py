"""Secrets the operator delivered to a sprite, kept out of everything it writes.

A sprite is untrusted: a value handed to it may come straight back in an event, a stdout
line or a notification. The operator redacts every delivered value, and the encodings a
program produces without trying (base64, URL-encoding), from status, Events and receipts.
"""

from __future__ import annotations

import base64
import re
from typing import Any
from urllib.parse import quote, quote_plus

REDACTED = "[redacted]"
MIN_CHARS = 4
"""Shorter values are not redacted: they would blank out ordinary text (and are no secret)."""


def encodings(secret: str) -> set[str]:
    """The value and its obvious encodings (none for a value under MIN_CHARS)."""
    if len(secret) < MIN_CHARS:
        return set()
    raw = secret.encode()
    forms = {
        secret,
        base64.b64encode(raw).decode(),
        base64.urlsafe_b64encode(raw).decode(),
        quote(secret, safe=""),
        quote_plus(secret, safe=""),
    }
    # base64 without its padding, as JWTs and many tools write it.
    forms |= {f.rstrip("=") for f in list(forms)}
    return {f for f in forms if len(f) >= MIN_CHARS}


class Redactor:
    """Replaces every known secret form in text and in JSON-like values."""

    def __init__(self) -> None:
        self._forms: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

    @property
    def active(self) -> bool:
        return self._pattern is not None

    def add(self, secret: bytes | str) -> None:
        text = secret.decode(errors="replace") if isinstance(secret, bytes) else secret
        # Each line too: a multi-line secret (a key file) may be echoed one line at a time.
        for part in {text.strip(), *text.splitlines()}:
            self._forms |= encodings(part.strip())
        if self._forms:
            # Longest first, so a form is never cut by a shorter one inside it.
            ordered = sorted(self._forms, key=len, reverse=True)
            self._pattern = re.compile("|".join(map(re.escape, ordered)))

    def text(self, value: str) -> str:
        return value if self._pattern is None else self._pattern.sub(REDACTED, value)

    def value(self, value: Any) -> Any:
        """`value` with every string in it (keys included) redacted."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.value(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value


__all__ = ["MIN_CHARS", "REDACTED", "Redactor", "encodings"]
