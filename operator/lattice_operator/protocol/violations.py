"""Protocol violations: what a bad line or a bad sequence of events becomes.

Nothing a sprite writes makes the engine raise. Each problem is recorded as a
`Violation` (where, which category, why, a short excerpt) and processing goes
on with the next line. Violations are part of the Run status, so the model
is an `ApiModel` with bounded strings.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from lattice_operator.modeling import ApiModel

EXCERPT_CHARS = 120
"""How much of an offending line a violation quotes."""
REASON_CHARS = 256


class ViolationCategory(StrEnum):
    """Why a line or an event was refused."""

    NOT_JSON = "not_json"
    """The line is not valid UTF-8 JSON."""
    NOT_OBJECT = "not_object"
    """The JSON is not an object."""
    DUPLICATE_KEY = "duplicate_key"
    """An object in the line names the same key twice: readers disagree on which value
    counts (the line is ambiguous), so it is not an event."""
    WRONG_PROTOCOL_VERSION = "wrong_protocol_version"
    """protocol_version is missing or not "v1"."""
    UNKNOWN_EVENT_TYPE = "unknown_event_type"
    """event_type is missing or not a v1 type."""
    INVALID_FIELD = "invalid_field"
    """A field is missing, wrongly typed or outside its allowed values."""
    PAYLOAD_TOO_LARGE = "payload_too_large"
    """The serialised payload is over the size cap."""
    LINE_TOO_LONG = "line_too_long"
    """The line is over the length cap (it is skipped without being buffered)."""
    SPOOFED_IDENTITY = "spoofed_identity"
    """sprite_id or work_item_id differs from the ones the Run was started with."""
    EVENT_AFTER_COMPLETED = "event_after_completed"
    """An event arrived after COMPLETED."""
    EVENT_AFTER_WAITING = "event_after_waiting"
    """An event arrived after WAITING and before the Run was resumed."""
    WAITING_WITHOUT_CHECKPOINT = "waiting_without_checkpoint"
    """WAITING without a checkpoint_id."""
    BLOCKING_REQUEST_WITHOUT_WAITING = "blocking_request_without_waiting"
    """A blocking ACTION_REQUEST was not immediately followed by WAITING."""
    BAD_TIMESTAMP = "bad_timestamp"
    """timestamp is missing or not an ISO-8601 date-time."""
    STDOUT_ONLY_EVENT = "stdout_only_event"
    """An event seen on stdout never appeared in the outbox by the end of the session."""
    OUTBOX_ONLY_EVENT = "outbox_only_event"
    """An event written to the outbox never appeared on stdout during its session (checked
    only for sessions whose stdout was followed without a gap, to a known exit)."""
    MISSING_TERMINAL_EVENT = "missing_terminal_event"
    """The session ended without COMPLETED, WAITING or ERROR."""
    CHECKPOINT_MISSING = "checkpoint_missing"
    """WAITING names a checkpoint the backend does not have (found by the operator)."""
    RESUME_NOT_ACKNOWLEDGED = "resume_not_acknowledged"
    """A resumed session's first event was not the INFO acknowledging the resume."""
    WORK_AFTER_WAITING = "work_after_waiting"
    """The session kept running after WAITING (found by the operator, which stopped it)."""
    OUTBOX_REWRITTEN = "outbox_rewritten"
    """The outbox before the cursor is not what was read there (found after a restart)."""
    BRANCH_REFUSED = "branch_refused"
    """The sprite's branch was not pushed: it rewrites the base branch or history, carries
    other branches, or exceeds the size or commit limits (found by the operator's git)."""


ViolationSource = Literal["outbox", "stdout", "session"]


class Violation(ApiModel):
    """One refused line or event."""

    category: ViolationCategory
    """What kind of problem."""
    source: ViolationSource
    """Where it was seen: the outbox, stdout, or the session as a whole."""
    session: int = Field(ge=1)
    """The exec session (1 for the first, +1 per resume)."""
    line: int | None = Field(default=None, ge=0)
    """0-based position: for the outbox, the Run-wide line sequence (as committed events);
    for stdout, the line number since the stream was attached."""
    offset: int | None = Field(default=None, ge=0)
    """Byte offset of the line in its source (outbox file, or stdout since attach)."""
    reason: str = Field(max_length=REASON_CHARS)
    """Why, in words."""
    excerpt: str = Field(default="", max_length=EXCERPT_CHARS)
    """The start of the offending line, made printable."""


__all__ = ["EXCERPT_CHARS", "Violation", "ViolationCategory", "ViolationSource"]
