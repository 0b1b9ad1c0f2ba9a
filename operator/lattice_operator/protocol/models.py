"""pydantic models of the sprite protocol v1: the envelope and every event type.

These models say what a valid event is to people and tools: the MCP tool that
writes events checks them here, `CommittedEvent.event` returns them, and a
refused line's reason comes from their errors (which name the field). They are
strict (a string is not a number, `1` is not `true`: the earlier system read
`success: false` as success); unknown extra fields are ignored so sprites may
add fields without breaking a Run.

The engine itself decodes each line into the msgspec Structs of `events`, in one
pass; a property test checks that both accept the same lines and read the same
values (`events` names the one difference: its timestamps are RFC 3339).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter

from lattice_operator.modeling import CHECKPOINT_ID_PATTERN

PROTOCOL_VERSION = "v1"
LINE_PREFIX = b"LATTICE_EVENT "
"""The stdout prefix of an event line (with its trailing space)."""


class EventType(StrEnum):
    """The v1 event types."""

    INFO = "INFO"
    PHASE_STARTED = "PHASE_STARTED"
    PHASE_FINISHED = "PHASE_FINISHED"
    ACTION_REQUEST = "ACTION_REQUEST"
    ARTIFACT = "ARTIFACT"
    WAITING = "WAITING"
    COMPLETED = "COMPLETED"
    ERROR = "ERROR"
    ENVIRONMENT_PROPOSAL = "ENVIRONMENT_PROPOSAL"


class ActionName(StrEnum):
    """The actions a sprite may ask Lattice to perform (protocol v1, "Known actions")."""

    OPEN_PR = "OPEN_PR"
    POST_COMMENT = "POST_COMMENT"
    LABEL_ISSUE = "LABEL_ISSUE"
    NOTIFY_USER = "NOTIFY_USER"
    FETCH_CREDENTIAL = "FETCH_CREDENTIAL"


class AdjustmentType(StrEnum):
    """The environment adjustments a sprite may propose."""

    RUNTIME_INSTALL = "runtime_install"
    RUNTIME_VERSION_ADJUST = "runtime_version_adjust"
    DEPENDENCY_MANAGER_SWITCH = "dependency_manager_switch"
    ADD_PREINSTALL_STEP = "add_preinstall_step"
    ADJUST_SMOKE_COMMAND = "adjust_smoke_command"
    ADD_SYSTEM_PACKAGE = "add_system_package"
    ENABLE_NETWORK_ACCESS = "enable_network_access"
    ESCALATE_TO_HUMAN = "escalate_to_human"


_INPUT_TYPE = re.compile(r"^(?:array<)*(?:string|integer|boolean|map)>*$")


def _check_input_type(spec: str) -> str:
    # array<...> must nest a known scalar and close every bracket it opens.
    if not _INPUT_TYPE.match(spec) or spec.count("array<") != spec.count(">"):
        raise ValueError(
            f"unknown input type {spec!r}: use string, integer, boolean, map or array<T>"
        )
    return spec


def _aware(value: datetime) -> datetime:
    # Sprites are told to send UTC; a naive timestamp is read as UTC rather than refused.
    # An explicit offset is kept as given (converting every event would cost more than it buys).
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


Timestamp = Annotated[datetime, AfterValidator(_aware)]
"""An ISO-8601 date-time, always timezone-aware (naive means UTC)."""
InputName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")]
"""A resume input's name: an identifier of at most 64 characters."""
InputType = Annotated[str, StringConstraints(max_length=64), AfterValidator(_check_input_type)]
"""A resume input's type: string, integer, boolean, map or array<T>."""
CheckpointId = Annotated[
    str, StringConstraints(min_length=1, max_length=256, pattern=CHECKPOINT_ID_PATTERN)
]
"""A checkpoint id, in the form Run.spec.resume.checkpointId accepts."""
NonEmpty = Annotated[str, StringConstraints(min_length=1)]
JsonObject = dict[str, Any]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class InfoPayload(_Strict):
    """INFO: a progress update, observation, assumption or note."""

    message: str
    """Human-readable text."""
    kind: str | None = None
    """progress, observation, assumption, note or any free-form string."""
    metadata: JsonObject | None = None
    """Structured data for the kind; for progress, `percent` (0-100) and `phase`."""


class PhaseStartedPayload(_Strict):
    """PHASE_STARTED: a logical phase of work began."""

    phase: NonEmpty
    """The phase name (bootstrap, implement, test, ...)."""


class PhaseFinishedPayload(_Strict):
    """PHASE_FINISHED: a logical phase ended, successfully or not."""

    phase: NonEmpty
    """The phase name."""
    success: bool
    """Whether the phase succeeded. Required: a missing value is never read as success."""


class ActionRequestPayload(_Strict):
    """ACTION_REQUEST: the sprite asks Lattice to act on its behalf."""

    action: ActionName
    """One of the known actions."""
    parameters: JsonObject = Field(default_factory=dict)
    """Action-specific parameters."""
    blocking: bool
    """Whether the sprite needs the result (then WAITING must follow immediately)."""


