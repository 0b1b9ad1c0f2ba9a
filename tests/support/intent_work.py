"""One Intent's work (handlers.intent.work_on_intent) driven without kopf, over the fake
cluster writer."""

from __future__ import annotations

import asyncio
from typing import Any

# The operator's context a task's work runs in (handlers-private; built here as the handlers do).
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.handlers.intent import reads_of, work_on_intent
from lattice_operator.reconcilers.intent_policies import IndexedPolicy
from lattice_operator.reconcilers.intent_workers import LiveBody, StopFlag, Work
from tests.support.cluster_writer import FakeClusterWriter
from tests.support.intent_world import policy, policy_object


async def run_work(
    writer: FakeClusterWriter,
    raw: dict[str, Any],
    stopped: StopFlag | None = None,
    **ctx: Any,
) -> None:
    """One Intent's work (handlers.intent.work_on_intent) over the fake cluster, with the
    indexes as plain mappings (no Run indexed) and policy p allowing everything (stored and
    indexed)."""
    context = OperatorContext(writer=writer, **ctx)
    writer.put("intentpolicies", policy_object("allow"))
    reads = reads_of(
        context,
        {
            "compiled_policies": {"ns": [IndexedPolicy("p", "1", policy("allow"))]},
            "runs_by_name": {},
            "sprite_directory": {},
        },
    )
    work = Work(
        ("ns", "i"),
        "u",
        LiveBody(raw),
        StopFlag() if stopped is None else stopped,
        asyncio.Event(),
    )
    await work_on_intent(context, reads, work)
