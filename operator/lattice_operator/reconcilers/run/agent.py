"""A Run's agent (spec.agent) for Lifeloop: the dispatch plan of a session start or a resume,
the reasons a refused one ends with, and what status.agent shows. Pure (no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from lattice_operator.api.v1alpha1 import Run
from lattice_operator.api.v1alpha1.run import (
    AgentCapabilityStatus,
    AgentPlacement,
    AgentPlacementStatus,
    RunAgentStatus,
)
from lattice_operator.lifeloop.builder import ADAPTER_ID
from lattice_operator.lifeloop.classes import FailureClass
from lattice_operator.lifeloop.dispatch import DispatchPlan, no_plan, plan_dispatch
from lattice_operator.lifeloop.negotiation import CapabilityRequest
from lattice_operator.lifeloop.placement import Payload, PlacementRequest
from lattice_operator.lifeloop.registry import lookup
from lattice_operator.lifeloop.vocabulary import ReceiptStatus
from lattice_operator.reconcilers.run.decisions import RESUME_PATH
from lattice_operator.reconcilers.run.reasons import EndReason

CONTEXT_PATH = "/workspace/.lattice/context"
"""Where the side_channel_context route writes the context (named by LATTICE_CONTEXT_FILE)."""
CONTEXT_ENV = "LATTICE_CONTEXT_FILE"
RESUME_ENV = "LATTICE_RESUME_FILE"

REFUSED: Mapping[FailureClass, EndReason] = {
    FailureClass.CAPABILITY_UNSUPPORTED: EndReason.CAPABILITY_UNSUPPORTED,
    FailureClass.OPERATOR_REQUIRED: EndReason.OPERATOR_REQUIRED,
    FailureClass.PLACEMENT_UNAVAILABLE: EndReason.PLACEMENT_UNAVAILABLE,
    FailureClass.PAYLOAD_TOO_LARGE: EndReason.PAYLOAD_TOO_LARGE,
}
"""The Run's end reason for each failure class a refused dispatch can carry."""

PayloadName = Literal["context", "resume"]


def adapter_id_of(run: Run) -> str:
    """The adapter the Run's receipts are for."""
    return run.spec.agent.adapter if run.spec.agent is not None else ADAPTER_ID


def _requests(placements: list[AgentPlacement]) -> tuple[PlacementRequest, ...]:
    return tuple(PlacementRequest(p.placement, p.requirement) for p in placements)


def start_plan(run: Run, argv: list[str], segment: int) -> DispatchPlan:
    """A session start: the capabilities negotiated, spec.agent.context placed."""
    agent = run.spec.agent
    if agent is None:
        return no_plan(ADAPTER_ID, argv)
    payloads: list[Payload] = []
    if agent.context is not None:
        payloads.append(
            Payload(
                payload_id=f"context-s{segment}",
                payload_kind=agent.context.kind,
                body=agent.context.body,
                acceptable_placements=_requests(agent.context.placements),
                file_path=CONTEXT_PATH,
                env_name=CONTEXT_ENV,
            )
        )
    return _plan(run, argv, payloads)


def resume_plan(run: Run, argv: list[str], body: str, segment: int) -> DispatchPlan:
    """A resume: negotiated again, and the resume payload placed."""
    agent = run.spec.agent
    if agent is None:
        return no_plan(ADAPTER_ID, argv)
    payload = Payload(
        payload_id=f"resume-s{segment}",
        payload_kind="resume",
        body=body,
        acceptable_placements=_requests(agent.resume_placements),
        file_path=RESUME_PATH,
        env_name=RESUME_ENV,
    )
    return _plan(run, argv, [payload])


def _plan(run: Run, argv: list[str], payloads: list[Payload]) -> DispatchPlan:
    agent = run.spec.agent
    assert agent is not None
    return plan_dispatch(
        lookup(agent.adapter),
        argv,
        capabilities=[CapabilityRequest(c.name, c.requirement) for c in agent.capabilities],
        accept_partial=agent.accept_partial,
        payloads=payloads,
    )


def agent_status(
    run: Run,
    plan: DispatchPlan,
    payload: PayloadName,
    previous: RunAgentStatus | None,
) -> RunAgentStatus | None:
    """status.agent after `plan` (None for a Run without spec.agent); the other payload's
    latest placement is kept."""
    agent = run.spec.agent
    if agent is None:
        return None
    negotiation = plan.negotiation
    placements = [p for p in (previous.placements if previous else []) if p.payload != payload]
    for decision in plan.placements:
        placements.append(
            AgentPlacementStatus(
                payload=payload,
                placement=decision.placement.value if decision.placement else None,
                status=decision.receipt.status.value,
            )
        )
    if plan.refusal is not None:
        outcome: Literal["satisfied", "degraded", "refused"] = "refused"
        message: str | None = plan.message
    elif plan.status is ReceiptStatus.DEGRADED:
        outcome, message = "degraded", "; ".join(plan.warnings)
    else:
        outcome, message = "satisfied", None
    return RunAgentStatus(
        adapter=agent.adapter,
        conformance=lookup(agent.adapter).conformance.value,
        outcome=outcome,
        capabilities=[
            AgentCapabilityStatus(
                name=r.capability.value,
                requirement=r.requirement.value,
                support=r.support.value,
                outcome=r.outcome.value,
            )
            for r in (negotiation.results if negotiation else ())
        ],
        placements=sorted(placements, key=lambda p: p.payload)[-2:],
        message=message[:1024] if message else None,
    )


__all__ = [
    "CONTEXT_ENV",
    "CONTEXT_PATH",
    "REFUSED",
    "RESUME_ENV",
    "adapter_id_of",
    "agent_status",
    "resume_plan",
    "start_plan",
]
