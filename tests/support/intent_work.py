"""One Intent's work (handlers.intent.work_on_intent) driven without kopf, over the fake
cluster writer."""

from __future__ import annotations

import asyncio
from typing import Any

# The operator's context a task's work runs in (handlers-private; built here as the handlers do).
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.handlers.intent import reads_of, work_on_intent
from lattice_operator.reconcilers.intent_workers import LiveBody, StopFlag, Work
from tests.support.cluster_writer import FakeClusterWriter
from tests.support.intent_world import policy


async def run_work(
    writer: FakeClusterWriter,
    raw: dict[str, Any],
    stopped: StopFlag | None = None,
    **ctx: Any,
) -> None:
    """One Intent's work (handlers.intent.work_on_intent) over the fake cluster, with the
    indexes as plain mappings (no Run indexed)."""
    context = OperatorContext(writer=writer, **ctx)
    reads = reads_of(
        context,
        {
            "compiled_policies": {"ns": [("p", policy("allow"))]},
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
