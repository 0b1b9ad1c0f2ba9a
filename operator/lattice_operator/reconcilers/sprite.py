"""Sprite reconciliation: desired state at the backend, observed state in status.

Level-based: `reconcile_sprite` reads the backend, converges it to the spec and
returns the status to write. It never asks which event woke it up. Only changed
fields cause backend writes; an unchanged spec costs reads only (and no calls at
all when the handler sees the generation was already reconciled).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from lattice_adapters.errors import AdapterError, NotFound
from lattice_operator.api.v1alpha1 import Sprite, SpriteStatus, set_condition
from lattice_operator.api.v1alpha1.sprite import SpriteServiceStatus
from lattice_operator.backend import SpriteBackend, SpriteInfo
from lattice_operator.errors import LatticeError


class SpriteReconcileError(LatticeError):
    """The sprite cannot be reconciled until something changes (not a transient failure)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def unknown_status(sprite: Sprite, reason: str, message: str, now: datetime) -> SpriteStatus:
    """Ready=Unknown: the operator has seen the Sprite but cannot reconcile it yet."""
    generation = sprite.metadata.generation
    conditions = set_condition(
        sprite.status.conditions,
        type="Ready",
        status="Unknown",
        reason=reason,
        message=message,
        observed_generation=generation,
        now=now,
    )
    return sprite.status.model_copy(
        update={"conditions": conditions, "observed_generation": generation, "phase": "Pending"}
    )


@dataclass(frozen=True)
class SpriteReconcileResult:
    status: SpriteStatus
    writes: int
    """How many backend write calls were made (0 when the backend already matched)."""


async def reconcile_sprite(
    sprite: Sprite, backend: SpriteBackend, now: datetime
) -> SpriteReconcileResult:
    """Converge the backend sprite to the spec and return the resulting status."""
    name = sprite.backend_name()
    spec = sprite.spec
    writes = 0
    info = await _get(backend, name)
    if info is None:
        if sprite.status.sprite_id is not None and not spec.recreate:
            raise SpriteReconcileError(
                "Missing",
                f"backend sprite {name!r} is gone and spec.recreate is false; "
                "set spec.recreate: true to create it again",
            )
        info = await backend.create_sprite(name, url_auth=spec.url_auth, labels=spec.labels)
        writes += 1
    elif sprite.status.sprite_id is None and not spec.adopt:
        raise SpriteReconcileError(
            "AlreadyExists",
            f"a sprite named {name!r} already exists at the backend; "
            "set spec.adopt: true to adopt it, or choose another spec.spriteName",
        )
    if info.url_auth != spec.url_auth or sorted(info.labels) != sorted(spec.labels):
        info = await backend.update_sprite(name, url_auth=spec.url_auth, labels=spec.labels)
        writes += 1
    if spec.network_policy is not None:
        current = await backend.get_network_policy(name)
        if list(current) != list(spec.network_policy.rules):
            await backend.set_network_policy(name, spec.network_policy.rules)
            writes += 1
    services, service_writes = await _converge_services(sprite, backend)
    writes += service_writes
    return SpriteReconcileResult(ready_status(sprite, info, services, now), writes)


async def _get(backend: SpriteBackend, name: str) -> SpriteInfo | None:
    try:
        return await backend.get_sprite(name)
    except NotFound:
        return None


async def _converge_services(
    sprite: Sprite, backend: SpriteBackend
) -> tuple[list[SpriteServiceStatus], int]:
    name = sprite.backend_name()
    desired = {s.name: s for s in sprite.spec.services}
    existing = {s.spec.name: s for s in await backend.list_services(name)}
    # Only services this Sprite put there are ours to remove.
    managed = {s.name for s in sprite.status.services}
    writes = 0
    for svc_name, svc in desired.items():
        have = existing.get(svc_name)
        if have is None or have.spec != svc:
            await backend.put_service(name, svc)
            writes += 1
    for svc_name in sorted((managed & set(existing)) - set(desired)):
        await backend.delete_service(name, svc_name)
        writes += 1
    if writes:
        existing = {s.spec.name: s for s in await backend.list_services(name)}
    statuses = [
        SpriteServiceStatus(
            name=n,
            status=existing[n].status if n in existing else "unknown",
            restart_count=existing[n].restart_count if n in existing else 0,
        )
        for n in desired
    ]
    return statuses, writes


def ready_status(
    sprite: Sprite,
    info: SpriteInfo,
    services: list[SpriteServiceStatus] | None,
    now: datetime,
) -> SpriteStatus:
    """Status of a sprite that exists at the backend and matches the spec."""
    generation = sprite.metadata.generation
    conditions = set_condition(
        sprite.status.conditions,
        type="Ready",
        status="True",
        reason="Ready",
        message=f"backend sprite {info.name} is {info.status}",
        observed_generation=generation,
        now=now,
    )
    conditions = set_condition(
        conditions,
        type="Synced",
        status="True",
        reason="Synced",
        message="the backend matches the spec",
        observed_generation=generation,
        now=now,
    )
    return sprite.status.model_copy(
        update={
            "conditions": conditions,
            "observed_generation": generation,
            "phase": "Ready",
            "sprite_name": info.name,
            "sprite_id": info.id,
            "url": info.url,
            "backend_status": info.status,
            "last_seen_time": now,
            "services": services if services is not None else sprite.status.services,
        }
    )


def failed_status(sprite: Sprite, reason: str, message: str, now: datetime) -> SpriteStatus:
    """Status of a sprite that could not be reconciled (Ready=False unless it was ready)."""
    generation = sprite.metadata.generation
    ready = "False" if reason in ("Missing", "AlreadyExists") else None
    conditions = set_condition(
        sprite.status.conditions,
        type="Synced",
        status="False",
        reason=reason,
        message=message,
        observed_generation=generation,
        now=now,
    )
    phase = sprite.status.phase or "Pending"
    if ready is not None:
        conditions = set_condition(
            conditions,
            type="Ready",
            status="False",
            reason=reason,
            message=message,
            observed_generation=generation,
            now=now,
        )
        phase = "Missing" if reason == "Missing" else "NotReady"
    return sprite.status.model_copy(update={"conditions": conditions, "phase": phase})


def deletion_blocked_status(sprite: Sprite, message: str, now: datetime) -> SpriteStatus:
    """Status of a Sprite whose backend sprite could not be deleted (it says how to release it)."""
    conditions = set_condition(
        sprite.status.conditions,
        type="Ready",
        status="False",
        reason="DeletionBlocked",
        message=message,
        observed_generation=sprite.metadata.generation,
        now=now,
    )
    return sprite.status.model_copy(update={"conditions": conditions, "phase": "Deleting"})


def missing_status(sprite: Sprite, now: datetime) -> SpriteStatus:
    """Status of a Sprite whose backend sprite vanished and must not be recreated."""
    message = (
        f"backend sprite {sprite.backend_name()!r} no longer exists and spec.recreate is false"
    )
    return failed_status(sprite, "Missing", message, now).model_copy(
        update={"backend_status": None, "url": None}
    )


def backend_error_reason(error: AdapterError) -> str:
    """A CamelCase condition reason for a backend error."""
    return "Backend" + "".join(p.capitalize() for p in error.failure_class.value.split("_"))
