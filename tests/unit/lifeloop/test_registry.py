"""The manifest registry, and each claim of the v1 conformance manifests (claude, codex)
paired with the code path it depends on ("registry-backed capability-claim verification")."""

from __future__ import annotations

from typing import get_args

import pytest

from lattice_operator.api.v1alpha1.run import RunAgent
from lattice_operator.lifeloop import (
    SPRITES_MANIFEST,
    FailureClass,
    LifecycleEvent,
    ManifestPlacement,
    PayloadPlacement,
    ReceiptStatus,
    SupportState,
)
from lattice_operator.lifeloop.manifest import manifest_problems
from lattice_operator.lifeloop.negotiation import (
    Capability,
    CapabilityRequest,
    Requirement,
    negotiate,
)
from lattice_operator.lifeloop.placement import Payload, PlacementRequest, Route, place
from lattice_operator.lifeloop.registry import (
    AGENT_ADAPTERS,
    REGISTRY,
    AgentAdapterId,
    Conformance,
    UnknownAdapter,
    lookup,
)
from tests.support.lifeloop import every_receipt

V1 = ["claude", "codex"]


def test_lookup_by_adapter_id() -> None:
    for adapter_id, entry in REGISTRY.items():
        assert lookup(adapter_id) is entry
        assert entry.manifest.adapter_id == adapter_id  # round-trips
    with pytest.raises(UnknownAdapter, match="registered: claude, codex"):
        lookup("gpt-9")


def test_the_contracts_adapters_are_registered_and_marked() -> None:
    by = {c: sorted(a for a, e in REGISTRY.items() if e.conformance is c) for c in Conformance}
    assert by[Conformance.V1] == V1
    assert by[Conformance.PRE_CONFORMANCE] == ["gemini", "hermes", "openclaw", "opencode"]
    assert by[Conformance.LATTICE] == ["sprites"]
    assert set(AGENT_ADAPTERS) == set(get_args(AgentAdapterId)) == set(REGISTRY) - {"sprites"}


def test_a_runs_agent_names_a_registered_adapter() -> None:
    with pytest.raises(ValueError, match="adapter"):
        RunAgent.model_validate({"adapter": "gpt-9"})
    with pytest.raises(ValueError, match=r"capabilities\.0\.name"):
        RunAgent.model_validate({"adapter": "claude", "capabilities": [{"name": "telepathy"}]})


@pytest.mark.parametrize("adapter_id", sorted(REGISTRY))
def test_every_manifest_conforms(adapter_id: str) -> None:
    assert manifest_problems(REGISTRY[adapter_id].manifest) == []


def _argv_for(route: Route) -> tuple[str, ...]:
    return (route.program or "agent", "exec", "the prompt")


def _through(adapter_id: str, placement: PayloadPlacement, body: str = "ctx") -> Payload:
    return Payload(
        payload_id="p1",
        payload_kind="context",
        body=body,
        acceptable_placements=(PlacementRequest(placement, Requirement.REQUIRED),),
        file_path="/workspace/.lattice/context",
        env_name="LATTICE_CONTEXT_FILE",
    )


@pytest.mark.parametrize("adapter_id", V1)
def test_each_placement_claim_is_what_a_route_delivers(adapter_id: str) -> None:
    entry = REGISTRY[adapter_id]
    routed = {r.position for r in entry.routes.values() if r.position is not None}
    for position, claim in entry.manifest.placement.items():
        claimed = claim.support is not SupportState.UNAVAILABLE
        assert claimed == (position in routed), position
        if claimed:
            limits = [r.max_bytes for r in entry.routes.values() if r.position is position]
            assert claim.max_bytes == max(x or 0 for x in limits)


ROUTES = [(a, p) for a in V1 for p in REGISTRY[a].routes]


