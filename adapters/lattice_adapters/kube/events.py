"""Posting one Event regarding an object, written once: a notice (a handler's or the
receipts' ReceiptsDropped) is evidence, not state, so a refused post is logged, never raised."""

from __future__ import annotations

import logging

from lattice_adapters.kube.api_errors import KubeApiError
from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.builders import notice_event
from lattice_operator.clock import Clock
from lattice_operator.ports.cluster import EventStore, Resource

log = logging.getLogger(__name__)

EVENTS: Resource = ("events.k8s.io", "v1", "events")
"""events.k8s.io/v1 Events (core/v1 readers see them too)."""


async def post_notice(
    store: EventStore,
    regarding: ObjectRef,
    *,
    reason: str,
    note: str,
    warning: bool,
    clock: Clock,
    controller: str,
    instance: str,
) -> bool:
    """Post an events.k8s.io/v1 Event (type Warning or Normal); False if it was refused."""
    body = notice_event(
        regarding,
        reason=reason,
        note=note,
        now=clock.now(),
        controller=controller,
        instance=instance,
    )
    if warning:
        body["type"] = "Warning"
    try:
        # A generated name: never one already there.
        return await store.create(EVENTS, regarding.namespace, body)
    except KubeApiError as exc:
        log.warning("could not post %s for %s/%s: %s", reason, regarding.kind, regarding.name, exc)
        return False


__all__ = ["EVENTS", "post_notice"]
