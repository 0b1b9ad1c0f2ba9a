"""Sprite reconciliation: desired state at the backend, observed state in status."""

from __future__ import annotations

from datetime import datetime

from lattice_operator.api.v1alpha1 import Sprite, SpriteStatus, set_condition


def pending_status(sprite: Sprite, now: datetime) -> SpriteStatus:
    """The status of a Sprite the operator has seen but not yet reconciled with a backend."""
    generation = sprite.metadata.generation
    conditions = set_condition(
        sprite.status.conditions,
        type="Ready",
        status="Unknown",
        reason="Pending",
        message="The operator has not reconciled this sprite with a backend yet.",
        observed_generation=generation,
        now=now,
    )
    return sprite.status.model_copy(
        update={"conditions": conditions, "observed_generation": generation, "phase": "Pending"}
    )
