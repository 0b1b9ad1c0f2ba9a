"""The few ways the handlers write to the API server, written once.

Creates are idempotent (a retried pass finds its object already there: AlreadyExists is
success), deletes tolerate an object already gone, and configuration objects are created
or brought up to date.
"""

from __future__ import annotations

from typing import Any

from lattice_adapters.kube import KubeApiError, KubeClient


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


async def delete_if_present(
    kube: KubeClient, path: str, options: dict[str, Any] | None = None
) -> bool:
    """Delete the object; False if it was already gone or its preconditions no longer hold
    (another object of the same name)."""
    try:
        await kube.request("DELETE", path, body=options)
    except KubeApiError as exc:
        if not (exc.not_found or exc.conflict):
            raise
        return False
    return True


__all__ = ["create_or_exists", "create_or_patch", "delete_if_present"]
