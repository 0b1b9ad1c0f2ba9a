"""Capability negotiation ("Capability Negotiation"): a client's requirement levels against
an adapter's manifest, before dispatch.

A capability is named by what the manifest claims about it: a lifecycle event
(`context.compacted`), a manifest placement class (`placement.pre_session`),
`context_pressure`, `receipts.ledger`, or a harness id (`identity.harness_run_id`).
Its support gives the outcome: native or synthesized → satisfied; partial →
satisfied only when the client accepts partial support, degraded otherwise;
manual → requires_operator; unavailable → unsupported. The requirement level
decides what the outcome means: a `required` capability not satisfied refuses
the dispatch (`capability_unsupported`, or `operator_required` when only an
operator could provide it); a `preferred` one proceeds with a degraded receipt
and a warning; an `optional` one is omitted without a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from lattice_operator.lifeloop.classes import FailureClass
from lattice_operator.lifeloop.manifest import AdapterManifest
from lattice_operator.lifeloop.vocabulary import ReceiptStatus, SupportState


class Requirement(StrEnum):
    """How much a client needs a capability or a placement."""

    REQUIRED = "required"
    PREFERRED = "preferred"
    OPTIONAL = "optional"


class Outcome(StrEnum):
    """The negotiation outcome of one capability."""

    SATISFIED = "satisfied"
    DEGRADED = "degraded"
    UNSUPPORTED = "unsupported"
    REQUIRES_OPERATOR = "requires_operator"


class Capability(StrEnum):
    """The capabilities a client can negotiate: every claim a manifest makes."""

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
    PLACEMENT_PRE_SESSION = "placement.pre_session"
    PLACEMENT_PRE_FRAME_LEADING = "placement.pre_frame_leading"
    PLACEMENT_PRE_FRAME_TRAILING = "placement.pre_frame_trailing"
    PLACEMENT_TOOL_RESULT = "placement.tool_result"
    PLACEMENT_MANUAL_OPERATOR = "placement.manual_operator"
    CONTEXT_PRESSURE = "context_pressure"
    RECEIPT_LEDGER = "receipts.ledger"
    HARNESS_SESSION_ID = "identity.harness_session_id"
    HARNESS_RUN_ID = "identity.harness_run_id"
    HARNESS_TASK_ID = "identity.harness_task_id"


def capability_support(manifest: AdapterManifest, capability: Capability) -> SupportState:
    """What `manifest` claims for `capability` (unavailable when it says nothing)."""
    name = capability.value
    if name.startswith("placement."):
        placed = {p.value: c for p, c in manifest.placement.items()}.get(name.split(".", 1)[1])
        return placed.support if placed is not None else SupportState.UNAVAILABLE
    if name.startswith("identity."):
        identity = manifest.session_identity
        if identity is None:
            return SupportState.UNAVAILABLE
        support: SupportState = getattr(identity, name.split(".", 1)[1])
        return support
    if capability is Capability.CONTEXT_PRESSURE:
        return manifest.context_pressure.support
    if capability is Capability.RECEIPT_LEDGER:
        return manifest.receipts.receipt_ledger
    claim = {e.value: c for e, c in manifest.lifecycle_events.items()}.get(name)
    return claim.support if claim is not None else SupportState.UNAVAILABLE


def outcome_of(support: SupportState, *, accept_partial: bool) -> Outcome:
    """A support state's outcome (partial counts as satisfied only when accepted)."""
    if support in (SupportState.NATIVE, SupportState.SYNTHESIZED):
        return Outcome.SATISFIED
    if support is SupportState.PARTIAL:
        return Outcome.SATISFIED if accept_partial else Outcome.DEGRADED
    if support is SupportState.MANUAL:
        return Outcome.REQUIRES_OPERATOR
    return Outcome.UNSUPPORTED


@dataclass(frozen=True)
class CapabilityRequest:
    """One capability the client asks for, at a requirement level."""

    capability: Capability
    requirement: Requirement


@dataclass(frozen=True)
class CapabilityResult:
    """The negotiation of one requested capability."""

    capability: Capability
    requirement: Requirement
    support: SupportState
    outcome: Outcome


@dataclass(frozen=True)
class Negotiation:
    """The result of negotiating every requested capability against one manifest."""

    adapter_id: str
    results: tuple[CapabilityResult, ...]
    refusal: FailureClass | None
    """Set when a required capability is not satisfied: the dispatch must not happen."""
    message: str
    """Why it was refused (empty when it was not)."""
    warnings: tuple[str, ...]
    """One per preferred capability not satisfied."""

    @property
    def status(self) -> ReceiptStatus:
        """failed (refused), degraded (a preferred capability missing) or observed."""
        if self.refusal is not None:
            return ReceiptStatus.FAILED
        return ReceiptStatus.DEGRADED if self.warnings else ReceiptStatus.OBSERVED

    def summary(self) -> dict[str, str]:
        """capability → outcome, for a receipt's telemetry."""
        return {r.capability.value: r.outcome.value for r in self.results}


def negotiate(
    manifest: AdapterManifest, requests: list[CapabilityRequest], *, accept_partial: bool
) -> Negotiation:
    """Every request evaluated against `manifest`, in the order given."""
    results: list[CapabilityResult] = []
    unmet: list[CapabilityResult] = []
    warnings: list[str] = []
    for request in requests:
        support = capability_support(manifest, request.capability)
        result = CapabilityResult(
            request.capability,
            request.requirement,
            support,
            outcome_of(support, accept_partial=accept_partial),
        )
        results.append(result)
        if result.outcome is Outcome.SATISFIED:
            continue
        if request.requirement is Requirement.REQUIRED:
            unmet.append(result)
        elif request.requirement is Requirement.PREFERRED:
            warnings.append(
                f"preferred capability {request.capability.value} is {result.outcome.value} "
                f"({manifest.adapter_id}: {support.value}); proceeding without it"
            )
    refusal: FailureClass | None = None
    message = ""
    if unmet:
        # Only a manual path missing is an operator's to fix; anything else is unsupported.
        only_manual = all(r.outcome is Outcome.REQUIRES_OPERATOR for r in unmet)
        refusal = (
            FailureClass.OPERATOR_REQUIRED if only_manual else FailureClass.CAPABILITY_UNSUPPORTED
        )
        message = f"adapter {manifest.adapter_id} cannot satisfy required " + ", ".join(
            f"{r.capability.value} ({r.outcome.value}: {r.support.value})" for r in unmet
        )
        if any(r.support is SupportState.PARTIAL for r in unmet):
            message += "; partial support is accepted only with acceptPartial"
    return Negotiation(
        adapter_id=manifest.adapter_id,
        results=tuple(results),
        refusal=refusal,
        message=message,
        warnings=tuple(warnings),
    )


__all__ = [
    "Capability",
    "CapabilityRequest",
    "CapabilityResult",
    "Negotiation",
    "Outcome",
    "Requirement",
    "capability_support",
    "negotiate",
    "outcome_of",
]
