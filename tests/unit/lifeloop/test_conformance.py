"""The contract's "Conformance Expectations" that apply to this adapter, one test (or a few)
each, named after the expectation.

Not applicable here, and therefore not tested: capability and placement negotiation
(`required`/`preferred`/`optional`, `partial` acceptance) and payload placement — the
`sprites` adapter negotiates nothing and places no payloads (its manifest says so, and
test_manifest.py proves no receipt carries a payload) — and synchronous compatibility
dispatch (there is no pre-existing command whose response must be preserved).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lattice_operator.lifeloop import (
    DEFAULT_RETRY,
    SPRITES_MANIFEST,
    AdapterManifest,
    FailureClass,
    LifecycleEvent,
    ManifestError,
    RetryClass,
    RunTransition,
    validate_manifest,
)
from lattice_operator.lifeloop.builder import RunReceipts
from tests.support.lifeloop import PRODUCED_EVENTS, Clock, CountingIds, committed, receipts
from tests.support.streams import ev

LIFELOOP = Path(__file__).resolve().parents[3] / "operator" / "lattice_operator" / "lifeloop"


def test_manifest_schema_validation_for_every_shipped_adapter() -> None:
    for manifest in (SPRITES_MANIFEST,):
        assert validate_manifest(AdapterManifest.model_validate(manifest.model_dump())) == manifest


def test_registry_backed_capability_claim_verification() -> None:
    # Each claim is paired with its code path (support.lifeloop.every_receipt); this guards
    # that the pairing covers every lifecycle event the manifest mentions.
    claimed = set(SPRITES_MANIFEST.lifecycle_events)
    assert claimed == set(LifecycleEvent)
    assert claimed >= PRODUCED_EVENTS


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
    book = receipts()
    produced = [
        *book.for_transition(RunTransition.SESSION_LOST, key="1"),
        *book.for_transition(RunTransition.TIMED_OUT, key="1"),
        *book.for_transition(RunTransition.STDOUT_LOST, key="1"),
    ]
    for receipt in produced:
        assert receipt.failure_class is not None
        assert receipt.retry_class is DEFAULT_RETRY[receipt.failure_class]


def test_static_ownership_lifeloop_core_imports_no_client_or_framework_modules() -> None:
    """The contract-level modules import only the contract's own pieces (no kopf, no
    Kubernetes, no reconcilers or handlers, no protocol engine)."""
    core = ["vocabulary.py", "classes.py", "receipts.py", "ledger.py", "manifest.py", "errors.py"]
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
