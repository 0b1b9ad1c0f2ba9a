"""Manifest rules, and every claim of the `sprites` manifest paired with the code that makes it
true ("registry-backed capability-claim verification")."""

from __future__ import annotations

from typing import Any

import pytest

from lattice_operator.lifeloop import (
    SPRITES_MANIFEST,
    AdapterManifest,
    FailureClass,
    IntegrationMode,
    LifecycleEvent,
    ManifestError,
    RunReceiptsState,
    RunTransition,
    SupportState,
    validate_manifest,
)
from lattice_operator.lifeloop.manifest import manifest_problems
from lattice_operator.lifeloop.mapping import LIFECYCLE_MAP
from lattice_operator.ports.errors import AdapterError
from lattice_operator.protocol import RunEventEngine
from lattice_operator.reconcilers.run import FAILURE_CLASSES
from tests.support.lifeloop import PRODUCED, PRODUCED_EVENTS, receipts
from tests.support.streams import PREFIX, SPRITE, WORK, info


def test_the_sprites_manifest_conforms() -> None:
    assert manifest_problems(SPRITES_MANIFEST) == []
    assert SPRITES_MANIFEST.adapter_id == "sprites"
    assert SPRITES_MANIFEST.contract_version == "lifeloop.v0.2"
    assert set(SPRITES_MANIFEST.lifecycle_events) == set(LifecycleEvent)  # nothing left unsaid


@pytest.mark.parametrize(
    "event",
    [
        e
        for e, c in SPRITES_MANIFEST.lifecycle_events.items()
        if c.support is not SupportState.UNAVAILABLE
    ],
)
def test_each_claimed_lifecycle_event_is_produced(event: LifecycleEvent) -> None:
    assert event in PRODUCED_EVENTS


@pytest.mark.parametrize(
    "event",
    [
        e
        for e, c in SPRITES_MANIFEST.lifecycle_events.items()
        if c.support is SupportState.UNAVAILABLE
    ],
)
def test_each_unavailable_lifecycle_event_is_never_produced(event: LifecycleEvent) -> None:
    assert event not in PRODUCED_EVENTS


def test_no_payload_placement_is_claimed_or_done() -> None:
    assert all(c.support is SupportState.UNAVAILABLE for c in SPRITES_MANIFEST.placement.values())
    assert all(r.payload_receipts == [] for r in PRODUCED)


def test_context_pressure_is_unavailable_and_never_reported() -> None:
    assert SPRITES_MANIFEST.context_pressure.support is SupportState.UNAVAILABLE
    assert LifecycleEvent.CONTEXT_PRESSURE_OBSERVED not in PRODUCED_EVENTS


def test_receipts_are_synthesized_by_the_launcher_wrapper() -> None:
    assert SPRITES_MANIFEST.receipts.lifeloop_synthesized
    assert not SPRITES_MANIFEST.receipts.native
    assert SPRITES_MANIFEST.integration_modes == [IntegrationMode.LAUNCHER_WRAPPER]
    assert {r.integration_mode for r in PRODUCED} == {"launcher_wrapper"}
    assert {r.adapter_id for r in PRODUCED} == {"sprites"}


def test_the_receipt_ledger_claim_is_durable() -> None:
    """receipt_ledger=synthesized: sequence and idempotency survive the persisted state."""
    assert SPRITES_MANIFEST.receipts.receipt_ledger is SupportState.SYNTHESIZED
    book = receipts()
    first = book.for_transition(RunTransition.EXEC_STARTED, key="exec-1")
    state = RunReceiptsState.model_validate_json(book.state.model_dump_json(by_alias=True))
    restored = receipts(state)
    assert restored.for_transition(RunTransition.EXEC_STARTED, key="exec-1") == first
    assert restored.for_transition(RunTransition.EXEC_EXITED, key="exec-1")[0].sequence == 2
    assert [g.event for g in restored.audit([2])] == [LifecycleEvent.RECEIPT_GAP_DETECTED]


def test_session_identity_claims() -> None:
    identity = SPRITES_MANIFEST.session_identity
    assert identity is not None
    started = next(r for r in PRODUCED if r.event is LifecycleEvent.SESSION_STARTED)
    assert identity.harness_session_id is SupportState.SYNTHESIZED
    assert started.harness_session_id == "default/run-1"  # the Run, chosen by us
    assert identity.harness_run_id is SupportState.NATIVE
    assert started.harness_run_id == "exec-1"  # the backend's exec session id
    assert identity.harness_task_id is SupportState.NATIVE
    assert started.harness_task_id == "issue-17"  # the work item the sprite echoes


