"""The few ways the handlers write to the API server, written once.

(The handlers' plans are written through the cluster writer port, `ports.cluster`; these
are for the start-up's configuration objects and the handlers not moved onto it yet.)
Creates are idempotent (a retried pass finds its object already there: AlreadyExists is
success) and configuration objects are created or brought up to date.
"""

from __future__ import annotations

from typing import Any

from lattice_adapters.kube import KubeApiError, KubeClient, NotFound
from lattice_operator.ports.cluster import ClusterWriter, Resource


async def create_or_exists(kube: KubeClient, collection: str, body: dict[str, Any]) -> bool:
    """Create the object; True if created, False if one of that name already exists."""
    try:
        await kube.create(collection, body)
    except KubeApiError as exc:
        if not exc.conflict:
            raise
        return False
    return True


async def create_or_patch(
    kube: KubeClient, collection: str, body: dict[str, Any], patch: dict[str, Any]
) -> None:
    """Create the object, or merge-patch `patch` into the one already there."""
    if not await create_or_exists(kube, collection, body):
        await kube.merge_patch(f"{collection}/{body['metadata']['name']}", patch)


def not_found_in(exc: BaseException) -> bool:
    """Whether a 404 from the API server is what raised `exc` (itself or a cause of it)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KubeApiError) and seen.not_found:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


async def is_gone(
    writer: ClusterWriter, resource: Resource, namespace: str, name: str, uid: str | None
) -> bool:
    """Whether the object no longer exists (or is another object of that name now).

    A daemon whose write got 404 asks this before giving up: its own object deleted (a
    namespace being deleted, say) ends it, anything else is an error to retry.
    """
    try:
        stored = await writer.read(resource, namespace, name)
    except NotFound:
        return True
    return bool(uid) and (stored.get("metadata") or {}).get("uid") != uid


async def deleted_under(
    writer: ClusterWriter,
    exc: BaseException,
    resource: Resource,
    namespace: str,
    name: str,
    uid: str | None,
) -> bool:
    """Whether `exc`, raised by a daemon's pass, means its own object was deleted under it
    (its namespace being deleted, say): then the daemon ends, instead of failing and being
    retried by kopf a minute later for an object that is not there."""
    return not_found_in(exc) and await is_gone(writer, resource, namespace, name, uid)


__all__ = [
    "create_or_exists",
    "create_or_patch",
    "deleted_under",
    "is_gone",
    "not_found_in",
]
