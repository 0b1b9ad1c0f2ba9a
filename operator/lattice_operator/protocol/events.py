"""The v1 events as msgspec Structs: what the engine decodes and validates each line into.

One `decode(raw)` parses and validates a line in a single pass (C code, no Python
frame per field), against these types: a tagged union on `event_type`, strict
(a string is not a number, `1` is not `true`), unknown fields ignored. The
pydantic models in `models` say the same for people and tools (the MCP tool,
`CommittedEvent.event`, error messages naming the field); a property test checks
that both accept the same lines and read the same values.

An optional field a line leaves out is `UNSET` (falsy), not its default: the
duplicate-key check in `parse` counts the string tokens of what was decoded, so
it needs to know which fields were given. Structs are not tracked by the
garbage collector (`gc=False`: they hold no cycles), which a million events
would otherwise make it scan again and again.

Two rules differ from the pydantic models: the timestamp is RFC 3339 (the ISO-8601
profile of the spec's examples; the models also take `2026-01-15T10:30Z`, a space as
separator and unix seconds in a string, and `parse` accepts such a line on a slow path,
see `parse._iso_timestamp`), and its fraction is rounded, not truncated, to microseconds.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Literal, TypeVar

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from lattice_operator.modeling import CHECKPOINT_ID_PATTERN
from lattice_operator.protocol.models import ActionName, AdjustmentType, EventType

# Python's `$` also matches before a final newline; pydantic's (Rust) regex does not.
_CheckpointId = Annotated[
    str, Meta(min_length=1, max_length=256, pattern=CHECKPOINT_ID_PATTERN.removesuffix("$") + r"\Z")
]
_InputName = Annotated[str, Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}\Z")]
_InputType = Annotated[str, Meta(max_length=64)]
_NonEmpty = Annotated[str, Meta(min_length=1)]
_Confidence = Annotated[float, Meta(ge=0.0, le=1.0)]
_INPUT_TYPE = re.compile(r"(?:array<)*(?:string|integer|boolean|map)>*")
JsonObject = dict[str, Any]
_T = TypeVar("_T")


class _Payload(Struct, frozen=True, gc=False):
    pass


class InfoPayload(_Payload, frozen=True, gc=False):
    """INFO: a progress update, observation, assumption or note."""

    message: str
    kind: str | UnsetType | None = UNSET
    metadata: JsonObject | UnsetType | None = UNSET


class PhaseStartedPayload(_Payload, frozen=True, gc=False):
    """PHASE_STARTED."""

    phase: _NonEmpty


class PhaseFinishedPayload(_Payload, frozen=True, gc=False):
    """PHASE_FINISHED: `success` is required (a missing value is never read as success)."""

    phase: _NonEmpty
    success: bool


class ActionRequestPayload(_Payload, frozen=True, gc=False):
    """ACTION_REQUEST."""

    action: ActionName
    blocking: bool
    parameters: JsonObject | UnsetType = UNSET


class ArtifactPayload(_Payload, frozen=True, gc=False):
    """ARTIFACT."""

    kind: _NonEmpty
    ref: str | UnsetType | None = UNSET
    url: str | UnsetType | None = UNSET
    metadata: JsonObject | UnsetType | None = UNSET


class WaitingPayload(_Payload, frozen=True, gc=False):
    """WAITING: `expected_inputs` maps names to string, integer, boolean, map or array<T>."""

    reason: _NonEmpty
    checkpoint_id: _CheckpointId
    expected_inputs: (
        Annotated[dict[_InputName, _InputType], Meta(max_length=64)] | UnsetType | None
    ) = UNSET

    def __post_init__(self) -> None:
        # Only WAITING pays for this (array<...> must close every bracket it opens).
        if self.expected_inputs:
            for spec in self.expected_inputs.values():
                if not _INPUT_TYPE.fullmatch(spec) or spec.count("array<") != spec.count(">"):
                    raise ValueError(
                        f"unknown input type {spec!r}: use string, integer, boolean, map or "
                        "array<T>"
                    )


class CompletedPayload(_Payload, frozen=True, gc=False):
    """COMPLETED."""

    status: Literal["success", "failure"]
    summary: str | UnsetType | None = UNSET


class ErrorPayload(_Payload, frozen=True, gc=False):
    """ERROR."""

    message: str
    details: JsonObject | UnsetType | None = UNSET


class SuggestedAdjustment(_Payload, frozen=True, gc=False):
    """ENVIRONMENT_PROPOSAL's proposed fix."""

    type: AdjustmentType
    details: JsonObject | UnsetType = UNSET