class ArtifactPayload(_Strict):
    """ARTIFACT: a declared work product."""

    kind: NonEmpty
    """branch, commit, file, pr_url, issue_url, ..."""
    ref: str | None = None
    """Branch name, SHA, file path or PR number."""
    url: str | None = None
    """URL if applicable."""
    metadata: JsonObject | None = None
    """Additional context."""


class WaitingPayload(_Strict):
    """WAITING: the sprite is blocked on external input and is about to stop."""

    reason: NonEmpty
    """Why the sprite waits."""
    checkpoint_id: CheckpointId
    """The checkpoint created before pausing; the resume restores it."""
    expected_inputs: dict[InputName, InputType] | None = Field(default=None, max_length=64)
    """Name → type of each input needed on resume."""


class CompletedPayload(_Strict):
    """COMPLETED: all work on the work item is finished."""

    status: Literal["success", "failure"]
    """How it ended."""
    summary: str | None = None
    """What was accomplished, or why it failed."""


class ErrorPayload(_Strict):
    """ERROR: an unrecoverable failure."""

    message: str
    """What went wrong."""
    details: JsonObject | None = None
    """Structured context."""


class SuggestedAdjustment(_Strict):
    """The environment change a sprite proposes."""

    type: AdjustmentType
    """One of the allowed adjustment types."""
    details: JsonObject = Field(default_factory=dict)
    """Type-specific details."""


class EnvironmentProposalPayload(_Strict):
    """ENVIRONMENT_PROPOSAL: a fixable environment problem, proposed and never applied."""

    observed_failure: JsonObject
    """What failed (phase, exit code, stderr hint, ...)."""
    suggested_adjustment: SuggestedAdjustment
    """The proposed fix."""
    confidence: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    """How sure the sprite is, from 0.0 to 1.0."""
    evidence: list[str]
    """Observations supporting the proposal."""
    scope: Literal["repo_specific", "global_candidate"]
    """Whether the fix is specific to this repository."""


class Envelope(_Strict):
    """The fields every v1 event carries."""

    protocol_version: Literal["v1"]
    """Always "v1"."""
    sprite_id: str
    """The sprite that emitted the event."""
    work_item_id: str
    """The work item the event belongs to."""
    timestamp: Timestamp
    """When the sprite emitted the event (its own clock); naive values are taken as UTC."""


class InfoEvent(Envelope):
    """An INFO event."""

    event_type: Literal[EventType.INFO]
    payload: InfoPayload


class PhaseStartedEvent(Envelope):
    """A PHASE_STARTED event."""

    event_type: Literal[EventType.PHASE_STARTED]
    payload: PhaseStartedPayload


class PhaseFinishedEvent(Envelope):
    """A PHASE_FINISHED event."""

    event_type: Literal[EventType.PHASE_FINISHED]
    payload: PhaseFinishedPayload


class ActionRequestEvent(Envelope):
    """An ACTION_REQUEST event."""

    event_type: Literal[EventType.ACTION_REQUEST]
    payload: ActionRequestPayload


class ArtifactEvent(Envelope):
    """An ARTIFACT event."""

    event_type: Literal[EventType.ARTIFACT]
    payload: ArtifactPayload


class WaitingEvent(Envelope):
    """A WAITING event."""

    event_type: Literal[EventType.WAITING]
    payload: WaitingPayload


class CompletedEvent(Envelope):
    """A COMPLETED event."""

    event_type: Literal[EventType.COMPLETED]
    payload: CompletedPayload


class ErrorEvent(Envelope):
    """An ERROR event."""

    event_type: Literal[EventType.ERROR]
    payload: ErrorPayload


class EnvironmentProposalEvent(Envelope):
    """An ENVIRONMENT_PROPOSAL event."""

    event_type: Literal[EventType.ENVIRONMENT_PROPOSAL]
    payload: EnvironmentProposalPayload


ProtocolEvent = Annotated[
    InfoEvent
    | PhaseStartedEvent
    | PhaseFinishedEvent
    | ActionRequestEvent
    | ArtifactEvent
    | WaitingEvent
    | CompletedEvent
    | ErrorEvent
    | EnvironmentProposalEvent,
    Field(discriminator="event_type"),
]
"""Any v1 event, told apart by `event_type`."""

EVENT_ADAPTER: TypeAdapter[ProtocolEvent] = TypeAdapter(ProtocolEvent)
"""Validates one event from JSON bytes into a model (`EVENT_ADAPTER.validate_json(line)`)."""

__all__ = [
    "EVENT_ADAPTER",
    "LINE_PREFIX",
    "PROTOCOL_VERSION",
    "ActionName",
    "ActionRequestEvent",
    "ActionRequestPayload",
    "AdjustmentType",
    "ArtifactEvent",
    "ArtifactPayload",
    "CheckpointId",
    "CompletedEvent",
    "CompletedPayload",
    "Envelope",
    "EnvironmentProposalEvent",
    "EnvironmentProposalPayload",
    "ErrorEvent",
    "ErrorPayload",
    "EventType",
    "InfoEvent",
    "InfoPayload",
    "InputName",
    "InputType",
    "PhaseFinishedEvent",
    "PhaseFinishedPayload",
    "PhaseStartedEvent",
    "PhaseStartedPayload",
    "ProtocolEvent",
    "SuggestedAdjustment",
    "Timestamp",
    "WaitingEvent",
    "WaitingPayload",
]
