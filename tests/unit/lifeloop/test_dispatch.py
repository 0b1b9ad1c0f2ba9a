"""Synchronous dispatch: negotiation and placement before the exec, the exec's response
unchanged, and one invocation (shared id, chained parents) per exec session."""

from __future__ import annotations

import asyncio

from lattice_operator.lifeloop import (
    FailureClass,
    LifecycleEvent,
    PayloadPlacement,
    ReceiptStatus,
    RunReceiptsState,
    RunTransition,
)
from lattice_operator.lifeloop.dispatch import DispatchPlan, dispatch, no_plan, plan_dispatch
from lattice_operator.lifeloop.negotiation import Capability, CapabilityRequest, Requirement
from lattice_operator.lifeloop.placement import Delivery, Payload, PlacementRequest
from lattice_operator.lifeloop.receipts import LifecycleReceipt
from lattice_operator.lifeloop.registry import REGISTRY
from tests.support.lifeloop import committed, receipts
from tests.support.streams import ev

CLAUDE = REGISTRY["claude"]
ARGV = ["claude", "-p", "fix the bug"]


def context(*placements: tuple[PayloadPlacement, Requirement]) -> Payload:
    return Payload(
        payload_id="context-s1",
        payload_kind="context",
        body="ctx",
        acceptable_placements=tuple(PlacementRequest(p, r) for p, r in placements),
        file_path="/workspace/.lattice/context",
        env_name="LATTICE_CONTEXT_FILE",
    )


def plan(
    capabilities: list[CapabilityRequest] | None = None, payloads: list[Payload] | None = None
) -> DispatchPlan:
    return plan_dispatch(
        CLAUDE, ARGV, capabilities=capabilities or [], accept_partial=False, payloads=payloads or []
    )


class Exec:
    """Stands in for the exec: records what it was asked, answers one response object."""

    def __init__(self) -> None:
        self.calls: list[Delivery] = []
        self.response = object()

    async def __call__(self, delivery: Delivery) -> object:
        self.calls.append(delivery)
        return self.response


def run_dispatch(
    the_plan: DispatchPlan,
) -> tuple[object | None, Exec, list[LifecycleReceipt]]:
    book = receipts(adapter_id="claude")
    book.set_session("exec-1")
    emitted: list[LifecycleReceipt] = []
    invoke = Exec()
    response = asyncio.run(
        dispatch(
            the_plan,
            starting=lambda p: book.for_transition(RunTransition.EXEC_STARTING, key="a1", plan=p),
            emit=emitted.extend,
            invoke=invoke,
        )
    )
    return response, invoke, emitted


def test_the_exec_response_comes_back_unchanged() -> None:
    the_plan = plan(
        payloads=[context((PayloadPlacement.DEVELOPER_EQUIVALENT_FRAME, Requirement.REQUIRED))]
    )
    response, invoke, emitted = run_dispatch(the_plan)
    assert response is invoke.response
    (delivery,) = invoke.calls
    assert delivery.argv == ("claude", "--append-system-prompt", "ctx", "-p", "fix the bug")
    (starting,) = emitted
    assert (starting.event, starting.status) == (
        LifecycleEvent.SESSION_STARTING,
        ReceiptStatus.DELIVERED,
    )
    assert [p.placement for p in starting.payload_receipts] == [
        PayloadPlacement.DEVELOPER_EQUIVALENT_FRAME
    ]


def test_a_plain_run_dispatches_as_before() -> None:
    response, invoke, emitted = run_dispatch(no_plan("sprites", ["sh", "-c", "true"]))
    assert response is invoke.response
    assert invoke.calls[0].argv == ("sh", "-c", "true")
    plain = receipts(adapter_id="claude")
    plain.set_session("exec-1")
    (expected,) = plain.for_transition(RunTransition.EXEC_STARTING, key="a1")
    assert emitted == [expected]  # the very receipt a Run without an agent always had


def test_a_refused_dispatch_makes_no_exec_and_says_why() -> None:
    the_plan = plan(
        capabilities=[CapabilityRequest(Capability.CONTEXT_COMPACTED, Requirement.REQUIRED)],
        payloads=[context((PayloadPlacement.SIDE_CHANNEL_CONTEXT, Requirement.REQUIRED))],
    )
    response, invoke, emitted = run_dispatch(the_plan)
    assert response is None
    assert invoke.calls == []
    (starting,) = emitted
    assert starting.status is ReceiptStatus.FAILED
    assert starting.failure_class is FailureClass.CAPABILITY_UNSUPPORTED
    assert starting.retry_class is not None
    assert starting.retry_class.value == "do_not_retry"
    assert starting.telemetry_summary["negotiation"] == {"context.compacted": "unsupported"}
    assert starting.payload_receipts == []  # nothing placed once refused
    assert any("context.compacted" in w for w in starting.warnings)