def _adapter_failure_classes() -> set[FailureClass]:
    """The failure class of every exception in lattice_adapters' one exception tree."""
    classes: set[FailureClass] = set()
    pending: list[type[AdapterError]] = [AdapterError]
    while pending:
        cls = pending.pop()
        classes.add(cls.failure_class)
        pending.extend(cls.__subclasses__())
    return classes


def test_failure_modes_are_exactly_what_the_adapter_and_driver_can_report() -> None:
    reportable = (
        {r.failure_class for r in PRODUCED if r.failure_class is not None}
        | set(FAILURE_CLASSES.values())
        | _adapter_failure_classes()
    )
    assert set(SPRITES_MANIFEST.failure_modes) == reportable


def _degrading_steps() -> set[tuple[str, SupportState]]:
    return {
        (step.capability, step.support)
        for steps in LIFECYCLE_MAP.values()
        for step in steps
        if step.capability is not None
        and step.support is not None
        and step.support is not SupportState.NATIVE
    }


def test_known_degradations_are_exactly_the_degrading_transitions() -> None:
    listed = {(k.capability, k.current_support) for k in SPRITES_MANIFEST.known_degradations}
    assert listed == _degrading_steps()
    assert all(
        k.previous_support is SupportState.NATIVE for k in SPRITES_MANIFEST.known_degradations
    )


@pytest.mark.parametrize(
    ("capability", "transition"),
    [
        ("stdout_stream", RunTransition.STDOUT_LOST),
        ("outbox", RunTransition.OUTBOX_UNREADABLE),
        ("checkpoint", RunTransition.CHECKPOINT_SYNTHESIZED),
    ],
)
def test_each_known_degradation_is_what_its_transition_reports(
    capability: str, transition: RunTransition
) -> None:
    (known,) = [k for k in SPRITES_MANIFEST.known_degradations if k.capability == capability]
    (receipt,) = receipts().for_transition(transition, key="1")
    (change,) = receipt.capability_degradations
    assert (change.capability, change.previous_support, change.current_support) == (
        known.capability,
        known.previous_support,
        known.current_support,
    )


def test_both_telemetry_sources_feed_the_engine() -> None:
    assert [s.name for s in SPRITES_MANIFEST.telemetry_sources] == ["stdout", "outbox"]
    engine = RunEventEngine(SPRITE, WORK)
    assert engine.feed_stdout(PREFIX + info("x") + b"\n").provisional == 1
    assert len(engine.feed_outbox(info("x") + b"\n").committed) == 1


# -- the rules ------------------------------------------------------------------------------------


def variant(**changes: Any) -> AdapterManifest:
    data = SPRITES_MANIFEST.model_dump(mode="json")
    data.update(changes)
    return AdapterManifest.model_validate(data)


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"contract_version": "lifeloop.v0.1"}, "contract_version"),
        ({"adapter_id": "Sprites!"}, "adapter_id"),
        ({"display_name": " "}, "display_name"),
        ({"integration_modes": []}, "integration_modes is empty"),
        ({"integration_modes": ["launcher_wrapper", "launcher_wrapper"]}, "repeats a mode"),
        (
            {
                "lifecycle_events": {
                    "session.started": {"support": "native", "modes": ["native_hook"]}
                }
            },
            "not integration modes",
        ),
        (
            {
                "lifecycle_events": {
                    "session.started": {"support": "unavailable", "modes": ["launcher_wrapper"]}
                }
            },
            "unavailable support names delivery modes",
        ),
        (
            {"lifecycle_events": {"session.started": {"support": "native", "modes": []}}},
            "names no mode",
        ),
        (
            {"placement": {"pre_session": {"support": "unavailable", "max_bytes": 10}}},
            "unavailable but has max_bytes",
        ),
        ({"failure_modes": ["timeout", "timeout"]}, "repeats a class"),
        (
            {
                "receipts": {
                    "native": False,
                    "lifeloop_synthesized": False,
                    "receipt_ledger": "unavailable",
                }
            },
            "neither native nor synthesized",
        ),
    ],
)
def test_each_rule(changes: dict[str, Any], problem: str) -> None:
    manifest = variant(**changes)
    with pytest.raises(ManifestError) as caught:
        validate_manifest(manifest)
    assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_unknown_vocabulary_is_refused_by_the_model() -> None:
    with pytest.raises(ValueError, match="role"):
        variant(role="boss")
    with pytest.raises(ValueError, match="lifecycle_events"):
        variant(lifecycle_events={"session.paused": {"support": "native"}})
    with pytest.raises(ValueError, match="failure_modes"):
        variant(failure_modes=["oops"])


def test_failure_modes_are_contract_failure_classes() -> None:
    assert all(isinstance(f, FailureClass) for f in SPRITES_MANIFEST.failure_modes)
