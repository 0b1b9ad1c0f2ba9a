"""The contract's "Conformance Expectations", one test (or a few) each, named after the
expectation. All fifteen apply: the `sprites` adapter is the Lattice wrapper, and the agents
that run in sprites (the v1 conformance manifests `claude` and `codex`, the pre-conformance
ones) are negotiated with before their exec, have their payloads placed, and are dispatched
synchronously (the exec's request/response unchanged). The detailed tests are in
test_negotiation.py, test_placement.py, test_registry.py and test_dispatch.py; the Run
driver's use of them in tests/unit/reconcilers/run/test_agent.py.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from lattice_operator.lifeloop import (
    DEFAULT_RETRY,
    SPRITES_MANIFEST,
    AdapterManifest,
    FailureClass,
    LifecycleEvent,
    ManifestError,
    PayloadPlacement,
    ReceiptStatus,
    RetryClass,
    RunTransition,
    SupportState,
    validate_manifest,
)
from lattice_operator.lifeloop.builder import RunReceipts
from lattice_operator.lifeloop.dispatch import dispatch, no_plan, plan_dispatch
from lattice_operator.lifeloop.negotiation import (
    Capability,
    CapabilityRequest,
    Outcome,
    Requirement,
    negotiate,
)
from lattice_operator.lifeloop.placement import Delivery, Payload, PlacementRequest, place
from lattice_operator.lifeloop.registry import REGISTRY, Conformance
from tests.support.lifeloop import PRODUCED_EVENTS, Clock, CountingIds, committed, receipts
from tests.support.streams import ev

LIFELOOP = Path(__file__).resolve().parents[3] / "operator" / "lattice_operator" / "lifeloop"


def test_manifest_schema_validation_for_every_shipped_adapter() -> None:
    assert SPRITES_MANIFEST is REGISTRY["sprites"].manifest
    for entry in REGISTRY.values():
        manifest = entry.manifest
        assert validate_manifest(AdapterManifest.model_validate(manifest.model_dump())) == manifest


def test_registry_backed_capability_claim_verification() -> None:
    # Each claim is paired with its code path (support.lifeloop.every_receipt for events,
    # test_registry.py for the v1 manifests' placement routes); this guards that the pairing
    # covers every lifecycle event and placement each v1 manifest mentions.
    v1 = [e for e in REGISTRY.values() if e.conformance is Conformance.V1]
    assert sorted(e.manifest.adapter_id for e in v1) == ["claude", "codex"]
    for entry in [REGISTRY["sprites"], *v1]:
        claimed = set(entry.manifest.lifecycle_events)
        assert claimed == set(LifecycleEvent)
        assert claimed >= PRODUCED_EVENTS
    for entry in v1:
        for placement, route in entry.routes.items():
            argv = (route.program or "x", "exec", "prompt")
            payload = _payload(PlacementRequest(placement, Requirement.REQUIRED))
            decision = place(entry.manifest, entry.routes, payload, argv)
            assert decision.placement is placement


def _payload(*placements: PlacementRequest, body: str = "ctx") -> Payload:
    return Payload(
        payload_id="pay-1",
        payload_kind="context",
        body=body,
        acceptable_placements=placements,
        file_path="/workspace/.lattice/context",
        env_name="LATTICE_CONTEXT_FILE",
    )


CLAUDE = REGISTRY["claude"]


def test_negotiation_required_preferred_optional() -> None:
    unsupported = Capability.CONTEXT_COMPACTED
    outcomes = {
        level: negotiate(
            CLAUDE.manifest, [CapabilityRequest(unsupported, level)], accept_partial=False
        )
        for level in Requirement
    }
    assert outcomes[Requirement.REQUIRED].refusal is FailureClass.CAPABILITY_UNSUPPORTED
    assert outcomes[Requirement.PREFERRED].refusal is None
    assert outcomes[Requirement.PREFERRED].warnings
    assert outcomes[Requirement.OPTIONAL].refusal is None
    assert outcomes[Requirement.OPTIONAL].warnings == ()
    satisfied = negotiate(
        CLAUDE.manifest,
        [CapabilityRequest(Capability.SESSION_STARTED, Requirement.REQUIRED)],
        accept_partial=False,
    )
    assert satisfied.results[0].outcome is Outcome.SATISFIED


def test_negotiation_partial_degrades_unless_accepted() -> None:
    events = dict(CLAUDE.manifest.lifecycle_events)
    events[LifecycleEvent.CONTEXT_COMPACTED] = events[LifecycleEvent.SESSION_STARTED].model_copy(
        update={"support": SupportState.PARTIAL}
    )
    manifest = CLAUDE.manifest.model_copy(update={"lifecycle_events": events})
    request = [CapabilityRequest(Capability.CONTEXT_COMPACTED, Requirement.REQUIRED)]
    assert negotiate(manifest, request, accept_partial=False).results[0].outcome is (
        Outcome.DEGRADED
    )
    assert negotiate(manifest, request, accept_partial=False).refusal is not None
    assert negotiate(manifest, request, accept_partial=True).refusal is None


def test_payload_placement_success_degradation_refusal() -> None:
    dev = PlacementRequest(PayloadPlacement.DEVELOPER_EQUIVALENT_FRAME, Requirement.PREFERRED)
    side = PlacementRequest(PayloadPlacement.SIDE_CHANNEL_CONTEXT, Requirement.REQUIRED)
    prompt = PlacementRequest(PayloadPlacement.PRE_PROMPT_FRAME, Requirement.REQUIRED)
    ok = place(CLAUDE.manifest, CLAUDE.routes, _payload(dev, side), ("claude", "-p", "x"))
    assert (ok.placement, ok.receipt.status) == (dev.placement, ReceiptStatus.DELIVERED)
    fallback = place(CLAUDE.manifest, CLAUDE.routes, _payload(dev, side), ("sh", "-c", "x"))
    assert (fallback.placement, fallback.receipt.status) == (
        side.placement,
        ReceiptStatus.DEGRADED,
    )
    refused = place(CLAUDE.manifest, CLAUDE.routes, _payload(prompt), ("sh", "-c", "x"))
    assert refused.failure_class is FailureClass.PLACEMENT_UNAVAILABLE


def test_synchronous_dispatch_preserves_the_command_response() -> None:
    response = object()
    calls: list[Delivery] = []

    async def invoke(delivery: Delivery) -> object:
        calls.append(delivery)
        return response

    emitted: list[object] = []
    book = receipts()
    for plan in (
        no_plan("sprites", ["sh", "-c", "true"]),
        plan_dispatch(
            CLAUDE,
            ["claude", "-p", "x"],
            capabilities=[],
            accept_partial=False,
            payloads=[
                _payload(
                    PlacementRequest(PayloadPlacement.SIDE_CHANNEL_CONTEXT, Requirement.REQUIRED)
                )
            ],
        ),
    ):
        got = asyncio.run(
            dispatch(
                plan,
                starting=lambda p: book.for_transition(
                    RunTransition.EXEC_STARTING, key="a1", plan=p
                ),
                emit=emitted.extend,
                invoke=invoke,
            )
        )
        assert got is response
    assert [c.argv for c in calls] == [("sh", "-c", "true"), ("claude", "-p", "x")]
    assert len(emitted) == 2


def test_receipt_ordering_and_idempotency() -> None:
    book = receipts()
    produced = []
    for i, raw in enumerate(
        [
            ev("PHASE_STARTED", {"phase": "a"}),
            ev("PHASE_FINISHED", {"phase": "a", "success": True}),
            ev("COMPLETED", {"status": "success"}),
        ]
    ):
        produced += book.for_event(committed(raw, i))
    ordered = sorted(produced, key=lambda r: (r.harness_session_id, r.sequence))
    assert ordered == produced
    assert [r.sequence for r in produced] == list(range(1, 6))
    replay = book.for_event(committed(ev("COMPLETED", {"status": "success"}), 2))
    assert replay == produced[-1:]


def test_receipt_schema_required_nullable_fields_present_even_when_null() -> None:
    (root,) = receipts().for_transition(RunTransition.EXEC_STARTING, key="x")
    wire = root.to_wire()
    assert wire["parent_receipt_id"] is None
    assert wire["failure_class"] is None
    assert "sequence" in wire
    assert "harness_task_id" in wire


def test_identifier_semantics_do_not_collapse_into_one_field() -> None:
    book = receipts()
    first, second = book.for_event(committed(ev("PHASE_STARTED", {"phase": "a"}), 3))
    # One observed fact: one event_id; two receipts: two receipt ids, sequences and keys.
    assert first.event_id == second.event_id
    assert first.receipt_id != second.receipt_id
    assert first.sequence != second.sequence
    assert first.idempotency_key != second.idempotency_key
    assert len({first.receipt_id, first.event_id, first.idempotency_key, str(first.sequence)}) == 4


def test_multi_event_invocations_share_invocation_id_and_chain_parents() -> None:
    book = receipts()
    ending, ended = book.for_transition(RunTransition.TIMED_OUT, key="attempt-1")
    assert ending.invocation_id == ended.invocation_id
    assert ending.parent_receipt_id is None
    assert ended.parent_receipt_id == ending.receipt_id
    (other,) = book.for_transition(RunTransition.EXEC_STARTED, key="exec-2")
    assert other.invocation_id != ending.invocation_id
    assert other.parent_receipt_id is None
    # One exec session (one transport invocation) across several calls: one id, a chain.
    session = [
        *book.for_transition(RunTransition.EXEC_STARTING, key="exec-3"),
        *book.for_transition(RunTransition.EXEC_STARTED, key="exec-3"),
        *book.for_transition(RunTransition.CANCELED, key="exec-3"),
    ]
    assert len({r.invocation_id for r in session}) == 1
    assert [r.parent_receipt_id for r in session] == [None] + [r.receipt_id for r in session[:-1]]


def test_stateless_first_slice_claims_no_state_it_does_not_have() -> None:
    # The manifest advertises a ledger, and the ledger's claims hold only through the state
    # the operator persists: a builder started without it begins a new sequence and knows
    # no earlier idempotency key (nothing is claimed across that boundary).
    assert SPRITES_MANIFEST.receipts.receipt_ledger.value == "synthesized"
    book = receipts()
    (first,) = book.for_transition(RunTransition.EXEC_STARTED, key="exec-1")
    fresh = RunReceipts(
        run_key="default/run-1", work_item_id="issue-17", clock=Clock(), ids=CountingIds()
    )
    fresh.ledger.begin()  # shift the fresh id counter so receipt ids cannot coincide
    (again,) = fresh.for_transition(RunTransition.EXEC_STARTED, key="exec-1")
    assert again.sequence == 1
    assert again.receipt_id != first.receipt_id


def test_telemetry_only_manifests_are_checked_separately() -> None:
    data = SPRITES_MANIFEST.model_dump(mode="json")
    data["integration_modes"] = ["telemetry_only"]
    data["lifecycle_events"] = {
        "session.started": {"support": "synthesized", "modes": ["telemetry_only"]}
    }
    observer = AdapterManifest.model_validate(data)
    assert validate_manifest(observer) == observer
    data["placement"] = {"pre_session": {"support": "native", "max_bytes": 100}}
    with pytest.raises(ManifestError, match="telemetry_only"):
        validate_manifest(AdapterManifest.model_validate(data))


def test_mid_session_capability_loss_is_surfaced() -> None:
    book = receipts()
    (receipt,) = book.for_transition(RunTransition.STDOUT_LOST, key="1", evidence="reset")
    assert receipt.event is LifecycleEvent.CAPABILITY_DEGRADED
    change = receipt.capability_degradations[0]
    assert change.previous_support.value == "native"
    assert change.current_support.value == "unavailable"


# The contract's "Default mapping" table, copied here by hand so that an edit of the
# implementation's table cannot change both sides of the check.
CONTRACT_DEFAULT_RETRY = {
    "adapter_unavailable": "retry_after_reconfigure",
    "capability_unsupported": "do_not_retry",
    "capability_degraded": "retry_after_reread",
    "placement_unavailable": "retry_after_reconfigure",
    "payload_too_large": "do_not_retry",
    "payload_rejected": "retry_after_reconfigure",
    "identity_unavailable": "retry_after_reconfigure",
    "transport_error": "safe_retry",
    "timeout": "safe_retry",
    "operator_required": "retry_after_operator",
    "state_conflict": "retry_after_reread",
    "invalid_request": "do_not_retry",
    "internal_error": "retry_after_reread",
}


def test_default_retry_table_is_the_contracts() -> None:
    assert {f.value: r.value for f, r in DEFAULT_RETRY.items()} == CONTRACT_DEFAULT_RETRY


def test_failure_class_mapping_for_every_adapter() -> None:
    assert len(FailureClass) == 13
    assert len(RetryClass) == 5
    assert set(DEFAULT_RETRY) == set(FailureClass)
    for adapter_id, entry in REGISTRY.items():
        book = receipts(adapter_id=adapter_id)
        refused = plan_dispatch(
            entry,
            ["sh"],
            capabilities=[CapabilityRequest(Capability.SUPERVISOR_TICK, Requirement.REQUIRED)],
            accept_partial=False,
            payloads=[],
        )
        produced = [
            *book.for_transition(RunTransition.SESSION_LOST, key="1"),
            *book.for_transition(RunTransition.TIMED_OUT, key="1"),
            *book.for_transition(RunTransition.STDOUT_LOST, key="1"),
            *book.for_transition(RunTransition.EXEC_STARTING, key="2", plan=refused),
        ]
        for receipt in produced:
            assert receipt.adapter_id == adapter_id
            assert receipt.failure_class is not None
            assert receipt.retry_class is DEFAULT_RETRY[receipt.failure_class]


def test_static_ownership_lifeloop_core_imports_no_client_or_framework_modules() -> None:
    """The contract-level modules import only the contract's own pieces (no kopf, no
    Kubernetes, no reconcilers or handlers, no protocol engine)."""
    core = [
        "vocabulary.py",
        "classes.py",
        "receipts.py",
        "ledger.py",
        "manifest.py",
        "errors.py",
        "negotiation.py",
        "placement.py",
        "registry.py",
        "dispatch.py",
    ]
    allowed = (
        "lattice_operator.lifeloop",
        "lattice_operator.errors",
        "lattice_operator.clock",
        "lattice_operator.modeling",
    )
    for name in core:
        tree = ast.parse((LIFELOOP / name).read_text())
        for node in ast.walk(tree):
            modules: list[str] = []
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            for module in modules:
                assert not module.startswith(("kopf", "kubernetes")), (name, module)
                if module.startswith("lattice_operator"):
                    assert module.startswith(allowed), (name, module)
