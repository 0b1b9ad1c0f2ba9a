"""The `lattice_leader` gauge: 1 while this replica is the one that reconciles."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import kopf

from lattice_adapters.kube import KubeApiError, resource_path
from lattice_operator.handlers._context import OperatorContext, context_of
from lattice_operator.metrics import LEADER
from lattice_operator.reconcilers.leader import peering_active

log = logging.getLogger(__name__)
LEADER_POLL = 10.0
"""Seconds between reads of the peering object (kopf's peers refresh theirs every minute)."""


@kopf.on.startup()
async def start_leader_gauge(memo: kopf.Memo, **_: Any) -> None:
    ctx = context_of(memo)
    if ctx.settings.peering.standalone:
        LEADER.set(1)  # no peers: this replica is the only one
        return
    LEADER.set(0)
    memo.leader_task = asyncio.create_task(_follow_peering(ctx), name="leader-gauge")


@kopf.on.cleanup()
async def stop_leader_gauge(memo: kopf.Memo, **_: Any) -> None:
    task = getattr(memo, "leader_task", None)
    if isinstance(task, asyncio.Task):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    LEADER.set(0)


async def _follow_peering(ctx: OperatorContext) -> None:
    peering = ctx.settings.peering
    # Namespaced: kopf keeps one peering object per namespace, all with the same peers.
    namespaces = [ns for ns in ctx.settings.namespaces if not any(c in ns for c in "*?[")]
    if ctx.settings.namespaces and not namespaces:
        return  # globs only: the objects are made by hand, their names unknown here
    if namespaces:
        path = resource_path("kopf.dev", "v1", "kopfpeerings", namespaces[0], peering.name)
    else:
        path = resource_path("kopf.dev", "v1", "clusterkopfpeerings", None, peering.name)
    while True:
        try:
            body = await ctx.require_kube().get(path)
            active = peering_active(body.get("status") or {}, peering.priority, ctx.clock.now())
            LEADER.set(1 if active else 0)
        except KubeApiError as exc:  # unknown: keep the last value, try again
            log.warning("leader gauge: cannot read the peering object: %s", exc)
        await asyncio.sleep(LEADER_POLL)
