"""Sprite handlers."""

from __future__ import annotations

from typing import Any

import kopf
from pydantic import ValidationError

from lattice_operator.api.v1alpha1 import Sprite
from lattice_operator.handlers._context import context_of
from lattice_operator.reconcilers.sprite import pending_status


@kopf.on.create("lattice.dev", "v1alpha1", "sprites")
@kopf.on.resume("lattice.dev", "v1alpha1", "sprites")
async def sprite_seen(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    try:
        sprite = Sprite.model_validate(dict(body))
    except ValidationError as exc:
        raise kopf.PermanentError(f"invalid Sprite: {exc}") from exc
    if sprite.status.observed_generation == sprite.metadata.generation:
        return
    status = pending_status(sprite, context_of(memo).clock.now())
    patch.status.update(status.to_wire())
