"""The Lifeloop contract's closed vocabularies (lifeloop-lifecycle-contract, lifeloop.v0.2)."""

from __future__ import annotations

from enum import StrEnum

CONTRACT_VERSION = "lifeloop.v0.2"
"""The contract version this package implements."""


class LifecycleEvent(StrEnum):
    """Lifecycle event names ("Lifecycle Event Vocabulary")."""

    SESSION_STARTING = "session.starting"
    SESSION_STARTED = "session.started"
    FRAME_OPENING = "frame.opening"
    FRAME_OPENED = "frame.opened"
    CONTEXT_PRESSURE_OBSERVED = "context.pressure_observed"
    CONTEXT_COMPACTED = "context.compacted"
    FRAME_ENDING = "frame.ending"
    FRAME_ENDED = "frame.ended"
    SESSION_ENDING = "session.ending"
    SESSION_ENDED = "session.ended"
    SUPERVISOR_TICK = "supervisor.tick"
    CAPABILITY_DEGRADED = "capability.degraded"
    RECEIPT_EMITTED = "receipt.emitted"
    RECEIPT_GAP_DETECTED = "receipt.gap_detected"


class ReceiptStatus(StrEnum):
    """What happened to the lifecycle operation a receipt describes."""

    OBSERVED = "observed"
    DELIVERED = "delivered"
    SKIPPED = "skipped"
    DEGRADED = "degraded"
    FAILED = "failed"


class IntegrationMode(StrEnum):
    """How an adapter is wired into its harness."""

    MANUAL_SKILL = "manual_skill"
    LAUNCHER_WRAPPER = "launcher_wrapper"
    NATIVE_HOOK = "native_hook"
    REFERENCE_ADAPTER = "reference_adapter"
    TELEMETRY_ONLY = "telemetry_only"


class SupportState(StrEnum):
    """How strongly an adapter satisfies a capability claim."""

    NATIVE = "native"
    SYNTHESIZED = "synthesized"
    MANUAL = "manual"
    PARTIAL = "partial"
    UNAVAILABLE = "unavailable"

    @property
    def strength(self) -> int:
        """Orders support states: a lower value after a higher one is a degradation."""
        return _STRENGTH[self]


_STRENGTH = {
    SupportState.NATIVE: 4,
    SupportState.SYNTHESIZED: 3,
    SupportState.PARTIAL: 2,
    SupportState.MANUAL: 1,
    SupportState.UNAVAILABLE: 0,
}


class AdapterRole(StrEnum):
    """The single role an adapter manifest claims."""

    PRIMARY_WORKER = "primary_worker"
    WORKER = "worker"
    SUPERVISOR = "supervisor"
    OBSERVER = "observer"


class ManifestPlacement(StrEnum):
    """Where in the lifecycle an adapter accepts payloads (manifest placement classes)."""

    PRE_SESSION = "pre_session"
    PRE_FRAME_LEADING = "pre_frame_leading"
    PRE_FRAME_TRAILING = "pre_frame_trailing"
    TOOL_RESULT = "tool_result"
    MANUAL_OPERATOR = "manual_operator"


class PayloadPlacement(StrEnum):
    """Where a concrete payload was routed (payload placement classes)."""

    DEVELOPER_EQUIVALENT_FRAME = "developer_equivalent_frame"
    PRE_PROMPT_FRAME = "pre_prompt_frame"
    SIDE_CHANNEL_CONTEXT = "side_channel_context"
    RECEIPT_ONLY = "receipt_only"


__all__ = [
    "CONTRACT_VERSION",
    "AdapterRole",
    "IntegrationMode",
    "LifecycleEvent",
    "ManifestPlacement",
    "PayloadPlacement",
    "ReceiptStatus",
    "SupportState",
]
