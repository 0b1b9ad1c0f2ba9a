"""The SpriteCheckpoint resource: a backend checkpoint of a Sprite a user can hold.

Creating one takes a checkpoint of the Sprite's filesystem at the backend; deleting it deletes
that checkpoint too, unless spec.deletionPolicy is Retain. Restoring one is an Intent
(`checkpoint_restore`), classified and approved like any other change to a Sprite.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field

from lattice_operator.api.v1alpha1._base import (
    CHECKPOINT_ID_PATTERN,
    ApiModel,
    LocalObjectReference,
    ObjectMeta,
    cel,
)
from lattice_operator.api.v1alpha1.conditions import CONDITIONS_LIST_SCHEMA, Condition

CheckpointPhase = Literal["Pending", "Ready", "Failed", "Deleting"]
CheckpointDeletionPolicy = Literal["Delete", "Retain"]


class SpriteCheckpointSpec(ApiModel):
    """Which Sprite to checkpoint, and why."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            {
                "rule": "self.spriteRef.name == oldSelf.spriteRef.name",
                "message": "spriteRef is immutable",
                "fieldPath": ".spriteRef",
            },
            {
                "rule": "self.comment == oldSelf.comment",
                "message": "comment is immutable (it is stored with the backend checkpoint)",
                "fieldPath": ".comment",
            },
        )
    )

    sprite_ref: LocalObjectReference
    """The Sprite (same namespace). Immutable."""
    comment: str = Field(default="", max_length=1024)
    """Stored with the backend checkpoint. Immutable."""
    deletion_policy: CheckpointDeletionPolicy = "Delete"
    """`Delete` deletes the backend checkpoint with this object; `Retain` leaves it (and the
    Sprite's spec.checkpoints.retention never prunes it)."""


class SpriteCheckpointStatus(ApiModel):
    """The backend checkpoint taken for this object."""

    observed_generation: int | None = None
    """The .metadata.generation last acted on."""
    conditions: list[Condition] = Field(
        default_factory=list, max_length=8, json_schema_extra=CONDITIONS_LIST_SCHEMA
    )
    """Ready: True once the backend checkpoint exists; False (reason) when it cannot be."""
    phase: CheckpointPhase | None = None
    """Pending, Ready, Failed or Deleting."""
    checkpoint_id: str | None = Field(default=None, max_length=128, pattern=CHECKPOINT_ID_PATTERN)
    """The backend checkpoint's id (`v3`)."""
    sprite_name: str | None = Field(default=None, max_length=63)
    """The backend sprite it was taken of."""
    create_time: datetime | None = None
    """When the backend took it."""


class SpriteCheckpoint(ApiModel):
    """A checkpoint of a Sprite's filesystem at the backend."""

    api_version: Literal["lattice.dev/v1alpha1"] = "lattice.dev/v1alpha1"
    kind: Literal["SpriteCheckpoint"] = "SpriteCheckpoint"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: SpriteCheckpointSpec
    status: SpriteCheckpointStatus = Field(default_factory=SpriteCheckpointStatus)


__all__ = [
    "CheckpointDeletionPolicy",
    "CheckpointPhase",
    "SpriteCheckpoint",
    "SpriteCheckpointSpec",
    "SpriteCheckpointStatus",
]
