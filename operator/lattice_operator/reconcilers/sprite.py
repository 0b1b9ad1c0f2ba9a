"""Sprite reconciliation: desired state at the backend, observed state in status.

Level-based: `reconcile_sprite` reads the backend, converges it to the spec and
returns the status to write. It never asks which event woke it up. Only changed
fields cause backend writes; an unchanged spec costs reads only (and no calls at
all when the handler sees the generation was already reconciled).

Ownership survives partial failure: the operator labels every backend sprite it
creates (or adopts) with `lattice-owner-<object uid>`, and a backend error raised
after the backend sprite is known carries it (`SpriteBackendError.info`), so the
status written on failure records `spriteId`. A retry, or a deletion, then
recognises the backend sprite as this object's even if `status.spriteId` was never
written (e.g. the operator stopped between the create and the status patch).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from lattice_operator.api.v1alpha1 import Sprite, SpriteStatus, set_condition
from lattice_operator.api.v1alpha1.sprite import NetworkPolicy, SpriteServiceStatus
from lattice_operator.errors import LatticeError
from lattice_operator.ports.errors import AdapterError, NotFound
from lattice_operator.ports.sprites import SpriteBackend, SpriteInfo
from lattice_operator.reconcilers.sprite_warmth import warmth_conditions

OWNER_LABEL_PREFIX = "lattice-owner-"


class SpriteReconcileError(LatticeError):
    """The sprite cannot be reconciled until something changes (not a transient failure)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class SpriteBackendError(LatticeError):
    """A backend call failed during a reconcile (transient: retry).

    `info` is the backend sprite when it was known before the failing call (found,
    adopted or created by this reconcile), so the failure status can record it.
    """

    def __init__(self, error: AdapterError, info: SpriteInfo | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.info = info
        self.reason = backend_error_reason(error)


def owner_label(sprite: Sprite) -> str | None:
    """The backend label that marks a backend sprite as this object's (None without a UID)."""
    uid = sprite.metadata.uid
    return f"{OWNER_LABEL_PREFIX}{uid.lower()}" if uid else None


def desired_labels(sprite: Sprite) -> list[str]:
    """The spec's labels plus this object's owner label."""
    labels = list(sprite.spec.labels)
    owner = owner_label(sprite)
    if owner is not None and owner not in labels:
        labels.append(owner)
    return labels


def owns(sprite: Sprite, info: SpriteInfo) -> bool:
    """Whether the backend sprite is this object's: its id is in status, or it has our label."""
    if sprite.status.sprite_id is not None and sprite.status.sprite_id == info.id:
        return True
    owner = owner_label(sprite)
    return owner is not None and owner in info.labels


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
    sprite: Sprite,
    backend: SpriteBackend,
    now: datetime,
    *,
    default_policy: NetworkPolicy | None = None,
) -> SpriteReconcileResult:
    """Converge the backend sprite to the spec and return the resulting status.

    Raises SpriteReconcileError (blocked until something changes) or
    SpriteBackendError (a backend call failed; retry).
    """
    info: SpriteInfo | None = None
    try:
        info, created = await _ensure_sprite(sprite, backend)
        return await _converge(sprite, backend, info, int(created), now, default_policy)
    except AdapterError as exc:
        raise SpriteBackendError(exc, info) from exc


async def _ensure_sprite(sprite: Sprite, backend: SpriteBackend) -> tuple[SpriteInfo, bool]:
    """The backend sprite (ours or adoptable, or created now) and whether it was created."""
    name = sprite.backend_name()
    spec = sprite.spec
    info = await _get(backend, name)
    if info is None:
        if sprite.status.sprite_id is not None and not spec.recreate:
            raise SpriteReconcileError(
                "Missing",
                f"backend sprite {name!r} is gone and spec.recreate is false; "
                "set spec.recreate: true to create it again",
            )
        created = await backend.create_sprite(
            name, url_auth=spec.url_auth, labels=desired_labels(sprite)
        )
        return created, True
    if sprite.status.sprite_id is None and not spec.adopt and not owns(sprite, info):
        raise SpriteReconcileError(
            "AlreadyExists",
            f"a sprite named {name!r} already exists at the backend; "
            "set spec.adopt: true to adopt it, or choose another spec.spriteName",
        )
    return info, False


async def _converge(
    sprite: Sprite,
    backend: SpriteBackend,
    info: SpriteInfo,
    writes: int,
    now: datetime,
    default_policy: NetworkPolicy | None,
) -> SpriteReconcileResult:
    name = sprite.backend_name()
    spec = sprite.spec
    labels = desired_labels(sprite)
    if info.url_auth != spec.url_auth or sorted(info.labels) != sorted(labels):
        info = await backend.update_sprite(name, url_auth=spec.url_auth, labels=labels)
        writes += 1
    policy = spec.network_policy if spec.network_policy is not None else default_policy
    if policy is not None:
        current = await backend.get_network_policy(name)
        if list(current) != list(policy.rules):
            await backend.set_network_policy(name, policy.rules)
            writes += 1
    services, service_writes = await _converge_services(sprite, backend)
    writes += service_writes
    return SpriteReconcileResult(ready_status(sprite, info, services, now), writes)


async def delete_backend_sprite(sprite: Sprite, backend: SpriteBackend) -> bool:
    """Delete the backend sprite per spec.deletionPolicy if it is this object's.

    True when a delete call was made. Without `status.spriteId` (a reconcile that
    created the sprite but never recorded it) the sprite is deleted only if it
    carries this object's owner label. Raises AdapterError (retry).
    """
    if sprite.spec.deletion_policy == "Orphan":
        return False
    name = sprite.backend_name()
    if sprite.status.sprite_id is None:
        info = await _get(backend, name)
        if info is None or not owns(sprite, info):
            return False  # nothing of ours at the backend
    try:
        await backend.delete_sprite(name)
    except NotFound:
        return False
    return True


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
    conditions = warmth_conditions(sprite, info.status, now, conditions)
    return sprite.status.model_copy(
        update={
            "conditions": conditions,
            "observed_generation": generation,
            "phase": "Ready",
            "sprite_name": info.name,
            "sprite_id": info.id,
            "url": info.url,
            "backend_status": info.status,
            "last_running_time": info.last_running_at,
            "last_warming_time": info.last_warming_at,
            "last_seen_time": now,
            "services": services if services is not None else sprite.status.services,
        }
    )


def failed_status(
    sprite: Sprite,
    reason: str,
    message: str,
    now: datetime,
    info: SpriteInfo | None = None,
) -> SpriteStatus:
    """Status of a sprite that could not be reconciled (Ready=False unless it was ready).

    `info` is the backend sprite when the failure came after it was found or created:
    its id and name are recorded so a retry and a deletion know it is this object's.
    """
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
    update: dict[str, object] = {"conditions": conditions, "phase": phase}
    if info is not None:
        update |= {
            "sprite_name": info.name,
            "sprite_id": info.id,
            "url": info.url,
            "backend_status": info.status,
        }
    return sprite.status.model_copy(update=update)


def error_status(
    sprite: Sprite, error: SpriteReconcileError | SpriteBackendError, now: datetime
) -> SpriteStatus:
    """The status to write for a failed reconcile."""
    info = error.info if isinstance(error, SpriteBackendError) else None
    return failed_status(sprite, error.reason, str(error), now, info)


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
