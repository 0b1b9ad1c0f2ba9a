"""Receipts of an operation an Intent carries out on a Sprite itself, without a Run.

A checkpoint restore is the one such operation. The Intent is the durable scope
(`harness_session_id`: its uid; `harness_task_id`: its name; `harness_run_id`: the backend
sprite), and its one outcome is one invocation: the receipts of `LIFECYCLE_MAP[operation]`,
chained parent to child, numbered from 1. An Intent records one outcome and ends, so its
ledger needs no state kept between passes; ids derived from the Intent and the operation
make the event and idempotency keys the same for every try of it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from lattice_operator.clock import Clock
from lattice_operator.lifeloop.builder import ADAPTER_ID, CLIENT_ID, INTEGRATION_MODE
from lattice_operator.lifeloop.classes import FailureClass
from lattice_operator.lifeloop.ledger import IdFactory, ReceiptLedger, ReceiptRequest
from lattice_operator.lifeloop.mapping import LIFECYCLE_MAP, SpriteOperation
from lattice_operator.lifeloop.receipts import LifecycleReceipt
from lattice_operator.text import clip


def _hashed(prefix: str, *parts: str) -> str:
    text = "\x1f".join(parts)
    return f"{prefix}-{hashlib.sha256(text.encode()).hexdigest()[:26]}"


def operation_receipts(
    operation: SpriteOperation,
    *,
    scope: str,
    task: str,
    sprite: str | None,
    facts: Mapping[str, object],
    clock: Clock,
    failure: FailureClass | None = None,
    warning: str = "",
    ids: IdFactory | None = None,
) -> list[LifecycleReceipt]:
    """The receipts of one operation's outcome (`failure` replaces the table's class of a
    failed step; `warning`: what went wrong, for humans)."""
    ledger = ReceiptLedger(
        client_id=CLIENT_ID,
        adapter_id=ADAPTER_ID,
        integration_mode=INTEGRATION_MODE,
        clock=clock,
        ids=ids,
    )
    invocation = ledger.begin()
    event_id = _hashed("evt", scope, operation.value)
    telemetry = {"operation": operation.value, **facts}
    for step in LIFECYCLE_MAP[operation]:
        failed = step.failure_class is not None
        ledger.emit(
            ReceiptRequest(
                event=step.event,
                event_id=event_id,
                idempotency_key=_hashed("idem", event_id, step.event.value),
                status=step.status,
                harness_session_id=scope,
                harness_run_id=sprite,
                harness_task_id=task,
                telemetry_summary=telemetry,
                failure_class=(failure or step.failure_class) if failed else None,
                warnings=(clip(warning, 256),) if warning else (),
            ),
            invocation,
        )
    return invocation.receipts


__all__ = ["operation_receipts"]
