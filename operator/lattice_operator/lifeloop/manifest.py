"""Adapter manifests, the contract's manifest rules, and the manifest of the `sprites` adapter.

The manifest is an honest report: each claim that is not `unavailable` is
made true by a code path in this repository, and a test runs that path (see
tests/unit/lifeloop/test_manifest.py). In short, for `sprites`:

- lifecycle events come from `LIFECYCLE_MAP` (lattice_operator.lifeloop.mapping):
  sessions and frames are *synthesized* from the exec session and the
  sprite's protocol events; `capability.degraded` and `receipt.gap_detected`
  are *synthesized* by `RunReceipts` and the ledger; context pressure,
  compaction, supervisor ticks and `receipt.emitted` are *unavailable*;
- no payload placement: the operator delivers no opaque client payloads;
- receipts are synthesized, with a durable per-Run ledger (sequence and
  idempotency keys persisted in the Run's status);
- identity: the Run is the session (synthesized), the backend exec session
  id is the run (native), the work item is the task (native).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from lattice_operator.lifeloop.classes import FailureClass
from lattice_operator.lifeloop.errors import ManifestError
from lattice_operator.lifeloop.vocabulary import (
    CONTRACT_VERSION,
    AdapterRole,
    IntegrationMode,
    LifecycleEvent,
    ManifestPlacement,
    SupportState,
)

_ADAPTER_ID = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


class _Manifest(BaseModel):
    # No use_attribute_docstrings: no schema is made of these, and reading the docstrings
    # when the class is defined is start-up CPU (see modeling.ApiModel).
    model_config = ConfigDict(extra="forbid", frozen=True)


class EventClaim(_Manifest):
    """Support for one lifecycle event."""

    support: SupportState
    modes: list[IntegrationMode] = Field(default_factory=list)
    """The integration modes that deliver it (none when unavailable)."""


class PlacementClaim(_Manifest):
    """Support for payload placement at one lifecycle position."""

    support: SupportState
    max_bytes: int | None = Field(default=None, gt=0)


class CapabilityClaim(_Manifest):
    """A single capability claim with its evidence."""

    support: SupportState
    evidence: str | None = None


class ReceiptsClaim(_Manifest):
    """Receipt emission and ledger support."""

    native: bool
    """The harness emits receipts itself."""
    lifeloop_synthesized: bool
    """Receipts are synthesized from other signals."""
    receipt_ledger: SupportState
    """A durable ledger (sequence, idempotency, gap detection) exists."""


class SessionIdentityClaim(_Manifest):
    """Which harness ids can be observed."""

    harness_session_id: SupportState
    harness_run_id: SupportState
    harness_task_id: SupportState


class KnownDegradation(_Manifest):
    """A degradation the adapter is known to go through."""

    capability: str = Field(min_length=1)
    previous_support: SupportState
    current_support: SupportState
    evidence: str


class TelemetrySource(_Manifest):
    """A source of lifecycle evidence."""

    name: str = Field(min_length=1)
    description: str


class AdapterManifest(_Manifest):
    """An adapter's honest report of its lifecycle behaviour ("Adapter Manifest")."""

    contract_version: str
    adapter_id: str
    adapter_version: str
    display_name: str
    role: AdapterRole
    integration_modes: list[IntegrationMode]
    lifecycle_events: dict[LifecycleEvent, EventClaim]
    placement: dict[ManifestPlacement, PlacementClaim]
    context_pressure: CapabilityClaim
    receipts: ReceiptsClaim
    session_identity: SessionIdentityClaim | None = None
    failure_modes: list[FailureClass] = Field(default_factory=list)
    telemetry_sources: list[TelemetrySource] = Field(default_factory=list)
    known_degradations: list[KnownDegradation] = Field(default_factory=list)


def manifest_problems(manifest: AdapterManifest) -> list[str]:
    """Every way `manifest` breaks the contract's manifest rules (empty when it conforms)."""
    problems: list[str] = []
    if manifest.contract_version != CONTRACT_VERSION:
        problems.append(f"contract_version {manifest.contract_version!r} is not {CONTRACT_VERSION}")
    if not _ADAPTER_ID.match(manifest.adapter_id):
        problems.append(f"adapter_id {manifest.adapter_id!r} is not a stable wire identifier")
    for name in ("adapter_version", "display_name"):
        if not getattr(manifest, name).strip():
            problems.append(f"{name} is empty")
    modes = manifest.integration_modes
    if not modes:
        problems.append("integration_modes is empty")
    if len(set(modes)) != len(modes):
        problems.append("integration_modes repeats a mode")
    for event, claim in manifest.lifecycle_events.items():
        unknown = [m.value for m in claim.modes if m not in modes]
        if unknown:
            problems.append(f"{event.value}: modes {unknown} are not integration modes")
        if claim.support is SupportState.UNAVAILABLE and claim.modes:
            problems.append(f"{event.value}: unavailable support names delivery modes")
        if claim.support is not SupportState.UNAVAILABLE and not claim.modes:
            problems.append(f"{event.value}: {claim.support.value} support names no mode")
    for placement, placed in manifest.placement.items():
        if placed.support is SupportState.UNAVAILABLE and placed.max_bytes is not None:
            problems.append(f"placement {placement.value}: unavailable but has max_bytes")
    if modes == [IntegrationMode.TELEMETRY_ONLY]:
        # Telemetry-only integrations observe; they cannot inject payloads.
        injecting = [
            p.value
            for p, c in manifest.placement.items()
            if c.support is not SupportState.UNAVAILABLE
        ]
        if injecting:
            problems.append(f"telemetry_only adapter claims payload placement {injecting}")
        if manifest.receipts.native:
            problems.append("telemetry_only adapter claims native receipts")
    if len(set(manifest.failure_modes)) != len(manifest.failure_modes):
        problems.append("failure_modes repeats a class")
    if not manifest.receipts.native and not manifest.receipts.lifeloop_synthesized:
        problems.append("receipts are neither native nor synthesized")
    return problems


