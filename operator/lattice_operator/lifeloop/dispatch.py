"""Synchronous dispatch: negotiate and place before the exec, then make the exec itself
unchanged ("Negotiation Timing And Transport", "Dispatch envelope").

`plan_dispatch` is pure: the adapter's manifest against the client's capability
requests, then each payload placed in turn against the command (one payload's
delivery can change the argv the next one sees). `dispatch` carries it out for one
session start: the `session.starting` receipt (with the negotiation's outcome, the
payload receipts and their warnings) is emitted first, in the session's
invocation; a refusal stops there, before the exec and before anything the client
sees is changed; otherwise the exec is made with the planned argv, environment and
files, and its response is returned as it came (the request/response behaviour of
the exec path is the same with or without Lifeloop in between).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from lattice_operator.lifeloop.classes import FailureClass
from lattice_operator.lifeloop.negotiation import CapabilityRequest, Negotiation, negotiate
from lattice_operator.lifeloop.placement import Delivery, Payload, PlacementDecision, place
from lattice_operator.lifeloop.receipts import LifecycleReceipt, PayloadReceipt
from lattice_operator.lifeloop.registry import RegisteredAdapter
from lattice_operator.lifeloop.vocabulary import ReceiptStatus

R = TypeVar("R")


@dataclass(frozen=True)
class DispatchPlan:
    """What one session start does: negotiated, placed, or refused."""

    adapter_id: str
    negotiation: Negotiation | None
    placements: tuple[PlacementDecision, ...]
    delivery: Delivery
    refusal: FailureClass | None = None
    message: str = ""
    """Why it was refused."""
    warnings: tuple[str, ...] = field(default=())

    @property
    def negotiated(self) -> bool:
        """Anything negotiated or placed (a Run naming no agent: nothing)."""
        return self.negotiation is not None or bool(self.placements)

    @property
    def status(self) -> ReceiptStatus:
        """The session.starting receipt's status."""
        if self.refusal is not None:
            return ReceiptStatus.FAILED
        if self.warnings:
            return ReceiptStatus.DEGRADED
        if any(p.receipt.status is ReceiptStatus.DELIVERED for p in self.placements):
            return ReceiptStatus.DELIVERED
        return ReceiptStatus.OBSERVED

    @property
    def payload_receipts(self) -> tuple[PayloadReceipt, ...]:
        return tuple(p.receipt for p in self.placements)

    def telemetry(self) -> dict[str, object]:
        facts: dict[str, object] = {"adapter": self.adapter_id}
        if self.negotiation is not None and self.negotiation.results:
            facts["negotiation"] = self.negotiation.summary()
        return facts


def plan_dispatch(
    adapter: RegisteredAdapter,
    argv: list[str],
    *,
    capabilities: list[CapabilityRequest],
    accept_partial: bool,
    payloads: list[Payload],
) -> DispatchPlan:
    """Negotiate the capabilities, then place each payload (nothing placed once refused)."""
    manifest = adapter.manifest
    negotiation = negotiate(manifest, capabilities, accept_partial=accept_partial)
    delivery = Delivery(tuple(argv))
    if negotiation.refusal is not None:
        return DispatchPlan(
            manifest.adapter_id,
            negotiation,
            (),
            delivery,
            refusal=negotiation.refusal,
            message=negotiation.message,
            warnings=negotiation.warnings,
        )
    decisions: list[PlacementDecision] = []
    warnings = list(negotiation.warnings)
    env: dict[str, str] = {}
    files: dict[str, bytes] = {}
    for payload in payloads:
        decision = place(manifest, adapter.routes, payload, delivery.argv)
        decisions.append(decision)
        warnings += decision.warnings
        if decision.failure_class is not None:
            return DispatchPlan(
                manifest.adapter_id,
                negotiation,
                tuple(decisions),
                Delivery(tuple(argv)),
                refusal=decision.failure_class,
                message=decision.message,
                warnings=tuple(warnings),
            )
        env.update(decision.delivery.env)
        files.update(decision.delivery.files)
        delivery = Delivery(decision.delivery.argv, env, files)
    return DispatchPlan(
        manifest.adapter_id,
        negotiation,
        tuple(decisions),
        Delivery(delivery.argv, dict(env), dict(files)),
        warnings=tuple(warnings),
    )


async def dispatch(
    plan: DispatchPlan,
    *,
    starting: Callable[[DispatchPlan], list[LifecycleReceipt]],
    emit: Callable[[list[LifecycleReceipt]], None],
    invoke: Callable[[Delivery], Awaitable[R]],
) -> R | None:
    """`starting(plan)`'s receipts emitted, then the exec (`invoke`) with the planned
    delivery, its response returned unchanged; None, with no exec, when refused."""
    emit(starting(plan))
    if plan.refusal is not None:
        return None
    return await invoke(plan.delivery)


def no_plan(
    adapter_id: str, argv: list[str], extra: Mapping[str, str] | None = None
) -> DispatchPlan:
    """The plan of a Run that names no agent: nothing negotiated, nothing placed."""
    return DispatchPlan(adapter_id, None, (), Delivery(tuple(argv), dict(extra or {})))


__all__ = ["DispatchPlan", "dispatch", "no_plan", "plan_dispatch"]
