"""Capability negotiation: requirement levels, outcomes, and partial support."""

from __future__ import annotations

import pytest

from lattice_operator.lifeloop import FailureClass, LifecycleEvent, ReceiptStatus, SupportState
from lattice_operator.lifeloop.manifest import AdapterManifest, EventClaim
from lattice_operator.lifeloop.negotiation import (
    Capability,
    CapabilityRequest,
    Outcome,
    Requirement,
    capability_support,
    negotiate,
)
from lattice_operator.lifeloop.registry import REGISTRY
from lattice_operator.lifeloop.vocabulary import IntegrationMode, ManifestPlacement

CLAUDE = REGISTRY["claude"].manifest
WRAPPER = [IntegrationMode.LAUNCHER_WRAPPER]


def with_event(support: SupportState, event: LifecycleEvent) -> AdapterManifest:
    """CLAUDE with one event's support changed (no shipped manifest claims partial or manual)."""
    events = dict(CLAUDE.lifecycle_events)
    modes = [] if support is SupportState.UNAVAILABLE else WRAPPER
    events[event] = EventClaim(support=support, modes=modes)
    return CLAUDE.model_copy(update={"lifecycle_events": events})


def ask(name: Capability, requirement: Requirement) -> list[CapabilityRequest]:
    return [CapabilityRequest(name, requirement)]


def test_the_capability_vocabulary_is_every_manifest_claim() -> None:
    expected = (
        {e.value for e in LifecycleEvent}
        | {f"placement.{p.value}" for p in ManifestPlacement}
        | {"context_pressure", "receipts.ledger"}
        | {f"identity.harness_{n}_id" for n in ("session", "run", "task")}
    )
    assert {c.value for c in Capability} == expected


@pytest.mark.parametrize("adapter_id", sorted(REGISTRY))
def test_every_capability_reads_its_claim(adapter_id: str) -> None:
    manifest = REGISTRY[adapter_id].manifest
    identity = manifest.session_identity
    assert identity is not None
    for event, claim in manifest.lifecycle_events.items():
        assert capability_support(manifest, Capability(event.value)) is claim.support
    for placement, placed in manifest.placement.items():
        name = Capability(f"placement.{placement.value}")
        assert capability_support(manifest, name) is placed.support
    assert capability_support(manifest, Capability.CONTEXT_PRESSURE) is (
        manifest.context_pressure.support
    )
    assert capability_support(manifest, Capability.RECEIPT_LEDGER) is (
        manifest.receipts.receipt_ledger
    )
    assert capability_support(manifest, Capability.HARNESS_RUN_ID) is identity.harness_run_id


def test_required_satisfied_proceeds() -> None:
    result = negotiate(
        CLAUDE, ask(Capability.SESSION_STARTED, Requirement.REQUIRED), accept_partial=False
    )
    assert result.refusal is None
    assert result.results[0].outcome is Outcome.SATISFIED
    assert result.status is ReceiptStatus.OBSERVED
    assert result.warnings == ()


def test_required_unsupported_refuses_before_dispatch() -> None:
    result = negotiate(
        CLAUDE, ask(Capability.CONTEXT_COMPACTED, Requirement.REQUIRED), accept_partial=False
    )
    assert result.refusal is FailureClass.CAPABILITY_UNSUPPORTED
    assert result.refusal.default_retry.value == "do_not_retry"
    assert result.results[0].outcome is Outcome.UNSUPPORTED
    assert result.status is ReceiptStatus.FAILED
    assert "context.compacted" in result.message


def test_required_manual_requires_the_operator() -> None:
    manifest = with_event(SupportState.MANUAL, LifecycleEvent.SUPERVISOR_TICK)
    result = negotiate(
        manifest, ask(Capability.SUPERVISOR_TICK, Requirement.REQUIRED), accept_partial=True
    )
    assert result.results[0].outcome is Outcome.REQUIRES_OPERATOR
    assert result.refusal is FailureClass.OPERATOR_REQUIRED


def test_preferred_unsupported_proceeds_degraded_with_a_warning() -> None:
    result = negotiate(
        CLAUDE, ask(Capability.CONTEXT_PRESSURE, Requirement.PREFERRED), accept_partial=False
    )
    assert result.refusal is None
    assert result.status is ReceiptStatus.DEGRADED
    assert len(result.warnings) == 1
    assert "context_pressure" in result.warnings[0]


def test_optional_unsupported_is_omitted_without_a_warning() -> None:
    result = negotiate(
        CLAUDE, ask(Capability.CONTEXT_PRESSURE, Requirement.OPTIONAL), accept_partial=False
    )
    assert result.refusal is None
    assert result.results[0].outcome is Outcome.UNSUPPORTED
    assert result.warnings == ()
    assert result.status is ReceiptStatus.OBSERVED


@pytest.mark.parametrize("requirement", list(Requirement))
def test_partial_degrades_unless_accepted(requirement: Requirement) -> None:
    manifest = with_event(SupportState.PARTIAL, LifecycleEvent.CONTEXT_COMPACTED)
    request = ask(Capability.CONTEXT_COMPACTED, requirement)
    refused = negotiate(manifest, request, accept_partial=False)
    assert refused.results[0].outcome is Outcome.DEGRADED
    if requirement is Requirement.REQUIRED:
        assert refused.refusal is FailureClass.CAPABILITY_UNSUPPORTED
        assert "acceptPartial" in refused.message
    elif requirement is Requirement.PREFERRED:
        assert (refused.refusal, refused.status) == (None, ReceiptStatus.DEGRADED)
    else:
        assert (refused.refusal, refused.status) == (None, ReceiptStatus.OBSERVED)
    accepted = negotiate(manifest, request, accept_partial=True)
    assert accepted.results[0].outcome is Outcome.SATISFIED
    assert (accepted.refusal, accepted.status, accepted.warnings) == (
        None,
        ReceiptStatus.OBSERVED,
        (),
    )


def test_an_unsupported_required_capability_outweighs_a_manual_one() -> None:
    manifest = with_event(SupportState.MANUAL, LifecycleEvent.SUPERVISOR_TICK)
    result = negotiate(
        manifest,
        [
            CapabilityRequest(Capability.SUPERVISOR_TICK, Requirement.REQUIRED),
            CapabilityRequest(Capability.CONTEXT_COMPACTED, Requirement.REQUIRED),
        ],
        accept_partial=False,
    )
    assert result.refusal is FailureClass.CAPABILITY_UNSUPPORTED
    assert [r.outcome for r in result.results] == [Outcome.REQUIRES_OPERATOR, Outcome.UNSUPPORTED]
