"""Warmth: whether a Sprite is kept from going cold, and whether the backend state meets it.

The Sprites API has no setting that keeps a sprite warm. A sprite goes `warm` (suspended)
after about 30 s without activity and later `cold` (stopped) on its own; any request
forwarded to it wakes it. The in-sprite Tasks API (`/.sprite/api.sock`) holds a sprite
`running`, billed all along, and is reachable only from inside the sprite. So a kept-warm
Sprite is woken by the fleet observer with the lightest forwarded request there is (the
list of its exec sessions) when the operator has neither seen it running nor woken it for
`backend.keep_warm_interval` seconds: one request and one idle window of running compute
per interval. Left to go cold, nothing wakes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from lattice_operator.api.v1alpha1 import Sprite, set_condition
from lattice_operator.api.v1alpha1.conditions import Condition, ConditionStatus
from lattice_operator.api.v1alpha1.sprite import BackendStatus
from lattice_operator.reconcilers.sprite_writers import SpriteKey

WARM = "Warm"
"""The condition: True when the backend state is the warmth spec.keepWarm asks for."""


def warmth_conditions(
    sprite: Sprite,
    backend_status: BackendStatus | None,
    now: datetime,
    conditions: Sequence[Condition] | None = None,
) -> list[Condition]:
    """`conditions` (default: the Sprite's) with Warm set for `backend_status`; removed when
    spec.keepWarm is unset (today's behaviour: nothing asked)."""
    base = sprite.status.conditions if conditions is None else conditions
    wanted = sprite.spec.keep_warm
    if wanted is None:
        return [c for c in base if c.type != WARM]
    status: ConditionStatus
    if backend_status is None:
        status, reason, message = "Unknown", "NotObserved", "the backend state is not known yet"
    elif not wanted:
        status, reason = "True", "NotKeptWarm"
        message = f"left to go cold; the backend reports {backend_status}"
    elif backend_status == "cold":
        status, reason = "False", "Cold"
        message = "the backend reports cold: the operator wakes it at its next fleet pass"
    else:
        status, reason = "True", "KeptWarm"
        message = f"kept warm; the backend reports {backend_status}"
    return set_condition(
        base,
        type=WARM,
        status=status,
        reason=reason,
        message=message,
        observed_generation=sprite.metadata.generation,
        now=now,
    )


def same_conditions(old: Iterable[Condition], new: Iterable[Condition]) -> bool:
    """Whether two condition lists say the same (transition times aside)."""

    def said(conditions: Iterable[Condition]) -> list[tuple[object, ...]]:
        return sorted(
            (c.type, c.status, c.reason, c.message, c.observed_generation) for c in conditions
        )

    return said(old) == said(new)


class KeepWarm:
    """When each kept-warm Sprite is next woken: at most once per `interval` seconds, and
    not while the backend reports it running (it is awake: the idle clock starts again)."""

    def __init__(self, interval: float, monotonic: Callable[[], float]) -> None:
        self._interval = interval
        self._monotonic = monotonic
        self._awake: dict[SpriteKey, float] = {}
        """When each Sprite was last seen running or woken (monotonic seconds)."""

    def due(self, key: SpriteKey, backend_status: BackendStatus) -> bool:
        """Whether to wake the Sprite now; seeing it running counts as a wake."""
        now = self._monotonic()
        if backend_status == "running":
            self._awake[key] = now
            return False
        last = self._awake.get(key)
        return last is None or now - last >= self._interval

    def woken(self, key: SpriteKey) -> None:
        """A wake was sent (answered or not: a failing backend is not asked again sooner)."""
        self._awake[key] = self._monotonic()

    def keep_only(self, keys: Iterable[SpriteKey]) -> None:
        """Forget Sprites no longer kept warm (deleted, or keepWarm taken off)."""
        wanted = set(keys)
        self._awake = {k: v for k, v in self._awake.items() if k in wanted}


__all__ = ["WARM", "KeepWarm", "same_conditions", "warmth_conditions"]
