"""The protocol package's exception tree.

Nothing a sprite writes raises: bad input becomes a `Violation`. These
exceptions are for a caller that drives the engine wrongly (a programming or
state error in the operator), so they are raised, not recorded.
"""

from __future__ import annotations

from lattice_operator.errors import LatticeError


class ProtocolEngineError(LatticeError):
    """Base of the errors the event engine raises on misuse."""


class EngineStateError(ProtocolEngineError):
    """The call does not fit the stream's state (for example resuming a Run that is not waiting)."""


class OutboxGapError(ProtocolEngineError):
    """Outbox bytes were fed from beyond the cursor: the bytes in between were never read."""

    def __init__(self, expected: int, got: int) -> None:
        super().__init__(f"outbox bytes start at offset {got}, but the cursor is at {expected}")
        self.expected = expected
        self.got = got


class UnknownActionRequestError(ProtocolEngineError):
    """No action request with that id is in the status (or it was resolved differently)."""


__all__ = [
    "EngineStateError",
    "OutboxGapError",
    "ProtocolEngineError",
    "UnknownActionRequestError",
]