class EnvironmentProposalPayload(_Payload, frozen=True, gc=False):
    """ENVIRONMENT_PROPOSAL: every field is required."""

    observed_failure: JsonObject
    suggested_adjustment: SuggestedAdjustment
    confidence: _Confidence
    evidence: list[str]
    scope: Literal["repo_specific", "global_candidate"]


class Event(Struct, frozen=True, gc=False, tag_field="event_type"):
    """The envelope; each subclass is one event type (its `tag`)."""

    protocol_version: Literal["v1"]
    sprite_id: str
    work_item_id: str
    timestamp: datetime
    """As given: naive when the line gave no offset (see `aware`)."""
    event_type: ClassVar[EventType]


class InfoEvent(Event, tag="INFO", frozen=True, gc=False):
    payload: InfoPayload
    event_type: ClassVar[EventType] = EventType.INFO


class PhaseStartedEvent(Event, tag="PHASE_STARTED", frozen=True, gc=False):
    payload: PhaseStartedPayload
    event_type: ClassVar[EventType] = EventType.PHASE_STARTED


class PhaseFinishedEvent(Event, tag="PHASE_FINISHED", frozen=True, gc=False):
    payload: PhaseFinishedPayload
    event_type: ClassVar[EventType] = EventType.PHASE_FINISHED


class ActionRequestEvent(Event, tag="ACTION_REQUEST", frozen=True, gc=False):
    payload: ActionRequestPayload
    event_type: ClassVar[EventType] = EventType.ACTION_REQUEST


class ArtifactEvent(Event, tag="ARTIFACT", frozen=True, gc=False):
    payload: ArtifactPayload
    event_type: ClassVar[EventType] = EventType.ARTIFACT


class WaitingEvent(Event, tag="WAITING", frozen=True, gc=False):
    payload: WaitingPayload
    event_type: ClassVar[EventType] = EventType.WAITING


class CompletedEvent(Event, tag="COMPLETED", frozen=True, gc=False):
    payload: CompletedPayload
    event_type: ClassVar[EventType] = EventType.COMPLETED


class ErrorEvent(Event, tag="ERROR", frozen=True, gc=False):
    payload: ErrorPayload
    event_type: ClassVar[EventType] = EventType.ERROR


class EnvironmentProposalEvent(Event, tag="ENVIRONMENT_PROPOSAL", frozen=True, gc=False):
    payload: EnvironmentProposalPayload
    event_type: ClassVar[EventType] = EventType.ENVIRONMENT_PROPOSAL


AnyEvent = (
    InfoEvent
    | PhaseStartedEvent
    | PhaseFinishedEvent
    | ActionRequestEvent
    | ArtifactEvent
    | WaitingEvent
    | CompletedEvent
    | ErrorEvent
    | EnvironmentProposalEvent
)
"""Any v1 event, told apart by `event_type`."""

_DECODER: msgspec.json.Decoder[AnyEvent] = msgspec.json.Decoder(AnyEvent)
decode = _DECODER.decode
"""One line (JSON bytes) → its event; raises `msgspec.DecodeError` (or its subclass
`msgspec.ValidationError`) when the line is not one."""

encode = msgspec.json.Encoder().encode
"""Events back to JSON (the given fields only): what the duplicate-key count compares."""


def aware(value: datetime) -> datetime:
    """A timestamp as the status keeps it: naive means UTC (sprites are told to send UTC).
    An explicit offset is kept as given."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def given(value: _T | UnsetType) -> _T | None:
    """An optional field's value, None when the line left it out."""
    return None if isinstance(value, UnsetType) else value


__all__ = [
    "ActionRequestEvent",
    "ActionRequestPayload",
    "AnyEvent",
    "ArtifactEvent",
    "ArtifactPayload",
    "CompletedEvent",
    "CompletedPayload",
    "EnvironmentProposalEvent",
    "EnvironmentProposalPayload",
    "ErrorEvent",
    "ErrorPayload",
    "Event",
    "InfoEvent",
    "InfoPayload",
    "PhaseFinishedEvent",
    "PhaseFinishedPayload",
    "PhaseStartedEvent",
    "PhaseStartedPayload",
    "SuggestedAdjustment",
    "WaitingEvent",
    "WaitingPayload",
    "aware",
    "decode",
    "encode",
    "given",
]