def validate_manifest(manifest: AdapterManifest) -> AdapterManifest:
    """`manifest` if it conforms; `ManifestError` listing every problem otherwise."""
    problems = manifest_problems(manifest)
    if problems:
        raise ManifestError(problems)
    return manifest


_WRAPPER = [IntegrationMode.LAUNCHER_WRAPPER]
_SYNTHESIZED = EventClaim(support=SupportState.SYNTHESIZED, modes=_WRAPPER)
_UNAVAILABLE = EventClaim(support=SupportState.UNAVAILABLE)

SPRITES_MANIFEST = validate_manifest(
    AdapterManifest(
        contract_version=CONTRACT_VERSION,
        adapter_id="sprites",
        adapter_version="0.1.0",
        display_name="Lattice sprites (Sprites exec sessions)",
        role=AdapterRole.PRIMARY_WORKER,
        integration_modes=_WRAPPER,
        lifecycle_events={
            LifecycleEvent.SESSION_STARTING: _SYNTHESIZED,
            LifecycleEvent.SESSION_STARTED: _SYNTHESIZED,
            LifecycleEvent.FRAME_OPENING: _SYNTHESIZED,
            LifecycleEvent.FRAME_OPENED: _SYNTHESIZED,
            LifecycleEvent.CONTEXT_PRESSURE_OBSERVED: _UNAVAILABLE,
            LifecycleEvent.CONTEXT_COMPACTED: _UNAVAILABLE,
            LifecycleEvent.FRAME_ENDING: _SYNTHESIZED,
            LifecycleEvent.FRAME_ENDED: _SYNTHESIZED,
            LifecycleEvent.SESSION_ENDING: _SYNTHESIZED,
            LifecycleEvent.SESSION_ENDED: _SYNTHESIZED,
            LifecycleEvent.SUPERVISOR_TICK: _UNAVAILABLE,
            LifecycleEvent.CAPABILITY_DEGRADED: _SYNTHESIZED,
            LifecycleEvent.RECEIPT_EMITTED: _UNAVAILABLE,
            LifecycleEvent.RECEIPT_GAP_DETECTED: _SYNTHESIZED,
        },
        placement={p: PlacementClaim(support=SupportState.UNAVAILABLE) for p in ManifestPlacement},
        context_pressure=CapabilityClaim(
            support=SupportState.UNAVAILABLE,
            evidence="the sprite protocol carries no context-pressure signal",
        ),
        receipts=ReceiptsClaim(
            native=False,
            lifeloop_synthesized=True,
            receipt_ledger=SupportState.SYNTHESIZED,
        ),
        session_identity=SessionIdentityClaim(
            harness_session_id=SupportState.SYNTHESIZED,
            harness_run_id=SupportState.NATIVE,
            harness_task_id=SupportState.NATIVE,
        ),
        # Every class a receipt or a backend error of this adapter can carry (receipts
        # from the Run driver's failure table; errors from lattice_operator.ports.errors).
        failure_modes=[
            FailureClass.TRANSPORT_ERROR,
            FailureClass.TIMEOUT,
            FailureClass.CAPABILITY_DEGRADED,
            FailureClass.STATE_CONFLICT,
            FailureClass.ADAPTER_UNAVAILABLE,
            FailureClass.INTERNAL_ERROR,
            FailureClass.OPERATOR_REQUIRED,
            FailureClass.INVALID_REQUEST,
            FailureClass.PAYLOAD_TOO_LARGE,
        ],
        telemetry_sources=[
            TelemetrySource(
                name="stdout",
                description="LATTICE_EVENT lines on the exec session's stdout (fast, lossy)",
            ),
            TelemetrySource(
                name="outbox",
                description="/workspace/.lattice/outbox.jsonl read from a byte offset (canonical)",
            ),
        ],
        known_degradations=[
            KnownDegradation(
                capability="stdout_stream",
                previous_support=SupportState.NATIVE,
                current_support=SupportState.UNAVAILABLE,
                evidence="the exec WebSocket drops; events still arrive through the outbox",
            ),
            KnownDegradation(
                capability="outbox",
                previous_support=SupportState.NATIVE,
                current_support=SupportState.UNAVAILABLE,
                evidence="the outbox file cannot be read; events only from stdout, not durable",
            ),
            KnownDegradation(
                capability="checkpoint",
                previous_support=SupportState.NATIVE,
                current_support=SupportState.SYNTHESIZED,
                evidence="a WAITING names a checkpoint that does not exist; the operator takes one",
            ),
        ],
    )
)
"""The manifest of the `sprites` adapter."""

__all__ = [
    "SPRITES_MANIFEST",
    "AdapterManifest",
    "CapabilityClaim",
    "EventClaim",
    "KnownDegradation",
    "PlacementClaim",
    "ReceiptsClaim",
    "SessionIdentityClaim",
    "TelemetrySource",
    "manifest_problems",
    "validate_manifest",
]