def test_a_refused_placement_makes_no_exec() -> None:
    the_plan = plan(payloads=[context((PayloadPlacement.PRE_PROMPT_FRAME, Requirement.REQUIRED))])
    assert the_plan.refusal is None
    refused = plan_dispatch(
        REGISTRY["codex"],
        ["sh", "-c", "codex exec hi"],
        capabilities=[],
        accept_partial=False,
        payloads=[context((PayloadPlacement.PRE_PROMPT_FRAME, Requirement.REQUIRED))],
    )
    assert refused.refusal is FailureClass.PLACEMENT_UNAVAILABLE
    response, invoke, emitted = run_dispatch(refused)
    assert (response, invoke.calls) == (None, [])
    assert emitted[0].payload_receipts[0].status is ReceiptStatus.FAILED


def test_a_degraded_dispatch_runs_with_its_warnings() -> None:
    the_plan = plan(
        capabilities=[CapabilityRequest(Capability.CONTEXT_PRESSURE, Requirement.PREFERRED)],
        payloads=[context((PayloadPlacement.SIDE_CHANNEL_CONTEXT, Requirement.REQUIRED))],
    )
    response, invoke, emitted = run_dispatch(the_plan)
    assert response is invoke.response
    assert invoke.calls[0].env == {"LATTICE_CONTEXT_FILE": "/workspace/.lattice/context"}
    assert invoke.calls[0].files == {"/workspace/.lattice/context": b"ctx"}
    assert emitted[0].status is ReceiptStatus.DEGRADED
    assert any("context_pressure" in w for w in emitted[0].warnings)


def test_payloads_compose_in_order() -> None:
    the_plan = plan(
        payloads=[
            context((PayloadPlacement.DEVELOPER_EQUIVALENT_FRAME, Requirement.REQUIRED)),
            context((PayloadPlacement.PRE_PROMPT_FRAME, Requirement.REQUIRED)),
        ]
    )
    assert the_plan.delivery.argv == (
        "claude",
        "--append-system-prompt",
        "ctx",
        "-p",
        "ctx\n\nfix the bug",
    )


def session_receipts(state: RunReceiptsState | None = None) -> list[LifecycleReceipt]:
    book = receipts(state=state)
    book.set_session("exec-1")
    out = book.for_transition(RunTransition.EXEC_STARTING, key="a1")
    out += book.for_transition(RunTransition.EXEC_STARTED, key="a1")
    out += book.for_event(committed(ev("PHASE_STARTED", {"phase": "a"}), 1))
    out += book.for_transition(RunTransition.STDOUT_LOST, key="a1")
    out += book.for_event(committed(ev("COMPLETED", {"status": "success"}), 2))
    out += book.for_transition(RunTransition.EXEC_EXITED, key="a1")
    return out


def test_one_exec_session_is_one_invocation_chained_in_order() -> None:
    produced = session_receipts()
    assert [r.event.value for r in produced] == [
        "session.starting",
        "session.started",
        "frame.opening",
        "frame.opened",
        "capability.degraded",
        "session.ending",
        "session.ended",
    ]
    assert len({r.invocation_id for r in produced}) == 1
    assert [r.parent_receipt_id for r in produced] == [None] + [r.receipt_id for r in produced[:-1]]


def test_the_invocation_survives_a_restart_and_ends_with_the_session() -> None:
    book = receipts()
    (starting,) = book.for_transition(RunTransition.EXEC_STARTING, key="a1")
    state = RunReceiptsState.model_validate_json(book.state.model_dump_json(by_alias=True))
    assert state.invocation_id == starting.invocation_id
    restored = receipts(state=state)
    (started,) = restored.for_transition(RunTransition.EXEC_STARTED, key="a1")
    assert started.invocation_id == starting.invocation_id
    assert started.parent_receipt_id == starting.receipt_id
    restored.for_transition(RunTransition.EXEC_EXITED, key="a1")
    assert restored.state.invocation_id is None
    (later,) = restored.for_transition(RunTransition.RESUME_STARTING, key="a1-s2")
    assert later.invocation_id != starting.invocation_id
    assert later.parent_receipt_id is None


def test_a_refused_start_opens_no_invocation() -> None:
    book = receipts(adapter_id="claude")
    refused = plan(
        capabilities=[CapabilityRequest(Capability.CONTEXT_COMPACTED, Requirement.REQUIRED)]
    )
    book.for_transition(RunTransition.EXEC_STARTING, key="a1", plan=refused)
    assert book.state.invocation_id is None
