"""The reasons of a Run's `Succeeded` condition, as closed enumerations.

The phase is derived from the condition's status and reason (`decisions.phase_of`), so a
misspelt reason would silently change a phase: every reason the driver writes is a member.
"""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """Reasons while the Run is on its way (status Unknown) or at a non-failure end."""

    PENDING = "Pending"
    SPRITE_NOT_READY = "SpriteNotReady"
    SPRITE_BUSY = "SpriteBusy"
    STARTING = "Starting"
    RUNNING = "Running"
    REATTACHING = "Reattaching"
    WAITING = "Waiting"
    RESUMING = "Resuming"
    CHECKPOINT_PENDING = "CheckpointPending"
    COMPLETED = "Completed"
    """Succeeded: COMPLETED with status success and exit status 0."""
    EXITED = "Exited"
    """Succeeded: exit status 0 without a COMPLETED event."""
    CANCELED = "Canceled"


class EndReason(StrEnum):
    """Why an attempt (and, when not retried, the Run) failed."""

    EXIT_CODE = "ExitCode"
    COMPLETED_FAILURE = "CompletedFailure"
    SPRITE_ERROR = "SpriteError"
    EXIT_UNKNOWN = "ExitUnknown"
    SESSION_LOST = "SessionLost"
    START_FAILED = "StartFailed"
    SPRITE_MISSING = "SpriteMissing"
    TIMEOUT = "Timeout"
    RESUME_FAILED = "ResumeFailed"
    RUN_POLICY = "RunPolicy"
    CAPABILITY_UNSUPPORTED = "CapabilityUnsupported"
    """spec.agent: a required capability the adapter cannot satisfy (before the exec)."""
    OPERATOR_REQUIRED = "OperatorRequired"
    """spec.agent: a required capability only an operator's manual step could provide."""
    PLACEMENT_UNAVAILABLE = "PlacementUnavailable"
    """spec.agent: no acceptable placement of a payload with a required one listed."""
    PAYLOAD_TOO_LARGE = "PayloadTooLarge"
    """spec.agent: a payload larger than every required placement's limit."""
    ENVIRONMENT_FAILED = "EnvironmentFailed"
    """A step of the Sprite's spec.environment did not exit 0 (before the agent's command);
    not retried: the environment must change first."""


__all__ = ["EndReason", "Reason"]