@pytest.mark.parametrize(("adapter_id", "placement"), ROUTES)
def test_each_route_places_its_payload(adapter_id: str, placement: PayloadPlacement) -> None:
    entry = REGISTRY[adapter_id]
    route = entry.routes[placement]
    argv = _argv_for(route)
    decision = place(entry.manifest, entry.routes, _through(adapter_id, placement), argv)
    assert (decision.placement, decision.receipt.status) == (placement, ReceiptStatus.DELIVERED)
    delivered = decision.delivery
    if route.kind == "file":
        assert delivered.files == {"/workspace/.lattice/context": b"ctx"}
        assert delivered.env == {"LATTICE_CONTEXT_FILE": "/workspace/.lattice/context"}
    elif route.kind == "argv_flag":
        assert delivered.argv == (argv[0], route.flag, "ctx", *argv[1:])
    elif route.kind == "prompt_prefix":
        assert delivered.argv[-1] == "ctx\n\nthe prompt"
    else:
        assert delivered.argv == argv
        assert not delivered.files
        assert not delivered.env
    if route.max_bytes is not None:
        big = _through(adapter_id, placement, body="x" * (route.max_bytes + 1))
        too_big = place(entry.manifest, entry.routes, big, argv)
        assert too_big.failure_class is FailureClass.PAYLOAD_TOO_LARGE


@pytest.mark.parametrize("adapter_id", V1)
def test_each_placement_without_a_route_is_refused(adapter_id: str) -> None:
    entry = REGISTRY[adapter_id]
    for placement in set(PayloadPlacement) - set(entry.routes):
        argv = (adapter_id, "exec", "p")
        decision = place(entry.manifest, entry.routes, _through(adapter_id, placement), argv)
        assert decision.failure_class is FailureClass.PLACEMENT_UNAVAILABLE


def test_codex_has_no_developer_equivalent_frame_and_claude_has() -> None:
    assert PayloadPlacement.DEVELOPER_EQUIVALENT_FRAME not in REGISTRY["codex"].routes
    assert REGISTRY["claude"].routes[PayloadPlacement.DEVELOPER_EQUIVALENT_FRAME].flag == (
        "--append-system-prompt"
    )
    for adapter_id in V1:
        placement = REGISTRY[adapter_id].manifest.placement
        assert placement[ManifestPlacement.TOOL_RESULT].support is SupportState.UNAVAILABLE
        assert placement[ManifestPlacement.MANUAL_OPERATOR].support is SupportState.UNAVAILABLE


@pytest.mark.parametrize("adapter_id", V1)
def test_lifecycle_claims_are_what_the_receipts_of_that_adapter_show(adapter_id: str) -> None:
    manifest = REGISTRY[adapter_id].manifest
    produced = every_receipt(adapter_id)
    events = {r.event for r in produced}
    for event, claim in manifest.lifecycle_events.items():
        assert (claim.support is not SupportState.UNAVAILABLE) == (event in events), event
    assert {r.adapter_id for r in produced} == {adapter_id}
    assert {r.integration_mode for r in produced} == {"launcher_wrapper"}
    assert manifest.integration_modes == SPRITES_MANIFEST.integration_modes
    assert manifest.context_pressure.support is SupportState.UNAVAILABLE
    assert LifecycleEvent.CONTEXT_PRESSURE_OBSERVED not in events
    assert manifest.receipts == SPRITES_MANIFEST.receipts
    assert manifest.session_identity == SPRITES_MANIFEST.session_identity
    started = next(r for r in produced if r.event is LifecycleEvent.SESSION_STARTED)
    assert (started.harness_session_id, started.harness_run_id, started.harness_task_id) == (
        "default/run-1",
        "exec-1",
        "issue-17",
    )


@pytest.mark.parametrize("adapter_id", V1)
def test_failure_modes_are_the_sprites_and_what_negotiation_and_placement_report(
    adapter_id: str,
) -> None:
    entry = REGISTRY[adapter_id]
    refused = negotiate(
        entry.manifest,
        [CapabilityRequest(Capability.CONTEXT_COMPACTED, Requirement.REQUIRED)],
        accept_partial=False,
    ).refusal
    unplaced = place(
        entry.manifest,
        entry.routes,
        _through(adapter_id, PayloadPlacement.SIDE_CHANNEL_CONTEXT, body="x" * 70000),
        ("sh",),
    ).failure_class
    missing = place(
        entry.manifest,
        entry.routes,
        _through(adapter_id, PayloadPlacement.PRE_PROMPT_FRAME),
        ("sh", "-c", "true"),
    ).failure_class
    reported = {refused, unplaced, missing}
    assert reported == {
        FailureClass.CAPABILITY_UNSUPPORTED,
        FailureClass.PAYLOAD_TOO_LARGE,
        FailureClass.PLACEMENT_UNAVAILABLE,
    }
    assert set(entry.manifest.failure_modes) == set(SPRITES_MANIFEST.failure_modes) | reported
